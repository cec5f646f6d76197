"""One closed loop, then the same question again: does what the loop measured make the next answer better?

For each request (a workload in no file of the table, :data:`bench_recommend_v2.DERIVED`, asked of
the shipped model, or a dataset held out of the table and the model as in ``recommend.md``, and a
question), on one core:

  loop      ``--budget B`` as ``advisor recommend ... --budget B`` runs it (successive halving over
            the top recipes and the obvious default), its trials written to a scratch knowledge base
            of the user's own (``--workdir``/own/<request>.csv.gz), which starts empty;
  again     the same question asked again, reading that knowledge base (what ``advisor recommend``
            does by default since 4e4453a): its runs of the workload are candidates as measured;
  verified  the new answer's first choice, run ``--repeats`` times for real (seeds 0..n-1);
  beside    with ``--default-beside``, the request's obvious default of ``recommend.md`` run again as
            many times on the same core, so that the two are timed in one sitting.

It is judged against what ``benchmarks/results/recommend.md`` measured for the same request:
the single answer (its ``pick`` runs) and the obvious default (its ``default`` runs, the same
configuration the answer without the loop shows beside it), from
``benchmarks/results/raw/recommend-v2.jsonl``. Accuracy at the same time bound, or the time to the
same target (read from each run's curve), as in that report.

Every record is appended to benchmarks/results/raw/own-trials.jsonl; ``render`` writes
benchmarks/results/own-trials.md.

Usage:
    taskset -c 0 python benchmarks/bench_own_trials.py run --datasets mnist-14px --questions target-accuracy:0.985 \\
        --budget 180 --repeats 3 --workdir /tmp/rv2-matrix
    python benchmarks/bench_own_trials.py render
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recommend_v2 as rv2  # noqa: E402
from common import RESULTS, append_jsonl, command_line, git_rev, machine_line, md_table, median, read_jsonl  # noqa: E402

RAW = RESULTS / "raw" / "own-trials.jsonl"
REPORT = RESULTS / "own-trials.md"


def _record(key: str, arm: str, rep: int, choice: Any, cfg: Any, result: Any, wall: float) -> dict[str, Any]:
    return {"key": key, "arm": arm, "repeat": rep, "framework": choice.framework, "model": choice.model,
            "basis": choice.basis, "source": choice.source, "config": cfg.to_dict(),
            "status": result.status, "train_time_s": result.train_time_s, "test_accuracy": result.test_accuracy,
            "accuracy_curve": result.accuracy_curve, "epoch_times": result.epoch_times,
            "contended": result.contended, "wall_s": wall, "blas": rv2._blas(result)}


def run(args: argparse.Namespace) -> None:
    from advisor import recommend as rc
    from advisor._recommend._budget import LOOP_POOL, closed_loop

    workdir = Path(args.workdir)
    done = read_jsonl(RAW)
    for dataset in args.datasets.split(","):
        if dataset in rv2.DERIVED:  # in no file of the table: the shipped model
            asked, table, model_dir, data_dir = str(rv2.derived_path(dataset, workdir)), None, None, None
        else:  # held out of the table and of the model, as in recommend.md
            asked = dataset
            table, model_dir = rv2.heldout_model(dataset, workdir, 150)
            sub = rv2.DATA_DIRS.get(dataset)
            data_dir = str(rv2.SHARED / sub) if sub else None
        for question in args.questions.split(","):
            constraints, prefer, label = rv2.constraints_for(question, dataset)
            key = f"{dataset}|{label}"
            # the request's own folder: its knowledge base and the loop's state beside it
            folder = workdir / "own" / hashlib.sha256(f"{key}|{args.budget}".encode()).hexdigest()[:12]
            if args.fresh and folder.exists():
                shutil.rmtree(folder)
            mine = folder / "knowledge.csv.gz"
            mine.parent.mkdir(parents=True, exist_ok=True)
            ask = dict(device_kind="cpu", cores=1, constraints=constraints, prefer=prefer, seed=0, table=table,
                       model_dir=model_dir)
            if args.fresh or not any(r["key"] == key and r["arm"] == "loop" for r in done):
                before = rc.recommend(asked, top=LOOP_POOL, own_table=mine, **ask)
                t0 = time.time()
                loop = closed_loop(before, args.budget, knowledge_path=mine, data_dir=data_dir,
                                   on_progress=lambda m: print("  " + m, flush=True))
                w = loop.winner
                append_jsonl(RAW, {"key": key, "arm": "loop", "repeat": -1, "budget_s": args.budget,
                                   "spent_s": loop.spent_s, "wall_s": time.time() - t0, "runs": len(loop.runs),
                                   "winner": None if w is None else {"label": w.label, "model": w.model, "epochs": w.epochs,
                                                                     "train_time_s": w.train_time_s,
                                                                     "test_accuracy": w.test_accuracy},
                                   "knowledge_path": str(mine)})
            again = rc.recommend(asked, top=1, own_table=mine, **ask)
            choice = again.choices[0]
            _repeats(key, "again", asked, data_dir, args.repeats, choice, choice.config,
                     {"own_trials": len(again.own_trials)})
            if args.default_beside:
                stored = [r for r in read_jsonl(rv2.RAW) if r["key"] == key and r["arm"] == "default" and r.get("config")]
                if not stored:
                    print(f"{key}: recommend.md has no default run to repeat", flush=True)
                    continue
                # recommend.md's default run again on this core, so that the answer is judged against a
                # default timed in the same sitting, not in another one on a shared machine
                base = stored[-1]
                _repeats(key, "default-now", asked, data_dir, args.repeats,
                         argparse.Namespace(framework=base["framework"], model=base["model"], basis="default",
                                            source="default"), base["config"])


def _repeats(key: str, arm: str, asked: str, data_dir: str | None, repeats: int, choice: Any,
             config: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    """``config`` run ``repeats`` times for real on this process's first core (seeds 0..n-1), each
    recorded as ``arm``; a repeat already recorded uncontended with the same configuration is not run again."""
    import os

    from advisor.harness import Limits, run_trial
    from advisor.records import Config, Workload

    for rep in range(repeats):
        cfg = Config.from_dict({**config, "seed": rep, "threads": 1})
        if any(r["key"] == key and r["arm"] == arm and r["repeat"] == rep and r["config"] == cfg.to_dict()
               and not r.get("contended") for r in read_jsonl(RAW)):
            continue
        t0 = time.time()
        result = run_trial(Workload(dataset=asked, model=choice.model, seed=rep, data_dir=data_dir), cfg,
                           cores=sorted(os.sched_getaffinity(0))[:1], limits=Limits(wall_time_s=900.0))
        append_jsonl(RAW, {**_record(key, arm, rep, choice, cfg, result, time.time() - t0), **(extra or {})})
        print(f"{key} {arm} #{rep}: {choice.framework} {choice.model} ({choice.basis}) -> {result.status} "
              f"acc={result.test_accuracy} time={result.train_time_s}", flush=True)


def _figure(runs: list[dict[str, Any]], c: dict[str, Any]) -> tuple[float | None, float | None]:
    """Median (time, accuracy) of runs; on a target, the time to it from each run's curve."""
    if not runs:
        return None, None
    acc = median(r["test_accuracy"] for r in runs)
    if c["max_time_s"] is not None:
        return median(r["train_time_s"] for r in runs), acc
    times = [rv2._time_to(r, c["min_accuracy"]) for r in runs]
    reached = [t for t in times if t is not None]
    return (median(reached) if len(reached) * 2 > len(times) else float("inf")), acc


