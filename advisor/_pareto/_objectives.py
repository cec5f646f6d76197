"""Objectives and constraints: what a study optimises, and parsing them from the user's text."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from advisor.errors import ConstraintError, invalid_parameter

__all__ = [
    "OBJECTIVES",
    "Objective",
    "Constraint",
    "parse_objectives",
    "parse_constraint",
    "parse_reference",
    "parse_size_mb",
]


@dataclass(frozen=True)
class Objective:
    """A study objective: its short name, the TrialResult field it reads and its direction."""

    name: str
    field: str
    direction: str  # "minimize" | "maximize"
    unit: str

    @property
    def sign(self) -> float:
        """+1 for minimised objectives, -1 for maximised ones (maps everything to minimisation)."""
        return 1.0 if self.direction == "minimize" else -1.0


OBJECTIVES: dict[str, Objective] = {
    # torch.compile's warm-up counts: it is time the study's trial cost (see the property)
    "time": Objective("time", "train_time_with_compile_s", "minimize", "s"),
    "accuracy": Objective("accuracy", "test_accuracy", "maximize", ""),
    "memory": Objective("memory", "peak_memory_mb", "minimize", "MiB"),
}


def parse_objectives(text: str | Sequence[str]) -> tuple[str, ...]:
    """Parse ``"time,accuracy,memory"`` (or a list) into validated objective names.

    Raises:
        InvalidParameterError: On an unknown or repeated name, or an empty list.
    """
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    accepted = f"a comma-separated subset of {', '.join(OBJECTIVES)} without repeats"
    if not names or len(set(names)) != len(names) or any(n not in OBJECTIVES for n in names):
        raise invalid_parameter("objectives", "the study", accepted, text)
    return tuple(names)


# --------------------------------------------------------------------------------- constraints

_UNITS = {
    "time": {"": 1.0, "s": 1.0, "ms": 1e-3, "m": 60.0, "min": 60.0, "h": 3600.0},
    "memory": {"": 1.0, "mb": 1.0, "mib": 1.0, "kb": 1 / 1024, "kib": 1 / 1024, "gb": 1024.0,
               "gib": 1024.0},
    "accuracy": {"": 1.0, "%": 0.01},
}
_CONSTRAINT_RE = re.compile(
    r"^\s*([a-z]+)\s*(<=|>=)\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+)\s*([a-zA-Z%]*)\s*$"
)


@dataclass(frozen=True)
class Constraint:
    """``objective op bound``, with the bound in the objective's base unit (s, fraction, MiB)."""

    objective: str
    op: str  # "<=" | ">="
    bound: float
    text: str

    def violation(self, value: float) -> float:
        """Optuna's convention: <= 0 is feasible, > 0 is the violation, relative to the bound."""
        raw = value - self.bound if self.op == "<=" else self.bound - value
        return raw / abs(self.bound) if self.bound else raw

    def satisfied(self, value: float) -> bool:
        return self.violation(value) <= 0.0


def parse_constraint(text: str) -> Constraint:
    """Parse ``accuracy>=0.98``, ``memory<=2GB``, ``time<=60`` (or ``60s``, ``2min``).

    Memory units are MiB-based (``GB`` = 1024 MiB); accuracy may be a fraction or a percentage.

    Raises:
        ConstraintError: One line saying what is accepted and what was found.
    """
    hint = ("'<objective><=|>=<number>[unit]' with objective time (s, ms, min, h), accuracy "
            "(fraction or %) or memory (MB, GB)")
    match = _CONSTRAINT_RE.match(text) if isinstance(text, str) and len(text) <= 100 else None
    if not match:
        raise ConstraintError(f"Constraint {text!r} is not understood: write {hint}, e.g. 'accuracy>=0.98'.")
    name, op, number, unit = match.groups()
    if name not in OBJECTIVES:
        raise ConstraintError(f"Constraint {text!r} names {name!r}: the objectives are {', '.join(OBJECTIVES)}.")
    units = _UNITS[name]
    if unit.lower() not in units:
        accepted = ", ".join(u for u in units if u) or "none"
        raise ConstraintError(f"Constraint {text!r} has unit {unit!r}: {name} accepts {accepted}.")
    bound = float(number) * units[unit.lower()]
    if not math.isfinite(bound) or (name == "accuracy" and not 0.0 <= bound <= 1.0):
        raise ConstraintError(f"Constraint {text!r}: accuracy bounds lie in [0, 1] (or 0-100%); found {bound!r}.")
    return Constraint(objective=name, op=op, bound=bound, text=f"{name}{op}{bound:g}")


def parse_size_mb(text: str, *, owner: str = "the study") -> float:
    """Parse a memory size (``2GB``, ``512MB``, ``1.5GiB``, a plain number of MiB) into MiB.

    Raises:
        InvalidParameterError: When ``text`` is not a positive size.
    """
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$", str(text))
    factor = _UNITS["memory"].get(match.group(2).lower()) if match else None
    value = float(match.group(1)) * factor if match and factor is not None else 0.0
    if not value > 0 or not math.isfinite(value):
        raise invalid_parameter("memory", owner, "a size such as 512MB or 2GB (MB = MiB)", text)
    return value


def parse_reference(text: str | None, objectives: Sequence[str]) -> dict[str, float]:
    """Parse ``"time=600,accuracy=0,memory=4096"`` into a partial reference point.

    Raises:
        InvalidParameterError: On an unknown objective or a non-finite number.
    """
    if not text:
        return {}
    out: dict[str, float] = {}
    accepted = f"'name=value' pairs separated by commas, names among {', '.join(objectives)}"
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or name not in objectives or not math.isfinite(number):
            raise invalid_parameter("ref", "the Pareto export", accepted, text)
        out[name] = number
    return out
