"""How a cell's value is written to the CSV and read back, by column type.

``str``, ``int``, ``float``, ``bool`` (``true`` / ``false``) and ``json`` (compact, 7 significant
digits). An empty cell is ``None``; a non-finite float is written as an empty cell.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

__all__ = ["normalise", "format_cell", "parse_column"]


def normalise(value: Any, kind: str) -> Any:
    """The value as it reads back from a file (so merged rows compare equal)."""
    if kind == "str":
        return "" if value is None else str(value)
    if value is None:
        return None
    if kind == "float":
        value = float(value)
        return value if math.isfinite(value) else None
    if kind == "int":
        return int(value)
    if kind == "json":
        return json.loads(json.dumps(_rounded(value), sort_keys=True, allow_nan=False, default=str))
    return bool(value)


def _rounded(obj: Any) -> Any:
    """JSON cells keep 7 significant digits: curves and per-epoch times need no more."""
    if isinstance(obj, float):
        return float(f"{obj:.7g}") if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [_rounded(v) for v in obj]
    return obj


def format_cell(value: Any, kind: str) -> str:
    """The CSV text of one cell of a ``kind`` column."""
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return repr(float(value)) if math.isfinite(value) else ""
    if kind == "json":
        return json.dumps(_rounded(value), sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
    return str(value)


_BOOLS = {"true": True, "false": False, "": None}


def parse_column(values: Sequence[str], kind: str) -> list[Any]:
    """The values of a ``kind`` column's CSV cells.

    Raises:
        ValueError, KeyError, RecursionError: When a cell does not hold a ``kind`` value.
    """
    if kind == "str":
        return list(values)
    if kind == "float":
        return [float(v) if v else None for v in values]
    if kind == "int":
        return [int(v) if v else None for v in values]
    if kind == "bool":
        return [_BOOLS[v] for v in values]
    present = [v for v in values if v]
    # One C-level parse of the whole column; a cell such as '1,2' would parse as two values,
    # which the length check catches (the caller then locates the bad cell).
    parsed = json.loads("[" + ",".join(present) + "]") if present else []
    if len(parsed) != len(present):
        raise ValueError("a JSON cell holds more than one value")
    it = iter(parsed)
    return [next(it) if v else None for v in values]
