"""How well does a surrogate predict the runs `recommend` actually picks? Score it on the verified runs.

`benchmarks/bench_recommend_v2.py` runs each pick and the obvious default for real and logs every
run to `benchmarks/results/raw/recommend-v2.jsonl`. None of those runs is in the knowledge base, and
they are the recipes a recommendation names (bn_cnn, resnet9, schedules, augmentation), not the
small 2018-style trials that dominate the table. So they are an out-of-table test that the model
card's grouped cross-validation is not: a change to the surrogate that improves the card's figures
can still make the answers worse (see `benchmarks/results/verified-runs.md`).

For every uncontended run that finished or was stopped (status ``ok`` or ``pruned``), the model is
asked about the run as it ran: its configuration, read after the epochs it completed of the
schedule it was given (a learning-curve reading, as `recommend` asks), one core. Held-out datasets
(mnist, fashion-mnist, cifar10, digits) are asked of the leave-one-dataset-out model fitted without
them (`lodo-<dataset>/model` under --workdir, fitted as `bench_recommend_v2.py` does when missing);
the workloads in no file of the table are asked of --model (default: the shipped model).

Reported: training time MAPE, median predicted/measured ratio and 10-90% band coverage; accuracy
MAE and band coverage; for all runs, the held-out ones, the others, and per model.

Usage: python benchmarks/bench_verified_runs.py run [--model DIR] [--workdir /tmp/rv2-matrix] [--label NAME]
       python benchmarks/bench_verified_runs.py render
Each run appends one record to benchmarks/results/raw/verified-runs.jsonl; render writes
benchmarks/results/verified-runs.md from all records, with the prose in raw/verified-runs.findings.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recommend_v2 as rv2  # noqa: E402
from common import RESULTS, append_jsonl, command_line, git_rev, machine_line, md_table, read_jsonl  # noqa: E402

RAW = RESULTS / "raw" / "verified-runs.jsonl"
FINDINGS = RESULTS / "raw" / "verified-runs.findings.md"
OUT = RESULTS / "verified-runs.md"


def verified_runs() -> list[dict[str, Any]]:
    return [r for r in read_jsonl(rv2.RAW) if r.get("config") and r.get("epoch_times") and r.get("model")
            and not r.get("contended") and r.get("status") in ("ok", "pruned")
            and r.get("test_accuracy") is not None]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Time and accuracy figures of predicted rows (those of an objective the model did not predict are left out)."""
    if not rows:
        return {"runs": 0}
    out: dict[str, Any] = {"runs": len(rows), "configs": len({(r["dataset"], r["recipe"]) for r in rows})}
    if all("time_pred" in r for r in rows):
        t, tp = np.array([r["time"] for r in rows]), np.array([r["time_pred"] for r in rows])
        out.update(time_mape=float(np.mean(np.abs(tp[:, 1] - t) / t)),
                   time_ratio=float(np.exp(np.median(np.log(tp[:, 1] / t)))),
                   time_coverage=float(np.mean((tp[:, 0] <= t) & (t <= tp[:, 2]))))
    if all("accuracy_pred" in r for r in rows):
        a, ap = np.array([r["accuracy"] for r in rows]), np.array([r["accuracy_pred"] for r in rows])
        out.update(accuracy_mae=float(np.mean(np.abs(ap[:, 1] - a))), accuracy_bias=float(np.median(ap[:, 1] - a)),
                   accuracy_coverage=float(np.mean((ap[:, 0] <= a) & (a <= ap[:, 2]))))
    return out


