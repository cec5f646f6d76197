"""Sampler choice: ``tpe``, ``nsga2``, ``gp``, ``random`` and our ``auto``."""

from __future__ import annotations

import warnings
from typing import Any

from advisor.errors import invalid_parameter

__all__ = ["SAMPLERS", "AUTO_NSGA2_MIN_TRIALS", "resolve_sampler", "make_sampler"]

SAMPLERS = ("auto", "tpe", "nsga2", "gp", "random")
# NSGA-II needs several generations to beat TPE; below this budget TPE is the better default.
AUTO_NSGA2_MIN_TRIALS = 200


def resolve_sampler(name: str, *, n_objectives: int, n_trials: int) -> str:
    """The concrete sampler behind ``name`` (``auto``: NSGA-II for >= 3 objectives and >= 200
    trials, TPE otherwise; Optuna's own AutoSampler lives in optunahub, which is not a dependency)."""
    if name not in SAMPLERS:
        raise invalid_parameter("sampler", "the study", "one of " + ", ".join(SAMPLERS), name)
    if name != "auto":
        return name
    return "nsga2" if n_objectives >= 3 and n_trials >= AUTO_NSGA2_MIN_TRIALS else "tpe"


def make_sampler(name: str, *, n_objectives: int, n_trials: int, seed: int | None,
                 parallel: bool) -> Any:
    """Build the Optuna sampler.

    Args:
        name: A name from :data:`SAMPLERS`.
        n_objectives: Number of objectives of the study.
        n_trials: The study's trial budget (sizes NSGA-II's population).
        seed: Sampler seed (each worker passes its own).
        parallel: Whether several workers share the study (TPE then uses the constant liar).

    Raises:
        MissingDependencyError: ``gp`` without torch or scipy.
    """
    import optuna

    from advisor._imports import try_import

    concrete = resolve_sampler(name, n_objectives=n_objectives, n_trials=n_trials)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if concrete == "tpe":
            # group=True splits the conditional (when:) parameters into sub-spaces TPE models apart.
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                              constant_liar=parallel)
        if concrete == "nsga2":
            population = max(4, min(50, n_trials // 5))
            return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
        if concrete == "gp":
            try_import("torch", feature="the gp sampler")
            try_import("scipy", feature="the gp sampler")
            return optuna.samplers.GPSampler(seed=seed)
        return optuna.samplers.RandomSampler(seed=seed)
