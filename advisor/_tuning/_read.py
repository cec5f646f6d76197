"""Reading studies back: trial counts, Pareto points, study listings. Nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from advisor._json import json_safe
from advisor.pareto import OBJECTIVES, ParetoFront, TrialPoint, compute_front
from advisor._pareto._front import is_chance_level

__all__ = ["SPEC_ATTR", "RESULT_ATTR", "STATUS_ATTR", "ERROR_ATTR", "TrialCounts", "StudyInfo",
           "count_trials", "study_points", "json_safe", "knob_params"]

SPEC_ATTR = "advisor.spec"
RESULT_ATTR = "advisor.result"
STATUS_ATTR = "advisor.status"
ERROR_ATTR = "advisor.error"
PRUNE_ATTR = "advisor.pruned_because"
#: A running trial's last epoch: ``{"epoch", "epochs", "accuracy", "elapsed_s"}`` (live display).
EPOCH_ATTR = "advisor.progress"
#: The process that runs a trial, ``host:pid`` (:func:`process_identity`): a worker's parent can
#: find the trials of a worker it had to kill.
PROCESS_ATTR = "advisor.process"


def knob_params(config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A config's knobs as Optuna parameters and distributions, for a trial added outside
    ``suggest`` (``study.add_trial``) that should still show and slice by its knobs in Optuna's
    tools. Bounds come from the knob declarations (widened to hold the value); every knob with a
    value is included except the seed and the device."""
    import optuna  # the distributions only

    from advisor.knobs import KNOBS

    params: dict[str, Any] = {}
    dists: dict[str, Any] = {}
    for knob in KNOBS:
        value = getattr(config, knob.name, None)
        if value is None or knob.name in ("seed", "device") or knob.type == "str":
            continue
        if knob.type in ("int", "float"):
            low = value if knob.low is None else min(float(knob.low), float(value))
            high = value if knob.high is None else max(float(knob.high), float(value))
            dists[knob.name] = (optuna.distributions.IntDistribution(int(low), int(high)) if knob.type == "int"
                                else optuna.distributions.FloatDistribution(float(low), float(high)))
        else:  # bool and choice
            choices = list(knob.choices) if knob.type == "choice" else [False, True]
            dists[knob.name] = optuna.distributions.CategoricalDistribution(
                choices if value in choices else [*choices, value])
        params[knob.name] = value
    return params, dists


def process_identity(pid: int | None = None) -> str:
    """``host:pid`` of this process (or of ``pid`` on this host)."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}"


@dataclass(frozen=True)
class TrialCounts:
    """Trials of a study by state, counted the way the trial budget counts them.

    ``finished`` is complete + pruned + failed, except failed trials that were retried (a worker
    died mid-trial; its retry stands in for it) and trials interrupted by a stop of the study
    (status ``interrupted``): ``retried`` and ``interrupted`` count those, apart.
    """

    finished: int = 0
    complete: int = 0
    pruned: int = 0
    failed: int = 0
    running: int = 0
    waiting: int = 0
    retried: int = 0
    #: Failed because the study was stopped while they ran: kept for the record, not counted.
    interrupted: int = 0


def count_trials(trials: Sequence[Any]) -> TrialCounts:
    """Count FrozenTrials by state (see :class:`TrialCounts`)."""
    from optuna.trial import TrialState

    superseded = {n for t in trials for n in t.system_attrs.get("retry_history", [])}
    by: dict[str, int] = {"complete": 0, "pruned": 0, "failed": 0, "running": 0, "waiting": 0, "retried": 0,
                          "interrupted": 0}
    for t in trials:
        if t.state == TrialState.FAIL and t.number in superseded:
            by["retried"] += 1
        elif t.state == TrialState.FAIL and t.user_attrs.get("advisor.status") == "interrupted":
            by["interrupted"] += 1
        elif t.state == TrialState.COMPLETE:
            by["complete"] += 1
        elif t.state == TrialState.PRUNED:
            by["pruned"] += 1
        elif t.state == TrialState.FAIL:
            by["failed"] += 1
        elif t.state == TrialState.RUNNING:
            by["running"] += 1
        elif t.state == TrialState.WAITING:
            by["waiting"] += 1
    return TrialCounts(finished=by["complete"] + by["pruned"] + by["failed"], **by)


def study_points(trials: Sequence[Any], objectives: Sequence[str]) -> list[TrialPoint]:
    """The complete trials as Pareto candidates, with provenance from ``advisor.result``."""
    from optuna.trial import TrialState

    points = []
    for t in trials:
        if t.state != TrialState.COMPLETE or t.values is None or len(t.values) != len(objectives):
            continue
        result = t.user_attrs.get(RESULT_ATTR) or {}
        config = result.get("config") or {}
        points.append(TrialPoint(
            trial_number=t.number,
            values={n: float(v) for n, v in zip(objectives, t.values)},
            params=dict(t.params),
            framework=str(config.get("framework", "")),
            status=str(result.get("status", "ok")),
            hardware_id=str(result.get("hardware_id", "")),
            dataset_fingerprint=str(result.get("dataset_fingerprint", "")),
            feasible=all(v <= 0.0 for v in t.constraints.values()),
            chance_level=is_chance_level(result.get("test_accuracy"), result.get("num_classes")),
        ))
    return points


def front_of(trials: Sequence[Any], objectives: Sequence[str], *, study: str = "",
             reference: Mapping[str, float] | None = None) -> ParetoFront:
    """The Pareto front of a study's trials."""
    return compute_front(study_points(trials, objectives), objectives, reference=reference, study=study)


@dataclass(frozen=True)
class StudyInfo:
    """One study of a storage, as ``advisor studies list`` shows it."""

    name: str
    objectives: tuple[str, ...]
    n_trials: int | None
    counts: TrialCounts
    dataset: str = ""
    model: str = ""
    space: str = ""
    created: str = ""
    advisor: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "objectives": list(self.objectives), "n_trials": self.n_trials,
            "counts": self.counts.__dict__.copy(), "dataset": self.dataset, "model": self.model,
            "space": self.space, "created": self.created, "advisor": self.advisor,
        }


def objectives_of(user_attrs: Mapping[str, Any], n_directions: int) -> tuple[str, ...]:
    """The objective names of a study (``advisor.spec``), or generic names for foreign studies."""
    spec = user_attrs.get(SPEC_ATTR) or {}
    names = tuple(spec.get("objectives") or ())
    if len(names) == n_directions and all(n in OBJECTIVES for n in names):
        return names
    return tuple(f"objective_{i}" for i in range(n_directions))
