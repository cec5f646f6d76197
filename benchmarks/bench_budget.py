"""`recommend --budget` against a tuned study given the same time, on a dataset held out of the surrogate.

For each dataset D (full size, its local copy) and one question (``--max-time T``):

  loop   the recommender, fitted without D (the leave-one-dataset-out model of
         bench_recommend_v2.py, built on demand), answers ``--max-time T``; its closed loop then spends
         ``--budget`` seconds measuring the top choices and the obvious default on D by successive
         halving (``advisor._recommend._budget.closed_loop``, trials into a scratch knowledge base);
  tune   a fresh Optuna study (``advisor.tuning.run_study``: TPE, the framework's CPU search space,
         objectives time and accuracy, 30 trials) on D, stopped from starting trials after the same
         budget: the best accuracy among its trials that finished within the budget and trained
         within T is the bar.

Both run one trial at a time on the one core this process is pinned to (``taskset -c N``), so two
datasets can run side by side, one per core. The loop's winner must reach at least the study's
best accuracy (0.2 points of slack for seed noise). Records go to
benchmarks/results/raw/budget.jsonl; ``render`` writes benchmarks/results/budget.md.

Usage:
    taskset -c 0 python benchmarks/bench_budget.py run --dataset mnist --max-time 60 --budget 120 &
    taskset -c 1 python benchmarks/bench_budget.py run --dataset fashion-mnist --max-time 60 --budget 120
    python benchmarks/bench_budget.py render
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recommend_v2 import DATA_DIRS, heldout_model  # noqa: E402
from common import RESULTS, SHARED, append_jsonl, command_line, git_rev, machine_line, md_table, read_jsonl  # noqa: E402

RAW = RESULTS / "raw" / "budget.jsonl"
REPORT = RESULTS / "budget.md"
FINDINGS = RESULTS / "raw" / "budget.findings.md"  # the reading of the rows, by hand


def run(args: argparse.Namespace) -> None:
    from advisor import recommend as rc
    from advisor._recommend._budget import LOOP_POOL, closed_loop
    from advisor.records import Workload
    from advisor.tuning import load_trials, run_study

    core = sorted(os.sched_getaffinity(0))
    if len(core) != 1:
        raise SystemExit("pin this process to one core (taskset -c N): the loop and the study each run one "
                         "single-threaded trial at a time on it")
    sub = DATA_DIRS[args.dataset]
    data_dir = str(SHARED / sub) if sub else None
    scratch = Path(tempfile.mkdtemp(prefix=f"advisor-budget-{args.dataset}-"))
    table, model_dir = heldout_model(args.dataset, Path(args.workdir), args.rounds)
    rec = rc.recommend(args.dataset, device_kind="cpu", cores=1, constraints=rc.Constraints(max_time_s=args.max_time),
                       prefer="balanced", table=table, model_dir=model_dir, top=LOOP_POOL, seed=args.seed)
    t0 = time.monotonic()
    loop = closed_loop(rec, args.budget, data_dir=data_dir, knowledge_path=scratch / "mine.csv.gz",
                       workdir=scratch / "trials", on_progress=lambda m: print(m, flush=True))
    loop_wall = time.monotonic() - t0
    w = loop.winner
    within = [r for r in loop.runs if r.status == "ok" and r.train_time_s is not None and r.train_time_s <= args.max_time]
    best_loop = max(within, key=lambda r: r.test_accuracy or 0.0) if within else None

    storage = f"sqlite:///{scratch / 'tune.db'}"
    started = dt.datetime.now()
    t0 = time.monotonic()
    run_study(study_name="tune", workload=Workload(dataset=args.dataset, model=rec.workload.model, data_dir=data_dir),
              storage=storage, space=f"{args.framework}-cpu", objectives="time,accuracy", n_trials=30,
              timeout=args.budget, seed=args.seed, wall_time_s=args.budget + 30)  # a longer trial cannot count
    tune_wall = time.monotonic() - t0
    _, trials = load_trials("tune", storage)
    finished = []
    for t in trials:
        result = t.user_attrs.get("advisor.result") or {}
        if t.state.name != "COMPLETE" or t.datetime_complete is None:
            continue
        within_budget = (t.datetime_complete - started).total_seconds() <= args.budget
        finished.append({"number": t.number, "within_budget": within_budget, "train_time_s": result.get("train_time_s"),
                         "test_accuracy": result.get("test_accuracy"), "epochs": (result.get("config") or {}).get("epochs"),
                         "model": (result.get("workload") or {}).get("model")})
    bar = [f for f in finished if f["within_budget"] and (f["train_time_s"] or 1e9) <= args.max_time]
    best_tune = max(bar, key=lambda f: f["test_accuracy"] or 0.0) if bar else None
    append_jsonl(RAW, {
        "dataset": args.dataset, "max_time_s": args.max_time, "budget_s": args.budget, "core": core[0],
        "loop": {"winner": None if w is None else w.__dict__, "best_within_time": None if best_loop is None else best_loop.__dict__,
                 "runs": [r.__dict__ for r in loop.runs], "spent_s": loop.spent_s, "wall_s": loop_wall},
        "tune": {"best": best_tune, "trials": finished, "wall_s": tune_wall, "framework": args.framework},
        "git": git_rev(), "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    })
    print(f"{args.dataset}: loop winner {w and w.test_accuracy} ({w and w.label}); tuned study best within "
          f"{args.budget:g} s: {best_tune and best_tune['test_accuracy']}", flush=True)


def render(_: argparse.Namespace) -> None:
    rows = []
    wins = 0
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in read_jsonl(RAW):  # a question asked again (the loop changed since) counts once: the last
        latest[(r["dataset"], r["max_time_s"], r["budget_s"])] = r
    records = sorted(latest.values(), key=lambda r: (r["dataset"], r["max_time_s"], r["budget_s"]))
    for r in records:
        lw, tb = r["loop"]["best_within_time"], r["tune"]["best"]
        la = (lw or {}).get("test_accuracy")
        ta = (tb or {}).get("test_accuracy")
        ok = la is not None and (ta is None or la >= ta - 0.002)
        wins += ok
        n_in = sum(f["within_budget"] for f in r["tune"]["trials"])
        rows.append([r["dataset"], f"{r['max_time_s']:g} s", f"{r['budget_s']:g} s",
                     "-" if lw is None else f"{lw['label']} ({lw['epochs']} ep): {la:.4f} in {lw['train_time_s']:.1f} s",
                     f"{len(r['loop']['runs'])} runs, {r['loop']['spent_s']:.0f} s",
                     "-" if tb is None else f"trial {tb['number']} ({tb['model']}, {tb['epochs']} ep): {ta:.4f} in {tb['train_time_s']:.1f} s",
                     f"{n_in} of {len(r['tune']['trials'])} finished in the budget",
                     "yes" if ok else "NO", r.get("git", "?")])
    lines = [
        "# `recommend --budget` against a tuned study given the same time (held-out datasets)",
        "",
        f"Generated by `{command_line()}` at {git_rev()}. {machine_line()}",
        "",
        "Per dataset, on one core: the recommender fitted without the dataset answers `--max-time T`, and its",
        "closed loop spends the budget measuring its top choices and the obvious default (successive halving);",
        "then a fresh TPE study over the torch CPU search space (objectives time and accuracy, 30 trials) gets",
        "the same budget (no trial starts after it). The bar is the study's best accuracy among trials that",
        "finished within the budget and trained within T. 'at least as good': the loop's best run within T",
        "reaches the bar less 0.2 points (seed noise). One run per dataset and question (the last one asked;",
        "earlier records stay in raw/budget.jsonl).",
        "",
        md_table(["dataset", "T", "budget", "loop: best run within T", "loop spent", "tuned study: best within the budget",
                  "study trials", "at least as good", "ran at"], rows),
        "",
        f"At least as good in {wins} of {len(records)}.",
        "",
        "Each row ran as `taskset -c CORE python benchmarks/bench_budget.py run --dataset D --max-time T --budget B`",
        "with the held-out models of `bench_recommend_v2.py` (`--workdir /tmp/rv2-matrix`): "
        + "; ".join(f"{r['dataset']} on core {r.get('core', '?')} at {r.get('git', '?')}" for r in records) + ".",
    ]
    if FINDINGS.exists():
        lines += ["", FINDINGS.read_text(encoding="utf-8").strip()]
    REPORT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {REPORT}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--dataset", required=True)
    r.add_argument("--max-time", type=float, default=60.0)
    r.add_argument("--budget", type=float, default=120.0)
    r.add_argument("--framework", default="torch", help="the tuned study's framework (its <framework>-cpu space)")
    r.add_argument("--rounds", type=int, default=150)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--workdir", default="/tmp/advisor-bench-recommend-v2")
    sub.add_parser("render")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args)
    render(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
