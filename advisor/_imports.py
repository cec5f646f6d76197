"""Deferred optional imports.

Heavy libraries are imported only where a feature needs them; the error names the extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from advisor.errors import MissingDependencyError

_EXTRA_FOR = {
    "torch": "torch",
    "tensorflow": "tensorflow",
    "onnxruntime": "onnx",
    "onnx": "onnx",
    "psycopg2": "postgres",
}


def try_import(module: str, *, feature: str) -> ModuleType:
    """Import ``module`` or raise an error that says how to install it.

    Args:
        module: Dotted module name.
        feature: What the caller wanted to do, for the message.

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: When the module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = _EXTRA_FOR.get(top)
        hint = f"pip install 'advisor[{extra}]'" if extra else f"pip install {top}"
        raise MissingDependencyError(
            f"{feature} needs the {top!r} package, which is not installed ({exc}); install it with: {hint}"
        ) from exc
