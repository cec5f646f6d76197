"""The user's bounds on the predicted median, and the filter that applies them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from advisor.errors import ConstraintError, invalid_parameter

__all__ = ["CONFIDENCE", "Constraints", "check_constraints", "probability"]


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


#: The z-score of the band's edges: the 10% and 90% quantiles of a normal distribution.
_Z90 = 1.2815515655446004
#: A constraint is "met with confidence" at this probability; below it (down to 0.5) the answer
#: says it is unsure, and below 0.5 nothing is recommended.
CONFIDENCE = 0.8


def _p_below(bound: float, lo: np.ndarray, mid: np.ndarray, hi: np.ndarray, *, log: bool) -> np.ndarray:
    """P(value <= bound) for values whose 10/50/90% quantiles are lo/mid/hi (normal; log-normal when ``log``),
    with a separate spread on each side of the median."""
    from math import erf, sqrt

    f = np.log if log else (lambda v: np.asarray(v, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        b, l, m, h = f(np.maximum(bound, 1e-12) if log else bound), f(np.maximum(lo, 1e-12) if log else lo), \
            f(np.maximum(mid, 1e-12) if log else mid), f(np.maximum(hi, 1e-12) if log else hi)
        sigma = np.where(b >= m, (h - m), (m - l)) / _Z90
        z = np.where(sigma > 0, (b - m) / np.where(sigma > 0, sigma, 1.0), np.where(b >= m, np.inf, -np.inf))
    return np.array([0.5 * (1.0 + erf(v / sqrt(2.0))) if np.isfinite(v) else float(v > 0) for v in z])


def probability(c: Constraints, t: tuple[np.ndarray, np.ndarray, np.ndarray],
                a: tuple[np.ndarray, np.ndarray, np.ndarray],
                m: tuple[np.ndarray, np.ndarray, np.ndarray], *, time_bounded: np.ndarray | None = None) -> np.ndarray:
    """The probability that each row meets every bound of ``c``, read from its bands (lo, mid, hi).

    Each figure is taken as normally distributed (time and memory log-normally) with the band's
    edges as its 10% and 90% quantiles, each side of the median spread separately; the figures are
    taken as independent, so the probabilities multiply. 1 where ``c`` has no bound. Rows of
    ``time_bounded`` meet the time bound for certain (a run that stops itself before it).
    """
    p = np.ones(len(t[1]))
    if c.max_time_s is not None:
        p_time = _p_below(c.max_time_s, *t, log=True)
        p = p * (p_time if time_bounded is None else np.where(time_bounded, 1.0, p_time))
    if c.min_accuracy is not None:
        p = p * (1.0 - _p_below(c.min_accuracy, *a, log=False))
    if c.max_memory_mb is not None:
        p = p * _p_below(c.max_memory_mb, *m, log=True)
    return p
