"""Dominance, exact hypervolume and the Pareto front of a set of trials.

The default hypervolume reference point is described in :mod:`advisor.pareto`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from advisor._pareto._objectives import OBJECTIVES

__all__ = [
    "TrialPoint",
    "ParetoFront",
    "dominates",
    "non_dominated",
    "hypervolume",
    "reference_point",
    "compute_front",
]


# ------------------------------------------------------------------------ dominance, hypervolume


def _as_min(values: Sequence[float], directions: Sequence[str]) -> tuple[float, ...]:
    return tuple(v if d == "minimize" else -v for v, d in zip(values, directions))


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """Whether ``a`` is at least as good as ``b`` everywhere and strictly better somewhere."""
    am, bm = _as_min(a, directions), _as_min(b, directions)
    return all(x <= y for x, y in zip(am, bm)) and any(x < y for x, y in zip(am, bm))


def non_dominated(points: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """Indices of the points no other point dominates (duplicates are all kept)."""
    return [
        i for i, p in enumerate(points)
        if not any(dominates(q, p, directions) for j, q in enumerate(points) if j != i)
    ]


def _hv_min(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    """Exact hypervolume of minimisation points below ``ref`` (recursive slicing on the last axis)."""
    pts = [p for p in points if all(x < r for x, r in zip(p, ref))]
    if not pts:
        return 0.0
    d = len(ref)
    if d == 1:
        return ref[0] - min(p[0] for p in pts)
    if d == 2:
        area, best_y = 0.0, ref[1]
        for x, y in sorted(pts):
            if y < best_y:
                area += (ref[0] - x) * (best_y - y)
                best_y = y
        return area
    pts.sort(key=lambda p: p[-1])
    volume = 0.0
    for i, p in enumerate(pts):
        upper = pts[i + 1][-1] if i + 1 < len(pts) else ref[-1]
        if upper > p[-1]:
            volume += _hv_min([q[:-1] for q in pts[: i + 1]], ref[:-1]) * (upper - p[-1])
    return volume


def hypervolume(
    points: Sequence[Sequence[float]], directions: Sequence[str], reference: Sequence[float],
    *, scale: Sequence[float] | None = None,
) -> float:
    """Exact hypervolume dominated by ``points`` with respect to ``reference``.

    Args:
        points: Objective vectors in their own directions.
        directions: ``minimize`` / ``maximize`` per objective.
        reference: The reference point (a point worse than every interesting point).
        scale: Divide each objective by this before measuring (1 = raw units).

    Returns:
        The volume; points that do not strictly beat the reference contribute nothing.
    """
    scale = scale or [1.0] * len(directions)
    pts = [tuple(x / s for x, s in zip(_as_min(p, directions), scale)) for p in points]
    ref = tuple(x / s for x, s in zip(_as_min(reference, directions), scale))
    return _hv_min(pts, ref)


def reference_point(
    values: Sequence[Mapping[str, float]], objectives: Sequence[str],
    override: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The default reference: 1.1 x the worst observed value of minimised objectives, 0 for accuracy."""
    override = dict(override or {})
    ref: dict[str, float] = {}
    for name in objectives:
        if name in override:
            ref[name] = float(override[name])
        elif OBJECTIVES[name].direction == "maximize":
            ref[name] = 0.0
        else:
            worst = max((v[name] for v in values), default=0.0)
            ref[name] = 1.1 * worst if worst > 0 else 1.0
    return ref


def _scale(objectives: Sequence[str], ref: Mapping[str, float]) -> list[float]:
    # Minimised objectives are measured as fractions of their reference; accuracy is a fraction.
    return [ref[n] if OBJECTIVES[n].direction == "minimize" and ref[n] > 0 else 1.0 for n in objectives]


# ------------------------------------------------------------------------------------- fronts


#: A point whose accuracy is at most this far above 1 / classes is flagged as chance level.
CHANCE_MARGIN = 0.05


