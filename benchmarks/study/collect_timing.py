"""Timing trials on input shapes the four datasets do not have, for the time and memory models.

Held out of the surrogate, a dataset's training time is predicted from the other datasets' trials,
and with four datasets each fold has three input shapes to learn from (8x8x1, 28x28x1, 32x32x3).
Measured on the shipped table (``benchmarks/results/dataset-scaling.md``): the leave-one-
dataset-out time error falls from 69% with two training datasets to 48% with three, while a
quarter of the trials instead of all of them costs only 52% against 48%. Time is limited by how
many workload geometries the table holds, not by its trials.

A training step's time depends on the input's shape, the training size, the model and the
configuration, not on what the images show, so this collector measures ``synthetic:HxWxC`` data
(random images and labels, ``synthetic`` in the table: the accuracy model never reads them) at
shapes none of the four datasets has and at several training sizes, every framework and model of
:mod:`collect_full`, one run (at most :data:`TIMING_EPOCHS` epochs) at a time, single-threaded,
pinned to one core (short runs of small data are drawn long enough that the first epoch's warm-up does
not dominate). Everything else (the trial record, contention re-runs, resuming, one worker per
core) is :class:`collect_full.Collector`'s.

Usage (one worker per core; stop it at any time)::

    python benchmarks/study/collect_timing.py --core 1 --storage sqlite:///benchmarks/study/kb3-timing.db
    advisor knowledge export --storage sqlite:///benchmarks/study/kb3-timing.db --out benchmarks/study/timing.csv.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collect_full import FRAMEWORK_WEIGHTS, Collector, DatasetPlan, run_worker  # noqa: E402

#: Input shapes (H, W, C) that none of digits (8x8x1), MNIST and Fashion-MNIST (28x28x1) or
#: CIFAR-10 (32x32x3) has: smaller and larger, one and three channels, one not square.
SHAPES = ((12, 12, 1), (16, 16, 3), (20, 20, 1), (24, 24, 3), (32, 32, 1), (40, 40, 1), (48, 48, 3), (24, 48, 1))
#: Training sizes measured at every shape.
SIZES = (2_000, 6_000, 15_000)
#: Epochs per run at most. Runs of 1-3 epochs (the first 78 trials) made the time model worse on the runs
#: recommend answers with (`benchmarks/results/verified-runs.md`): their first epoch's warm-up (compile,
#: oneDNN primitives) dominated them, as it does not a real run.
TIMING_EPOCHS = 8
MODELS = ("mlp", "lenet5", "cifar_quick", "bn_cnn_w8", "bn_cnn_w16", "bn_cnn_w32", "resnet9_w8")
#: Twice the training seconds a run aims at on one core (epochs are capped to fit half of it, as for
#: :mod:`collect_full`'s subsets).
TRIAL_SECONDS = 80.0


def synthetic_name(shape: tuple[int, int, int]) -> str:
    return "synthetic:{}x{}x{}".format(*shape)


class TimingCollector(Collector):
    # every cell is a 'subset' of a stated size: synthetic data without a size has only 2,000 samples
    plans = {synthetic_name(s): DatasetPlan(synthetic_name(s), None, SIZES[-1], SIZES, MODELS, TRIAL_SECONDS)
             for s in SHAPES}
    max_epochs = TIMING_EPOCHS

    def study_name(self, dataset: str, size: int | None) -> str:
        return f"kb3-timing-{dataset.split(':', 1)[1]}-{size or self.plans[dataset].full}"

    def choose_dataset(self, results: list[dict[str, Any]]) -> tuple[str, int | None]:
        """The (shape, size) cell with the fewest finished runs (ties at random)."""
        counts: dict[tuple[str, int | None], int] = {(ds, s): 0 for ds, p in self.plans.items() for s in p.subsets}
        for r in results:
            w = r.get("workload") or {}
            key = (w.get("dataset"), w.get("train_samples"))
            if key in counts and r.get("status") in ("ok", "pruned"):
                counts[key] += 1
        return min(counts, key=lambda k: (counts[k], self.rng.random()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", default="sqlite:///benchmarks/study/kb3-timing.db")
    ap.add_argument("--core", type=int, required=True, help="the one CPU id this worker owns")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORK_WEIGHTS))
    ap.add_argument("--max-trials", type=int, default=None, help="stop after this many new trials")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/advisor-collect-timing")
    args = ap.parse_args(argv)
    # what Collector reads besides: no real data, no subsets beyond the plans', one draw per trial
    args.frameworks = args.frameworks.split(",")
    args.datasets = list(TimingCollector.plans)
    args.data_dir, args.base_table, args.strategy = "", "", "uniform"
    args.side_share, args.time_scale, args.max_full = 0.0, 1.0, None
    return run_worker(TimingCollector, args)


if __name__ == "__main__":
    raise SystemExit(main())
