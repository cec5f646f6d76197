"""LightGBM import shim: the one place that knows how LightGBM is loaded.

``lightgbm.compat`` imports scikit-learn (and through it SciPy) at import time, for its
scikit-learn wrappers only; that costs about a second and ``advisor recommend`` must answer in
about one. The surrogate uses only ``lightgbm.train`` and ``lightgbm.Booster``, so on the
recommendation path LightGBM is imported with scikit-learn hidden, which makes LightGBM skip its
wrappers. Nothing else changes: scikit-learn stays importable afterwards.

LightGBM's default logger ``print``s native messages (``[LightGBM] [Fatal] ...``) to stdout, which
would corrupt ``--json`` output; they are routed to the ``lightgbm`` :mod:`logging` logger instead.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType

from advisor._imports import try_import

__all__ = ["import_lightgbm"]


def import_lightgbm(*, lean: bool = False) -> ModuleType:
    """Import LightGBM.

    Args:
        lean: Skip LightGBM's scikit-learn wrappers when neither package is loaded yet (used for
            prediction; the wrappers then stay unavailable in this process).

    Returns:
        The ``lightgbm`` module.
    """
    if not lean or "lightgbm" in sys.modules or "sklearn" in sys.modules:
        return _quiet(try_import("lightgbm", feature="The surrogate model"))
    sys.modules["sklearn"] = None  # type: ignore[assignment]  # makes `import sklearn` fail fast
    try:
        return _quiet(try_import("lightgbm", feature="The surrogate model"))
    finally:
        if sys.modules.get("sklearn", 0) is None:
            del sys.modules["sklearn"]


def _quiet(lgb: ModuleType) -> ModuleType:
    default = getattr(lgb.basic, "_DummyLogger", None)
    if default is not None and isinstance(getattr(lgb.basic, "_LOGGER", None), default):
        lgb.register_logger(logging.getLogger("lightgbm"))
    return lgb
