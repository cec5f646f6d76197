"""The trial harness: run one training trial in a child process and measure it.

``run_trial`` spawns ``python -m advisor.harness.child TRIAL_DIR`` with an explicit environment
and CPU affinity, samples its process tree, enforces wall-time and memory limits, and turns every
outcome into a :class:`~advisor.records.TrialResult`.
"""

from __future__ import annotations

from advisor.harness.env import build_child_env, resolve_cores
from advisor.harness.outcome import ACCURACY_THRESHOLDS, time_to_accuracy
from advisor.harness.parent import Limits, run_trial

__all__ = ["ACCURACY_THRESHOLDS", "Limits", "build_child_env", "resolve_cores", "run_trial", "time_to_accuracy"]
