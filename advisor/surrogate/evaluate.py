"""How good the surrogate is: grouped cross-validation (the model card that publishes it is written
by :mod:`advisor.surrogate._card`, re-exported here).

Every scheme holds out whole groups, so the figures say how well the models transfer, not how
well they interpolate between near-identical trials:

- ``leave-one-dataset-out``: train without a dataset, predict it;
- ``leave-one-train-size-out``: train without a training-set size, predict it;
- ``leave-one-hardware-out``: train without a device kind / hardware profile (only when the table
  holds at least two);
- ``random-5-fold``: the optimistic baseline.

Timing runs on random data (``synthetic`` rows, which only the time and memory models read) train
every fold and are scored in none.

Figures per objective and scheme, pooled over the held-out predictions: Spearman's rho between
predicted median and measured value, MAPE (time and memory) or MAE (accuracy), and the coverage
of the 10-90% band (0.8 when the band is calibrated).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from advisor.surrogate._card import FULL_SIZE_SAMPLES, _shipped_offsets, model_card
from advisor.surrogate.features import FeatureSchema, device_model_times, schema_from_columns
from advisor.surrogate.model import (
    CALIBRATION_FOLDS,
    DEFAULT_ROUNDS,
    LOG_OBJECTIVES,
    MIN_ROWS,
    OBJECTIVES,
    fit,
    training_columns,
)
from advisor.surrogate._targets import real_rows

__all__ = ["SCHEMES", "Figures", "Evaluation", "spearman", "repeat_noise", "evaluate", "time_to_accuracy", "device_holdout",
           "error_composition", "SHORT_RUN_S", "LEARNED_MARGIN",
           "training_meta", "model_card"]

SCHEMES = ("leave-one-dataset-out", "leave-one-train-size-out", "leave-one-hardware-out", "random-5-fold")


@dataclass(frozen=True)
class Figures:
    """Held-out quality of one objective under one scheme.

    Attributes:
        objective: ``train_time_s``, ``test_accuracy`` or ``peak_memory_mb``.
        scheme: One of :data:`SCHEMES`.
        n_rows: Held-out predictions pooled.
        n_folds: Folds that could be fitted.
        spearman: Rank correlation of prediction and measurement.
        mape: Mean absolute percentage error (time, memory), as a fraction.
        mae: Mean absolute error (accuracy).
        coverage: Fraction of measurements inside the predicted 10-90% band.
        by_group: The same figures for each held-out group alone (``{name: {"n_rows", "spearman",
            "mape", "mae", "coverage"}}``), for the schemes that hold out a named group (a dataset,
            a training size, a device); empty for random folds.
        by_kind: Where the error comes from (:func:`error_composition`): the figure over kinds of
            row (``{kind: {"n_rows", "mape" or "mae", "share"}}``, ``share`` being the kind's part
            of the summed error); empty where the objective has no such split.
    """

    objective: str
    scheme: str
    n_rows: int
    n_folds: int
    spearman: float | None
    mape: float | None
    mae: float | None
    coverage: float | None
    by_group: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_kind: dict[str, dict[str, Any]] = field(default_factory=dict)


#: Runs shorter than this (seconds) are told apart in :func:`error_composition`: their time is
#: mostly start-up and per-step overhead, and a relative error there is large in seconds that matter little.
SHORT_RUN_S = 1.0
#: A run whose test accuracy is within this of chance (1 / classes) did not learn.
LEARNED_MARGIN = 0.1


def error_composition(objective: str, y: np.ndarray, mid: np.ndarray, num_classes: np.ndarray) -> dict[str, dict[str, Any]]:
    """Where a held-out figure's error comes from: time over runs shorter than :data:`SHORT_RUN_S`
    and the rest; accuracy over runs that did not learn (within :data:`LEARNED_MARGIN` of chance)
    and those that did. Empty for memory."""
    err = np.abs(mid - y)
    if objective == "train_time_s":
        err, key = err / y, "mape"
        kinds = {f"runs under {SHORT_RUN_S:g} s": y < SHORT_RUN_S, f"runs of {SHORT_RUN_S:g} s or more": y >= SHORT_RUN_S}
    elif objective == "test_accuracy":
        chance = 1.0 / np.maximum(np.asarray(num_classes, dtype=float), 2.0)
        failed = y < chance + LEARNED_MARGIN
        key, kinds = "mae", {f"runs that did not learn (within {LEARNED_MARGIN:g} of chance)": failed,
                             "runs that learned": ~failed}
    else:
        return {}
    total = float(err.sum()) or 1.0
    return {name: {"n_rows": int(m.sum()), key: float(err[m].mean()), "share": float(err[m].sum() / total)}
            for name, m in kinds.items() if m.any()}


@dataclass(frozen=True)
class Evaluation:
    """All figures, plus the schemes that could not run and why."""

    table: str
    n_rows: int
    figures: tuple[Figures, ...]
    skipped: tuple[str, ...]
    noise: dict[str, Any] = field(default_factory=dict)
    time_to_accuracy: dict[str, Any] = field(default_factory=dict)
    device_holdout: dict[str, Any] = field(default_factory=dict)

    def get(self, objective: str, scheme: str) -> Figures | None:
        return next((f for f in self.figures if f.objective == objective and f.scheme == scheme), None)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "n_rows": self.n_rows, "figures": [asdict(f) for f in self.figures],
                "skipped": list(self.skipped), "repeat_noise": dict(self.noise),
                "time_to_accuracy": dict(self.time_to_accuracy), "device_holdout": dict(self.device_holdout)}


def repeat_noise(columns: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """How much repeated runs of one configuration differ: the floor under any model's error.

    Rows that share workload, hardware and every config value except the seed form a group; each
    objective's figure is the mean deviation of its usable rows (as the model would train on them)
    from their group's median: absolute for accuracy, relative for time and memory. The ``loo_``
    figure scores each row against the median of the *other* rows of its group instead, which is
    the error of a predictor that knows everything but the seed: the honest floor for held-out rows.

    Returns:
        ``{objective: {"groups": n, "rows": n, "mae" | "mape": value, "loo_mae" | "loo_mape": value}}``
        for objectives with repeats.
    """
    config_keys = sorted(k for k in columns if k.startswith("cfg_") and k != "cfg_seed")
    keys = ("dataset_name", "train_samples", "test_samples", "model", "framework", "device_kind", "hardware_id")
    out: dict[str, Any] = {}
    for objective in OBJECTIVES:
        picked, values = training_columns(columns, objective)
        groups: dict[tuple[Any, ...], list[float]] = {}
        for i, v in enumerate(values):
            key = tuple(picked[k][i] for k in keys if k in picked) + tuple(picked[k][i] for k in config_keys)
            groups.setdefault(key, []).append(float(v))
        repeated = [np.array(g) for g in groups.values() if len(g) >= 2]
        if not repeated:
            continue
        # each run predicted by the median of the other runs of its configuration: what a perfect
        # model, which knows everything but the seed's luck, would err on a new run
        others = [(g, np.array([np.median(np.delete(g, i)) for i in range(len(g))])) for g in repeated]
        if objective in LOG_OBJECTIVES:
            dev = np.concatenate([np.abs(g / np.median(g) - 1.0) for g in repeated])
            loo = np.concatenate([np.abs(pred - g) / g for g, pred in others])
            out[objective] = {"groups": len(repeated), "rows": int(len(dev)), "mape": float(dev.mean()),
                              "loo_mape": float(loo.mean())}
        else:
            dev = np.concatenate([np.abs(g - np.median(g)) for g in repeated])
            loo = np.concatenate([np.abs(pred - g) for g, pred in others])
            out[objective] = {"groups": len(repeated), "rows": int(len(dev)), "mae": float(dev.mean()),
                              "loo_mae": float(loo.mean())}
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    ranks[order] = np.arange(len(x), dtype=float)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]  # ties share their mean rank


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float | None:
    """Spearman's rho (ties averaged); ``None`` when either side is constant or too short."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def _groups(picked: Mapping[str, Sequence[Any]], scheme: str, seed: int) -> tuple[np.ndarray, list[str]] | None:
    """Each row's fold and the folds' names (``None`` for random folds); ``None`` with fewer than two folds."""
    n = len(picked["trial_id"])
    if scheme == "leave-one-dataset-out":
        keys = [str(v) for v in picked["dataset_name"]]
    elif scheme == "leave-one-train-size-out":
        keys = [str(v) for v in picked["train_samples"]]
    elif scheme == "leave-one-hardware-out":
        keys = [f"{k}/{h}" for k, h in zip(picked["device_kind"], picked["hardware_id"])]
    else:
        folds = np.arange(n) % 5
        np.random.default_rng(seed).shuffle(folds)
        return (folds, []) if n >= 5 else None
    names, codes = np.unique(np.array(keys, dtype=object).astype(str), return_inverse=True)
    return (codes, [str(v) for v in names]) if codes.max(initial=0) >= 1 else None


