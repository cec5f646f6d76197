"""LightGBM quantile models of training time, accuracy and memory.

For each objective three boosters are trained with ``objective="quantile"``: alpha 0.1, 0.5 and
0.9, giving a median and a 10-90% band. Time and memory are modelled in log space (they span
orders of magnitude and their noise is multiplicative); accuracy is modelled as is and clipped to
[0, 1]. Where the three predictions of a row cross, accuracy and memory sort them (the middle of
three is the better median there), while time keeps the 0.5 model's prediction as its median and
moves a crossing band edge onto it: out of fold, sorting swapped time's median for a band edge on
77% of the rows of a held-out dataset, and measured on the shipped table the choice moved the
held-out figures (leave one dataset out / one training size out / random 5-fold) as follows:
time MAPE 35.1 / 15.4 / 12.9% sorted against 31.0 / 15.4 / 13.0% kept; memory MAPE 17.6 / 4.5 /
1.8% sorted against 18.0 / 4.6 / 1.8% kept.

Boosted quantile models give bands that are too narrow on rows they did not see (out of fold they
covered 61-74% of values instead of 80%). ``fit`` therefore calibrates each band by conformalized
quantile regression (Romano et al., 2019): out-of-fold 10% and 90% predictions over
:data:`CALIBRATION_FOLDS` random folds give each row the score ``max(lo - y, y - hi)`` (in the
model's space), and the band is widened (or narrowed) on both sides by the score's
``ceil((n + 1) * 0.8) / n`` quantile, stored as ``meta["band_offsets"]``. On rows exchangeable
with the training rows this makes the band cover about 80%; a new dataset is not exchangeable,
which is why recommend widens an extrapolation's band further.

Time is modelled relative to a physical baseline: per framework, non-negative coefficients
(least relative error, fitted on the training rows only, plus a pooled set for a framework without
rows of its own) of ``GFLOPs + steps + samples seen + 1 + activation traffic`` (compute, per-step
overhead, per-sample data handling, start-up, and the layer outputs written and read per sample,
which count the element-wise and memory-bound work that FLOPs miss). The boosters' target is
``log(train_time_s / baseline)`` (:data:`TIME_TARGET`), a prediction is multiplied back by the
candidate's baseline, and the boosters also see ``log(baseline / total_flops)`` as
:data:`BASELINE_FEATURE`; the coefficients are stored in ``meta["time_baseline"]``. Trees cannot
extrapolate, and a new dataset or model lies outside the measured ranges, so what they learn
should be a correction that transfers: the baseline carries the scale. Held-out time MAPE on the
shipped table (leave one dataset out / one training size out / random 5-fold, ``advisor surrogate
evaluate``): per FLOP without a baseline 84.1 / 25.0 / 15.8%; per FLOP with a four-term baseline
as a feature 79.1 / 19.9 / 14.1%; relative to the five-term baseline 31.0 / 15.4 / 13.0%.

Memory is modelled the same way, relative to a per-framework baseline of
:data:`MEMORY_BASIS` (a constant for the framework and runtime, the dataset held as float32, and
one batch's layer outputs as float32): the target is ``log(peak_memory_mb / baseline)``
(:data:`MEMORY_TARGET`) and the boosters see ``log(baseline)`` as
:data:`~advisor.surrogate.features.MEMORY_BASELINE_FEATURE`. Held-out memory MAPE on the shipped
table (same three schemes): 22.1 / 8.1 / 2.4% modelled as ``log(peak_memory_mb)``, 17.6 / 4.5 /
1.8% relative to the baseline. (A parameter term made the baseline worse on a held-out dataset:
24% against 14% for the baseline alone, measured while choosing.)

Accuracy is modelled relative to the dataset's landmark (:mod:`advisor._datasets.landmark`, the
test accuracy of a fixed ridge classifier): the target is ``accuracy - landmark`` and a prediction
adds the candidate's landmark back. What the boosters learn is then how much a network beats the
simplest classifier, which transfers from easy datasets to hard ones; plain accuracy learnt on
digits and MNIST promised CIFAR-10 about 0.97. Alone, though, the relative model overshoots on
easy data (CIFAR-10's large margin over its landmark pushed MNIST and digits predictions to 1.0),
so a second set of boosters (:data:`ACCURACY_COMPANION`) learns plain accuracy, which never
exceeds what was measured, and a prediction takes the lower of the two, quantile by quantile.
Out of fold on the shipped table (median models): leave one dataset out 0.232 (plain) / 0.159
(relative) / 0.183 (lower of both) MAE, leave one size out 0.110 / 0.095 / 0.089, random 5-fold
0.071 / 0.078 / 0.074, predictions >= 0.999: 6 / 24 / 2 in random folds. A row without a
landmark (a user's ``.npz`` in a merged table) uses the median landmark of the training rows,
stored as ``meta["accuracy_target"]["landmark_fallback"]``.

Which rows train which model:

- ``test_accuracy``: status ``ok`` and not synthetic (synthetic data has no accuracy meaning);
- ``train_time_s``: status ``ok`` or ``pruned`` (with the epochs it completed) and not contended
  (a timing disturbed by other processes would teach the model noise);
- ``peak_memory_mb``: status ``ok`` or ``pruned``.

Training is deterministic: fixed seed, ``deterministic=True``, one thread by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from advisor.errors import SurrogateError
from advisor.surrogate._compat import import_lightgbm
from advisor.surrogate.features import (BASELINE_FEATURE, FEATURES, MEMORY_BASELINE_FEATURE, FeatureSchema, encode,
                                       schema_from_columns)

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

OBJECTIVES = ("train_time_s", "test_accuracy", "peak_memory_mb")
#: Boosters on plain accuracy, kept beside the landmark-relative ``test_accuracy`` ones: a
#: prediction takes the lower of the two, quantile by quantile.
ACCURACY_COMPANION = "test_accuracy_plain"
QUANTILES = (0.1, 0.5, 0.9)
LOG_OBJECTIVES = frozenset({"train_time_s", "peak_memory_mb"})
MIN_ROWS = 5
DEFAULT_ROUNDS = 150
#: Random folds of the in-fit band calibration (0 disables it).
CALIBRATION_FOLDS = 4
#: The coverage the calibrated 10-90% band aims at.
BAND_COVERAGE = QUANTILES[2] - QUANTILES[0]


@dataclass(frozen=True)
class Band:
    """Predictions for a batch: the 10% quantile, the median and the 90% quantile."""

    lo: np.ndarray
    mid: np.ndarray
    hi: np.ndarray

    def row(self, i: int) -> tuple[float, float, float]:
        return float(self.lo[i]), float(self.mid[i]), float(self.hi[i])


def _row_usable(objective: str, status: str, value: Any, synthetic: Any, contended: Any) -> bool:
    if value is None or not math.isfinite(value):
        return False
    if objective == "test_accuracy":
        return status == "ok" and not synthetic
    if value <= 0 or status not in ("ok", "pruned"):
        return False
    return not (objective == "train_time_s" and contended)


def training_columns(columns: Mapping[str, Sequence[Any]], objective: str) -> tuple[dict[str, list[Any]], np.ndarray]:
    """The rows that may train ``objective``, and their measured values.

    Pruned rows count with the epochs they completed, so their time matches their features.

    Returns:
        ``(columns, values)``: the selected columns and the objective's measured values.
    """
    keep = [
        i for i, (st, v, syn, con) in enumerate(zip(
            columns["status"], columns[objective], columns["synthetic"], columns["contended"]))
        if _row_usable(objective, st, v, syn, con)
    ]
    picked = {name: [col[i] for i in keep] for name, col in columns.items()}
    picked["cfg_epochs"] = [
        (done if st == "pruned" and done else ep)
        for st, done, ep in zip(picked["status"], picked["epochs_completed"], picked["cfg_epochs"])
    ]
    return picked, np.array(picked[objective], dtype=float)


_INDEX = {f.name: i for i, f in enumerate(FEATURES)}
_TOTAL_FLOPS = _INDEX["total_flops"]

#: The terms of the per-framework time baseline, in the order of its coefficients. Activation
#: traffic is samples seen times the model's layer outputs per sample (millions of elements): the
#: element-wise, pooling and memory-bound work that FLOPs do not count.
TIME_BASIS = ("training GFLOPs", "training steps", "training samples seen", "start-up", "activation traffic")
#: What the time boosters learn (``meta["time_target"]``): the log of the measured time over the baseline.
TIME_TARGET = "log(train_time_s / baseline)"
#: The terms of the per-framework memory baseline (MiB): the framework and runtime, the dataset
#: held in memory as float32 (train and test), and one batch's layer outputs as float32.
MEMORY_BASIS = ("framework and runtime", "dataset in memory", "activations of one batch")
#: What the memory boosters learn (``meta["memory_target"]``).
MEMORY_TARGET = "log(peak_memory_mb / baseline)"
#: The coefficients of the baseline fitted on every framework's rows together, used for a
#: framework without enough rows of its own.
POOLED = "*"


def _time_basis(x: np.ndarray, reference_gflops: float | None = None) -> np.ndarray:
    samples = x[:, _INDEX["samples_seen"]]
    gflops = x[:, _TOTAL_FLOPS] / 1e9
    if reference_gflops:  # the compute at the reference GEMM speed: scaled by each row's calibrated speed
        speed = x[:, _INDEX["hw_gflops"]]
        gflops = gflops * reference_gflops / np.where(np.isfinite(speed) & (speed > 0), speed, reference_gflops)
    # a row whose model has no known layer shapes gets no traffic term rather than no baseline
    traffic = np.nan_to_num(samples * x[:, _INDEX["activations_per_sample"]] / 1e6, nan=0.0)
    return np.stack([gflops, x[:, _INDEX["total_steps"]], samples, np.ones(len(x)), traffic], axis=1)


def reference_gflops(x: np.ndarray) -> float | None:
    """The median calibrated GEMM speed of the rows (GFLOP/s), or ``None`` when none is calibrated.

    With a reference, the baseline's compute term is the training GFLOPs scaled to that speed by
    each row's own calibrated speed (a row without one is taken to run at the reference); without
    one, calibration is ignored for every row, so a model fitted on uncalibrated trials treats a
    calibrated candidate alike.
    """
    speed = x[:, _INDEX["hw_gflops"]]
    speed = speed[np.isfinite(speed) & (speed > 0)]
    return float(np.median(speed)) if len(speed) else None


def _framework_names(x: np.ndarray, schema: FeatureSchema) -> list[str | None]:
    levels = schema.levels.get("framework", ())
    codes = x[:, _INDEX["framework"]]
    return [levels[int(c)] if np.isfinite(c) and 0 <= int(c) < len(levels) else None for c in codes]


def _fit_baseline(basis: np.ndarray, values: np.ndarray, names: np.ndarray) -> dict[str, list[float]]:
    """Per name (and :data:`POOLED`), non-negative coefficients of ``basis`` with least squared
    relative error; a name with fewer than :data:`MIN_ROWS` usable rows gets none."""
    from scipy.optimize import nnls

    usable = np.isfinite(basis).all(axis=1) & np.isfinite(values) & (values > 0)
    out: dict[str, list[float]] = {}
    for name in [POOLED] + sorted({n for n in names if n is not None}):
        rows = usable & ((names == name) if name != POOLED else True)
        if rows.sum() < MIN_ROWS:
            continue
        coef, _ = nnls(basis[rows] / values[rows, None], np.ones(int(rows.sum())))
        if np.any(coef > 0):
            out[name] = [float(c) for c in coef]
    return out


def _apply_baseline(basis: np.ndarray, x: np.ndarray, schema: FeatureSchema,
                    coefficients: Mapping[str, Sequence[float]]) -> np.ndarray:
    levels = schema.levels.get("framework", ())
    width = basis.shape[1]
    pooled = coefficients.get(POOLED, [np.nan] * width)
    # one row of coefficients per framework level (pooled without), picked by each row's level code
    table = np.array([coefficients.get(name, pooled) for name in levels] + [pooled], dtype=float).reshape(-1, width)
    codes = x[:, _INDEX["framework"]]
    known = np.isfinite(codes) & (codes >= 0) & (codes < len(levels))
    picked = table[np.where(known, codes, len(levels)).astype(int)]
    return np.einsum("ij,ij->i", basis, picked)


def fit_time_baseline(x: np.ndarray, seconds: np.ndarray, schema: FeatureSchema, *,
                      reference: float | None = None) -> dict[str, list[float]]:
    """Per framework, the non-negative coefficients of :data:`TIME_BASIS` that fit ``seconds`` best.

    The fit minimises the squared *relative* error (each row divided by its time), so fast and
    slow trials weigh alike. A framework with fewer than :data:`MIN_ROWS` usable rows gets none.

    Returns:
        ``{framework: [c_gflops, c_step, c_sample, c_startup, c_traffic]}``, plus :data:`POOLED`
        fitted on all usable rows.
    """
    return _fit_baseline(_time_basis(x, reference), seconds, np.array(_framework_names(x, schema), dtype=object))


def time_baseline(x: np.ndarray, schema: FeatureSchema, coefficients: Mapping[str, Sequence[float]], *,
                  reference: float | None = None) -> np.ndarray:
    """The baseline time (s) of each row: its framework's coefficients, else the pooled ones; NaN
    where neither exists."""
    return _apply_baseline(_time_basis(x, reference), x, schema, coefficients)


def _memory_basis(x: np.ndarray) -> np.ndarray:
    pixels = x[:, _INDEX["pixels"]] * x[:, _INDEX["input_c"]]
    mib = 4 / 2**20  # float32
    data = (x[:, _INDEX["train_samples"]] + np.nan_to_num(x[:, _INDEX["test_samples"]], nan=0.0)) * pixels * mib
    batch = np.nan_to_num(x[:, _INDEX["batch_size"]] * x[:, _INDEX["activations_per_sample"]] * mib, nan=0.0)
    return np.stack([np.ones(len(x)), data, batch], axis=1)


def fit_memory_baseline(x: np.ndarray, mib: np.ndarray, schema: FeatureSchema) -> dict[str, list[float]]:
    """Per framework, the non-negative coefficients of :data:`MEMORY_BASIS` that fit ``mib`` best
    (least squared relative error, as :func:`fit_time_baseline`), plus :data:`POOLED`."""
    return _fit_baseline(_memory_basis(x), mib, np.array(_framework_names(x, schema), dtype=object))


def memory_baseline(x: np.ndarray, schema: FeatureSchema, coefficients: Mapping[str, Sequence[float]]) -> np.ndarray:
    """The baseline peak memory (MiB) of each row (its framework's coefficients, else the pooled ones)."""
    return _apply_baseline(_memory_basis(x), x, schema, coefficients)


def with_memory_baseline(x: np.ndarray, schema: FeatureSchema,
                         coefficients: Mapping[str, Sequence[float]]) -> np.ndarray:
    """A copy of ``x`` with :data:`MEMORY_BASELINE_FEATURE` filled in (``log(baseline)``)."""
    out = x.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(memory_baseline(x, schema, coefficients))
    out[:, _INDEX[MEMORY_BASELINE_FEATURE]] = np.where(np.isfinite(value), value, np.nan)
    return out


def with_time_baseline(x: np.ndarray, schema: FeatureSchema, coefficients: Mapping[str, Sequence[float]], *,
                       reference: float | None = None) -> np.ndarray:
    """A copy of ``x`` with :data:`BASELINE_FEATURE` filled in (``log(baseline / total_flops)``)."""
    out = x.copy()
    base, flops = time_baseline(x, schema, coefficients, reference=reference), x[:, _TOTAL_FLOPS]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(base / flops)
    out[:, _INDEX[BASELINE_FEATURE]] = np.where(np.isfinite(value), value, np.nan)
    return out


_LANDMARK = _INDEX["landmark"]


def _landmark_or(x: np.ndarray, fallback: float) -> np.ndarray:
    mark = x[:, _LANDMARK]
    return np.where(np.isnan(mark), fallback, mark)


def to_model_space(objective: str, values: np.ndarray, x: np.ndarray, *,
                   landmark_fallback: float | None = None) -> np.ndarray:
    """Measured values -> the booster's target (NaN where it cannot be formed).

    Time and memory are the log of the value over their baseline, so ``x`` must have
    :data:`BASELINE_FEATURE` or :data:`MEMORY_BASELINE_FEATURE` filled in.
    Accuracy is modelled relative to the dataset's landmark when ``landmark_fallback`` is given
    (rows without a landmark use it); with ``None`` it is modelled as is.
    """
    if objective == "test_accuracy":
        return values if landmark_fallback is None else values - _landmark_or(x, landmark_fallback)
    if objective not in LOG_OBJECTIVES:
        return values
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(values)
        if objective == "train_time_s":
            out = out - _log_time_baseline(x)
        else:
            out = out - x[:, _INDEX[MEMORY_BASELINE_FEATURE]]
    return np.where(np.isfinite(out), out, np.nan)


def _log_time_baseline(x: np.ndarray) -> np.ndarray:
    """``log`` of each row's baseline time, from :data:`BASELINE_FEATURE` (filled by
    :func:`with_time_baseline`; NaN where it is not)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return x[:, _INDEX[BASELINE_FEATURE]] + np.log(x[:, _TOTAL_FLOPS])


def from_model_space(objective: str, raw: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Booster outputs (rows x quantiles) -> values in the objective's unit.

    Landmark-relative accuracy is brought back to accuracy by :meth:`Surrogate.predict_matrix`
    before it is combined with the plain-accuracy model; here accuracy is only clipped.
    """
    if objective not in LOG_OBJECTIVES:
        return np.clip(raw, 0.0, 1.0)
    if objective == "train_time_s":
        raw = raw + _log_time_baseline(x)[:, None]
    else:
        raw = raw + x[:, _INDEX[MEMORY_BASELINE_FEATURE]][:, None]
    return np.exp(raw)


def lgb_params(*, alpha: float, n_rows: int, seed: int, num_threads: int) -> dict[str, Any]:
    """LightGBM parameters for one quantile model (leaf sizes scale with small tables)."""
    min_leaf = max(2, min(20, n_rows // 25))
    return {
        "objective": "quantile",
        "alpha": alpha,
        "learning_rate": 0.1,
        "num_leaves": 31,
        "min_data_in_leaf": min_leaf,
        "min_data_per_group": min_leaf,
        "cat_smooth": 1.0,
        "min_data_in_bin": 1,
        "feature_pre_filter": False,
        "deterministic": True,
        "force_col_wise": True,
        "seed": seed,
        "num_threads": num_threads,
        "verbosity": -1,
    }


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
    def landmark_fallback(self) -> float | None:
        """The landmark used for rows without one, when accuracy is modelled relative to it."""
        target = self.meta.get("accuracy_target") or {}
        value = target.get("landmark_fallback") if isinstance(target, dict) else None
        return None if value is None else float(value)

    def predict_matrix(self, x: np.ndarray, *, num_threads: int = 1) -> dict[str, Band]:
        """Predict every objective for a feature matrix: one ``predict`` call per booster."""
        out: dict[str, Band] = {}
        offsets = self.meta.get("band_offsets") or {}
        offsets_new = self.meta.get("band_offsets_new_workload") or {}
        known = self.meta.get("workloads")
        seen = seen_workloads(x, known) if offsets_new and known is not None else None
        baseline = (self.meta.get("time_baseline") or {}).get("coefficients")
        reference = (self.meta.get("time_baseline") or {}).get("reference_gflops")
        memory = (self.meta.get("memory_baseline") or {}).get("coefficients")
        fallback = self.landmark_fallback
        for objective, models in self.boosters.items():
            if objective == ACCURACY_COMPANION:
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
                raw = raw + _landmark_or(x, fallback)[:, None]
                companion = self.boosters.get(ACCURACY_COMPANION)
                if companion:
                    plain = np.stack([companion[a].predict(x, num_threads=num_threads) for a in QUANTILES], axis=1)
                    plain.sort(axis=1)
                    raw = np.minimum(raw, plain)
            # conformal calibration, wider for a workload the model never saw; never moves an edge past the median
            q = np.full(len(x), float(offsets.get(objective, 0.0)))
            if objective in offsets_new and seen is not None:
                q[~seen] = float(offsets_new[objective])
            raw[:, 0] = np.minimum(raw[:, 0] - q, raw[:, 1])
            raw[:, 2] = np.maximum(raw[:, 2] + q, raw[:, 1])
            raw = from_model_space(objective, raw, xo)
            out[objective] = Band(raw[:, 0], raw[:, 1], raw[:, 2])
        return out

    def predict(self, columns: Mapping[str, Sequence[Any]], *, num_threads: int = 1) -> dict[str, Band]:
        """Predict every objective for rows given as knowledge-base columns."""
        return self.predict_matrix(encode(columns, self.schema), num_threads=num_threads)


#: The features that identify a workload without its name: input shape, classes, landmark and
#: training size (a row's dataset and how much of it trains).
WORKLOAD_FEATURES = ("input_h", "input_w", "input_c", "num_classes", "landmark", "train_samples")


def workload_keys(x: np.ndarray) -> np.ndarray:
    """Each row's workload as a float vector (:data:`WORKLOAD_FEATURES`, rounded; NaN as -1)."""
    cols = x[:, [_INDEX[name] for name in WORKLOAD_FEATURES]]
    return np.round(np.nan_to_num(cols, nan=-1.0), 4)


def seen_workloads(x: np.ndarray, known: Sequence[Sequence[float]]) -> np.ndarray:
    """Whether each row's workload is among ``known`` (the fitted model's ``meta["workloads"]``)."""
    table = {tuple(float(v) for v in k) for k in known}
    return np.array([tuple(k) in table for k in workload_keys(x).tolist()], dtype=bool)


def _uncross(raw: np.ndarray) -> None:
    """Keep the median column; move a band edge that crosses it onto it (in place)."""
    raw[:, 0] = np.minimum(raw[:, 0], raw[:, 1])
    raw[:, 2] = np.maximum(raw[:, 2], raw[:, 1])


def conformal_offset(y: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, coverage: float = BAND_COVERAGE) -> float:
    """How far to move both edges of ``[lo, hi]`` so that it covers ``coverage`` of ``y`` (split CQR).

    The score of a row is ``max(lo - y, y - hi)`` (negative inside the band); the offset is its
    ``ceil((n + 1) * coverage) / n`` empirical quantile, so a band widened by it covers at least
    ``coverage`` of exchangeable new rows. A negative offset narrows a band that was too wide.
    """
    scores = np.maximum(lo - y, y - hi)
    n = len(scores)
    if n == 0:
        return 0.0
    level = min(1.0, math.ceil((n + 1) * coverage) / n)
    return float(np.quantile(scores, level, method="higher"))


def _train_one(lgb: Any, x: np.ndarray, y: np.ndarray, schema: FeatureSchema, *, alpha: float, seed: int,
               num_threads: int, num_boost_round: int) -> Any:
    data = lgb.Dataset(
        x, label=y, feature_name=schema.names, categorical_feature=schema.categorical_indices,
        free_raw_data=True, params={"verbosity": -1, "min_data_in_bin": 1, "feature_pre_filter": False},
    )
    params = lgb_params(alpha=alpha, n_rows=len(y), seed=seed, num_threads=num_threads)
    return lgb.train(params, data, num_boost_round=num_boost_round)


def _calibrate(lgb: Any, x: np.ndarray, members: Sequence[tuple[np.ndarray, np.ndarray]], y: np.ndarray,
               schema: FeatureSchema, *, folds: int, seed: int, num_threads: int, num_boost_round: int,
               groups: np.ndarray | None = None) -> float | None:
    """The conformal offset of the 10-90% band from ``folds`` random out-of-fold fits; None if too few rows.

    With ``groups`` (one key per row), each fold holds out whole groups, so the offset is the one
    a row of an unseen group needs; None when there are fewer than two groups.

    Each member is ``(target, shift)``: boosters fitted on ``target`` whose predictions plus ``shift``
    are in the units of ``y``; with several members the band is their elementwise minimum, as
    :meth:`Surrogate.predict_matrix` combines them.
    """
    if folds < 2 or len(y) < folds * MIN_ROWS:
        return None
    rng = np.random.default_rng(seed + 7919)
    if groups is None:
        fold = np.arange(len(y)) % folds
        rng.shuffle(fold)
    else:  # whole groups to a fold: round-robin over the groups in a random order
        _, codes = np.unique(groups, return_inverse=True)
        order = rng.permutation(codes.max() + 1)
        if len(order) < 2:
            return None
        fold = (np.argsort(order)[codes] % min(folds, len(order))).astype(int)
        folds = min(folds, len(order))
    lo, hi = np.full(len(y), np.inf), np.full(len(y), np.inf)
    for k in range(folds):
        train, test = fold != k, fold == k
        for target, shift in members:
            edges = [_train_one(lgb, x[train], target[train], schema, alpha=alpha, seed=seed, num_threads=num_threads,
                                num_boost_round=num_boost_round).predict(x[test], num_threads=num_threads)
                     for alpha in (QUANTILES[0], QUANTILES[2])]
            lo[test] = np.minimum(lo[test], np.minimum(*edges) + shift[test])
            hi[test] = np.minimum(hi[test], np.maximum(*edges) + shift[test])
    return conformal_offset(y, np.minimum(lo, hi), np.maximum(lo, hi))


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
    workloads: set[tuple[float, ...]] = set()
    landmark_fallback: float | None = None
    for objective in objectives:
        picked, values = training_columns(columns, objective)
        x = encode(picked, schema)
        if objective == "test_accuracy":
            marks = x[:, _LANDMARK][~np.isnan(x[:, _LANDMARK])]
            landmark_fallback = float(np.median(marks)) if len(marks) else None
        if objective == "train_time_s":  # the target is relative to the baseline, so it comes first
            reference = reference_gflops(x)
            baseline = fit_time_baseline(x, values, schema, reference=reference)
            x = with_time_baseline(x, schema, baseline, reference=reference)
        elif objective == "peak_memory_mb":
            memory = fit_memory_baseline(x, values, schema)
            x = with_memory_baseline(x, schema, memory)
        y = to_model_space(objective, values, x, landmark_fallback=landmark_fallback)
        keep = ~np.isnan(y)
        x, y, values = x[keep], y[keep], values[keep]
        if len(y) < MIN_ROWS:
            raise SurrogateError(
                f"Cannot fit the {objective!r} model: {source} has {len(y)} usable rows for it; "
                f"at least {MIN_ROWS} are needed (see MODEL_CARD.md for which rows count)."
            )
        counts[objective] = len(y)
        boosters[objective] = {
            alpha: _train_one(lgb, x, y, schema, alpha=alpha, seed=seed, num_threads=num_threads,
                              num_boost_round=num_boost_round)
            for alpha in QUANTILES
        }
        members = [(y, np.zeros(len(y)))]
        units = y
        if objective == "test_accuracy" and landmark_fallback is not None:
            boosters[ACCURACY_COMPANION] = {
                alpha: _train_one(lgb, x, values, schema, alpha=alpha, seed=seed, num_threads=num_threads,
                                  num_boost_round=num_boost_round)
                for alpha in QUANTILES
            }
            shift = _landmark_or(x, landmark_fallback)
            members, units = [(y, shift), (values, np.zeros(len(y)))], values
        offset = _calibrate(lgb, x, members, units, schema, folds=calibration_folds, seed=seed,
                            num_threads=num_threads, num_boost_round=num_boost_round)
        if offset is not None:
            offsets[objective] = offset
        keys = workload_keys(x)
        workloads.update(map(tuple, keys.tolist()))
        offset = _calibrate(lgb, x, members, units, schema, folds=calibration_folds, seed=seed,
                            num_threads=num_threads, num_boost_round=num_boost_round,
                            groups=np.unique(keys, axis=0, return_inverse=True)[1].ravel())
        if offset is not None and objective in offsets:
            offsets_new[objective] = max(offset, offsets[objective])  # never narrower than a seen workload's
    baseline_meta = {"basis": list(TIME_BASIS), "coefficients": baseline, "reference_gflops": reference,
                     "fit": "per framework, non-negative least squares of the relative error"} \
        if "train_time_s" in boosters else None
    memory_meta = {"basis": list(MEMORY_BASIS), "coefficients": memory,
                   "fit": "per framework, non-negative least squares of the relative error"} \
        if "peak_memory_mb" in boosters else None
    accuracy_meta = {"relative_to": "landmark", "landmark_fallback": landmark_fallback,
                     "combined_with": f"{ACCURACY_COMPANION} (plain accuracy), elementwise minimum"} \
        if landmark_fallback is not None else None
    meta = {"time_baseline": baseline_meta, "memory_baseline": memory_meta, "accuracy_target": accuracy_meta,
            "row_counts": counts, "seed": seed, "num_boost_round": num_boost_round,
            "lightgbm_version": lgb.__version__, "time_target": TIME_TARGET, "memory_target": MEMORY_TARGET,
            "band_offsets": offsets, "band_offsets_new_workload": offsets_new,
            "workloads": sorted(list(k) for k in workloads),
            "band_calibration": {"method": "conformalized quantile regression", "folds": calibration_folds,
                                 "coverage": BAND_COVERAGE}}
    return Surrogate(schema, boosters, meta)
