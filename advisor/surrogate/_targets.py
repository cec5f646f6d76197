"""What each booster learns: the objectives and quantiles, the rows that may train an objective,
and the transform between measured values and the boosters' targets (model space).

Which rows train which model:

- ``test_accuracy``: status ``ok`` and not synthetic (synthetic data has no accuracy meaning);
- ``train_time_s``: status ``ok`` or ``pruned`` (with the epochs it completed) and not contended
  (a timing disturbed by other processes would teach the model noise);
- ``peak_memory_mb``: status ``ok`` or ``pruned``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from advisor.surrogate.features import BASELINE_FEATURE, FEATURES, MEMORY_BASELINE_FEATURE
from advisor.surrogate._curves import epochs_run

__all__ = [
    "OBJECTIVES",
    "ACCURACY_COMPANION",
    "QUANTILES",
    "LOG_OBJECTIVES",
    "MIN_ROWS",
    "training_columns",
    "real_rows",
    "to_model_space",
    "from_model_space",
]

OBJECTIVES = ("train_time_s", "test_accuracy", "peak_memory_mb")
#: Boosters on plain accuracy, kept beside the landmark-relative ``test_accuracy`` ones: a
#: prediction takes the lower of the two, quantile by quantile.
ACCURACY_COMPANION = "test_accuracy_plain"
QUANTILES = (0.1, 0.5, 0.9)
LOG_OBJECTIVES = frozenset({"train_time_s", "peak_memory_mb"})
MIN_ROWS = 5

# Column positions in the feature matrix, shared by the baselines, the targets and the workload keys.
_INDEX = {f.name: i for i, f in enumerate(FEATURES)}
_TOTAL_FLOPS = _INDEX["total_flops"]
_LANDMARK = _INDEX["landmark"]


def real_rows(columns: Mapping[str, Sequence[Any]]) -> np.ndarray:
    """Which rows measured real data: not the timing runs on random data (``synthetic``), which
    train the time and memory models but are evidence of no real workload and calibrate or score
    nothing."""
    return np.array([not s for s in columns["synthetic"]], dtype=bool)


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

    Pruned rows, and rows of runs under a time budget, count with the epochs they completed
    (:func:`~advisor.surrogate._curves.epochs_run`).

    Returns:
        ``(columns, values)``: the selected columns and the objective's measured values.
    """
    keep = [
        i for i, (st, v, syn, con) in enumerate(zip(
            columns["status"], columns[objective], columns["synthetic"], columns["contended"]))
        if _row_usable(objective, st, v, syn, con)
    ]
    picked = {name: [col[i] for i in keep] for name, col in columns.items()}
    picked["cfg_epochs"] = epochs_run(picked)
    return picked, np.array(picked[objective], dtype=float)


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

    Landmark-relative accuracy is brought back to accuracy by
    :meth:`~advisor.surrogate.model.Surrogate.predict_matrix` before it is combined with the
    plain-accuracy model; here accuracy is only clipped.
    """
    if objective not in LOG_OBJECTIVES:
        return np.clip(raw, 0.0, 1.0)
    if objective == "train_time_s":
        raw = raw + _log_time_baseline(x)[:, None]
    else:
        raw = raw + x[:, _INDEX[MEMORY_BASELINE_FEATURE]][:, None]
    return np.exp(raw)
