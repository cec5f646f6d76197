"""Framework backends. Each runs inside the trial child; see :mod:`advisor.frameworks.base`.

Backends are looked up by name and imported only when a trial needs them.
"""

from __future__ import annotations

import importlib

from advisor.errors import UnknownNameError
from advisor.records import FRAMEWORKS, Config

__all__ = ["FRAMEWORKS", "get_trainer_class", "make_trainer"]

_MODULES = {
    "torch": ("advisor.frameworks.torch", "TorchTrainer"),
    "tensorflow": ("advisor.frameworks.tensorflow", "TensorFlowTrainer"),
    "onnxruntime": ("advisor.frameworks.onnxruntime", "OnnxRuntimeTrainer"),
    "sklearn": ("advisor.frameworks.sklearn", "SklearnTrainer"),
}


def get_trainer_class(name: str) -> type:
    """Import and return the trainer class of framework ``name``."""
    if name not in _MODULES:
        raise UnknownNameError(f"Unknown framework {name!r}: choose one of {', '.join(FRAMEWORKS)}.")
    module, cls = _MODULES[name]
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


def make_trainer(config: Config):  # type: ignore[no-untyped-def]
    """Build the trainer for ``config.framework``."""
    return get_trainer_class(config.framework)(config)
