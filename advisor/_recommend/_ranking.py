"""The predicted Pareto front and its ranking by preference.

Ranking keeps the predicted Pareto front (and, when it is too small, the next fronts) and orders
it by preference: ``fast``, ``accurate``, ``lean`` or ``balanced`` (among the front points
predicted within one accuracy point of the best, the fastest; the next ranks are the front points
that add the most predicted hypervolume, so the top K shows the trade-offs).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BALANCED_ACCURACY_SLACK", "PREFERENCES", "front_layers", "pareto_mask", "rank", "spread"]

PREFERENCES = ("fast", "accurate", "lean", "balanced")
#: ``balanced`` picks among configurations predicted within this much accuracy of the best one.
BALANCED_ACCURACY_SLACK = 0.01


def pareto_mask(costs: np.ndarray) -> np.ndarray:
    """Rows of ``costs`` (n x m, all minimised) that no other row dominates.

    Rows are visited in lexicographic order, so a row can only be dominated by one visited before
    it; by transitivity it suffices to test it against the front found so far, which stays small.
    Equal rows do not dominate each other: all of them are kept.
    """
    n = len(costs)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    costs = np.asarray(costs, dtype=float)
    front = np.empty_like(costs)
    k = 0
    for i in np.lexsort(costs.T[::-1]):
        row = costs[i]
        if k:
            f = front[:k]
            if np.any(np.all(f <= row, axis=1) & np.any(f < row, axis=1)):
                continue
        front[k] = row
        k += 1
        keep[i] = True
    return keep


def rank(costs: np.ndarray, preference: str) -> np.ndarray:
    """Order of rows (costs: log time, -accuracy, log memory) by preference, best first.

    ``balanced`` first keeps the rows whose accuracy is within :data:`BALANCED_ACCURACY_SLACK` of
    the best row's and orders them by time, then memory; the other rows follow, by distance to the
    ideal point with all three objectives scaled. A knee over all three objectives alone tends to
    pick a configuration that trains in no time to a useless accuracy, which no user means by
    balanced. A knee over time and memory within the near-best set (the rule before) let a lower
    memory outweigh a several-fold longer training: on the held-out workloads of
    ``benchmarks/results/recommend-v1.md`` it picked scikit-learn configs training 1.6-6.3x longer
    than a torch config of the same or better measured accuracy. Memory limits belong to
    ``--max-memory`` and ``--prefer lean``.
    """
    t, a, m = costs[:, 0], costs[:, 1], costs[:, 2]
    if preference == "fast":
        return np.lexsort((m, a, t))
    if preference == "accurate":
        return np.lexsort((m, t, a))
    if preference == "lean":
        return np.lexsort((t, a, m))

    def knee(block: np.ndarray) -> np.ndarray:
        span = block.max(axis=0) - block.min(axis=0)
        scaled = (block - block.min(axis=0)) / np.where(span > 0, span, 1.0)
        return np.linalg.norm(scaled, axis=1)

    near = a <= a.min() + BALANCED_ACCURACY_SLACK
    first = np.flatnonzero(near)
    rest = np.flatnonzero(~near)
    first = first[np.lexsort((m[first], t[first]))]
    rest = rest[np.lexsort((t[rest], knee(costs[rest])))] if len(rest) else rest
    return np.concatenate([first, rest])


def spread(ordered: np.ndarray, time_s: np.ndarray, accuracy: np.ndarray, memory_mb: np.ndarray,
            want: int, *, memory_room_mb: float | None = None) -> np.ndarray:
    """``ordered`` with its first ``want`` entries made to show the trade-offs of the front.

    The first entry stays (the preference's pick); each next one is the entry that adds the most
    predicted hypervolume (time, accuracy, memory; reference 1.1 x the worst time and memory of
    ``ordered``, accuracy 0) to those chosen, ties to the earlier in ``ordered``. Without this the
    top K of ``balanced`` were K near-copies of one point (the near-best, slow configurations),
    which tells a user nothing about what a faster or leaner choice would cost. The remaining
    entries follow in their order.

    With ``memory_room_mb`` (the memory of the device trained on) the memory axis reaches at
    least that far, so memory counts as the share of the device a choice leaves free: a choice
    that saves 70 MiB of an 80 GiB GPU, slower and less accurate, is not shown as a trade-off,
    while one that needs most of the device still is.
    """
    from advisor.pareto import hypervolume

    if want < 2 or len(ordered) < 3:
        return ordered
    directions = ("minimize", "maximize", "minimize")
    points = {int(j): (float(time_s[j]), float(accuracy[j]), float(memory_mb[j])) for j in ordered}
    ref = (1.1 * max(p[0] for p in points.values()), 0.0,
           max(1.1 * max(p[2] for p in points.values()), memory_room_mb or 0.0))
    scale = (ref[0], 1.0, ref[2])
    chosen = [int(ordered[0])]
    while len(chosen) < min(want, len(ordered)):
        base = hypervolume([points[c] for c in chosen], directions, ref, scale=scale)
        gains = [(hypervolume([points[c] for c in chosen] + [points[int(j)]], directions, ref, scale=scale) - base,
                  -k, int(j)) for k, j in enumerate(ordered) if int(j) not in chosen]
        gain, _, best = max(gains)
        if gain <= 0:
            break
        chosen.append(best)
    return np.array(chosen + [int(j) for j in ordered if int(j) not in chosen])


def front_layers(costs: np.ndarray, want: int) -> list[int]:
    """Indices of the front, then of the next fronts, until ``want`` are collected."""
    remaining = np.arange(len(costs))
    layers: list[int] = []
    while len(remaining) and (not layers or len(layers) < want):
        mask = pareto_mask(costs[remaining])
        layers.extend(remaining[mask].tolist())
        remaining = remaining[~mask]
    return layers
