"""Knowledge base v2: full-size workloads, learning curves, trials chosen where the surrogate is unsure.

Each worker owns one core and runs one trial at a time on it, single-threaded, in a fresh child
(``advisor.harness.run_trial``, pinned): two workers on a 2-core machine never oversubscribe.
Workers share one Optuna storage; studies are ``kb2-<dataset>-<size>`` and every trial keeps its
full ``TrialResult`` (per-epoch accuracy and time curve, hardware profile, versions, dataset
fingerprint and variant) in the user attribute ``advisor.result``, so ``advisor knowledge export``
turns the storage into table rows and ``advisor knowledge merge`` adds them to the shipped table.

What is measured:
- the datasets at full size (MNIST 60k, Fashion-MNIST 60k, the 30k CIFAR-10 copy) most of the time,
  training-size subsets and digits now and then (size transfer);
- every framework whose runtime trains the model (scikit-learn: the MLP only: its numpy conv
  engine needs minutes per epoch at these sizes), the recipe models (batch norm, residual) and
  every knob of the framework's CPU search space;
- epochs drawn log-uniformly up to what fits ``--trial-seconds`` on this core (estimated from
  trials already run, else from the model's FLOPs); the schedule's length is the trial's epoch
  count, so a curve read at epoch k of an N-epoch schedule is recorded as such (``cfg_epochs`` = N).

How the next trial is chosen (``--strategy``):
- ``uniform``: one random draw;
- ``active``: a pool of random draws is scored by a surrogate refitted every ``--refit`` trials on
  the shipped table plus everything collected so far; half the time the pick is the pool's
  widest accuracy band among the candidates on the predicted (time, accuracy) front, otherwise
  the widest band overall (time band width, in log space, counts too).

A trial during which another process used the core is recorded as ``contended`` (the surrogate
ignores those rows) and run again once. Interrupt at will: the storage holds every finished trial,
and a restart continues from the counts it finds.

Usage (one worker per core)::

    python benchmarks/study/collect_full.py --core 0 --strategy active &
    python benchmarks/study/collect_full.py --core 1 --strategy active &
    advisor knowledge export --storage sqlite:///benchmarks/study/kb2.db --out /tmp/kb2.csv.gz
    advisor knowledge merge advisor/shipped/knowledge.csv.gz /tmp/kb2.csv.gz --out advisor/shipped/knowledge.csv.gz
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from advisor import datasets, knowledge, models
from advisor.harness import Limits, run_trial
from advisor.knobs import forced_by_model
from advisor.records import Config, TrialResult, Workload
from advisor.space import load_space

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collect import _record  # noqa: E402  (the same trial record as the first collector)

log = logging.getLogger("collect_full")

SHARED = Path(__file__).resolve().parents[3] / "shared" / "datasets"


@dataclass(frozen=True)
class DatasetPlan:
    name: str
    subdir: str | None
    full: int               # training samples of the local copy at full size
    subsets: tuple[int, ...]
    models: tuple[str, ...]
    trial_seconds: float    # epochs are capped so a trial's training fits this, on one core


PLANS = {
    "mnist": DatasetPlan("mnist", "mnist", 60_000, (10_000,),
                         ("mlp", "lenet5", "bn_cnn_w8", "bn_cnn_w16", "resnet9_w8"), 80.0),
    "fashion-mnist": DatasetPlan("fashion-mnist", "fashion-mnist", 60_000, (10_000,),
                                 ("mlp", "lenet5", "bn_cnn_w8", "bn_cnn_w16", "resnet9_w8"), 80.0),
    "cifar10": DatasetPlan("cifar10", "cifar-10-batches-bin", 30_000, (5_000,),
                           ("lenet5", "cifar_quick", "bn_cnn_w8", "bn_cnn_w16", "bn_cnn_w32", "resnet9_w8"),
                           150.0),
    "digits": DatasetPlan("digits", None, 1437, (), ("mlp", "lenet5", "bn_cnn_w8"), 30.0),
}
FULL_SIZE = ("mnist", "fashion-mnist", "cifar10")
FRAMEWORK_WEIGHTS = {"torch": 0.5, "tensorflow": 0.2, "onnxruntime": 0.2, "sklearn": 0.1}
SKLEARN_MODELS = ("mlp",)
MAX_EPOCHS = 30
#: Knobs that change the time of an epoch several-fold: the epoch-time estimate matches on them.
SPEED_SWITCHES = ("bfloat16", "onednn", "compile", "channels_last", "xla")


def study_name(dataset: str, size: int | None) -> str:
    return f"kb2-{dataset}-{'full' if size is None else size}"


@dataclass
class Draw:
    workload: Workload
    config: Config
    params: dict[str, Any]
    epoch_s: float
    score: float | None = None
    prediction: dict[str, float] | None = None


class Collector:
    #: The datasets this collector measures, by name.
    plans: dict[str, DatasetPlan] = PLANS
    #: The longest run drawn (epochs).
    max_epochs: int = MAX_EPOCHS

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.core = args.core
        self.rng = np.random.default_rng([args.seed, args.core, int(time.time())])
        self.storage = args.storage
        self.hardware = _hardware()
        self.surrogate: Any = None
        self.since_fit = 10**9
        self.base_rows = knowledge.read(args.base_table).rows if args.base_table else []
        # The older table's CPU curves, shaped like storage results, for epoch-time estimates only.
        self.prior = [{"workload": {"dataset": r["dataset_name"], "model": r["model"],
                                    "train_samples": r["train_samples"]},
                       "config": {**{k[4:]: r[k] for k in r if k.startswith("cfg_")}, "framework": r["framework"]},
                       "epoch_times": r["epoch_times"]}
                      for r in self.base_rows if r["device_kind"] == "cpu" and r["epoch_times"]]

    # --- what the storage holds -------------------------------------------------------------
    def _studies(self) -> dict[str, optuna.Study]:
        out = {}
        for ds, plan in self.plans.items():
            for size in (None, *plan.subsets):
                name = self.study_name(ds, size)
                out[name] = optuna.create_study(study_name=name, storage=self.storage, load_if_exists=True,
                                                directions=["minimize", "maximize", "minimize"])
        return out

    def results(self) -> list[dict[str, Any]]:
        out = []
        for study in self._studies().values():
            for t in study.get_trials(deepcopy=False):
                r = t.user_attrs.get("advisor.result")
                if r:
                    out.append(r)
        return out

    def study_name(self, dataset: str, size: int | None) -> str:
        return study_name(dataset, size)

    # --- what to run next --------------------------------------------------------------------
    def choose_dataset(self, results: list[dict[str, Any]]) -> tuple[str, int | None]:
        if self.rng.random() < self.args.side_share:
            side = [(ds, s) for ds, p in self.plans.items() for s in p.subsets]
            if "digits" in self.args.datasets:
                side.append(("digits", None))
            side = [(ds, s) for ds, s in side if ds in self.args.datasets]
            if side:
                return side[int(self.rng.integers(len(side)))]
        full = [ds for ds in FULL_SIZE if ds in self.args.datasets]
        counts = {ds: 0 for ds in full}
        for r in results:
            name = (r.get("workload") or {}).get("dataset")
            if name in counts and (r.get("workload") or {}).get("train_samples") is None and r.get("status") == "ok":
                counts[name] += 1
        # The dataset furthest below its share goes first (CIFAR trials are longer: equal counts).
        return min(full, key=lambda d: (counts[d], self.rng.random())), None

    def _epoch_seconds(self, results: list[dict[str, Any]], fw: str, dataset: str, model: str, n: int,
                       batch: int, params: dict[str, Any] | None = None) -> float:
        """Seconds per epoch on one core, from the trial like it with the nearest batch size and
        the same speed switches (its epoch time scaled by the training size, half per sample and
        half per step), else from the model's FLOPs and a per-step overhead. A differing speed
        switch (bfloat16, oneDNN, compile, channels_last, XLA) counts as far as a 2.7x batch size:
        bfloat16 without oneDNN, for one, runs several times slower per epoch."""
        best: tuple[float, float] | None = None
        wanted = {k: (params or {}).get(k) for k in SPEED_SWITCHES}
        for r in [*results, *self.prior]:
            w, c = r.get("workload") or {}, r.get("config") or {}
            if (c.get("framework"), w.get("dataset"), w.get("model")) != (fw, dataset, model):
                continue
            times = r.get("epoch_times") or []
            if not times or c.get("threads") != 1 or not c.get("batch_size"):
                continue
            size = w.get("train_samples") or self.plans[dataset].full
            bs = int(c["batch_size"])
            estimate = float(np.median(times)) * (n / size) * (0.5 + 0.5 * bs / batch)
            distance = abs(math.log(bs / batch)) + sum(
                1.0 for k, v in wanted.items() if v is not None and bool(c.get(k)) != bool(v))
            if best is None or distance < best[0]:
                best = (distance, estimate)
        if best is not None:
            return best[1]
        info = datasets.get_info(dataset)
        flops = models.training_flops_per_sample(models.get_model(model), tuple(info.input_shape), info.num_classes)
        return n * flops / 30e9 + n / batch * 0.015  # ~30 GFLOP/s effective on one core, 15 ms per step

    def draw(self, results: list[dict[str, Any]], dataset: str, size: int | None) -> Draw:
        plan = self.plans[dataset]
        fws = [f for f in FRAMEWORK_WEIGHTS if f in self.args.frameworks]
        p = np.array([FRAMEWORK_WEIGHTS[f] for f in fws])
        n = size or plan.full
        budget = plan.trial_seconds * self.args.time_scale * (1.0 if size is None else 0.5)
        # Redraw a configuration whose single epoch would already run far past the budget: it ends
        # in a timeout that teaches one point at best.
        for _ in range(20):
            fw = fws[int(self.rng.choice(len(fws), p=p / p.sum()))]
            choices = [m for m in plan.models if fw != "sklearn" or m in SKLEARN_MODELS] or ["mlp"]
            model = choices[int(self.rng.integers(len(choices)))]
            space = load_space(f"{fw}-cpu", cores=1)
            forced = forced_by_model(fw, model)
            params = space.sample(self.rng, exclude=datasets.refused_knobs(dataset) | set(forced))
            params["threads"] = 1
            params.update(forced)
            epoch_s = self._epoch_seconds(results, fw, dataset, model, n, int(params.get("batch_size", 128)), params)
            if epoch_s <= 1.5 * budget:
                break
        cap = int(max(1, min(self.max_epochs, budget // max(epoch_s, 1e-3))))
        # Longer runs teach more: every epoch of a run is a reading of its learning curve.
        params["epochs"] = int(self.rng.integers(max(1, cap // 3), cap + 1))
        config = space.to_config(params, seed=int(self.rng.integers(0, 2**31 - 1)))
        workload = Workload(
            dataset=dataset, model=model, train_samples=size, test_samples=None,
            data_dir=str(Path(self.args.data_dir) / plan.subdir) if plan.subdir else None,
            seed=int(self.rng.integers(0, 1000)),
        )
        return Draw(workload, config, params, epoch_s)

    def refit(self, results: list[dict[str, Any]]) -> None:
        from advisor import surrogate as sur

        rows = list(self.base_rows)
        for r in results:
            try:
                rows.append(knowledge.row_from_result(r, self.hardware))
            except Exception:  # a result this version cannot read is not training data
                continue
        t0 = time.time()
        table = knowledge.Table.from_rows(rows)
        self.surrogate = sur.fit(table.columns, seed=int(self.rng.integers(0, 2**31 - 1)), num_threads=1,
                                 calibration_folds=0, objectives=("train_time_s", "test_accuracy"))
        self.since_fit = 0
        log.info("core %d: surrogate refitted on %d rows in %.0f s", self.core, len(rows), time.time() - t0)

    def score(self, pool: list[Draw]) -> Draw:
        from advisor._recommend._candidates import Candidate, columns
        from advisor._recommend._workload import describe_workload, resolve_target

        target = resolve_target("cpu", cores=1, profile=self.hardware)
        by_workload: dict[tuple[str, str, int | None], list[int]] = {}
        for i, d in enumerate(pool):
            by_workload.setdefault((d.workload.dataset, d.workload.model, d.workload.train_samples), []).append(i)
        acc = np.zeros((len(pool), 3))
        tim = np.zeros((len(pool), 3))
        for (ds, model, size), idx in by_workload.items():
            info = describe_workload(ds, model=model, train_samples=size or self.plans[ds].full)
            cols = columns([Candidate(pool[i].config, "collector", None) for i in idx], info, target)
            bands = self.surrogate.predict(cols)
            for j, i in enumerate(idx):
                acc[i] = bands["test_accuracy"].row(j)
                tim[i] = bands["train_time_s"].row(j)
        width = (acc[:, 2] - acc[:, 0]) + 0.1 * np.log(np.maximum(tim[:, 2], 1e-3) / np.maximum(tim[:, 0], 1e-3))
        front = np.array([not np.any((tim[:, 1] <= tim[i, 1]) & (acc[:, 1] >= acc[i, 1])
                                     & ((tim[:, 1] < tim[i, 1]) | (acc[:, 1] > acc[i, 1]))) for i in range(len(pool))])
        use_front = self.rng.random() < 0.5 and front.any()
        masked = np.where(front, width, -np.inf) if use_front else width
        best = int(np.argmax(masked))
        chosen = pool[best]
        chosen.score = float(width[best])
        chosen.prediction = {"accuracy_q10": acc[best, 0], "accuracy_q50": acc[best, 1], "accuracy_q90": acc[best, 2],
                             "time_q10": tim[best, 0], "time_q50": tim[best, 1], "time_q90": tim[best, 2],
                             "on_front": bool(front[best])}
        return chosen

    # --- one trial ---------------------------------------------------------------------------
    def run_one(self) -> bool:
        results = self.results()
        dataset, size = self.choose_dataset(results)
        counts = sum(1 for r in results if (r.get("workload") or {}).get("train_samples") is None
                     and r.get("status") == "ok" and (r.get("workload") or {}).get("dataset") in FULL_SIZE)
        if self.args.max_full is not None and counts >= self.args.max_full:
            return False
        if self.args.strategy == "active":
            if self.surrogate is None or self.since_fit >= self.args.refit:
                self.refit(results)
            pool = [self.draw(results, dataset, size) for _ in range(self.args.pool)]
            chosen = self.score(pool)
        else:
            chosen = self.draw(results, dataset, size)
        name = self.study_name(dataset, size)
        study = optuna.load_study(study_name=name, storage=self.storage)
        limits = Limits(wall_time_s=max(90.0, 2.0 * self.plans[dataset].trial_seconds + 60), memory_mb=8192)
        for attempt in (1, 2):
            t0 = time.time()
            result = run_trial(chosen.workload, chosen.config, limits=limits, cores=[self.core],
                               workdir=self.args.workdir, study=name,
                               trial_number=len(study.get_trials(deepcopy=False)))
            params = dict(chosen.params, strategy=self.args.strategy, attempt=attempt,
                          acquisition=chosen.score, predicted=chosen.prediction, epoch_estimate_s=chosen.epoch_s)
            _record(study, params, result)
            self.since_fit += 1
            log.info("core %d %s %s %s/%s ep=%d bs=%d -> %s acc=%s time=%s wall=%.0fs contended=%s", self.core, name,
                     chosen.config.framework, chosen.workload.model, chosen.config.optimizer, chosen.config.epochs,
                     chosen.config.batch_size, result.status, _fmt(result.test_accuracy), _fmt(result.train_time_s),
                     time.time() - t0, result.contended)
            if not result.contended:
                break
        return True


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _hardware() -> Any:
    from advisor import hardware

    return hardware.load_cached()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", default="sqlite:///benchmarks/study/kb2.db")
    ap.add_argument("--data-dir", default=str(SHARED))
    ap.add_argument("--core", type=int, required=True, help="the one CPU id this worker owns")
    ap.add_argument("--strategy", choices=("active", "uniform"), default="active")
    ap.add_argument("--pool", type=int, default=48, help="random draws scored per active pick")
    ap.add_argument("--refit", type=int, default=12, help="trials between surrogate refits (active)")
    ap.add_argument("--base-table", default=str(Path(__file__).resolve().parents[2] / "advisor" / "shipped"
                                                / "knowledge.csv.gz"),
                    help="older trials the active surrogate also learns from ('' for none)")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORK_WEIGHTS))
    ap.add_argument("--datasets", default=",".join(PLANS))
    ap.add_argument("--side-share", type=float, default=0.12, help="share of subset and digits trials")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="multiplies every dataset's per-trial training budget (0.75: shorter trials, more of them)")
    ap.add_argument("--max-trials", type=int, default=None, help="stop after this many new trials")
    ap.add_argument("--max-full", type=int, default=None, help="stop when the storage holds this many full-size ok trials")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/advisor-collect-full")
    args = ap.parse_args(argv)
    args.frameworks = args.frameworks.split(",")
    args.datasets = args.datasets.split(",")
    return run_worker(Collector, args)


def run_worker(kind: type[Collector], args: argparse.Namespace) -> int:
    """One worker: logs to stderr, pinned to ``args.core`` (refits included), trials until
    ``args.max_trials`` or the collector has nothing left to run."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    os.sched_setaffinity(0, {args.core})  # the worker's own work (refits) stays on its core too
    collector = kind(args)
    n = 0
    while args.max_trials is None or n < args.max_trials:
        if not collector.run_one():
            break
        n += 1
    log.info("core %d: done, %d trials this run", args.core, n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
