"""Runs that fill a time bound: the answer to ``--max-time T`` that does not bet on a predicted epoch time.

A ``--max-time`` question is answered by choosing how long to train. Chosen from predicted epoch
times, the run either overruns ``T`` (the time was under-predicted: a new dataset, a model the
table has never timed) or stops well short of it (over-predicted), and either way the user loses.
A run under a time budget (the ``time_budget_s`` knob, :func:`advisor.frameworks.base.budget_epochs`)
measures its own epochs and stops before one that would not fit, with its schedule re-planned to
end where the budget does: the approach of budgeted training (Li, Yumer and Ramanan, ICLR 2020).

:func:`filling_runs` adds, for each recipe offered over the epoch grid (the obvious default and the
portfolio), the same recipe with ``time_budget_s = T``. Its figures come from the family's own
predictions: the epochs that fit at the time band's low, middle and high edge give the band of
epochs it will run (at most the family's longest run), its accuracy is the family's at those run
lengths (the middle at the middle, the low edge at the fewest epochs), and its time ends within one
epoch of ``T`` where the budget stops it (the family's whole run where that fits, one epoch where
even that may not).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from advisor._recommend._candidates import Candidate, family_key

__all__ = ["FILLING_SOURCES", "filling_runs", "add_filling_runs", "bounded_by_budget"]

#: The candidate sources whose epoch-grid families get a run that fills the time bound.
FILLING_SOURCES = ("default", "portfolio")


def _at_most(epochs: np.ndarray, values: np.ndarray, e: int) -> float | None:
    """The family's value at its longest run of at most ``e`` epochs (None when it has none)."""
    ok = epochs <= e
    return float(values[ok][np.argmax(epochs[ok])]) if ok.any() else None


def _run_end(max_time_s: float, per: float, fit: int, cap: int) -> tuple[float, float, float]:
    """When a run of ``per`` seconds an epoch, under a budget of ``max_time_s``, ends: earliest, median, latest.

    Where the budget stops it (fewer epochs fit than the family's longest run), it stops before the
    epoch that would overrun the bound, so it ends within one epoch of it: ``T - per`` to ``T``,
    ``T - per / 2`` in the middle. Otherwise it runs its whole length (or its one epoch that may not fit).
    """
    if 1 <= fit < cap:
        return max_time_s - per, max_time_s - per / 2, max_time_s
    whole = min(max(fit, 1), cap) * per
    return whole, whole, whole


def bounded_by_budget(cands: list[Candidate], hi: np.ndarray, max_time_s: float) -> np.ndarray:
    """Rows whose time cannot exceed ``max_time_s``: runs under a budget of at most it, whose band's
    slow edge fits one epoch in it (the run stops itself before the bound), or that were measured
    within it (a measured run's band is its repeat noise, not a doubt that it stops)."""
    budgets = np.array([c.config.time_budget_s or math.inf for c in cands], dtype=float)
    within = np.array([c.measured is not None and c.measured.time_s[1] <= max_time_s for c in cands], dtype=bool)
    return (budgets <= max_time_s) & ((np.asarray(hi) <= max_time_s) | within)


def filling_runs(cands: list[Candidate], t: list[np.ndarray], a: list[np.ndarray], m: list[np.ndarray],
                 max_time_s: float) -> tuple[list[Candidate], list[int], list[list[float]], list[list[float]],
                                             list[list[float]]]:
    """Candidates that fill ``max_time_s``, one per epoch-grid family, the family member each was
    derived from, and their bands (lo, mid, hi).

    ``t``, ``a``, ``m``: the bands of ``cands`` (lists of three arrays). Families whose one epoch is
    not predicted to fit (at the median) get none.
    """
    families: dict[str, list[int]] = {}
    for i, c in enumerate(cands):
        if c.source in FILLING_SOURCES and c.measured is None and not c.config.time_budget_s:
            families.setdefault(family_key(c), []).append(i)
    out: list[Candidate] = []
    bases: list[int] = []
    bands: tuple[list[list[float]], ...] = ([], [], [])
    for idx in families.values():
        idx = sorted(idx, key=lambda i: cands[i].config.epochs)
        epochs = np.array([cands[i].config.epochs for i in idx])
        # The epoch time of the member whose predicted run is nearest the bound (its share of fixed
        # costs is nearest the filling run's).
        near = idx[int(np.argmin(np.abs(np.log(np.maximum(t[1][idx], 1e-9)) - math.log(max_time_s))))]
        per = [float(t[q][near]) / cands[near].config.epochs for q in range(3)]
        if not all(p > 0 and math.isfinite(p) for p in per):
            continue
        fit = [int(max_time_s // p) for p in per]  # epochs that fit at the low, middle and high time
        if fit[1] < 1:
            continue
        # No more epochs than the family's longest predicted run: the grid holds no evidence that
        # training longer still helps, and a run that ends early leaves the time unspent, not lost.
        cap = int(epochs.max())
        few, mid, most = min(max(fit[2], 1), cap), min(fit[1], cap), min(max(fit[0], fit[1]), cap)
        got = (_at_most(epochs, a[0][idx], few), _at_most(epochs, a[1][idx], mid), _at_most(epochs, a[2][idx], most))
        if got[0] is None or got[1] is None or got[2] is None:
            continue
        acc = (got[0], got[1], got[2])
        base = cands[near]
        config = dataclasses.replace(base.config, epochs=most, time_budget_s=float(max_time_s))
        out.append(Candidate(config, base.source, None, model=base.model, transfer=base.transfer, run_epochs=mid))
        bases.append(near)
        ends = [_run_end(max_time_s, per[q], fit[q], cap) for q in range(3)]
        bands[0].append([min(e[0] for e in ends), ends[1][1], max(e[2] for e in ends)])
        bands[1].append([min(acc[0], acc[1]), acc[1], max(acc[1], acc[2])])
        bands[2].append([float(m[q][near]) for q in range(3)])
    return out, bases, *bands  # type: ignore[return-value]


def add_filling_runs(cands: list[Candidate], x: np.ndarray, fits: np.ndarray, t: list[np.ndarray],
                     a: list[np.ndarray], m: list[np.ndarray], max_time_s: float,
                     ) -> tuple[list[Candidate], np.ndarray, np.ndarray]:
    """``cands`` with :func:`filling_runs` appended; the bands ``t``, ``a``, ``m`` are extended in place,
    and the feature rows ``x`` and device fits ``fits`` are those of each run's family member."""
    extra, bases, *new = filling_runs(cands, t, a, m, max_time_s)
    if not extra:
        return cands, x, fits
    for band, rows in zip((t, a, m), new):
        arr = np.asarray(rows, dtype=float)
        for q in range(3):
            band[q] = np.concatenate([band[q], arr[:, q]])
    return cands + extra, np.vstack([x, x[bases]]), np.concatenate([fits, fits[bases]])
