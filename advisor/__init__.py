"""advisor: measure, tune, remember and predict deep-learning training configurations.

Importing this package loads no deep-learning framework, LightGBM or Optuna.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
