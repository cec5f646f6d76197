"""Would warm restarts reach a best-shot target sooner? The target picks of recommend.md, run again
with ``schedule=restarts``.

On a ``--target-accuracy`` question about data the table does not hold, the answer is a best shot:
the robust recipe for 30 epochs (60 on tiny data) with one cosine schedule, every run stopping at the
target. A cosine run reaches its accuracy near its end, so a target that a shorter run would also
reach comes late (``recommend.md``: Fashion-MNIST at 32x32x3, the same recipe filling 60 s reached
90% in 46-59 s, its 30-epoch run in 404 s). ``restarts`` (:func:`advisor.frameworks.base.learning_rate_at`)
anneals in cycles that double (2, 6, 14 and 30 epochs for 30), so an annealed accuracy comes early
and late, without starting over.

For each request key, the pick that ``recommend.md`` verified (``raw/recommend-v2.jsonl``, its
first repeat's configuration) is run ``--repeats`` times (seeds 0..n-1) with only the schedule
changed, on the cores given, and compared with that file's cosine runs and obvious default: time
to the target read from each curve, median of the repeats.

``--schedule probes --stretch 1.25`` measures the other shape: two short cycles (1/15 and 2/15 of
the run) that reach a modest target early, then one over the last 4/5, with the run made 1.25
times as long so that its last cycle is about as long as the pick's one cosine run (30 epochs
become 38: cycles of about 2.5, 5 and 30 epochs). Each (schedule, stretch) is a column.

Usage:
    taskset -c 0 python benchmarks/bench_restarts.py run --keys 'fashion-mnist-rgb32|target-accuracy 0.9000' \\
        --repeats 1 --cores 0 --workdir /tmp/rv2-matrix
    python benchmarks/bench_restarts.py render
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recommend_v2 as rv2  # noqa: E402
from common import RESULTS, append_jsonl, command_line, git_rev, machine_line, md_table, median, read_jsonl  # noqa: E402

RAW = RESULTS / "raw" / "restarts.jsonl"
REPORT = RESULTS / "restarts.md"


def _verified(key: str, arm: str) -> list[dict[str, Any]]:
    """recommend.md's runs of ``arm`` for ``key``, each repeat as it last ran (as that report counts them)."""
    return [r for (k, a, rep), r in sorted(rv2.latest_runs().items()) if k == key and a == arm and rep >= 0]


def _target(key: str) -> float:
    return float(key.rsplit(" ", 1)[1])


def run(args: argparse.Namespace) -> None:
    from advisor.harness import Limits, run_trial
    from advisor.records import Config, Workload

    import math

    cores = [int(c) for c in args.cores.split(",")]
    arm = _arm({"schedule": args.schedule, "stretch": args.stretch})
    done = {(r["key"], _arm(r), r["repeat"]) for r in read_jsonl(RAW) if not r.get("contended")}
    for key in args.keys.split(","):
        picks = _verified(key, "pick")
        if not picks:
            print(f"{key}: recommend.md has no verified pick", file=sys.stderr)
            continue
        first = picks[0]
        dataset = first["dataset"]
        asked = str(rv2.derived_path(dataset, Path(args.workdir))) if dataset in rv2.DERIVED else dataset
        sub = rv2.DATA_DIRS.get(dataset)
        for rep in range(args.repeats):
            if (key, arm, rep) in done:
                continue
            epochs = int(math.ceil(first["config"]["epochs"] * args.stretch))
            cfg = Config.from_dict({**first["config"], "schedule": args.schedule, "epochs": epochs, "seed": rep,
                                    "threads": len(cores)})
            workload = Workload(dataset=asked, model=first["model"], test_samples=None,
                                data_dir=str(rv2.SHARED / sub) if sub else None, seed=rep)
            t0 = time.time()
            result = run_trial(workload, cfg, cores=cores, limits=Limits(wall_time_s=args.max_trial_s))
            append_jsonl(RAW, {"key": key, "repeat": rep, "schedule": args.schedule, "stretch": args.stretch,
                               "dataset": dataset, "framework": first["framework"],
                               "model": first["model"], "config": cfg.to_dict(), "status": result.status,
                               "train_time_s": result.train_time_s, "test_accuracy": result.test_accuracy,
                               "accuracy_curve": result.accuracy_curve, "epoch_times": result.epoch_times,
                               "contended": result.contended, "wall_s": time.time() - t0,
                               "blas": rv2._blas(result), "commit": git_rev(), "command": command_line()})
            print(f"{key} {arm} #{rep}: {first['framework']} {first['model']} -> {result.status} "
                  f"acc={result.test_accuracy} time={result.train_time_s} epochs={len(result.accuracy_curve or [])}",
                  flush=True)


