"""Cold-process latency of the main job, `advisor recommend --dataset cifar10 --gpu` (issue 6).

Each run is a fresh interpreter started through the console script, exactly as a user runs it,
with the shipped knowledge base and model. Reports the median wall time of --runs runs (after one
unmeasured run that warms the OS file cache), the CPU time of the child, and which heavy modules
the process loaded (none of torch, tensorflow, onnxruntime, optuna may appear).

Usage:
    python benchmarks/bench_recommend_latency.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, machine_line, md_table, median  # noqa: E402

COMMANDS = [["recommend", "--dataset", "cifar10", "--gpu"], ["recommend", "--dataset", "mnist", "--cpu"]]
PROBE = ("import runpy, sys, json, atexit\n"
         "heavy = ('torch', 'tensorflow', 'onnxruntime', 'optuna', 'keras', 'sklearn')\n"
         "atexit.register(lambda: sys.stderr.write('LOADED ' + json.dumps(sorted(m for m in heavy if m in sys.modules)) + '\\n'))\n"
         "sys.argv = ['advisor'] + sys.argv[1:]\n"
         "runpy.run_module('advisor', run_name='__main__')\n")


# Python caches compiled bytecode (__pycache__) by default, so on a user's machine only the first
# run compiles advisor's sources. Some sandboxes set PYTHONDONTWRITEBYTECODE=1, which would make
# every measured run recompile them; the children run with Python's default instead.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
SANDBOX_NO_BYTECODE = "PYTHONDONTWRITEBYTECODE" in os.environ


def _time(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=CHILD_ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{argv} failed: {out.stderr[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    exe = shutil.which("advisor") or sys.exit("the advisor console script is not on PATH")
    rows = []
    for cmd in COMMANDS:
        _time([exe, *cmd])  # warm the file cache (and write the bytecode cache)
        walls, cpus = [], []
        for _ in range(args.runs):
            w, c = _time([exe, *cmd])
            walls.append(w)
            cpus.append(c)
        probe = subprocess.run([sys.executable, "-c", PROBE, *cmd, "--json"], capture_output=True, text=True,
                               env=CHILD_ENV)
        loaded = next((line[7:] for line in probe.stderr.splitlines() if line.startswith("LOADED ")), "?")
        n = len(json.loads(probe.stdout)["choices"]) if probe.returncode == 0 else 0
        rows.append(("advisor " + " ".join(cmd), args.runs, median(walls), min(walls), max(walls), median(cpus), n, loaded))
    text = f"""# Cold-process latency of `advisor recommend`

Machine: {machine_line()}

Each run starts a fresh process through the `advisor` console script with the shipped knowledge
base and model (one unmeasured run first warms the file cache and, as Python does by default,
writes the compiled-bytecode cache{"; this machine's environment sets PYTHONDONTWRITEBYTECODE=1, which the runs leave out" if SANDBOX_NO_BYTECODE else ""}). Target: median <= 1.5 s for
`advisor recommend --dataset cifar10 --gpu`. "heavy modules loaded" lists which of torch,
tensorflow, onnxruntime, optuna, keras and scikit-learn the process imported (it must be none of
the deep-learning frameworks).

Command: `python benchmarks/bench_recommend_latency.py --runs {args.runs}`

{md_table(["command", "runs", "median wall s", "min", "max", "median CPU s", "configs returned", "heavy modules loaded"], rows)}
"""
    (RESULTS / "recommend-latency.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