def render(_: argparse.Namespace) -> None:
    stored, mine = rv2.latest_runs(), rv2.latest_runs(RAW)
    rows = []
    for key in sorted({k for k, arm, _ in mine if arm == "loop"}):
        loop = mine[(key, "loop", -1)]
        again = [r for (k, arm, rep), r in mine.items() if k == key and arm == "again" and rep >= 0]
        pick = [r for (k, arm, rep), r in stored.items() if k == key and arm == "pick" and rep >= 0]
        base = [r for (k, arm, rep), r in stored.items() if k == key and arm == "default" and rep >= 0]
        beside = [r for (k, arm, rep), r in mine.items() if k == key and arm == "default-now" and rep >= 0]
        if not pick or not again:
            continue
        c = pick[0]["constraints"]
        (at, aa), (pt, pa), (bt, ba) = _figure(again, c), _figure(pick, c), _figure(base, c)
        nt, na = _figure(beside, c)

        def cell(t: float | None, a: float | None) -> str:
            if t is None:
                return "-"
            return f"{a:.4f} in {t:.1f} s" if c["max_time_s"] is not None else (
                f"{t:.1f} s to {c['min_accuracy']:g}" if t != float("inf") else f"never (peak {a:.4f})")

        if beside:  # judged against the default timed beside it, where it was
            bt, ba = nt, na
        if c["max_time_s"] is not None:
            meets = at is not None and at <= c["max_time_s"]
            beats = aa >= ba - 0.002 if ba is not None else None
        else:
            meets = at != float("inf")
            beats = (at <= bt * 1.05) if bt not in (None, float("inf")) else (at != float("inf") or aa >= ba - 0.002)
        w = loop.get("winner") or {}
        first = again[0]
        rows.append([key, f"{loop['budget_s']:g} s (spent {loop['spent_s']:.0f} s, {loop['runs']} runs; winner "
                          f"{w.get('label', '-')} {w.get('model', '')})",
                     f"{first['framework']} {first['model']} ({first['basis']}, {first['config'].get('epochs')} ep)",
                     f"{cell(at, aa)} (n={len(again)})", cell(pt, pa), cell(*_figure(base, c)),
                     f"{cell(nt, na)} (n={len(beside)})" if beside else "-",
                     "yes" if meets else "NO", "-" if beats is None else "yes" if beats else "NO"])
    runs = [f"- `{line}`" for line in (RESULTS / "raw" / "own-trials.runs").read_text().splitlines()] \
        if (RESULTS / "raw" / "own-trials.runs").exists() else []
    text = "\n".join([
        "# One closed loop, then the same question again", "",
        "Runs of `python benchmarks/bench_own_trials.py run ...`, then `render` (see the script's docstring), one core:",
        *runs, "", machine_line() + "; BLAS of the verified runs: "
        + (", ".join(sorted({r.get("blas") or "?" for r in mine.values() if r.get("arm") == "again"})) or "-")
        + " (the kernel OpenBLAS chose, as threadpoolctl reported it in each run)", "",
        "A workload in no file of the table (asked of the shipped model), or a dataset held out of the table and the "
        "model as in `recommend.md`, is asked a question; `--budget` measures on it (its trials go to an "
        "empty knowledge base of the user's own); the question is asked again, reading that knowledge base, and the "
        "new answer's first choice is run for real (median of the repeats). 'single answer' and 'obvious default' "
        "are the same request's verified runs in `recommend.md` (the default there is the configuration the "
        "answer shows beside it). 'default beside it': that default run again on the same core in the same sitting "
        "as the answer asked again (`--default-beside`), where it was: the machine is shared and its speed varies "
        "between sittings, so where it ran, the answer is judged against it. Beats: accuracy at least the default's "
        "(0.2 points of slack) at a time bound, time to the target at most 1.05x the default's.", "",
        md_table(["request", "loop", "answer asked again", "measured", "single answer (recommend.md)",
                  "obvious default (recommend.md)", "default beside it", "meets", "beats default"], rows), "",
    ])
    REPORT.write_text(text, encoding="utf-8")
    print(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--datasets", required=True)
    r.add_argument("--questions", required=True)
    r.add_argument("--budget", type=float, default=180.0)
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--workdir", default="/tmp/advisor-bench-recommend-v2")
    r.add_argument("--default-beside", action="store_true", help="run recommend.md's default of the request "
                   "again on this core after the answer, and judge the answer against it")
    r.add_argument("--fresh", action="store_true", help="run the loop again on an empty knowledge base "
                   "(the request's earlier records stay in the log; render takes the latest)")
    sub.add_parser("render")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        with (RESULTS / "raw" / "own-trials.runs").open("a", encoding="utf-8") as f:
            f.write(f"{command_line()} at {git_rev()}\n")
        run(args)
    render(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
