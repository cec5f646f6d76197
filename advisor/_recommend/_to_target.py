"""Time to an accuracy target, read from the learning-curve model.

A ``--target-accuracy`` question stops every run at the first epoch that reaches the target (its
schedule still spans all its epochs). The surrogate learned every trial's per-epoch readings as
epoch ``k`` of an ``E``-epoch schedule (:mod:`advisor.surrogate._curves`), so for a predicted
candidate it can say at which epoch the target is reached, not only whether the whole schedule
reaches it: that epoch's share of the run is the predicted time to the target. The band follows
the accuracy band: the time's median is read where the accuracy's median first reaches the target,
its upper edge where the accuracy's lower edge does, its lower edge where the upper edge does.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from advisor._recommend._candidates import Candidate

__all__ = ["READINGS", "reading_epochs", "times_to_target"]

#: Readings of one candidate's curve before its last epoch: every epoch of a shorter run, evenly
#: spread over a longer one (the target is then read at the first reading past it).
READINGS = 12

Bands = Sequence[np.ndarray]


def reading_epochs(epochs: int, readings: int = READINGS) -> list[int]:
    """The epochs ``k < epochs`` at which a candidate's predicted curve is read."""
    if epochs < 2:
        return []
    if epochs - 1 <= readings:
        return list(range(1, epochs))
    return sorted({int(k) for k in np.round(np.linspace(1, epochs - 1, readings))})


def times_to_target(cands: list[Candidate], rows: np.ndarray, t: list[np.ndarray], a: Bands, raw: Any,
                    target: float, surrogate: Any,
                    encode: Callable[[list[Candidate], tuple[list[int], list[int]]], np.ndarray],
                    ) -> dict[int, tuple[float, float, float]]:
    """Replace, in place, the whole-schedule time bands ``t`` of the candidates ``rows`` by their
    predicted time to ``target``; return the whole-schedule bands of those that changed.

    ``a`` holds the final accuracy bands as the recommender adjusted them (widened for an
    extrapolation, capped at the dataset's ceiling, raised by the learning-curve prior) and ``raw``
    the surrogate's own final accuracy band (a ``Band``); each curve is the surrogate's reading
    shifted by their difference, so its last reading is the final band. ``encode(candidates,
    (epochs, schedules))`` gives the features of each candidate read after ``epochs`` epochs of its
    schedule laid over ``schedules``. An edge that reaches the target only at the last epoch,
    or never, keeps the whole schedule's time (a run that never gets there runs it all).
    """
    probes: list[Candidate] = []
    spans: list[int] = []
    owner: list[tuple[int, int]] = []
    for i in (int(r) for r in rows):
        epochs = cands[i].config.epochs
        for k in reading_epochs(epochs):
            probes.append(cands[i])
            spans.append(epochs)
            owner.append((i, k))
    if not probes:
        return {}
    x = encode(probes, ([k for _, k in owner], spans))
    band = surrogate.predict_matrix(x, objectives=("test_accuracy",))["test_accuracy"]
    curve = [np.asarray(band.lo, dtype=float), np.asarray(band.mid, dtype=float), np.asarray(band.hi, dtype=float)]
    final = (raw.lo, raw.mid, raw.hi)
    whole: dict[int, tuple[float, float, float]] = {}
    at = 0
    while at < len(owner):
        i = owner[at][0]
        end = at
        while end < len(owner) and owner[end][0] == i:
            end += 1
        ks = np.array([k for _, k in owner[at:end]], dtype=float)
        epochs = cands[i].config.epochs
        before = (float(t[0][i]), float(t[1][i]), float(t[2][i]))
        # the time's lower edge from the accuracy's upper edge, and so on
        for edge, acc in ((0, 2), (1, 1), (2, 0)):
            reading = curve[acc][at:end] + (float(a[acc][i]) - float(final[acc][i]))
            hit = np.flatnonzero(reading >= target)
            if len(hit):
                t[edge][i] = before[edge] * ks[hit[0]] / epochs
        t[1][i] = max(t[1][i], t[0][i])
        t[2][i] = max(t[2][i], t[1][i])
        if (float(t[0][i]), float(t[1][i]), float(t[2][i])) != before:
            whole[i] = before
        at = end
    return whole
