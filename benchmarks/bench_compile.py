"""Does ``torch.compile`` pay on this CPU? The portfolio's compiled recipes, run with and without it.

Two of the portfolio's CPU recipes carry ``compile=True`` (the robust ``bn_cnn_w8`` recipe and a
``bn_cnn_w32`` one), and so do most PyTorch answers `recommend` verified. The harness compiles the
training graph on one dummy batch *before* the timed epochs (``advisor/frameworks/torch.py``,
``_warm_up``) and reports that warm-up apart (``compile_time_s`` in a result's ``extra``), so no
time in the knowledge base includes it; TensorFlow's XLA compile, by contrast, happens inside the
first epoch and counts. This benchmark measures what compiling buys and costs: each recipe as the
portfolio holds it, with ``compile`` on and off and nothing else changed, on full-size MNIST and the
30k CIFAR-10 copy, for ``--epochs`` epochs, one core, the two arms of a seed back to back on the
same core. Each compiled run starts with an empty inductor cache (``TORCHINDUCTOR_CACHE_DIR``), as a
user's first run of a recommended command does; a second run of the same shape finds the C++
kernels built and compiles in a few seconds.

Reported per recipe and dataset (median over seeds): the compile warm-up, the first epoch and the
steady epoch (median of the later ones) with and without compiling, the accuracy of each, and the
epochs after which compiling has paid for its warm-up (never where a compiled epoch is not faster).

Usage:
    taskset -c 0 python benchmarks/bench_compile.py run --cores 0 --part 0/2 &
    taskset -c 1 python benchmarks/bench_compile.py run --cores 1 --part 1/2 &
    python benchmarks/bench_compile.py render
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recommend_v2 import DATA_DIRS, _blas  # noqa: E402
from common import (RESULTS, SHARED, append_jsonl, command_line, git_rev, machine_line, md_table,  # noqa: E402
                    median, read_jsonl)

RAW = RESULTS / "raw" / "compile.jsonl"
REPORT = RESULTS / "compile.md"


def recipes() -> list[dict[str, Any]]:
    """The shipped CPU portfolio's PyTorch recipes that compile, as configurations (model included)."""
    from advisor._recommend._portfolio import load_portfolio
    from advisor import surrogate as sg

    out = []
    for r in load_portfolio(sg.shipped_model_dir(), "cpu"):
        if r.get("framework") == "torch" and r.get("compile"):
            out.append({k: v for k, v in r.items() if k not in ("transfer", "transfers")})
    return out


def _name(recipe: dict[str, Any]) -> str:
    return f"{recipe['model']} {recipe['optimizer']} {recipe['schedule']} batch {recipe['batch_size']}"


def cells(datasets: list[str], seeds: int) -> list[tuple[dict[str, Any], str, int]]:
    compiled = recipes()
    return [(r, d, s) for s in range(seeds) for d in datasets for r in compiled]


def run(args: argparse.Namespace) -> None:
    from advisor.harness import Limits, run_trial
    from advisor.records import Config, Workload

    cores = [int(c) for c in args.cores.split(",")]
    index, parts = (int(v) for v in args.part.split("/"))
    done = {(r["recipe"], r["dataset"], r["seed"], r["compile"]) for r in read_jsonl(RAW) if not r.get("contended")}
    todo = cells(args.datasets.split(","), args.seeds)[index::parts]
    for recipe, dataset, seed in todo:
        for compiled in (True, False):
            key = (_name(recipe), dataset, seed, compiled)
            if key in done:
                continue
            knobs = {k: v for k, v in recipe.items() if k != "model"}
            cfg = Config.from_dict({**knobs, "compile": compiled, "epochs": args.epochs, "seed": seed,
                                    "threads": len(cores), "time_budget_s": 0.0})
            workload = Workload(dataset=dataset, model=recipe["model"], test_samples=None,
                                data_dir=str(SHARED / DATA_DIRS[dataset]), seed=seed)
            t0 = time.time()
            # A cold compile, as a user's first run of a recommended command pays it: inductor keeps the
            # C++ kernels it builds in a cache that would make every later run of the shape look cheap.
            with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
                try:
                    result = run_trial(workload, cfg, cores=cores, limits=Limits(wall_time_s=args.max_trial_s))
                finally:
                    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            extra = result.extra or {}
            record = {"recipe": _name(recipe), "dataset": dataset, "seed": seed, "compile": compiled,
                      "status": result.status, "compile_time_s": extra.get("compile_time_s"),
                      "epoch_times": result.epoch_times, "train_time_s": result.train_time_s,
                      "wall_time_s": result.wall_time_s, "wall_s": time.time() - t0,
                      "test_accuracy": result.test_accuracy, "contended": result.contended,
                      "blas": _blas(result),
                      "config": cfg.to_dict(), "commit": git_rev(), "command": command_line()}
            append_jsonl(RAW, record)
            print(f"{record['recipe']} {dataset} seed {seed} compile={compiled}: {result.status} "
                  f"warm-up {record['compile_time_s']} epochs {[round(t, 1) for t in result.epoch_times or []]} "
                  f"acc {result.test_accuracy}", flush=True)


