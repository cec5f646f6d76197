"""Export of a Pareto front as CSV, JSON, self-contained HTML (plotly) or PNG (matplotlib).

plotly and matplotlib are imported inside the writers that use them.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from advisor._json import json_safe
from advisor._atomic import atomic_write
from advisor._pareto._front import ParetoFront, TrialPoint
from advisor._pareto._objectives import OBJECTIVES
from advisor.errors import InvalidParameterError

__all__ = ["FORMATS", "front_to_csv", "front_to_json", "front_to_html", "front_to_png", "export_front"]

FORMATS = ("table", "csv", "json", "html", "png")


def front_to_json(front: ParetoFront) -> str:
    return json.dumps(json_safe(front.to_dict()), indent=2, sort_keys=True, allow_nan=False) + "\n"


def front_to_csv(front: ParetoFront) -> str:
    param_names = sorted({k for p in front.points for k in p.params})
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["trial_number", *front.objectives, "framework", "status", "chance_level", "hardware_id",
                     "dataset_fingerprint", *param_names])
    for p in front.points:
        writer.writerow([p.trial_number, *(p.values[n] for n in front.objectives), p.framework,
                         p.status, p.chance_level, p.hardware_id, p.dataset_fingerprint,
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
