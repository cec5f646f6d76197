# Floor over measured time for each finished CPU row (epochs as run), by framework, model, precision and threads: the figures of time-model-variants.findings.md (stop 44). Run from the repository root.
import numpy as np, collections, advisor.knowledge as k
from advisor.surrogate.features import feature_values
from advisor.surrogate._curves import epochs_run
t=k.read('surrogate/knowledge.csv.gz'); c=dict(t.columns)
c['cfg_epochs']=epochs_run(c)
fv=feature_values(c)
tt=np.array([v if v is not None else np.nan for v in c['train_time_s']],float)
ok=np.array([s=='ok' for s in c['status']]); cpu=np.array([d in (None,'cpu') for d in c['cfg_device']])
floor=fv['total_flops']/1e9/fv['hw_gflops']; r=floor/tt
g=collections.defaultdict(list)
for i in np.where(ok&cpu&np.isfinite(r))[0]:
    g[(c['framework'][i],c['model'][i],'bf16' if c['cfg_bfloat16'][i] else 'fp32','thr%s'%c['cfg_threads'][i])].append(r[i])
for key in sorted(g):
    a=np.array(g[key]); print(key, len(a), 'median %.2f p90 %.2f max %.2f  frac>1 %.2f'%(np.median(a),np.percentile(a,90),a.max(),(a>1).mean()))