def _steady(times: list[float]) -> float | None:
    return median(times[1:]) if len(times) > 1 else None


def render(_: argparse.Namespace) -> None:
    rows = [r for r in read_jsonl(RAW) if r.get("status") == "ok" and r.get("epoch_times")]
    latest: dict[tuple[str, str, int, bool], dict[str, Any]] = {}
    for r in rows:  # a run repeated (it was contended) counts as it last ran
        latest[(r["recipe"], r["dataset"], r["seed"], r["compile"])] = r
    groups: dict[tuple[str, str], dict[bool, list[dict[str, Any]]]] = {}
    for (recipe, dataset, _, compiled), r in sorted(latest.items()):
        groups.setdefault((recipe, dataset), {True: [], False: []})[compiled].append(r)
    body = []
    for (recipe, dataset), arms in groups.items():
        on, off = arms[True], arms[False]
        if not on or not off:
            continue
        warm = median(float(r["compile_time_s"] or 0.0) for r in on)
        first_on, first_off = median(r["epoch_times"][0] for r in on), median(r["epoch_times"][0] for r in off)
        steady_on = median(s for s in (_steady(r["epoch_times"]) for r in on) if s is not None)
        steady_off = median(s for s in (_steady(r["epoch_times"]) for r in off) if s is not None)
        saved = steady_off - steady_on
        # the whole cost of compiling over e epochs: warm-up + (first_on - first_off) - (e - 1) * saved
        fixed = warm + first_on - first_off
        pays = f"{1 + fixed / saved:.0f}" if saved > 0 and fixed > 0 else ("at once" if fixed <= 0 < saved else "never")
        body.append([recipe, dataset, f"{len(on)}/{len(off)}", f"{warm:.1f}", f"{first_on:.1f} / {first_off:.1f}",
                     f"{steady_on:.2f} / {steady_off:.2f}", f"{steady_on / steady_off:.2f}",
                     f"{median(r['test_accuracy'] for r in on):.4f} / {median(r['test_accuracy'] for r in off):.4f}",
                     pays,
                     "; ".join(sorted({r.get("blas", "") for r in on + off} - {""})) or "-"])
    contended = sum(1 for r in read_jsonl(RAW) if r.get("contended"))
    commands = sorted({r["command"] for r in rows if r.get("command")})
    lines = ["# Does torch.compile pay on this CPU?", "",
             "The portfolio's PyTorch recipes that compile, each run with `compile` on and off and nothing else "
             "changed (`python benchmarks/bench_compile.py run ...`, then `render`), one core per run, the two arms "
             "of a seed back to back on the same core; medians over seeds. Every compiled run starts with an empty "
             "inductor cache, as a first run of a recommended command does. The harness compiles on one dummy batch "
             "before the timed epochs, so no recorded training time includes the warm-up (column 'warm-up'); "
             "'pays after' is the number of epochs after which compiling has paid for its warm-up and its slower "
             "first epoch ('never' where a compiled epoch is not faster).", "",
             f"Machine: {machine_line()}. The BLAS column is the OpenBLAS kernel each run loaded (threadpoolctl; "
             f"`OPENBLAS_CORETYPE` {os.environ.get('OPENBLAS_CORETYPE') or 'not set'} when rendered); PyTorch's "
             f"convolutions run on oneDNN either way. Contended runs recorded: {contended} (run again; the later run "
             "counts).", "",
             md_table(["recipe", "dataset", "runs (on/off)", "warm-up s", "first epoch s (on / off)",
                       "steady epoch s (on / off)", "steady ratio", "accuracy (on / off)", "pays after (epochs)",
                       "BLAS"], body), "",
             "Commands:", "", *[f"- `{c}`" for c in commands], ""]
    findings = RESULTS / "raw" / "compile.findings.md"
    if findings.exists():
        lines[2:2] = [findings.read_text().strip(), ""]
    REPORT.write_text("\n".join(lines))
    print(f"wrote {REPORT}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--datasets", default="mnist,cifar10")
    r.add_argument("--seeds", type=int, default=2)
    r.add_argument("--epochs", type=int, default=3)
    r.add_argument("--cores", default="0")
    r.add_argument("--part", default="0/1", help="i/n: run every n-th cell from the i-th (one worker per core)")
    r.add_argument("--max-trial-s", type=float, default=900.0)
    sub.add_parser("render")
    args = p.parse_args(argv)
    {"run": run, "render": render}[args.cmd](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