def _subset(columns: Mapping[str, Sequence[Any]], idx: np.ndarray) -> dict[str, list[Any]]:
    return {k: [v[i] for i in idx] for k, v in columns.items()}


def _scores(objective: str, y: np.ndarray, lo: np.ndarray, mid: np.ndarray, hi: np.ndarray) -> dict[str, Any]:
    err = np.abs(mid - y)
    relative = objective in LOG_OBJECTIVES
    return {"n_rows": int(len(y)), "spearman": spearman(mid, y),
            "mape": float(np.mean(err / y)) if relative else None,
            "mae": None if relative else float(np.mean(err)),
            "coverage": float(np.mean((lo <= y) & (y <= hi)))}


def _figures(objective: str, scheme: str, y: np.ndarray, lo: np.ndarray, mid: np.ndarray,
             hi: np.ndarray, n_folds: int, by_group: dict[str, dict[str, Any]] | None = None,
             num_classes: np.ndarray | None = None) -> Figures:
    if not len(y):
        return Figures(objective, scheme, 0, n_folds, None, None, None, None)
    by_kind = error_composition(objective, y, mid, num_classes) if num_classes is not None else {}
    return Figures(objective=objective, scheme=scheme, n_folds=n_folds, by_group=dict(by_group or {}),
                   by_kind=by_kind, **_scores(objective, y, lo, mid, hi))


