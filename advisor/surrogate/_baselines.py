"""Physical baselines of training time and peak memory, fitted per framework.

Time is modelled relative to a physical baseline: per framework, non-negative coefficients
(least relative error, fitted on the training rows only, plus a pooled set for a framework without
rows of its own) of ``GFLOPs + steps + samples seen + 1 + activation traffic`` (compute, per-step
overhead, per-sample data handling, start-up, and the layer outputs written and read per sample,
which count the element-wise and memory-bound work that FLOPs miss). The boosters' target is
``log(train_time_s / baseline)`` (:data:`TIME_TARGET`), a prediction is multiplied back by the
candidate's baseline, and the boosters also see ``log(baseline / total_flops)`` as
:data:`BASELINE_FEATURE`; the coefficients are stored in ``meta["time_baseline"]``. Trees cannot
extrapolate, and a new dataset or model lies outside the measured ranges, so what they learn
should be a correction that transfers: the baseline carries the scale. With a dataset held out this
cut the time error by more than half against a time per FLOP, with or without the baseline as a
mere feature (``benchmarks/results/surrogate-choices.md`` has the figures).

Memory is modelled the same way, relative to a per-framework baseline of
:data:`MEMORY_BASIS` (a constant for the framework and runtime, the dataset held as float32, and
one batch's layer outputs as float32): the target is ``log(peak_memory_mb / baseline)``
(:data:`MEMORY_TARGET`) and the boosters see ``log(baseline)`` as
:data:`~advisor.surrogate.features.MEMORY_BASELINE_FEATURE`. It was better held out than
``log(peak_memory_mb)``, and a parameter term made the baseline worse on a held-out dataset.
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


def _fit_baseline(basis: np.ndarray, values: np.ndarray, names: np.ndarray,
                  fixed: np.ndarray | None = None) -> dict[str, list[float]]:
    """Per name (and :data:`POOLED`), non-negative coefficients of ``basis`` with least squared
    relative error, on top of a ``fixed`` part of each value (none by default; a floor on a term, as
    ``benchmarks/time_model_variants.py`` tries); a name with fewer than :data:`MIN_ROWS` usable rows
    gets none."""
    from scipy.optimize import nnls

    fixed = np.zeros(len(values)) if fixed is None else fixed
    usable = np.isfinite(basis).all(axis=1) & np.isfinite(values) & (values > 0)
    out: dict[str, list[float]] = {}
    for name in [POOLED] + sorted({n for n in names if n is not None}):
        rows = usable & ((names == name) if name != POOLED else True)
        if rows.sum() < MIN_ROWS:
            continue
        coef, _ = nnls(basis[rows] / values[rows, None], 1.0 - fixed[rows] / values[rows])
        if np.any(coef > 0) or np.any(fixed[rows] > 0):  # a fixed part alone is a baseline too
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
