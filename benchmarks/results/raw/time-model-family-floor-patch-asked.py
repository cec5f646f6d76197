# Stop 44: asks three fresh targets of the shipped model and of the table refitted with benchmarks/patches/time-model-family-floor.patch. Run with PYTHONPATH set to a worktree where the patch is applied; output: time-model-family-floor-patch-asked.txt.
import sys, time, json
from pathlib import Path
from advisor import knowledge, surrogate as sg
from advisor._recommend._portfolio import build_portfolio, save_portfolio
t0=time.time()
table=sg.shipped_table(); md=Path('/tmp/s44/pm/model')
model=sg.fit_file(table); sg.save(model, md, table_path=table)
pf=build_portfolio(knowledge.read(table), model)
save_portfolio(md, {"cpu": pf}, table_sha256=model.meta["table_sha256"])
print('fitted', time.time()-t0, flush=True)
from advisor import recommend as rc
for ds,a in [('mnist-rot-back-image',0.8339),('fashion-mnist-3k',0.8769),('cifar10-animals',0.6941)]:
    for name,mdir in [('patch',md),('shipped',sg.shipped_model_dir())]:
        rec=rc.recommend(f'/tmp/s44/rv/{ds}.npz' if Path(f'/tmp/s44/rv/{ds}.npz').exists() else f'/tmp/w/{ds}.npz', device_kind='cpu', cores=1,
            constraints=rc.Constraints(min_accuracy=a), prefer='fast', table=table, model_dir=mdir, top=4, seed=0)
        for i,c in enumerate(rec.choices):
            print(ds, name, i+1, c.framework, c.model, c.config.get('optimizer'), c.config.get('epochs'), 'time', [round(c.time_s.lo),round(c.time_s.mid),round(c.time_s.hi)], 'acc', [round(c.accuracy.lo,3),round(c.accuracy.mid,3),round(c.accuracy.hi,3)], 'P', round(c.p_constraints or 0,2), flush=True)
