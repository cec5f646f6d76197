#!/usr/bin/env bash
# What one call of the device tool runs on a lent GPU machine (see benchmarks/gpu/README.md):
# unpack the carried datasets, read the card's ceilings, run the prepared spread, leave the
# results under $OUT. Usage: benchmarks/gpu/device_run.sh CARRIED_DATA_DIR DEADLINE_SECONDS
set -uo pipefail
carried="$1"; deadline="${2:-330}"
out="${OUT:-/tmp/gpu-out}"; mkdir -p "$out"
export PYTHONPATH="$PWD:$PWD/$1/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
data=/tmp/gpu-data
python3 - "$carried" "$data" <<'PY'
import lzma, pathlib, shutil, sys
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for f in src.rglob("*"):
    if "site" in f.relative_to(src).parts[:1]:
        continue
    if f.is_file():
        target = dst / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        if f.suffix == ".xz":
            with lzma.open(f) as fin, open(target.with_suffix(""), "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copy(f, target)
print("data:", sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file()))
PY
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/nvidia-smi.txt"
python3 -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'numpy', numpy.__version__)"
[ -n "${SKIP_CALIBRATE:-}" ] || timeout 60 python3 benchmarks/gpu/calibrate.py | tee "$out/calibration.json"
python3 benchmarks/gpu/collect.py --data-dir "$data" --budget 600 --deadline "$deadline" --device "${COLLECT_DEVICE:-cuda}" ${COLLECT_ARGS:-} \
    --out "$out/gpu-trials.csv.gz" --jsonl "$out/gpu-trials.jsonl" 2>&1 | tee "$out/collect.log"
ls -la "$out"
