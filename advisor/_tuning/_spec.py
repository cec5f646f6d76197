"""The study's records: its stored specification, its progress and its summary.

The specification is stored as the study user attribute ``advisor.spec`` when the study is
created, so a worker needs only the study name and the storage URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from advisor import __version__
from advisor._tuning._early_stopping import EarlyStopping
from advisor._tuning._read import SPEC_ATTR, TrialCounts, count_trials, front_of, json_safe
from advisor.errors import InvalidParameterError, StorageError
from advisor.pareto import Constraint, ParetoFront, parse_constraint
from advisor.records import Workload
from advisor.space import SearchSpace, combined_space, space_from_document

__all__ = ["StudyProgress", "StudySpec", "StudySummary", "check_budget", "progress_of", "read_spec"]


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
class StudyProgress:
    """Where a study stands (passed to the progress callback)."""

    study: str
    n_trials: int
    counts: TrialCounts
    front_size: int
    hypervolume: float
    last: str = ""


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
    trials = study.get_trials(deepcopy=False)
    front = front_of(trials, spec.objectives, study=study.study_name)
    return StudyProgress(study=study.study_name, n_trials=spec.n_trials, counts=count_trials(trials),
                         front_size=len(front.points), hypervolume=front.hypervolume, last=last)


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