def _arm(record: dict[str, Any]) -> str:
    """A run's schedule and stretch in words (the first runs, before the options, were restarts at 1x)."""
    schedule, stretch = record.get("schedule", "restarts"), float(record.get("stretch", 1.0))
    return schedule if stretch == 1.0 else f"{schedule}, {stretch:g}x the epochs"


def _times(runs: list[dict[str, Any]], target: float) -> tuple[list[float], list[int]]:
    """Times to ``target`` of the runs that reached it, and the epoch each reached it at."""
    times, epochs = [], []
    for r in runs:
        t = rv2._time_to(r, target)
        if t is not None:
            times.append(t)
            epochs.append(next(k for k, a in enumerate(r["accuracy_curve"], 1) if a >= target))
    return times, epochs


def _cell(runs: list[dict[str, Any]], target: float) -> str:
    if not runs:
        return "-"
    times, epochs = _times(runs, target)
    if len(times) < len(runs):
        peak = max((max(r["accuracy_curve"] or [0.0]) for r in runs), default=0.0)
        reached = f"{len(times)} of {len(runs)} reached it" if times else "never"
        return f"{reached} (peak {peak:.4f}; n={len(runs)})"
    span = f" ({min(times):.1f}-{max(times):.1f})" if len(times) > 1 else ""
    at = f"epoch {min(epochs)}" + (f"-{max(epochs)}" if max(epochs) != min(epochs) else "")
    return f"{median(times):.1f} s{span}, {at} (n={len(runs)})"


def render(args: argparse.Namespace) -> None:
    runs = read_jsonl(RAW)
    latest: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in runs:
        latest[(r["key"], _arm(r), r["repeat"])] = r
    keys = sorted({k for k, _, _ in latest})
    arms = sorted({a for _, a, _ in latest}, key=lambda a: (a != "restarts", a))
    rows = []
    for key in keys:
        target = _target(key)
        mine = [_cell([r for (k, a, _), r in sorted(latest.items()) if k == key and a == arm], target) for arm in arms]
        pick = _verified(key, "pick")
        rows.append([key, f"{pick[0]['framework']} {pick[0]['model']} {pick[0]['config']['epochs']} ep" if pick else "-",
                     _cell(pick, target), *mine, _cell(_verified(key, "default"), target)])
    commands = sorted({f"`{r['command']}` at {r.get('commit', '?')}" for r in runs if r.get("command")})
    lines = ["# Warm restarts for a best-shot target", "",
             "Runs of `python benchmarks/bench_restarts.py run ...`, then `render` (see the script's docstring), "
             "one core per run.", "", machine_line(), "",
             "Each request's pick as `recommend.md` verified it, with one cosine schedule over its epochs, and the "
             "same configuration with `schedule=restarts` (cosine cycles that double, the last ending with the "
             "run: for 30 epochs they end at epochs 2, 6, 14 and 30), and where measured with `schedule=probes` "
             "(two short cosine cycles, 1/15 and 2/15 of the run, then one over the last 4/5; with the epochs "
             "stretched 1.25 times, a 30-epoch pick runs 38 epochs, its cycles ending at about 2.5, 7.6 and 38). "
             "Every run stops at the target; the time "
             "to it is read from its curve. 'cosine' and 'obvious default' are `recommend.md`'s runs (another "
             "sitting: the machine is shared and its speed varies between sittings by up to 30%).", "",
             md_table(["request", "pick", "cosine (recommend.md)", *arms, "obvious default (recommend.md)"], rows)]
    if commands:
        lines += ["", "Commands: " + ", ".join(commands)]
    findings = RESULTS / "raw" / "restarts.findings.md"
    if findings.exists():
        lines += ["", findings.read_text().strip()]
    REPORT.write_text("\n".join(lines) + "\n")
    print(f"wrote {REPORT}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--keys", required=True, help="recommend.md request keys, comma-separated")
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--cores", default="0")
    r.add_argument("--workdir", default="/tmp/advisor-bench-recommend-v2")
    r.add_argument("--max-trial-s", type=float, default=900.0)
    r.add_argument("--schedule", default="restarts", choices=("restarts", "probes"))
    r.add_argument("--stretch", type=float, default=1.0, help="the pick's epochs times this (rounded up)")
    sub.add_parser("render")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args)
    render(args)


if __name__ == "__main__":
    main()