def evaluate(
    columns: Mapping[str, Sequence[Any]],
    *,
    table: str = "",
    schemes: Sequence[str] = SCHEMES,
    objectives: Sequence[str] = OBJECTIVES,
    seed: int = 0,
    num_threads: int = 1,
    num_boost_round: int = DEFAULT_ROUNDS,
    on_progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """Cross-validate the surrogate on a table, holding out whole groups.

    Args:
        columns: The table's columns (``Table.columns``).
        table: How to name the table in the result.
        schemes: Which of :data:`SCHEMES` to run.
        objectives: Which objectives to evaluate.
        seed: Seed of the models and of the random folds.
        num_threads: LightGBM threads.
        num_boost_round: Boosting rounds per model.
        on_progress: Called with a line as each objective and scheme is scored (a run of every
            scheme fits dozens of models).

    Returns:
        An :class:`Evaluation`; a scheme with fewer than two groups is listed in ``skipped``.
    """
    import time

    started = time.monotonic()
    with_tta = "leave-one-dataset-out" in schemes and {"train_time_s", "test_accuracy"} <= set(objectives)
    steps = len(objectives) * len(schemes) + with_tta + ("leave-one-hardware-out" in schemes)
    done = 0

    def said(what: str) -> None:
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(f"[{done}/{steps}] {what} ({time.monotonic() - started:.0f} s)")

    schema: FeatureSchema = schema_from_columns(columns)
    figures: list[Figures] = []
    skipped: list[str] = []
    for objective in objectives:
        picked, y_all = training_columns(columns, objective)
        if len(y_all) < MIN_ROWS:
            skipped.append(f"{objective}: only {len(y_all)} usable rows")
            done += len(schemes)
            continue
        # Timing runs on random data train every fold and are scored in none: the figures are about real datasets.
        real = real_rows(picked)
        for scheme in schemes:
            grouping = _groups(picked, scheme, seed)
            if grouping is None:
                skipped.append(f"{objective} / {scheme}: fewer than two groups")
                said(f"{objective}, {scheme}: fewer than two groups")
                continue
            groups, names = grouping
            ys, los, mids, his, classes = [], [], [], [], []
            num_classes = np.array([np.nan if v is None else float(v) for v in picked["num_classes"]])
            by_group: dict[str, dict[str, Any]] = {}
            n_folds = 0
            for g in np.unique(groups[real]):
                test = np.flatnonzero((groups == g) & real)
                train = np.flatnonzero((groups != g) | ~real)
                if len(train) < MIN_ROWS:
                    continue
                model = fit(_subset(picked, train), seed=seed, num_threads=num_threads,
                            num_boost_round=num_boost_round, objectives=(objective,), schema=schema)
                band = model.predict(_subset(picked, test))[objective]
                ys.append(y_all[test])
                classes.append(num_classes[test])
                los.append(band.lo)
                mids.append(band.mid)
                his.append(band.hi)
                if names:
                    by_group[names[g]] = _scores(objective, ys[-1], band.lo, band.mid, band.hi)
                n_folds += 1
            said(f"{objective}, {scheme}: {n_folds} folds")
            if not n_folds:
                skipped.append(f"{objective} / {scheme}: no fold kept {MIN_ROWS} training rows")
                continue
            figures.append(_figures(objective, scheme, np.concatenate(ys), np.concatenate(los),
                                    np.concatenate(mids), np.concatenate(his), n_folds, by_group,
                                    num_classes=np.concatenate(classes)))
    tta: dict[str, Any] = {}
    if with_tta:
        tta = time_to_accuracy(columns, schema=schema, seed=seed, num_threads=num_threads,
                               num_boost_round=num_boost_round)
        said("time to accuracy, leave-one-dataset-out")
    held: dict[str, Any] = {}
    if "leave-one-hardware-out" in schemes:
        held = device_holdout(columns, schema=schema, seed=seed, num_threads=num_threads,
                              num_boost_round=num_boost_round)
        said("leave one device out")
    return Evaluation(table=table, n_rows=len(columns["trial_id"]), figures=tuple(figures), skipped=tuple(skipped),
                      noise=repeat_noise(columns), time_to_accuracy=tta, device_holdout=held)


def device_holdout(columns: Mapping[str, Sequence[Any]], *, schema: FeatureSchema | None = None, seed: int = 0,
                   num_threads: int = 1, num_boost_round: int = DEFAULT_ROUNDS) -> dict[str, Any]:
    """Leave one device kind out, as a GPU answer is made when the table holds no GPU trial.

    The GPU rows are held out. Time is what ``recommend`` then answers with: the device model's
    expected time (:mod:`advisor.devices`) over the run's steps, against the measured training time
    (which also holds the first epoch's warm-up). Accuracy is the surrogate fitted on the CPU rows
    alone (the claim that a config trains to the same accuracy on any device, under test), with its
    band's coverage. Empty when the table holds no GPU row or too few CPU rows.
    """
    schema = schema or schema_from_columns(columns)
    out: dict[str, Any] = {}
    picked, y = training_columns(columns, "train_time_s")
    kinds = np.array([str(k) for k in picked["device_kind"]], dtype=object)
    gpu = np.flatnonzero(kinds == "gpu")
    if not len(gpu):
        return {}
    sub = _subset(picked, gpu)
    steps = np.array([math.ceil(int(n) / int(b)) * int(e) for n, b, e in zip(
        sub["train_samples"], sub["cfg_batch_size"], sub["epochs_completed"])], dtype=float)
    physics = device_model_times(sub, steps)
    ok = np.isfinite(physics)
    if ok.any():
        ratio = physics[ok] / y[gpu][ok]
        out["time"] = {"rows": int(ok.sum()), "median_error": float(np.median(np.abs(ratio - 1))),
                       "median_ratio": float(np.median(ratio)),
                       "spearman": spearman(physics[ok], y[gpu][ok]),
                       "gpu_models": sorted({str(m) for m in sub["gpu_model"]})}
    picked, y = training_columns(columns, "test_accuracy")
    kinds = np.array([str(k) for k in picked["device_kind"]], dtype=object)
    test, train = np.flatnonzero(kinds == "gpu"), np.flatnonzero(kinds != "gpu")
    if len(test) and len(train) >= MIN_ROWS:
        model = fit(_subset(picked, train), seed=seed, num_threads=num_threads, num_boost_round=num_boost_round,
                    objectives=("test_accuracy",), schema=schema)
        band = model.predict(_subset(picked, test))["test_accuracy"]
        truth = y[test]
        out["accuracy"] = {"rows": int(len(test)), "mae": float(np.mean(np.abs(band.mid - truth))),
                           "coverage": float(np.mean((truth >= band.lo) & (truth <= band.hi)))}
    return out


#: The accuracy a held-out curve is asked to reach: this far from its first reading to its best.
TTA_LEVEL = 0.75


def _tta_cases(columns: Mapping[str, Sequence[Any]], idx: np.ndarray) -> list[tuple[int, float, float, int]]:
    """Held-out curves to score: (row, target accuracy, measured time to it, epochs), for ``ok``,
    non-synthetic, uncontended full-size trials whose curve first reaches the target after epoch 1."""
    out = []
    for i in idx:
        curve, times, epochs = columns["accuracy_curve"][i], columns["epoch_times"][i], columns["cfg_epochs"][i]
        total = columns["train_time_s"][i]
        if (columns["status"][i] != "ok" or columns["synthetic"][i] or columns["contended"][i]
                or not isinstance(curve, list) or not isinstance(times, list) or len(curve) < 2
                or len(curve) != epochs or len(times) != epochs or not total
                or (columns["train_samples"][i] or 0) < FULL_SIZE_SAMPLES):
            continue
        best = max(curve)
        if best - curve[0] < 0.01:  # no curve to speak of
            continue
        target = curve[0] + TTA_LEVEL * (best - curve[0])
        k = next(j for j, a in enumerate(curve, 1) if a >= target)
        share = float(np.sum(times[:k]) / np.sum(times))
        out.append((int(i), float(target), float(total) * share, int(epochs)))
    return out


def time_to_accuracy(columns: Mapping[str, Sequence[Any]], *, schema: FeatureSchema | None = None, seed: int = 0,
                     num_threads: int = 1, num_boost_round: int = DEFAULT_ROUNDS) -> dict[str, Any]:
    """Time to an accuracy on held-out full-size learning curves, leave-one-dataset-out.

    For each held-out curve the target is :data:`TTA_LEVEL` of the way from its first reading to its
    best; the model fitted without that dataset predicts the curve epoch by epoch (the run's schedule
    length kept) and the predicted time to the target is the predicted time at the first epoch whose
    median accuracy reaches it (the last epoch when none does: counted as a miss). The figure is the
    median of ``|predicted - measured| / measured``.
    """
    schema = schema or schema_from_columns(columns)
    datasets = np.array([str(v) for v in columns["dataset_name"]], dtype=object)
    errors: list[float] = []
    shape_errors: list[float] = []
    per_dataset: dict[str, Any] = {}
    misses = 0
    for name in sorted(set(datasets.tolist())):
        test = np.flatnonzero(datasets == name)
        cases = _tta_cases(columns, test)
        train = np.flatnonzero(datasets != name)
        if not cases or len(train) < MIN_ROWS:
            continue
        model = fit(_subset(columns, train), seed=seed, num_threads=num_threads, num_boost_round=num_boost_round,
                    objectives=("train_time_s", "test_accuracy"), schema=schema, calibration_folds=0)
        rows = [(i, k) for i, _, _, e in cases for k in range(1, e + 1)]
        probe = _subset(columns, np.array([i for i, _ in rows]))
        probe["schedule_epochs"] = list(probe["cfg_epochs"])
        probe["cfg_epochs"] = [k for _, k in rows]
        bands = model.predict(probe)
        acc, tim = bands["test_accuracy"].mid, bands["train_time_s"].mid
        pos = 0
        errs, errs_shape = [], []
        for i, target, measured, epochs in cases:
            a, t = acc[pos:pos + epochs], tim[pos:pos + epochs]
            pos += epochs
            hit = np.flatnonzero(a >= target)
            misses += int(not len(hit))
            predicted = float(t[hit[0]] if len(hit) else t[-1])
            errs.append(abs(predicted - measured) / measured)
            # The same question asked of the curve's shape: the point 75% of the way up each curve.
            own = np.flatnonzero(a >= a[0] + TTA_LEVEL * (a.max() - a[0]))
            errs_shape.append(abs(float(t[own[0]]) - measured) / measured)
        errors += errs
        shape_errors += errs_shape
        per_dataset[name] = {"curves": len(errs), "median_error": float(np.median(errs)),
                             "median_error_shape": float(np.median(errs_shape))}
    if not errors:
        return {}
    return {"curves": len(errors), "median_error": float(np.median(errors)), "misses": misses,
            "median_error_shape": float(np.median(shape_errors)),
            "level": TTA_LEVEL, "per_dataset": per_dataset,
            "method": "leave-one-dataset-out; target = first reading + level x (best - first reading); "
                      "'shape': the same level read on the predicted curve's own first and best readings"}


def training_meta(columns: Mapping[str, Sequence[Any]], *, table_path: str | Path) -> dict[str, Any]:
    """What a model card says about training when no fitted model is at hand: table, hash, row counts."""
    from advisor import __version__
    from advisor.surrogate._compat import import_lightgbm
    from advisor.surrogate.io import file_sha256

    sha = file_sha256(table_path)
    return {
        "advisor_version": __version__,
        "lightgbm_version": import_lightgbm().__version__,
        "table": str(table_path),
        "table_sha256": sha,
        "row_counts": {o: int(len(training_columns(columns, o)[1])) for o in OBJECTIVES},
        "band_calibration": {"method": "conformalized quantile regression", "folds": CALIBRATION_FOLDS},
        **_shipped_offsets(sha),
    }

