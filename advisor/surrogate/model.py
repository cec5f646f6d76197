"""LightGBM quantile models of training time, accuracy and memory.

For each objective three boosters are trained with ``objective="quantile"``: alpha 0.1, 0.5 and
0.9, giving a median and a 10-90% band. Time and memory are modelled in log space (they span
orders of magnitude and their noise is multiplicative); accuracy is modelled as is and clipped to
[0, 1]. Where the three predictions of a row cross, accuracy and memory sort them (the middle of
three is the better median there), while time keeps the 0.5 model's prediction as its median and
moves a crossing band edge onto it: out of fold, sorting swapped time's median for a band edge on
most rows of a held-out dataset and made its time error worse.

Time and memory are modelled relative to physical baselines (:mod:`advisor.surrogate._baselines`),
and the bands are calibrated by conformalized quantile regression (:mod:`advisor.surrogate._calibration`).
Which rows train which model, and the transform between measured values and the boosters' targets,
are in :mod:`advisor.surrogate._targets`.

Accuracy is modelled relative to the dataset's landmark (:mod:`advisor._datasets.landmark`, the
test accuracy of a fixed ridge classifier on random convolutional features): the target is
``accuracy - landmark`` and a prediction adds the candidate's landmark back. What the boosters
learn is then how much a network beats the simplest classifier, which transfers from easy datasets
to hard ones, where plain accuracy learnt on easy data promised hard data nearly as much. Alone,
though, the relative model overshoots on easy data, so a second set of boosters
(:data:`ACCURACY_COMPANION`) can learn plain accuracy and a prediction take the lower of the two,
quantile by quantile (:data:`COMBINE_WITH_PLAIN`); with full-size datasets in the table that cost
more held out than it saved, so the companion is off, and what it guarded against is bounded
instead: a relative prediction never removes more of the landmark's error (``1 - landmark``) than
any training trial did (``meta["accuracy_target"]["headroom_cap"]``), so easy data is not promised
1.0. The share of the landmark's error removed, ``(accuracy - landmark) / (1 - landmark)``, was
worse held out than the difference. A row without a landmark (a user's ``.npz`` in a merged table)
uses the median landmark of the training rows, stored as
``meta["accuracy_target"]["landmark_fallback"]``. The held-out figures behind each of these choices
are in ``benchmarks/results/surrogate-choices.md``.

Training is deterministic: fixed seed, ``deterministic=True``, one thread by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from advisor.errors import SurrogateError
from advisor.surrogate._baselines import (MEMORY_BASIS, MEMORY_TARGET, POOLED, TIME_BASIS, TIME_TARGET,
                                          fit_memory_baseline, fit_time_baseline, memory_baseline, reference_gflops,
                                          time_baseline, with_memory_baseline, with_time_baseline)
from advisor.surrogate._boosters import _train_one, lgb_params
from advisor.surrogate._calibration import (BAND_COVERAGE, CALIBRATION_FOLDS, WORKLOAD_FEATURES, _calibrate, pair_groups,
                                            pair_offset,
                                            conformal_offset, dataset_keys, seen_datasets, seen_workloads,
                                            workload_keys)
from advisor.surrogate._compat import import_lightgbm
from advisor.surrogate._curves import CURVE_OBJECTIVES, expand_curves, weights_and_final
from advisor.surrogate._targets import (_LANDMARK, ACCURACY_COMPANION, LOG_OBJECTIVES, MIN_ROWS, OBJECTIVES, QUANTILES,
                                        _landmark_or, from_model_space, real_rows, to_model_space,
                                        training_columns)
from advisor.surrogate.features import FeatureSchema, encode, schema_from_columns

__all__ = [
    "OBJECTIVES",
    "ACCURACY_COMPANION",
    "QUANTILES",
    "LOG_OBJECTIVES",
    "MIN_ROWS",
    "CALIBRATION_FOLDS",
    "WORKLOAD_FEATURES",
    "workload_keys",
    "seen_workloads",
    "TIME_BASIS",
    "TIME_TARGET",
    "POOLED",
    "fit_time_baseline",
    "reference_gflops",
    "MEMORY_BASIS",
    "MEMORY_TARGET",
    "fit_memory_baseline",
    "memory_baseline",
    "with_memory_baseline",
    "time_baseline",
    "with_time_baseline",
    "conformal_offset",
    "Band",
    "Surrogate",
    "training_columns",
    "to_model_space",
    "from_model_space",
    "fit",
    "lgb_params",
]

DEFAULT_ROUNDS = 150


@dataclass(frozen=True)
class Band:
    """Predictions for a batch: the 10% quantile, the median and the 90% quantile."""

    lo: np.ndarray
    mid: np.ndarray
    hi: np.ndarray

    def row(self, i: int) -> tuple[float, float, float]:
        return float(self.lo[i]), float(self.mid[i]), float(self.hi[i])


class Surrogate:
    """Fitted boosters for every objective and quantile, with their feature schema.

    Attributes:
        schema: Feature list and categorical levels.
        boosters: ``{objective: {alpha: lightgbm.Booster}}``.
        meta: Provenance (versions, training table and its sha256, row counts, trained_at).
    """

    def __init__(self, schema: FeatureSchema, boosters: Mapping[str, Mapping[float, Any]],
                 meta: Mapping[str, Any]) -> None:
        self.schema = schema
        self.boosters = {obj: dict(b) for obj, b in boosters.items()}
        self.meta = dict(meta)

    @property
    def headroom_cap(self) -> float | None:
        """The largest share of the landmark's error (``1 - landmark``) that training trials removed
        (the most any of them removed): a landmark-relative prediction never removes more."""
        target = self.meta.get("accuracy_target") or {}
        value = target.get("headroom_cap") if isinstance(target, dict) else None
        return None if value is None else float(value)

    @property
    def landmark_fallback(self) -> float | None:
        """The landmark used for rows without one, when accuracy is modelled relative to it."""
        target = self.meta.get("accuracy_target") or {}
        value = target.get("landmark_fallback") if isinstance(target, dict) else None
        return None if value is None else float(value)

    def predict_matrix(self, x: np.ndarray, *, num_threads: int = 1,
                       objectives: Collection[str] | None = None) -> dict[str, Band]:
        """Predict every objective (or those named) for a feature matrix: one ``predict`` call per booster."""
        out: dict[str, Band] = {}
        offsets = self.meta.get("band_offsets") or {}
        offsets_new = self.meta.get("band_offsets_new_workload") or {}
        offsets_new_data = self.meta.get("band_offsets_new_dataset") or {}
        known = self.meta.get("workloads")
        seen = seen_workloads(x, known) if offsets_new and known is not None else None
        seen_data = seen_datasets(x, known) if offsets_new_data and known is not None else None
        baseline = (self.meta.get("time_baseline") or {}).get("coefficients")
        reference = (self.meta.get("time_baseline") or {}).get("reference_gflops")
        memory = (self.meta.get("memory_baseline") or {}).get("coefficients")
        fallback = self.landmark_fallback
        for objective, models in self.boosters.items():
            if objective == ACCURACY_COMPANION or (objectives is not None and objective not in objectives):
                continue
            xo = x
            if objective == "train_time_s" and baseline:
                xo = with_time_baseline(x, self.schema, baseline, reference=reference)
            elif objective == "peak_memory_mb" and memory:
                xo = with_memory_baseline(x, self.schema, memory)
            raw = np.stack([models[a].predict(xo, num_threads=num_threads) for a in QUANTILES], axis=1)
            _uncross(raw) if objective == "train_time_s" else raw.sort(axis=1)
            if objective == "test_accuracy" and fallback is not None:
                # to accuracy units, then the more pessimistic of the two models, quantile by quantile
                mark = _landmark_or(x, fallback)
                raw = raw + mark[:, None]
                cap = self.headroom_cap
                if cap is not None:  # never more of the landmark's error removed than any trial removed
                    raw = np.minimum(raw, (mark + cap * (1.0 - mark))[:, None])
                companion = self.boosters.get(ACCURACY_COMPANION)
                if companion:
                    plain = np.stack([companion[a].predict(x, num_threads=num_threads) for a in QUANTILES], axis=1)
                    plain.sort(axis=1)
                    raw = np.minimum(raw, plain)
            # conformal calibration, wider for a workload the model never saw; never moves an edge past the median
            q = np.full(len(x), float(offsets.get(objective, 0.0)))
            if objective in offsets_new and seen is not None:
                q[~seen] = float(offsets_new[objective])
            if objective in offsets_new_data and seen_data is not None:
                q[~seen_data] = float(offsets_new_data[objective])
            raw[:, 0] = np.minimum(raw[:, 0] - q, raw[:, 1])
            raw[:, 2] = np.maximum(raw[:, 2] + q, raw[:, 1])
            raw = from_model_space(objective, raw, xo)
            out[objective] = Band(raw[:, 0], raw[:, 1], raw[:, 2])
        return out

    def predict(self, columns: Mapping[str, Sequence[Any]], *, num_threads: int = 1) -> dict[str, Band]:
        """Predict every objective for rows given as knowledge-base columns."""
        return self.predict_matrix(encode(columns, self.schema), num_threads=num_threads)


#: Fit the plain-accuracy companion boosters and take the lower of the two models' predictions
#: (off: ``benchmarks/results/surrogate-choices.md`` has the held-out figures that decided it).
COMBINE_WITH_PLAIN = False


def _uncross(raw: np.ndarray) -> None:
    """Keep the median column; move a band edge that crosses it onto it (in place)."""
    raw[:, 0] = np.minimum(raw[:, 0], raw[:, 1])
    raw[:, 2] = np.maximum(raw[:, 2], raw[:, 1])


def fit(
    columns: Mapping[str, Sequence[Any]],
    *,
    seed: int = 0,
    num_threads: int = 1,
    num_boost_round: int = DEFAULT_ROUNDS,
    objectives: Sequence[str] = OBJECTIVES,
    source: str = "the table",
    schema: FeatureSchema | None = None,
    calibration_folds: int = CALIBRATION_FOLDS,
) -> Surrogate:
    """Fit the quantile boosters on knowledge-base columns.

    Args:
        columns: A :class:`advisor.knowledge.Table`'s ``columns`` (or any mapping like it).
        seed: LightGBM seed.
        num_threads: LightGBM threads (1 or 2 keeps results reproducible on a shared machine).
        num_boost_round: Boosting rounds per model.
        objectives: Which objectives to fit.
        source: How to name the table in errors.
        schema: Categorical levels to use; learnt from ``columns`` when ``None``.
        calibration_folds: Random folds of the conformal band calibration (0: uncalibrated
            quantile bands).

    Returns:
        A :class:`Surrogate`; its ``meta`` holds row counts (the caller adds provenance).

    Raises:
        SurrogateError: When an objective has fewer than :data:`MIN_ROWS` usable rows.
    """
    lgb = import_lightgbm()
    if not any(s == "ok" for s in columns["status"]):
        raise SurrogateError(f"Cannot fit a surrogate: {source} has no trials with status 'ok'.")
    schema = schema or schema_from_columns(columns)
    boosters: dict[str, dict[float, Any]] = {}
    counts: dict[str, int] = {}
    offsets: dict[str, float] = {}
    baseline: dict[str, list[float]] = {}
    reference: float | None = None
    memory: dict[str, list[float]] = {}
    offsets_new: dict[str, float] = {}
    offsets_new_dataset: dict[str, float] = {}
    pairs_new_dataset: dict[str, float] = {}
    workloads: set[tuple[float, ...]] = set()
    landmark_fallback: float | None = None
    headroom_cap: float | None = None
    readings: dict[str, int] = {}
    expanded = expand_curves(columns) if CURVE_OBJECTIVES.intersection(objectives) else None
    for objective in objectives:
        rows = expanded if expanded is not None and objective in CURVE_OBJECTIVES else columns
        picked, values = training_columns(rows, objective)
        weight, final = weights_and_final(picked)
        x = encode(picked, schema)
        if objective == "test_accuracy":
            marks = x[:, _LANDMARK][~np.isnan(x[:, _LANDMARK])]
            landmark_fallback = float(np.median(marks)) if len(marks) else None
            if landmark_fallback is not None:
                mark = _landmark_or(x, landmark_fallback)[final]
                share = (values[final] - mark) / np.maximum(1.0 - mark, 1e-3)
                # the most any trial removed: with a landmark close to 1 (digits) the 99th percentile fell to
                # 0.81 and called reachable targets on new data impossible
                headroom_cap = float(np.clip(np.max(share), 0.0, 1.0)) if len(share) else None
        if objective == "train_time_s":  # the target is relative to the baseline, so it comes first
            reference = reference_gflops(x)
            baseline = fit_time_baseline(x, values, schema, reference=reference)
            x = with_time_baseline(x, schema, baseline, reference=reference)
        elif objective == "peak_memory_mb":
            memory = fit_memory_baseline(x, values, schema)
            x = with_memory_baseline(x, schema, memory)
        y = to_model_space(objective, values, x, landmark_fallback=landmark_fallback)
        keep = ~np.isnan(y)
        x, y, values, weight, final = x[keep], y[keep], values[keep], weight[keep], final[keep]
        # Timing runs on random data train the time and memory boosters but calibrate no band: their
        # shapes would count as new datasets whose errors say nothing of a real one's.
        real = real_rows(picked)[keep]
        trials = np.unique(np.asarray(picked["trial_id"], dtype=object).astype(str)[keep], return_inverse=True)[1]
        if len(y) < MIN_ROWS:
            raise SurrogateError(
                f"Cannot fit the {objective!r} model: {source} has {len(y)} usable rows for it; "
                f"at least {MIN_ROWS} are needed (see MODEL_CARD.md for which rows count)."
            )
        counts[objective] = int(final.sum())  # finished trials; the curve readings come on top
        readings[objective] = int(len(y) - final.sum())
        boosters[objective] = {
            alpha: _train_one(lgb, x, y, schema, alpha=alpha, seed=seed, num_threads=num_threads,
                              num_boost_round=num_boost_round, weight=weight)
            for alpha in QUANTILES
        }
        members = [(y, np.zeros(len(y)))]
        units = y
        if objective == "test_accuracy" and landmark_fallback is not None and COMBINE_WITH_PLAIN:
            boosters[ACCURACY_COMPANION] = {
                alpha: _train_one(lgb, x, values, schema, alpha=alpha, seed=seed, num_threads=num_threads,
                                  num_boost_round=num_boost_round, weight=weight)
                for alpha in QUANTILES
            }
            shift = _landmark_or(x, landmark_fallback)
            members, units = [(y, shift), (values, np.zeros(len(y)))], values
        curve = {"weight": weight, "score_rows": final & real, "trials": trials}
        offset = _calibrate(lgb, x, members, units, schema, folds=calibration_folds, seed=seed,
                            num_threads=num_threads, num_boost_round=num_boost_round, **curve)
        if offset is not None:
            offsets[objective] = offset
        keys = workload_keys(x)
        workloads.update(map(tuple, keys.tolist()))
        offset = _calibrate(lgb, x, members, units, schema, folds=calibration_folds, seed=seed,
                            num_threads=num_threads, num_boost_round=num_boost_round,
                            groups=np.unique(keys, axis=0, return_inverse=True)[1].ravel(), **curve)
        if offset is not None and objective in offsets:
            offsets_new[objective] = max(offset, offsets[objective])  # never narrower than a seen workload's
        # A dataset the model never saw (at any size) is harder still: folds that hold out whole
        # datasets set its offset (never narrower than a new size's of a seen dataset).
        mid = np.full(len(units), np.nan)
        offset = _calibrate(lgb, x, members, units, schema, folds=calibration_folds, seed=seed,
                            num_threads=num_threads, num_boost_round=num_boost_round,
                            groups=np.unique(dataset_keys(keys), axis=0, return_inverse=True)[1].ravel(), **curve,
                            mid_out=mid)
        if offset is not None and objective in offsets_new:
            offsets_new_dataset[objective] = max(offset, offsets_new[objective])
            # The same held-out-dataset folds calibrate a difference of two predictions (finished trials only).
            scored = final & real
            pair = pair_offset(units[scored], mid[scored], pair_groups(x)[scored], upper_half=objective == "test_accuracy",
                               seed=seed)
            if pair is not None:
                pairs_new_dataset[objective] = pair
    baseline_meta = {"basis": list(TIME_BASIS), "coefficients": baseline, "reference_gflops": reference,
                     "fit": "per framework, non-negative least squares of the relative error"} \
        if "train_time_s" in boosters else None
    memory_meta = {"basis": list(MEMORY_BASIS), "coefficients": memory,
                   "fit": "per framework, non-negative least squares of the relative error"} \
        if "peak_memory_mb" in boosters else None
    accuracy_meta = {"relative_to": "landmark", "landmark_fallback": landmark_fallback, "headroom_cap": headroom_cap,
                     "combined_with": f"{ACCURACY_COMPANION} (plain accuracy), elementwise minimum"
                     if COMBINE_WITH_PLAIN else None} \
        if landmark_fallback is not None else None
    meta = {"time_baseline": baseline_meta, "memory_baseline": memory_meta, "accuracy_target": accuracy_meta,
            "row_counts": counts, "curve_readings": readings, "seed": seed, "num_boost_round": num_boost_round,
            "lightgbm_version": lgb.__version__, "time_target": TIME_TARGET, "memory_target": MEMORY_TARGET,
            "band_offsets": offsets, "band_offsets_new_workload": offsets_new,
            "band_offsets_new_dataset": offsets_new_dataset, "pair_offsets_new_dataset": pairs_new_dataset,
            "workloads": sorted(list(k) for k in workloads),
            "band_calibration": {"method": "conformalized quantile regression", "folds": calibration_folds,
                                 "coverage": BAND_COVERAGE}}
    return Surrogate(schema, boosters, meta)