def is_chance_level(accuracy: Any, num_classes: Any) -> bool:
    """Whether ``accuracy`` is no better than guessing among ``num_classes`` (within :data:`CHANCE_MARGIN`)."""
    try:
        return float(accuracy) <= 1.0 / int(num_classes) + CHANCE_MARGIN
    except (TypeError, ValueError, ZeroDivisionError):
        return False


@dataclass(frozen=True)
class TrialPoint:
    """One finished trial as the front sees it.

    Attributes:
        trial_number: The trial's number in its study.
        values: Objective name -> value (``time`` in s, ``accuracy`` fraction, ``memory`` MiB).
        params: The searched parameters.
        framework: The framework trained.
        status: The trial's status (``ok`` for a point that may be on the front).
        hardware_id: Hardware profile id of the machine that ran it.
        dataset_fingerprint: Exact dataset identity.
        feasible: Whether it satisfies the study's constraints.
    """

    trial_number: int
    values: Mapping[str, float]
    params: Mapping[str, Any] = field(default_factory=dict)
    framework: str = ""
    status: str = "ok"
    hardware_id: str = ""
    dataset_fingerprint: str = ""
    feasible: bool = True
    #: Test accuracy within :data:`CHANCE_MARGIN` of guessing (1 / classes): a "fast" point that
    #: learnt nothing, kept on the front because it is fastest, but flagged.
    chance_level: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial_number": self.trial_number,
            "values": dict(self.values),
            "params": dict(self.params),
            "framework": self.framework,
            "status": self.status,
            "hardware_id": self.hardware_id,
            "dataset_fingerprint": self.dataset_fingerprint,
            "feasible": self.feasible,
            "chance_level": self.chance_level,
        }


@dataclass(frozen=True)
class ParetoFront:
    """The non-dominated feasible points of a set of trials, with their hypervolume."""

    objectives: tuple[str, ...]
    points: tuple[TrialPoint, ...]  # the front, sorted by the first objective
    others: tuple[TrialPoint, ...]  # every other complete point (dominated or infeasible)
    reference: Mapping[str, float]
    hypervolume: float
    study: str = ""

    @property
    def directions(self) -> tuple[str, ...]:
        return tuple(OBJECTIVES[n].direction for n in self.objectives)

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "objectives": [
                {"name": n, "field": OBJECTIVES[n].field, "direction": OBJECTIVES[n].direction,
                 "unit": OBJECTIVES[n].unit} for n in self.objectives
            ],
            "reference": dict(self.reference),
            "hypervolume": self.hypervolume,
            "n_points": len(self.points) + len(self.others),
            "front": [p.to_dict() for p in self.points],
        }


def compute_front(
    points: Sequence[TrialPoint], objectives: Sequence[str], *,
    reference: Mapping[str, float] | None = None, study: str = "",
) -> ParetoFront:
    """The Pareto front of the feasible points with every objective measured.

    Args:
        points: Candidate points (failed, pruned or incomplete ones are kept out of the front).
        objectives: Objective names, in order.
        reference: Partial reference-point override; the rest takes the defaults.
        study: Name carried into exports.
    """
    objectives = tuple(objectives)
    directions = [OBJECTIVES[n].direction for n in objectives]
    usable = [
        p for p in points
        if p.status == "ok" and all(isinstance(p.values.get(n), (int, float))
                                    and math.isfinite(p.values[n]) for n in objectives)
    ]
    feasible = [p for p in usable if p.feasible]
    vectors = [[p.values[n] for n in objectives] for p in feasible]
    keep = set(non_dominated(vectors, directions))
    front = sorted((feasible[i] for i in keep), key=lambda p: (p.values[objectives[0]], p.trial_number))
    others = tuple(p for i, p in enumerate(feasible) if i not in keep) + tuple(
        p for p in usable if not p.feasible)
    ref = reference_point([p.values for p in feasible], objectives, reference)
    ref_vec = [ref[n] for n in objectives]
    hv = hypervolume([vectors[i] for i in sorted(keep)], directions, ref_vec, scale=_scale(objectives, ref))
    return ParetoFront(objectives=objectives, points=tuple(front), others=others, reference=ref,
                       hypervolume=hv, study=study)