def predicted(run: dict[str, Any], model: Any, workdir: Path, *, landmark: float | None = None) -> dict[str, Any]:
    """``model``'s bands for a verified run as it ran (one core; ``landmark`` replaces the workload's)."""
    import dataclasses

    from advisor._recommend._candidates import Candidate, columns
    from advisor._recommend._workload import describe_workload, resolve_target
    from advisor.records import Config

    dataset = run["dataset"]
    derived = dataset in rv2.DERIVED
    workload = describe_workload(str(rv2.derived_path(dataset, workdir)) if derived else dataset, model=run["model"])
    if landmark is not None:
        workload = dataclasses.replace(workload, landmark=landmark)
    cfg = Config.from_dict({**run["config"], "threads": 1})
    cols = columns([Candidate(cfg, "verified run", None, run["model"])], workload, resolve_target("cpu", cores=1),
                   reading=([len(run["epoch_times"])], [int(cfg.epochs)]))
    out: dict[str, Any] = {"dataset": dataset, "held_out": not derived, "model": run["model"],
                           "framework": run["framework"], "recipe": rv2._recipe_of(run["config"]),
                           "time": float(np.sum(run["epoch_times"])), "accuracy": float(run["test_accuracy"])}
    for name, band in model.predict(cols).items():
        key = {"train_time_s": "time_pred", "test_accuracy": "accuracy_pred"}.get(name)
        if key:
            out[key] = [float(band.lo[0]), float(band.mid[0]), float(band.hi[0])]
    return out


def run(args: argparse.Namespace) -> None:
    from advisor import surrogate as sg

    workdir = Path(args.workdir)
    model_dir = Path(args.model) if args.model else sg.shipped_model_dir()
    models: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    for r in verified_runs():
        dataset = r["dataset"]
        key = "*" if dataset in rv2.DERIVED else dataset
        if key not in models:
            models[key] = sg.load(model_dir if key == "*" else rv2.heldout_model(dataset, workdir, args.rounds)[1])
        rows.append(predicted(r, models[key], workdir))
    by_model = defaultdict(list)
    for row in rows:
        by_model[row["model"]].append(row)
    record = {"label": args.label or git_rev(), "commit": git_rev(), "model_dir": str(model_dir),
              "workdir": str(workdir), "command": command_line(), "machine": machine_line(),
              "seconds": round(time.time() - t0, 1),
              "all": summary(rows), "held_out": summary([x for x in rows if x["held_out"]]),
              "derived": summary([x for x in rows if not x["held_out"]]),
              "by_model": {m: summary(v) for m, v in sorted(by_model.items())}}
    append_jsonl(RAW, record)
    s = record["all"]
    print(f"{record['label']}: {s['runs']} runs; time MAPE {s['time_mape']:.1%} (ratio {s['time_ratio']:.2f}, "
          f"band {s['time_coverage']:.0%}); accuracy MAE {s['accuracy_mae']:.3f} (band {s['accuracy_coverage']:.0%})")


def _pct(v: Any) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def render(_: argparse.Namespace) -> None:
    records = read_jsonl(RAW)
    lines = ["# The surrogate on the runs recommend picked (verified runs, out of the table)", ""]
    if FINDINGS.exists():
        lines += [FINDINGS.read_text().strip(), ""]
    head = ["model (label)", "commit", "runs", "set", "time MAPE", "time pred/meas (median)", "time band",
            "acc MAE", "acc bias (median)", "acc band"]
    body = []
    for rec in records:
        for part in ("all", "held_out", "derived"):
            s = rec[part]
            if not s.get("runs"):
                continue
            body.append([rec["label"], rec["commit"], f"{s['runs']} ({s['configs']} configs)", part.replace("_", "-"),
                         _pct(s["time_mape"]), f"{s['time_ratio']:.2f}", _pct(s["time_coverage"]),
                         f"{s['accuracy_mae']:.3f}", f"{s['accuracy_bias']:+.3f}", _pct(s["accuracy_coverage"])])
    lines += [md_table(head, body), ""]
    for rec in records:
        lines += [f"Per model, {rec['label']} (`{rec['command']}`, {rec['seconds']} s; {rec['machine']}):", ""]
        lines += [md_table(["model", "runs", "time MAPE", "time pred/meas", "acc MAE", "acc bias"],
                           [[m, s["runs"], _pct(s["time_mape"]), f"{s['time_ratio']:.2f}", f"{s['accuracy_mae']:.3f}",
                             f"{s['accuracy_bias']:+.3f}"] for m, s in rec["by_model"].items()]), ""]
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", default=None, help="model folder for the workloads in no file of the table")
    r.add_argument("--workdir", default="/tmp/rv2-matrix", help="where the leave-one-dataset-out models live")
    r.add_argument("--rounds", type=int, default=150)
    r.add_argument("--label", default=None)
    sub.add_parser("render")
    args = p.parse_args(argv)
    {"run": run, "render": render}[args.cmd](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
