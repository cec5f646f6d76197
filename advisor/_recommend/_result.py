"""The records a recommendation returns: predictions with their bands, evidence, choices.

Every figure in a :class:`Choice` is a prediction, never a measurement; :meth:`Recommendation.to_dict`
is the ``--json`` form.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from typing import Any

from advisor._recommend._constraints import Constraints
from advisor._recommend._workload import Target, WorkloadInfo

__all__ = ["Choice", "Evidence", "Prediction", "Recommendation"]


@dataclass(frozen=True)
class Prediction:
    """A median and its 10-90% band: predicted by the surrogate, or measured (median and range of
    the repeats, at least the machine's repeat noise wide)."""

    lo: float
    mid: float
    hi: float
    basis: str = "predicted"


@dataclass(frozen=True)
class Evidence:
    """A measured trial near a recommended configuration."""

    trial_id: str
    framework: str
    dataset_name: str
    train_samples: int | None
    device_kind: str
    distance: float
    status: str
    train_time_s: float | None
    test_accuracy: float | None
    peak_memory_mb: float | None
    #: The GPU a GPU trial ran on (``None`` for CPU trials and older records).
    gpu_model: str | None = None


@dataclass(frozen=True)
class Choice:
    """One recommended configuration with its figures (each says whether it is measured or
    predicted), the probability that it meets the constraints, and its evidence."""

    rank: int
    framework: str
    source: str
    config: dict[str, Any]
    space_params: dict[str, Any] | None
    time_s: Prediction
    accuracy: Prediction
    memory_mb: Prediction
    evidence: tuple[Evidence, ...]
    model: str = ""
    #: ``measured`` when the figures are this configuration's own measurements on the workload.
    basis: str = "predicted"
    #: Measured runs behind the figures (0 when predicted).
    repeats: int = 0
    #: Probability of meeting every constraint (1.0 when there are none).
    p_constraints: float = 1.0
    #: A portfolio recipe's measured record against the obvious default on other datasets (each
    #: trained under one time budget): the datasets, wins, ties, losses, both accuracies.
    transfer: dict[str, Any] | None = None
    #: How likely it is to beat or tie the default on this dataset, from that record (rule of succession).
    p_not_worse: float | None = None
    #: The whole schedule's predicted time, where ``time_s`` is the predicted time to an accuracy
    #: target (a run stopping there); None otherwise.
    schedule_time_s: Prediction | None = None
    #: The training samples of the runs behind a measured figure, where they are not the
    #: workload's (a smaller copy measured in place of the full size); None otherwise.
    measured_train_samples: int | None = None
    #: The epochs of those runs, where they are not the choice's: the choice is the same training
    #: in samples seen at the workload's size (fewer epochs of more samples); None otherwise.
    measured_epochs: int | None = None


@dataclass(frozen=True)
class Recommendation:
    """The answer of :func:`recommend`."""

    workload: WorkloadInfo
    target: Target
    constraints: Constraints
    preference: str
    choices: tuple[Choice, ...]
    n_candidates: int
    n_feasible: int
    n_front: int
    extrapolation: bool
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    table: str
    model_dir: str
    table_mismatch: bool = False
    #: No trial the surrogate was fitted on has this workload (dataset and training size): its bands
    #: use the offset calibrated on held-out workloads. ``None`` when the model does not record them.
    new_workload: bool | None = None
    #: The obvious default (PyTorch, Adam 1e-3, batch 128, constant rate, the workload's model) at
    #: its best run length for the same question: what the user would get without advice.
    baseline: Choice | None = None
    #: How the choices were ranked, in words.
    ranking: str = ""
    #: Probability threshold the choices meet (the constraints' confidence), when there are constraints.
    confidence: float | None = None
    #: The user's own knowledge base read for measured evidence (None: not read, or none exists yet), and the ids of its
    #: trials that are candidates in this answer (as measured).
    own_table: str | None = None
    own_trials: tuple[str, ...] = ()

    def command(self, choice: Choice, *, data_dir: str | None = None) -> str:
        """The ``advisor measure`` command that runs ``choice`` on this workload, as one line."""
        from advisor.knobs import measure_argv
        from advisor.records import Config

        w = self.workload
        return shlex.join(measure_argv(Config.from_dict(choice.config), dataset=w.dataset, model=choice.model or w.model,
                                       data_dir=data_dir,
                                       train_samples=w.train_samples if w.train_samples_given else None))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["target"]["gemm_gflops"] = dict(self.target.gemm_gflops)
        for item, choice in zip(data["choices"], self.choices):
            item["command"] = self.command(choice)
        if self.baseline is not None:
            data["baseline"]["command"] = self.command(self.baseline)
        return data
