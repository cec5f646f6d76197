"""The study's records: its stored specification, its progress and its summary.

The specification is stored as the study user attribute ``advisor.spec`` when the study is
created, so a worker needs only the study name and the storage URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from advisor import __version__
from advisor._tuning._early_stopping import EarlyStopping
from advisor._tuning._read import EPOCH_ATTR, SPEC_ATTR, TrialCounts, count_trials, front_of, json_safe
from advisor.errors import InvalidParameterError, StorageError
from advisor.pareto import OBJECTIVES, Constraint, ParetoFront, parse_constraint
from advisor.records import Workload
from advisor.space import SearchSpace, combined_space, space_from_document

__all__ = ["RunningTrial", "StudyProgress", "StudySpec", "StudySummary", "check_budget", "progress_of", "read_spec"]


@dataclass(frozen=True)
class StudySpec:
    """What a study is, stored as the study user attribute ``advisor.spec`` when it is created, so
    a worker needs only the study name and the storage URL."""

    workload: Workload
    space: Mapping[str, Any]  # {"name": ..., "document": ...}; see SearchSpace.document
    objectives: tuple[str, ...]
    n_trials: int
    constraints: tuple[str, ...] = ()
    sampler: str = "tpe"
    seed: int = 0
    wall_time_s: float | None = None
    memory_mb: float | None = None
    early_stopping: Mapping[str, Any] | None = None
    heartbeat_interval: int = 10
    grace_period: int = 60
    advisor_version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        return json_safe({
            "workload": self.workload.to_dict(), "space": dict(self.space),
            "objectives": list(self.objectives), "n_trials": self.n_trials,
            "constraints": list(self.constraints), "sampler": self.sampler, "seed": self.seed,
            "wall_time_s": self.wall_time_s, "memory_mb": self.memory_mb,
            "early_stopping": dict(self.early_stopping) if self.early_stopping else None,
            "heartbeat_interval": self.heartbeat_interval, "grace_period": self.grace_period,
            "advisor_version": self.advisor_version,
        })

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StudySpec":
        data = dict(data)
        data["workload"] = Workload.from_dict(data["workload"])
        data["objectives"] = tuple(data["objectives"])
        data["constraints"] = tuple(data.get("constraints", ()))
        return cls(**data)

    def build_space(self, *, cores: int | None) -> SearchSpace:
        """The search space, with ``${cores}`` resolved for the cores this worker has."""
        doc = self.space["document"]
        if "combined" in doc:
            return combined_space(doc["combined"]["frameworks"], doc["combined"]["target"], cores=cores)
        return space_from_document(doc, name=self.space["name"], cores=cores,
                                   source=str(self.space.get("source", "")))

    def parsed_constraints(self) -> list[Constraint]:
        return [parse_constraint(c) for c in self.constraints]

    def stopping(self) -> EarlyStopping | None:
        return EarlyStopping(**self.early_stopping) if self.early_stopping else None

    def same_study_as(self, other: "StudySpec") -> str | None:
        """The first defining difference (workload, space, objectives, constraints), or ``None``."""
        if self.workload != other.workload:
            return "workload"
        if json_safe(dict(self.space)) != json_safe(dict(other.space)):
            return "search space"
        if self.objectives != other.objectives:
            return "objectives"
        if sorted(self.constraints) != sorted(other.constraints):
            return "constraints"
        return None


@dataclass(frozen=True)
class RunningTrial:
    """A trial that is running now, as far as its last finished epoch."""

    number: int
    elapsed_s: float
    epoch: int | None = None
    epochs: int | None = None
    accuracy: float | None = None


@dataclass(frozen=True)
class StudyProgress:
    """Where a study stands (passed to the progress callback).

    Attributes:
        running: The running trials, with their last finished epoch (read from the storage, so
            the trials of every worker show).
        best: The best finished trial on the first objective, in words ("" before the first).
        eta_s: Seconds until the budget is finished, from the median duration of the finished
            trials and the number running at once; ``None`` before the first finishes.
    """

    study: str
    n_trials: int
    counts: TrialCounts
    front_size: int
    hypervolume: float
    last: str = ""
    running: tuple[RunningTrial, ...] = ()
    best: str = ""
    eta_s: float | None = None


@dataclass(frozen=True)
class StudySummary:
    """What :func:`advisor.tuning.run_study` returns."""

    study: str
    storage: str
    n_trials: int
    counts: TrialCounts
    front: ParetoFront
    sampler: str
    workers: int
    elapsed_s: float
    interrupted: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return json_safe({
            "study": self.study, "storage": self.storage, "n_trials": self.n_trials,
            "counts": self.counts.__dict__.copy(), "sampler": self.sampler, "workers": self.workers,
            "elapsed_s": self.elapsed_s, "interrupted": self.interrupted, "notes": list(self.notes),
            "pareto": self.front.to_dict(),
        })


def progress_of(study: Any, spec: StudySpec, *, last: str = "") -> StudyProgress:
    import datetime as dt
    import statistics

    trials = study.get_trials(deepcopy=False)
    front = front_of(trials, spec.objectives, study=study.study_name)
    counts = count_trials(trials)
    now = dt.datetime.now()
    running = []
    for t in trials:
        if t.state.name != "RUNNING" or t.datetime_start is None:
            continue
        live = t.user_attrs.get(EPOCH_ATTR) or {}
        running.append(RunningTrial(number=t.number, elapsed_s=max(0.0, (now - t.datetime_start).total_seconds()),
                                    epoch=live.get("epoch"), epochs=live.get("epochs"),
                                    accuracy=live.get("accuracy")))
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in trials
                 if t.state.name in ("COMPLETE", "PRUNED", "FAIL") and t.datetime_start and t.datetime_complete]
    eta = None
    left = max(0, spec.n_trials - counts.finished)
    if durations:
        at_once = max(1, len(running))
        eta = statistics.median(durations) * left / at_once
        # the running trials are part way through
        eta = max(0.0, eta - sum(r.elapsed_s for r in running) / at_once) if left else 0.0
    return StudyProgress(study=study.study_name, n_trials=spec.n_trials, counts=counts,
                         front_size=len(front.points), hypervolume=front.hypervolume, last=last,
                         running=tuple(running), best=_best(front, spec.objectives), eta_s=eta)


def _best(front: Any, objectives: Sequence[str]) -> str:
    """The front's best point on the first objective, with the others, in words; a point that
    learnt nothing (chance-level accuracy: fast, but no answer) is best only when all are."""
    if not front.points:
        return ""
    first = objectives[0]
    points = [p for p in front.points if not p.chance_level] or front.points
    pick = (max if OBJECTIVES[first].direction == "maximize" else min)(points, key=lambda p: p.values[first])
    parts = [f"{n} {pick.values[n]:.4g}" + (f" {OBJECTIVES[n].unit}" if OBJECTIVES[n].unit else "")
             for n in objectives]
    return f"trial {pick.trial_number}: " + ", ".join(parts)


def read_spec(study: Any) -> StudySpec:
    data = study.user_attrs.get(SPEC_ATTR)
    if not data:
        raise StorageError(f"Study {study.study_name!r} was not created by 'advisor tune' (it has no "
                           f"{SPEC_ATTR!r} attribute): tune it with a new --study name.")
    return StudySpec.from_dict(data)


def check_budget(n_trials: Any) -> int:
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise InvalidParameterError(f"The 'n_trials' parameter of run_study must be an integer >= 1. "
                                    f"Got {n_trials!r} instead.")
    return n_trials
