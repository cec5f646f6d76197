"""Pareto fronts: objectives, constraints, non-dominated filtering, hypervolume and export.

Nothing here imports Optuna; :mod:`advisor.tuning` reads studies into :class:`TrialPoint` lists,
and ``recommend`` uses the same functions on predicted points.

Hypervolume reference point (documented in ``docs/tuning.md``): each minimised objective (time,
memory) is referenced at 1.1 x the worst value observed among the points, accuracy at 0; any of
them can be overridden (``--ref "time=600,accuracy=0,memory=4096"``). Minimised objectives are
divided by their reference, so with the defaults the hypervolume is a fraction in [0, 1]: the
share of the box [0, ref_time] x [ref_acc, 1] x [0, ref_mem] that the front dominates.
"""

from __future__ import annotations

from advisor._pareto._export import (
    FORMATS, export_front, front_to_csv, front_to_html, front_to_json, front_to_png,
)
from advisor._pareto._front import (
    ParetoFront, TrialPoint, compute_front, dominates, hypervolume, non_dominated, reference_point,
)
from advisor._pareto._objectives import (
    OBJECTIVES, Constraint, Objective, parse_constraint, parse_objectives, parse_reference, parse_size_mb,
)

__all__ = [
    "OBJECTIVES",
    "Objective",
    "Constraint",
    "TrialPoint",
    "ParetoFront",
    "parse_objectives",
    "parse_constraint",
    "parse_reference",
    "parse_size_mb",
    "dominates",
    "non_dominated",
    "hypervolume",
    "reference_point",
    "compute_front",
    "export_front",
    "FORMATS",
    "front_to_csv",
    "front_to_json",
    "front_to_html",
    "front_to_png",
]
