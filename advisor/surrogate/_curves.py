"""Learning curves as training data: one trial of E epochs teaches the reading after each epoch.

Every trial records its test accuracy and training time after each epoch. A reading after epoch
``k`` of an ``E``-epoch run is not a ``k``-epoch result when the schedule depends on ``E``
(cosine, one-cycle, step and warm-up are laid out over the whole run), so an expanded row keeps
both: ``cfg_epochs`` becomes ``k`` (what was trained, so FLOPs and steps stay true) and
``schedule_epochs`` stays ``E`` (the features add ``epoch_fraction = k / E``). A finished trial
is the row with ``k = E``; a candidate without a ``schedule_epochs`` column is read that way.

The time of a reading is the trial's training time scaled by the share of the epoch times up to
``k`` (the recorded epoch times exclude evaluation, as ``train_time_s`` does).

Weights keep long trials from outweighing short ones: the final reading weighs 1 and a trial's
intermediate readings :data:`CURVE_WEIGHT` together. At most :data:`MAX_READINGS` intermediate
readings per trial are used (spread evenly over the curve).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["CURVE_OBJECTIVES", "CURVE_WEIGHT", "MAX_READINGS", "expand_curves", "curve_epochs", "epochs_run"]

#: Objectives read from the curves (memory is one peak per trial).
CURVE_OBJECTIVES = frozenset({"train_time_s", "test_accuracy"})
#: The summed weight of one trial's intermediate readings (its final reading weighs 1).
CURVE_WEIGHT = 1.0
#: Intermediate readings kept per trial.
MAX_READINGS = 4

_FINAL = "curve_final"
_WEIGHT = "curve_weight"


def epochs_run(columns: Mapping[str, Sequence[Any]]) -> list[Any]:
    """Each row's ``cfg_epochs`` as its schedule spanned it: a run under a time budget
    (``cfg_time_budget_s`` > 0) re-planned its schedule to the epochs it completed, and a pruned
    trial and one stopped at its target accuracy (``cfg_stop_at_accuracy``) count with the epochs
    they completed, so their time matches their features."""
    n = len(columns["cfg_epochs"])
    budgets = columns.get("cfg_time_budget_s") or [0.0] * n
    stops = columns.get("cfg_stop_at_accuracy") or [0.0] * n
    return [(done if done and (st == "pruned" or (b or 0) > 0 or (s or 0) > 0) else ep) for st, done, ep, b, s in zip(
        columns["status"], columns["epochs_completed"], columns["cfg_epochs"], budgets, stops)]


def schedule_spans(columns: Mapping[str, Sequence[Any]]) -> list[Any]:
    """The epochs each row's schedule was laid over: the completed ones (:func:`epochs_run`), except
    for a run stopped at its target accuracy, whose schedule still spanned ``cfg_epochs``."""
    n = len(columns["cfg_epochs"])
    stops = columns.get("cfg_stop_at_accuracy") or [0.0] * n
    return [ep if (s or 0) > 0 else run for run, ep, s in zip(epochs_run(columns), columns["cfg_epochs"], stops)]


def curve_epochs(epochs: int, *, max_readings: int = MAX_READINGS) -> list[int]:
    """The intermediate epochs ``k < epochs`` read from a curve, evenly spread, at most ``max_readings``."""
    if epochs < 2:
        return []
    ks = np.unique(np.round(np.linspace(1, epochs - 1, min(max_readings, epochs - 1))).astype(int))
    return [int(k) for k in ks]


def _usable_curve(status: Any, synthetic: Any, curve: Any, times: Any, epochs: Any, total: Any) -> bool:
    return (status == "ok" and not synthetic and isinstance(curve, (list, tuple)) and isinstance(times, (list, tuple))
            and isinstance(epochs, int) and epochs >= 2 and len(curve) == epochs and len(times) == epochs
            and total is not None and np.isfinite(total) and total > 0 and sum(times) > 0)


def expand_curves(columns: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """The table's rows plus one row per intermediate curve reading (see the module docstring).

    Adds the columns ``schedule_epochs``, ``curve_final`` (True for the table's own rows) and
    ``curve_weight``. Rows that already carry ``schedule_epochs`` are not expanded again.
    """
    n = len(columns["trial_id"])
    out = {k: list(v) for k, v in columns.items()}
    if "schedule_epochs" in columns:  # already expanded
        out.setdefault(_FINAL, [True] * n)
        out.setdefault(_WEIGHT, [1.0] * n)
        return out
    epochs_col = epochs_run(columns)
    out["cfg_epochs"] = list(epochs_col)
    out["schedule_epochs"] = schedule_spans(columns)
    out[_FINAL] = [True] * n
    out[_WEIGHT] = [1.0] * n
    names = list(out)
    extra: dict[str, list[Any]] = {k: [] for k in names}
    get = columns.get
    statuses, synth = columns["status"], columns["synthetic"]
    curves, times_col = get("accuracy_curve") or [None] * n, get("epoch_times") or [None] * n
    totals = columns["train_time_s"]
    for i in range(n):
        curve, times, epochs = curves[i], times_col[i], epochs_col[i]
        if not _usable_curve(statuses[i], synth[i], curve, times, epochs, totals[i]):
            continue
        ks = curve_epochs(epochs)
        if not ks:
            continue
        cumulative = np.cumsum(np.asarray(times, dtype=float))
        share = cumulative / cumulative[-1]
        weight = CURVE_WEIGHT / len(ks)
        for k in ks:
            for name in names:
                extra[name].append(out[name][i])
            extra["cfg_epochs"][-1] = k
            extra["epochs_completed"][-1] = k
            extra["test_accuracy"][-1] = float(curve[k - 1])
            extra["train_time_s"][-1] = float(totals[i]) * float(share[k - 1])
            extra[_FINAL][-1] = False
            extra[_WEIGHT][-1] = weight
    for name in names:
        out[name].extend(extra[name])
    return out


def weights_and_final(columns: Mapping[str, Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Row weights and the mask of finished-trial rows (all ones and all True for unexpanded columns)."""
    n = len(columns["trial_id"])
    w = np.asarray(columns.get(_WEIGHT) or [1.0] * n, dtype=float)
    final = np.asarray(columns.get(_FINAL) or [True] * n, dtype=bool)
    return w, final
