"""Collect the knowledge base: trials spread over every framework's search space.

Each cell (framework, dataset, model, training-set size) is one Optuna study in a SQLite storage;
configurations are drawn at random from the framework's CPU search space (with the epoch range
capped per training size, so one trial stays within a couple of minutes on a 2-core machine) and
measured through the harness, one fresh child process per trial. Every trial is recorded,
failed and timed-out ones included, with its full TrialResult in the user attribute
``advisor.result``, so ``advisor knowledge export`` turns the storage into the trial table.

The script is resumable: it counts what each study already holds and runs only the remainder.
Cells are visited round-robin, a few trials at a time, so an interrupted run still covers them all.

Usage:
    python benchmarks/study/collect.py --storage sqlite:///benchmarks/study/kb.db \
        --data-dir ../shared/datasets --cores 0 --per-cell 40 [--frameworks torch,sklearn]
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from advisor.harness import Limits, run_trial
from advisor.records import TrialResult, Workload
from advisor.space import load_space

log = logging.getLogger("collect")

# Largest epoch count sampled for a training-set size: keeps a trial within about two minutes.
EPOCH_CAP = [(1_500, 20), (2_000, 10), (5_000, 6), (10_000, 4), (30_000, 2), (10**9, 2)]


@dataclass(frozen=True)
class Cell:
    framework: str
    dataset: str
    model: str
    train_samples: int | None
    data_subdir: str | None

    @property
    def study_name(self) -> str:
        size = "full" if self.train_samples is None else str(self.train_samples)
        return f"kb-{self.framework}-{self.dataset}-{self.model}-{size}"

    def epoch_cap(self, full_size: int) -> int:
        n = self.train_samples or full_size
        return next(cap for limit, cap in EPOCH_CAP if n <= limit)


FULL = {"digits": 1437, "mnist": 60_000, "cifar10": 30_000}


# The numpy im2col engine (scikit-learn's conv path) needs minutes per epoch beyond this size.
NUMPY_CONV_MAX = 5_000


def _affordable(cell: Cell) -> bool:
    if cell.framework != "sklearn" or cell.model == "mlp":
        return True
    return cell.train_samples is not None and cell.train_samples <= NUMPY_CONV_MAX


def cells(frameworks: list[str]) -> list[Cell]:
    out: list[Cell] = []
    for fw in frameworks:
        for size in (500, 1000, None):
            for model in ("mlp", "lenet5"):
                out.append(Cell(fw, "digits", model, size, None))
        for size in (2000, 5000, 10000, None):
            for model in ("mlp", "lenet5"):
                out.append(Cell(fw, "mnist", model, size, "mnist"))
        for size in (2000, 5000, 10000, None):
            out.append(Cell(fw, "cifar10", "cifar_quick", size, "cifar-10-batches-bin"))
    return [c for c in out if _affordable(c)]


def _sample(cell: Cell, rng: np.random.Generator, cores: int) -> dict:
    space = load_space(f"{cell.framework}-cpu", cores=cores)
    params = space.sample(rng)
    cap = cell.epoch_cap(FULL[cell.dataset])
    if params.get("epochs", 1) > cap:
        # Keep the spread: rescale rather than clip, so the cap is not over-represented.
        params["epochs"] = max(1, int(math.ceil(params["epochs"] * cap / 20)))
        params["epochs"] = min(params["epochs"], cap)
    params["threads"] = min(int(params.get("threads", 1)), cores)
    return params, space


def _record(study: optuna.Study, params: dict, result: TrialResult) -> None:
    """Add one finished trial to ``study``: its knobs as Optuna parameters (optuna-dashboard
    slices the study by them), the draw in ``advisor.params``, the full record in ``advisor.result``."""
    from advisor._tuning._read import json_safe, knob_params  # the same forms tuning stores

    attrs = {"advisor.result": json_safe(result.to_dict()), "advisor.status": result.status,
             "advisor.params": json_safe(params)}
    if result.status == "ok":
        values = [result.train_time_s, result.test_accuracy, result.peak_memory_mb]
        state = optuna.trial.TrialState.COMPLETE
    else:
        values = None
        state = optuna.trial.TrialState.PRUNED if result.status == "pruned" else optuna.trial.TrialState.FAIL
    knobs, distributions = knob_params(result.config)
    study.add_trial(optuna.trial.create_trial(values=values, state=state, user_attrs=attrs, params=knobs,
                                              distributions=distributions))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", default="sqlite:///benchmarks/study/kb.db")
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "datasets"))
    ap.add_argument("--cores", default="0", help="CPU ids granted to this collector, e.g. 0 or 0,1")
    ap.add_argument("--per-cell", type=int, default=40)
    ap.add_argument("--batch", type=int, default=2, help="trials per cell per round")
    ap.add_argument("--frameworks", default="sklearn,torch,onnxruntime,tensorflow")
    ap.add_argument("--datasets", default="digits,mnist,cifar10")
    ap.add_argument("--max-samples", type=int, default=None,
                    help="skip cells whose training set is larger (the full set counts at its size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trial-timeout", type=float, default=240.0)
    ap.add_argument("--workdir", default="/tmp/advisor-collect")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    cores = [int(c) for c in args.cores.split(",")]
    datasets = set(args.datasets.split(","))
    plan = [c for c in cells(args.frameworks.split(",")) if c.dataset in datasets]
    if args.max_samples is not None:
        plan = [c for c in plan if (c.train_samples or FULL[c.dataset]) <= args.max_samples]
    rng = np.random.default_rng([args.seed, *cores])
    limits = Limits(wall_time_s=args.trial_timeout, memory_mb=8192)
    done_total = 0
    while True:
        progressed = False
        for cell in plan:
            study = optuna.create_study(study_name=cell.study_name, storage=args.storage,
                                        directions=["minimize", "maximize", "minimize"], load_if_exists=True)
            have = len(study.get_trials(deepcopy=False))
            todo = min(args.batch, args.per_cell - have)
            for _ in range(max(0, todo)):
                params, space = _sample(cell, rng, len(cores))
                config = space.to_config(params, seed=int(rng.integers(0, 2**31 - 1)))
                workload = Workload(
                    dataset=cell.dataset, model=cell.model, train_samples=cell.train_samples,
                    test_samples=None if cell.dataset == "digits" else 2000,
                    data_dir=str(Path(args.data_dir) / cell.data_subdir) if cell.data_subdir else None,
                    seed=int(rng.integers(0, 1000)),
                )
                t0 = time.time()
                result = run_trial(workload, config, limits=limits, cores=cores[: config.threads],
                                   workdir=args.workdir, study=cell.study_name, trial_number=have)
                _record(study, params, result)
                have += 1
                done_total += 1
                progressed = True
                log.info("%s #%d %s acc=%s time=%s wall=%.1fs contended=%s", cell.study_name, have,
                         result.status, result.test_accuracy, result.train_time_s, time.time() - t0,
                         result.contended)
        if not progressed:
            log.info("all cells complete (%d trials this run)", done_total)
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
