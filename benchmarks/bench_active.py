"""Active against uniform collection of the knowledge base, at equal core-hours.

``benchmarks/study/collect_full.py`` ran two workers side by side, one per core, over the same
workloads: one chose each trial actively (widest surrogate band near the predicted front), the
other uniformly at random. This script reads their trials from the collector's storage and asks
how good a surrogate each arm buys for the same compute:

- a common test set: a fixed random third of each arm's finished full-size trials (never trained on);
- for each budget of core-seconds, each arm's surrogate is fitted on the older table (the rows the
  collector started from) plus that arm's trials (all of them: full-size and side workloads,
  test set excluded) finished within the budget, in the order they ran;
- figures on the common test set: accuracy MAE, time MAPE and Spearman rho of time.

Usage:
    python benchmarks/bench_active.py --storage sqlite:///benchmarks/study/kb2.db [--dataset mnist]
writes benchmarks/results/active.md (and raw/active.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, command_line, git_rev, machine_line, md_table  # noqa: E402

FULL_SIZE = ("mnist", "fashion-mnist", "cifar10")


def arm_trials(storage: str) -> dict[str, list[dict[str, Any]]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out: dict[str, list[dict[str, Any]]] = {"active": [], "uniform": []}
    for summary in optuna.get_all_study_summaries(storage):
        if not summary.study_name.startswith("kb2-"):
            continue
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        for t in study.get_trials(deepcopy=False):
            result, params = t.user_attrs.get("advisor.result"), t.user_attrs.get("advisor.params") or {}
            arm = params.get("strategy")
            if result and arm in out:
                out[arm].append(result)
    from advisor import knowledge
    from advisor.errors import KnowledgeBaseError

    for arm in out:
        readable = []
        for r in out[arm]:
            try:
                knowledge.row_from_result(r)
            except KnowledgeBaseError:  # a config today's validation refuses (compile with oneDNN off)
                continue
            readable.append(r)
        out[arm] = sorted(readable, key=lambda r: r.get("started_at") or "")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", default="sqlite:///benchmarks/study/kb2.db")
    ap.add_argument("--dataset", default=None, help="judge on one full-size dataset only (default: all three)")
    ap.add_argument("--steps", type=int, default=4, help="budgets evaluated per arm")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from advisor import hardware, knowledge
    from advisor import surrogate as sg
    from advisor.surrogate.evaluate import spearman

    trials = arm_trials(args.storage)
    collected = {r["trial_id"] for rs in trials.values() for r in rs}
    shipped = knowledge.read(sg.shipped_table())
    base = shipped.where([t not in collected for t in shipped["trial_id"]])  # the table the collector started from
    profile = hardware.load_cached()
    rng = np.random.default_rng(args.seed)
    judged = tuple([args.dataset] if args.dataset else FULL_SIZE)

    def is_test_candidate(r: dict[str, Any]) -> bool:
        w = r.get("workload") or {}
        return (r.get("status") == "ok" and not r.get("contended") and w.get("dataset") in judged
                and w.get("train_samples") is None)

    test_ids: set[str] = set()
    for arm, rs in trials.items():
        pool = [r["trial_id"] for r in rs if is_test_candidate(r)]
        test_ids |= set(rng.choice(pool, size=len(pool) // 3, replace=False).tolist()) if pool else set()
    test_rows = [knowledge.row_from_result(r, profile) for rs in trials.values() for r in rs
                 if r["trial_id"] in test_ids]
    if len(test_rows) < 5:
        print("fewer than 5 test trials: collect more first")
        return 1
    test = knowledge.Table.from_rows(test_rows)
    spent = {arm: np.cumsum([float(r.get("wall_time_s") or 0.0) for r in rs if r["trial_id"] not in test_ids])
             for arm, rs in trials.items()}
    total = min(float(s[-1]) for s in spent.values() if len(s)) if all(len(s) for s in spent.values()) else 0.0
    budgets = [total * (k + 1) / args.steps for k in range(args.steps)]
    rows, raw = [], []
    for budget in budgets:
        for arm, rs in trials.items():
            train = [r for r in rs if r["trial_id"] not in test_ids]
            within = [r for r, s in zip(train, spent[arm]) if s <= budget + 1e-9]
            columns = knowledge.Table.from_rows(list(base.rows) + [knowledge.row_from_result(r, profile)
                                                                   for r in within]).columns
            model = sg.fit(columns, num_boost_round=args.rounds, calibration_folds=0,
                           objectives=("train_time_s", "test_accuracy"))
            bands = model.predict(test.columns)
            acc = np.array(test["test_accuracy"], dtype=float)
            tim = np.array(test["train_time_s"], dtype=float)
            mae = float(np.mean(np.abs(bands["test_accuracy"].mid - acc)))
            mape = float(np.mean(np.abs(bands["train_time_s"].mid - tim) / tim))
            rho = spearman(bands["train_time_s"].mid, tim)
            full = sum(1 for r in within if is_test_candidate(r))
            raw.append({"budget_core_s": budget, "arm": arm, "trials": len(within), "full_size_ok": full,
                        "accuracy_mae": mae, "time_mape": mape, "time_spearman": rho})
            rows.append([f"{budget / 3600:.2f}", arm, len(within), full, mae, f"{100 * mape:.1f}%",
                         "n/a" if rho is None else f"{rho:.3f}"])
    out = RESULTS / "active.md"
    (RESULTS / "raw" / "active.json").write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
    lines = [
        "# Active against uniform knowledge-base collection (equal core-hours)",
        "",
        f"Generated by `{command_line()}` at {git_rev()}. {machine_line()}",
        "",
        f"Two collector workers ran side by side, one core each (`benchmarks/study/collect_full.py --strategy "
        f"active|uniform`). Common test set: {len(test_rows)} finished full-size trials of "
        f"{', '.join(judged)} (a random third of each arm's), never trained on. Each arm's surrogate is fitted "
        "on the older table plus the arm's own trials finished within the budget (core-seconds of trial wall "
        "time, in the order they ran).",
        "",
        md_table(["core-hours per arm", "arm", "trials", "full-size ok", "accuracy MAE", "time MAPE", "Spearman time"],
                 rows),
        "",
        "Caveat: the test set is drawn from both arms, so it leans toward the regions each arm chose; a small "
        "number of trials per arm makes the comparison noisy (see the counts).",
    ]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
