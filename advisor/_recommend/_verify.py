"""Verification: run recommended configurations for real through the harness, and keep the results.

Each choice is run, or skipped with the reason (its framework is not installed, there is no GPU,
the dataset's files are not here); what ran is merged into the user's knowledge base.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from advisor import knowledge
from advisor._recommend._result import Choice, Prediction, Recommendation
from advisor.records import Config, TrialResult

__all__ = ["Verification", "verify", "EVAL_SHARE", "evaluation_s", "with_evaluation", "wall_limit_s"]

#: What evaluating one test image costs, as a share of training on one (a forward pass against a
#: forward and a backward one); the harness evaluates the whole test set after every epoch, so on a
#: small training set with a large test set most of a run's wall time is evaluation. Plans use this
#: share; wall limits allow twice it.
EVAL_SHARE = 0.5

_MODULE_OF = {"torch": "torch", "tensorflow": "tensorflow", "onnxruntime": "onnxruntime", "sklearn": "sklearn"}
_DOWNLOADED = ("mnist", "fashion-mnist", "cifar10")


@dataclass(frozen=True)
class Verification:
    """A recommended configuration run for real, or why it was not."""

    rank: int
    framework: str
    predicted: dict[str, Prediction]
    status: str  # a TrialResult status, or "skipped"
    measured: dict[str, float | None]
    within_band: dict[str, bool | None]
    trial_id: str | None = None
    note: str | None = None


def _why_not(choice: Choice, rec: Recommendation, data_dir: str | None) -> str | None:
    fw = choice.framework
    if importlib.util.find_spec(_MODULE_OF[fw]) is None:
        return f"rank {choice.rank}: {fw} is not installed here (pip install 'advisor[all]'), so it was not run"
    if rec.target.device_kind == "gpu":
        from advisor import hardware

        if not hardware.identity().gpus:
            return f"rank {choice.rank}: this machine has no GPU, so a GPU configuration cannot be measured here"
    if rec.workload.dataset in _DOWNLOADED:
        from advisor import datasets
        from advisor.errors import DatasetError

        try:
            datasets.find_files(rec.workload.dataset, data_dir=data_dir, download=False)
        except DatasetError as exc:
            return f"rank {choice.rank}: the {rec.workload.dataset} files are not here ({exc}); pass --data-dir"
    return None


def evaluation_s(train_s: float, rec: Recommendation, *, share: float = EVAL_SHARE) -> float:
    """The evaluation of the test set after every epoch of a run that trains for ``train_s``."""
    w = rec.workload
    return train_s * share * w.test_samples / max(1, w.train_samples)


def with_evaluation(train_s: float, rec: Recommendation, *, share: float = EVAL_SHARE) -> float:
    """A run's training time plus its evaluation of the test set after every epoch."""
    return train_s + evaluation_s(train_s, rec, share=share)


def wall_limit_s(train_s_hi: float, rec: Recommendation) -> float:
    """A run's wall-time limit: three times its training time (the band's upper edge) with twice the
    usual evaluation cost, plus two minutes for start-up and loading."""
    return 3.0 * with_evaluation(train_s_hi, rec, share=2 * EVAL_SHARE) + 120.0


def verify(rec: Recommendation, n: int, *, data_dir: str | None = None, workdir: str | Path | None = None,
           knowledge_path: str | Path | None = None, time_limit_s: float | None = None,
           with_baseline: bool = True) -> tuple[list[Verification], knowledge.MergeStats | None]:
    """Run the top ``n`` choices through the harness and merge them into the user's knowledge base.

    Args:
        rec: A recommendation.
        n: How many of its choices to run.
        data_dir: Folder with the dataset's canonical files.
        workdir: Where trial folders go (default: a temporary folder).
        knowledge_path: The knowledge base to merge into (default :func:`knowledge.user_knowledge_path`).
        time_limit_s: Wall-time limit per trial (default :func:`wall_limit_s` of the predicted 90% time).
        with_baseline: Also run the obvious default (``rec.baseline``, rank 0) unless it is a choice.

    Returns:
        One :class:`Verification` per choice tried, and the merge statistics (``None`` if nothing ran).
    """
    from advisor import harness
    from advisor.records import Workload

    out: list[Verification] = []
    results: list[TrialResult] = []
    chosen = list(rec.choices[:n])
    if rec.baseline is not None and with_baseline and all(
            c.config != rec.baseline.config or c.model != rec.baseline.model for c in chosen):
        chosen.append(rec.baseline)  # the obvious default is always one of the measured comparisons
    for choice in chosen:
        predicted = {"train_time_s": choice.time_s, "test_accuracy": choice.accuracy, "peak_memory_mb": choice.memory_mb}
        why = _why_not(choice, rec, data_dir)
        if why:
            out.append(Verification(choice.rank, choice.framework, predicted, "skipped", {}, {}, note=why))
            continue
        workload = Workload(dataset=rec.workload.dataset, model=choice.model or rec.workload.model, data_dir=data_dir,
                            train_samples=rec.workload.train_samples if rec.workload.train_samples_given else None)
        limit = time_limit_s or wall_limit_s((choice.schedule_time_s or choice.time_s).hi, rec)
        result = harness.run_trial(workload, Config.from_dict(choice.config),
                                   limits=harness.Limits(wall_time_s=limit), workdir=workdir)
        results.append(result)
        measured = {"train_time_s": result.train_time_s, "test_accuracy": result.test_accuracy,
                    "peak_memory_mb": result.peak_memory_mb}
        within = {k: (None if v is None else bool(predicted[k].lo <= v <= predicted[k].hi)) for k, v in measured.items()}
        note = result.error.splitlines()[0][:200] if result.error else None
        stop_at = float(choice.config.get("stop_at_accuracy") or 0.0)
        if stop_at and result.status == "ok" and (result.test_accuracy or 0.0) >= stop_at \
                and result.epochs_completed < int(choice.config["epochs"]):
            # Stopped at its target: its accuracy there is not the whole schedule's; its time is
            # scored where the figure is a time to the target (measured, or read from the predicted curve).
            to_target = choice.basis == "measured" or choice.schedule_time_s is not None
            within.update(test_accuracy=None, **({} if to_target else {"train_time_s": None}))
            note = f"reached {stop_at:g} at epoch {result.epochs_completed} of {choice.config['epochs']}, stopped there"
        elif choice.schedule_time_s is not None and result.train_time_s is not None:  # ran the whole schedule
            predicted["train_time_s"] = choice.schedule_time_s
            within["train_time_s"] = bool(choice.schedule_time_s.lo <= result.train_time_s <= choice.schedule_time_s.hi)
        out.append(Verification(choice.rank, choice.framework, predicted, result.status, measured, within,
                                trial_id=result.trial_id, note=note))
    stats = None
    if results:
        from advisor import hardware

        stats = knowledge.append_to_user_knowledge(results, hardware=hardware.load_cached(), path=knowledge_path)
    return out, stats
