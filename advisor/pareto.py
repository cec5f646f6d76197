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

import csv
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from advisor._atomic import atomic_write
from advisor.errors import ConstraintError, InvalidParameterError, invalid_parameter

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

FORMATS = ("table", "csv", "json", "html", "png")


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
    "time": Objective("time", "train_time_s", "minimize", "s"),
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


# ------------------------------------------------------------------------------------- export


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def front_to_json(front: ParetoFront) -> str:
    return json.dumps(_json_safe(front.to_dict()), indent=2, sort_keys=True, allow_nan=False) + "\n"


def front_to_csv(front: ParetoFront) -> str:
    param_names = sorted({k for p in front.points for k in p.params})
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["trial_number", *front.objectives, "framework", "status", "hardware_id",
                     "dataset_fingerprint", *param_names])
    for p in front.points:
        writer.writerow([p.trial_number, *(p.values[n] for n in front.objectives), p.framework,
                         p.status, p.hardware_id, p.dataset_fingerprint,
                         *(p.params.get(k, "") for k in param_names)])
    return buf.getvalue()


def _label(name: str) -> str:
    unit = OBJECTIVES[name].unit
    return f"{name} ({unit})" if unit else name


def _hover(p: TrialPoint) -> str:
    params = "<br>".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in p.params.items())
    return f"trial {p.trial_number} · {p.framework}<br>{params}"


def front_to_html(front: ParetoFront) -> str:
    """A self-contained page (plotly.js embedded, works offline)."""
    import plotly.graph_objects as go

    objs = front.objectives
    fig = go.Figure()
    for group, name, style in ((front.others, "other trials", {"color": "#b0b0b0", "size": 5}),
                               (front.points, "Pareto front", {"color": "#d62728", "size": 8})):
        cols = [[p.values[n] for p in group] for n in objs]
        text = [_hover(p) for p in group]
        if len(objs) >= 3:
            fig.add_trace(go.Scatter3d(x=cols[0], y=cols[1], z=cols[2], mode="markers", name=name,
                                       marker=style, text=text, hoverinfo="text+x+y+z"))
        elif len(objs) == 2:
            fig.add_trace(go.Scatter(x=cols[0], y=cols[1], mode="markers", name=name, marker=style,
                                     text=text, hoverinfo="text+x+y"))
        else:
            fig.add_trace(go.Scatter(x=cols[0], y=[0] * len(group), mode="markers", name=name,
                                     marker=style, text=text, hoverinfo="text+x"))
    title = f"Pareto front of {front.study or 'the study'}: {len(front.points)} points, hypervolume {front.hypervolume:.4f}"
    if len(objs) >= 3:
        fig.update_layout(scene={"xaxis_title": _label(objs[0]), "yaxis_title": _label(objs[1]),
                                 "zaxis_title": _label(objs[2])})
    else:
        fig.update_layout(xaxis_title=_label(objs[0]), yaxis_title=_label(objs[1]) if len(objs) > 1 else "")
    fig.update_layout(title=title, template="plotly_white")
    return fig.to_html(include_plotlyjs=True, full_html=True)


def front_to_png(front: ParetoFront) -> bytes:
    """Pairwise scatter panels (matplotlib Agg, no global pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    objs = front.objectives
    pairs = [(i, j) for i in range(len(objs)) for j in range(i + 1, len(objs))] or [(0, 0)]
    fig = Figure(figsize=(4.5 * len(pairs), 4.0), dpi=100)
    FigureCanvasAgg(fig)
    for k, (i, j) in enumerate(pairs, start=1):
        ax = fig.add_subplot(1, len(pairs), k)
        for group, color, size, label in ((front.others, "#b0b0b0", 12, "other trials"),
                                          (front.points, "#d62728", 30, "Pareto front")):
            xs = [p.values[objs[i]] for p in group]
            ys = [p.values[objs[j]] if i != j else 0.0 for p in group]
            ax.scatter(xs, ys, s=size, c=color, label=label)
        ax.set_xlabel(_label(objs[i]))
        ax.set_ylabel(_label(objs[j]) if i != j else "")
        ax.grid(True, alpha=0.3)
        if k == 1:
            ax.legend(fontsize=8)
    fig.suptitle(f"{front.study or 'study'}: {len(front.points)} front points, HV {front.hypervolume:.4f}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def export_front(front: ParetoFront, fmt: str, path: str | os.PathLike[str]) -> Path:
    """Write the front as ``csv``, ``json``, ``html`` or ``png`` to ``path`` atomically.

    Raises:
        InvalidParameterError: On an unknown format.
    """
    writers = {
        "csv": lambda: front_to_csv(front).encode(),
        "json": lambda: front_to_json(front).encode(),
        "html": lambda: front_to_html(front).encode(),
        "png": lambda: front_to_png(front),
    }
    if fmt not in writers:
        raise InvalidParameterError(
            f"The 'format' parameter of export_front must be one of {', '.join(writers)}. Got {fmt!r} instead.")
    return atomic_write(path, writers[fmt]())
