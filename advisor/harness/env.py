"""The environment and CPU set of one trial child, built explicitly per trial.

Nothing here touches ``os.environ`` of the parent: the parent's environment is copied, the
trial's keys are set on the copy, and the copy is handed to the child.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from advisor.errors import invalid_parameter
from advisor.knobs import THREAD_VARIABLES, knob_environment
from advisor.records import Config

__all__ = ["THREAD_VARIABLES", "allowed_cpus", "build_child_env", "resolve_cores"]

EVENT_FD_VARIABLE = "ADVISOR_EVENT_FD"


def allowed_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on, sorted."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def resolve_cores(cores: Sequence[int] | None, threads: int) -> tuple[int, ...]:
    """The CPU set a trial is pinned to.

    Args:
        cores: The CPUs asked for, or ``None`` for the first ``threads`` CPUs this process may use
            (wrapping around when ``threads`` exceeds them, so the set is then all of them).
        threads: The trial's thread count.

    Returns:
        The sorted, de-duplicated CPU indices.

    Raises:
        InvalidParameterError: When ``cores`` is empty or names a CPU this process may not use.
    """
    allowed = allowed_cpus()
    if cores is None:
        return tuple(sorted({allowed[i % len(allowed)] for i in range(threads)}))
    chosen = tuple(sorted(set(cores)))
    if not chosen or any(isinstance(c, bool) or not isinstance(c, int) for c in chosen):
        raise invalid_parameter("cores", "run_trial", "a non-empty sequence of CPU indices", cores)
    outside = [c for c in chosen if c not in allowed]
    if outside:
        raise invalid_parameter(
            "cores", "run_trial", f"CPUs this process may use ({', '.join(map(str, allowed))})", list(cores)
        )
    return chosen


def build_child_env(
    config: Config, *, event_fd: int, base: Mapping[str, str] | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """Build the child's full environment and the part of it that the trial's config decided.

    Args:
        config: The trial's config.
        event_fd: The file descriptor number the child writes its events to.
        base: The environment to start from; defaults to a copy of this process's environment.

    Returns:
        ``(env, applied)``: the environment to pass to the child, and the configuration keys set
        on it (thread variables, TensorFlow switches, ``CUDA_VISIBLE_DEVICES``, ``PYTHONHASHSEED``),
        which the trial records as ``env_applied``. Plumbing (the event fd, ``PYTHONPATH``,
        unbuffered output, the fault handler) is set but not recorded.
    """
    env = dict(os.environ if base is None else base)
    applied = knob_environment(config)  # threads, inter-op threads, TensorFlow's oneDNN switch
    applied["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if not config.is_cuda:
        # A CPU trial must not initialise (or hold memory on) a GPU, whatever the framework.
        applied["CUDA_VISIBLE_DEVICES"] = ""
    applied["PYTHONHASHSEED"] = str(config.seed)
    env.update(applied)
    env[EVENT_FD_VARIABLE] = str(event_fd)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    # The child runs the same advisor as the parent, installed or not.
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return env, applied
