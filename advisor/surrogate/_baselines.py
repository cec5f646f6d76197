"""Physical baselines of training time and peak memory, fitted per framework.

Time is modelled relative to a physical baseline: per framework, non-negative coefficients
(least squared error in log space, fitted on the training rows only, plus a pooled set for a framework without
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
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from advisor.surrogate._targets import _INDEX, _TOTAL_FLOPS, MIN_ROWS
from advisor.surrogate.features import BASELINE_FEATURE, MEMORY_BASELINE_FEATURE, FeatureSchema

__all__ = [
    "TIME_BASIS",
    "TIME_TARGET",
    "MEMORY_BASIS",
    "MEMORY_TARGET",
    "POOLED",
    "TIME_BLIND",
    "reference_gflops",
    "fit_time_baseline",
    "time_baseline",
    "with_time_baseline",
    "fit_memory_baseline",
    "memory_baseline",
    "with_memory_baseline",
]

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
#: The coefficients of the baseline fitted on every framework's CPU rows together, used for a
#: framework without enough rows of its own.
POOLED = "*"
#: Features the time boosters do not see (stored in ``meta["time_baseline"]["blind"]``): how
#: training learns (rates, momentum, regularisation, the schedule's shape) and how hard the data
#: is (its landmark) cost nothing per step. Seen, they let the trees tell the datasets apart,
#: which does not carry over to a new one (the model card's leave-one-dataset-out figures).
TIME_BLIND = ("log10_learning_rate", "log10_effective_lr", "log10_lr_x_steps", "log10_lr_per_sample", "momentum",
              "nesterov", "weight_decay", "warmup_fraction", "label_smoothing", "schedule", "landmark")


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


def _baseline_keys(x: np.ndarray, schema: FeatureSchema) -> tuple[np.ndarray, list[str | None]]:
    """Each row's index into the returned keys, and the keys: a framework on a CPU,
    ``framework@kind`` on another device kind, ``None`` without a framework.

    A GPU step costs a small fraction of a CPU one, so one set of coefficients over both fits
    neither: with a few dozen GPU rows among thousands of CPU ones, PyTorch's compute term went to
    zero and its CPU times stopped depending on the model.
    """
    levels = schema.levels.get("framework", ())
    kinds = schema.levels.get("device_kind", ())
    pairs = np.stack([np.nan_to_num(x[:, _INDEX["framework"]], nan=-1.0),
                      np.nan_to_num(x[:, _INDEX["device_kind"]], nan=-1.0)], axis=1).astype(int)
    unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
    keys: list[str | None] = []
    for c, k in unique:
        name = levels[c] if 0 <= c < len(levels) else None
        kind = kinds[k] if 0 <= k < len(kinds) else None
        keys.append(f"{name}@{kind}" if name is not None and kind not in (None, "cpu") else name)
    return inverse.reshape(-1), keys


def _framework_names(x: np.ndarray, schema: FeatureSchema) -> list[str | None]:
    """Each row's baseline key (:func:`_baseline_keys`)."""
    inverse, keys = _baseline_keys(x, schema)
    return [keys[i] for i in inverse]


def _fit_baseline(basis: np.ndarray, values: np.ndarray, names: np.ndarray) -> dict[str, list[float]]:
    """Per name (and :data:`POOLED`), non-negative coefficients of ``basis`` with the least squared
    error in log space (the least squared relative error as the start); a name with fewer than
    :data:`MIN_ROWS` usable rows gets none.

    Squared relative error favours predicting low (a time predicted at 0 errs by 1, one predicted
    at double by 1 too): that fit put the baseline at 0.6 to 0.8 of the measured times at the median.
    In log space, halving and doubling err alike, and the baseline sits at the median time.
    """
    from scipy.optimize import least_squares, nnls

    usable = np.isfinite(basis).all(axis=1) & np.isfinite(values) & (values > 0)
    out: dict[str, list[float]] = {}
    on_cpu = np.array([n is not None and "@" not in n for n in names], dtype=bool)
    for name in [POOLED] + sorted({n for n in names if n is not None}):
        # the pooled set stands in for a framework without rows of its own: fitted on CPU rows
        rows = usable & ((names == name) if name != POOLED else on_cpu)
        if rows.sum() < MIN_ROWS:
            continue
        b, v = basis[rows], values[rows]
        coef, _ = nnls(b / v[:, None], np.ones(len(v)))
        if not np.any(coef > 0):
            continue
        logged = least_squares(lambda c: np.log(np.maximum(b @ c, 1e-12)) - np.log(v), np.maximum(coef, 1e-9),
                               bounds=(0.0, np.inf))
        if logged.success and np.isfinite(logged.x).all() and np.any(logged.x > 0):
            coef = logged.x
        out[name] = [float(c) for c in coef]
    return out


def _apply_baseline(basis: np.ndarray, x: np.ndarray, schema: FeatureSchema,
                    coefficients: Mapping[str, Sequence[float]]) -> np.ndarray:
    width = basis.shape[1]
    pooled = coefficients.get(POOLED, [np.nan] * width)
    inverse, keys = _baseline_keys(x, schema)
    # a row's own key (framework, or framework@kind off the CPU), else its framework's CPU
    # coefficients, else the pooled ones
    table = np.array([(coefficients.get(k) or coefficients.get(k.split("@")[0]) or pooled) if k else pooled
                      for k in keys], dtype=float).reshape(-1, width)
    return np.einsum("ij,ij->i", basis, table[inverse])


def fit_time_baseline(x: np.ndarray, seconds: np.ndarray, schema: FeatureSchema, *,
                      reference: float | None = None) -> dict[str, list[float]]:
    """Per framework, the non-negative coefficients of :data:`TIME_BASIS` that fit ``seconds`` best.

    The fit minimises the squared error of ``log(time)``, so fast and slow trials weigh alike and
    the baseline sits at the median time rather than below it. A framework with fewer than :data:`MIN_ROWS` usable rows gets none.

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
    (least squared error in log space, as :func:`fit_time_baseline`), plus :data:`POOLED`."""
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
                       reference: float | None = None, blind: Sequence[str] = ()) -> np.ndarray:
    """A copy of ``x`` with :data:`BASELINE_FEATURE` filled in (``log(baseline / total_flops)``)
    and the features named in ``blind`` emptied (NaN: :data:`TIME_BLIND`, as the model was fitted)."""
    out = x.copy()
    base, flops = time_baseline(x, schema, coefficients, reference=reference), x[:, _TOTAL_FLOPS]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(base / flops)
    out[:, _INDEX[BASELINE_FEATURE]] = np.where(np.isfinite(value), value, np.nan)
    for name in blind:
        if name in _INDEX:
            out[:, _INDEX[name]] = np.nan
    return out
