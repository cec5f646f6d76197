"""Strict JSON for the package: NaN and infinities become ``null`` (``None``)."""

from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["json_safe"]


def json_safe(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by ``None``, mapping keys as strings and
    tuples as lists: what ``json.dumps(..., allow_nan=False)`` and Optuna's storages accept."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
