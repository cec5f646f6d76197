"""The user's bounds on the predicted median, and the filter that applies them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from advisor.errors import ConstraintError, invalid_parameter

__all__ = ["Constraints", "check_constraints"]


@dataclass(frozen=True)
class Constraints:
    """Bounds on the predicted median; ``None`` means no bound."""

    max_time_s: float | None = None
    min_accuracy: float | None = None
    max_memory_mb: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_time_s", "max_memory_mb"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                raise invalid_parameter(name, "Constraints", "a positive number", v)
        if self.min_accuracy is not None and not (0.0 <= self.min_accuracy <= 1.0):
            raise invalid_parameter("min_accuracy", "Constraints", "a number in [0, 1]", self.min_accuracy)


def check_constraints(c: Constraints, t: np.ndarray, a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Feasible rows; when none, a ConstraintError naming the binding bound and the best value."""
    steps = [
        ("--max-time", c.max_time_s, "s", t, lambda v, b: v <= b, "the fastest predicted training time is {:.3g} s",
         lambda v: v.min()),
        ("--min-accuracy", c.min_accuracy, "", a, lambda v, b: v >= b, "the best predicted accuracy is {:.4f}",
         lambda v: v.max()),
        ("--max-memory", c.max_memory_mb, " MB", m, lambda v, b: v <= b,
         "the leanest predicted peak memory is {:.0f} MB", lambda v: v.min()),
    ]
    mask = np.ones(len(t), dtype=bool)
    applied: list[str] = []
    for flag, bound, unit, values, ok, best_text, best in steps:
        if bound is None:
            continue
        new = mask & ok(values, bound)
        if not new.any():
            within = f" among configurations that meet {' and '.join(applied)}" if applied else ""
            raise ConstraintError(
                f"No configuration is predicted to meet {flag} {bound:g}{unit}: "
                f"{best_text.format(best(values[mask]))}{within}; relax {flag}."
            )
        mask = new
        applied.append(f"{flag} {bound:g}{unit}")
    return mask
