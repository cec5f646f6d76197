"""One worker's trial loop: the objective it optimises, and how it handles interrupts.

The study's records live in :mod:`advisor._tuning._spec`, and riding out a storage outage in
:mod:`advisor._tuning._outage`.
"""

from __future__ import annotations

import datetime as _dt

import contextlib
import functools
import logging
import math
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Sequence

from advisor._tuning._early_stopping import optimistic_point, prune_decision
from advisor._tuning._outage import STORAGE_OUTAGE_S, first_line, is_outage, outage_error, retry_storage
from advisor._tuning._read import (
    EPOCH_ATTR, ERROR_ATTR, PROCESS_ATTR, PRUNE_ATTR, RESULT_ATTR, STATUS_ATTR, count_trials, front_of, json_safe,
    process_identity,
)
from advisor._tuning._samplers import make_sampler
from advisor._tuning._spec import StudyProgress, StudySpec, progress_of, read_spec
from advisor.datasets import refused_knobs
from advisor.hardware import cpu_bf16_support
from advisor.pareto import OBJECTIVES
from advisor.records import EpochRecord
from advisor.space import SearchSpace

__all__ = ["make_objective", "sigterm_as_interrupt", "suggest", "worker_loop"]

logger = logging.getLogger("advisor.tuning")
POLL_S = 1.0


class _TrialFailed(Exception):
    """Raised by the objective so Optuna records FAIL; the status is in the user attributes."""


class _Interrupts:
    """^C / SIGTERM while a worker loop runs: raised at once inside a trial's run (which kills the
    trial's process tree and records the trial as interrupted), deferred everywhere else, so that
    an interrupt never cuts Optuna's own bookkeeping (creating, sampling or finishing a trial) in
    half and leaves a trial RUNNING. The loop checks ``pending`` at its safe points."""

    interruptible = False
    pending = False


_INTERRUPTS = _Interrupts()


class _SignalInterrupt(KeyboardInterrupt):
    """The interrupt the handler raises, carrying its signal so that it can be delivered again."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def _redelivered(active: Callable[[], bool]) -> Iterator[None]:
    """While the block runs, a :class:`_SignalInterrupt` raised where Python cannot propagate it
    (the signal landed while a finaliser or a weakref callback ran: garbage collection, logging's
    lock bookkeeping) is neither printed ("Exception ignored in ...", with a traceback) nor lost: its
    signal is sent again from a helper thread, and the main thread's handler raises it in ordinary
    code, as long as ``active()`` still says an interrupt should be raised."""
    def send(signum: int) -> None:
        if active():
            os.kill(os.getpid(), signum)

    def unraisable(info: Any) -> None:
        if isinstance(info.exc_value, _SignalInterrupt):
            threading.Timer(0.01, send, (info.exc_value.signum,)).start()
            return
        previous(info)

    previous, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous


@contextlib.contextmanager
def _deferred_interrupts() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        # pending even when raised: if anything inside the trial's run swallowed the exception,
        # the loop still stops at its next safe point instead of running on until it is killed
        _INTERRUPTS.pending = True
        if _INTERRUPTS.interruptible:
            raise _SignalInterrupt(signum)

    _INTERRUPTS.pending = False
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with _redelivered(lambda: _INTERRUPTS.interruptible):
            yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        _INTERRUPTS.interruptible = False


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """Inside a trial's run: hold an interrupt back while the block writes to the storage (an
    exception in the middle of a database write can leave the session unusable, and then the
    interrupted trial could not be recorded as FAIL), and raise it right after."""
    was = _INTERRUPTS.interruptible
    _INTERRUPTS.interruptible = False
    try:
        yield
    finally:
        _INTERRUPTS.interruptible = was
    if was and _INTERRUPTS.pending:
        raise KeyboardInterrupt("interrupted while the trial's progress was recorded")


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """The span in which an interrupt is raised at once (a pending one is raised on entry)."""
    _INTERRUPTS.interruptible = True
    try:
        if _INTERRUPTS.pending:
            raise KeyboardInterrupt("interrupted before the trial started")
        yield
    finally:
        _INTERRUPTS.interruptible = False


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt for the duration (main thread only), so a terminated
    worker records its running trial as failed and keeps everything already finished."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _SignalInterrupt(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    active = [True]
    try:
        with _redelivered(lambda: active[0]):
            yield
    finally:
        active[0] = False
        signal.signal(signal.SIGTERM, previous)


def suggest(trial: Any, space: SearchSpace, *, exclude: Collection[str] = ()) -> dict[str, Any]:
    """Suggest every active parameter of ``space`` through the trial (define-by-run); the knobs in
    ``exclude`` are not suggested and keep their defaults."""
    chosen: dict[str, Any] = {}
    for p in space.params:
        if not p.is_active(chosen) or p.name.rsplit(".", 1)[-1] in exclude:
            continue
        if p.type == "categorical":
            chosen[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        elif p.type == "int":
            chosen[p.name] = trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log,  # type: ignore[arg-type]
                                               step=int(p.step or 1))
        else:
            chosen[p.name] = trial.suggest_float(p.name, float(p.low), float(p.high), log=p.log,  # type: ignore[arg-type]
                                                 step=p.step)
    return chosen


def _objective_values(result: Any, objectives: Sequence[str]) -> list[float] | None:
    values = [getattr(result, OBJECTIVES[n].field) for n in objectives]
    if any(v is None or not math.isfinite(float(v)) for v in values):
        return None
    return [float(v) for v in values]


def make_objective(spec: StudySpec, space: SearchSpace, *, cores: Sequence[int] | None,
                   workdir: str | Path | None, worker: str) -> Callable[[Any], list[float]]:
    """The Optuna objective: one harness trial, its result stored, its outcome turned into a state."""
    import optuna
    from optuna.trial import TrialState

    from advisor.harness import Limits, run_trial

    constraints = spec.parsed_constraints()
    stopping = spec.stopping()
    excluded = refused_knobs(spec.workload.dataset)
    if space.target == "cpu" and cpu_bf16_support() is None:  # emulated bfloat16: never worth a trial
        excluded |= {"bfloat16"}
    limits = Limits(wall_time_s=spec.wall_time_s, memory_mb=spec.memory_mb)

    def objective(trial: Any) -> list[float]:
        trial.set_user_attr("advisor.worker", worker)
        trial.set_user_attr(PROCESS_ATTR, process_identity())
        params = suggest(trial, space, exclude=excluded)
        try:
            config = space.to_config(params, seed=spec.seed)
        except (ValueError, TypeError) as exc:
            trial.set_user_attr(STATUS_ATTR, "failed")
            trial.set_user_attr(ERROR_ATTR, f"invalid config: {exc}")
            raise _TrialFailed(f"invalid config: {exc}") from None

        started = time.monotonic()
        written = [0.0]

        def note_epoch(record: EpochRecord) -> None:
            # The running trial's epoch, accuracy and elapsed time, for the live display of any
            # process watching the study (tune's own, or one per worker machine): at most one
            # write a second (short epochs), and always the last epoch.
            now = time.monotonic()
            if now - written[0] < 1.0 and record.epoch < config.epochs:
                return
            written[0] = now
            with _shielded():
                try:
                    trial.set_user_attr(EPOCH_ATTR, {
                        "epoch": record.epoch, "epochs": config.epochs, "accuracy": record.test_accuracy,
                        "elapsed_s": round(time.monotonic() - started, 1)})
                except Exception as exc:  # noqa: BLE001 - a display hint: never fail a trial for it
                    logger.debug("progress of trial %d not written: %s", trial.number, exc)

        done: list[Any] = []
        front: list[Any] = []
        curve: list[EpochRecord] = []
        if stopping is not None:
            done = trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            front = [p.values for p in front_of(done, spec.objectives).points]

        def on_epoch(record: EpochRecord) -> bool:
            note_epoch(record)
            if stopping is None:
                return True
            curve.append(record)
            point = optimistic_point(
                epochs_done=record.epoch, epochs_total=config.epochs,
                train_time_s=record.train_time_s, epoch_times=[r.epoch_time_s for r in curve],
                accuracies=[r.test_accuracy for r in curve],
                peak_memory_mb=record.peak_memory_mb, settings=stopping)
            if record.epoch >= config.epochs:
                return True
            reason = prune_decision(point, objectives=spec.objectives, front=front,
                                    n_completed=len(done), constraints=constraints, settings=stopping)
            if reason is not None:
                with _shielded():
                    trial.set_user_attr(PRUNE_ATTR, f"after epoch {record.epoch}: {reason}")
                return False
            return True

        granted = list(cores)[: config.threads] if cores else None
        # The trial's process is being spawned; an ISO time reads well in optuna-dashboard.
        trial.set_user_attr("advisor.started", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
        try:
            with _interruptible():
                result = run_trial(spec.workload, config, limits=limits, cores=granted, workdir=workdir,
                                   study=trial.study.study_name, trial_number=trial.number, on_epoch=on_epoch)
        except KeyboardInterrupt:
            trial.set_user_attr(STATUS_ATTR, "interrupted")  # recorded, not counted against --trials
            trial.set_user_attr(ERROR_ATTR, "interrupted: the study was stopped during this trial")
            raise
        record = {RESULT_ATTR: json_safe(result.to_dict()), STATUS_ATTR: result.status,
                  **{f"advisor.{k}": v for k, v in outcome_attrs(result).items()}}
        if result.error:
            record[ERROR_ATTR] = str(result.error)[:2000]
        for key, value in record.items():  # the measurement is done: keep it through a restart
            retry_storage(functools.partial(trial.set_user_attr, key, value),
                          what=f"recording trial {trial.number}")
        if result.status == "pruned":
            raise optuna.TrialPruned(trial.user_attrs.get(PRUNE_ATTR, "pruned"))
        values = _objective_values(result, spec.objectives) if result.status == "ok" else None
        if values is None:
            if result.status == "ok":
                trial.set_user_attr(STATUS_ATTR, "failed")
                trial.set_user_attr(ERROR_ATTR, "the trial reported no value for an objective")
            raise _TrialFailed(trial.user_attrs.get(STATUS_ATTR, result.status))
        by_name = dict(zip(spec.objectives, values))
        for c in constraints:
            value = by_name.get(c.objective)
            if value is None:
                value = _objective_values(result, [c.objective])[0]  # type: ignore[index]
            trial.set_constraint(c.text, c.violation(value))
        return values

    return objective


def outcome_attrs(result: Any) -> dict[str, Any]:
    """The key outcomes of a trial as separate, short user attributes (the full record stays in
    ``advisor.result``): what a dashboard shows per trial without unfolding one long JSON."""
    return {"framework": result.config.framework, "train_time_s": result.train_time_s,
            "test_accuracy": result.test_accuracy, "peak_memory_mib": result.peak_memory_mb,
            "epochs": result.epochs_completed, "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(
                timespec="seconds")}


def worker_loop(
    study: Any, *, space: SearchSpace, cores: Sequence[int] | None, seed: int | None,
    deadline: float | None, workdir: str | Path | None, worker: str, parallel: bool,
    progress: Callable[[StudyProgress], None] | None = None,
) -> bool:
    """Run trials until the study has its ``n_trials`` finished trials or the deadline passes.

    The budget is read from the study each time, so a resumed study with a larger ``--trials``
    lets running workers go on. When the remaining budget is covered by trials running elsewhere,
    the worker waits instead of leaving: if one of those workers dies, its trial goes stale, is
    retried, and this worker runs the retry.

    Returns:
        ``True`` when interrupted (KeyboardInterrupt or SIGTERM).
    """
    with _deferred_interrupts():
        return _worker_loop(study, space=space, cores=cores, seed=seed, deadline=deadline, workdir=workdir,
                            worker=worker, parallel=parallel, progress=progress)


def _worker_loop(
    study: Any, *, space: SearchSpace, cores: Sequence[int] | None, seed: int | None,
    deadline: float | None, workdir: str | Path | None, worker: str, parallel: bool,
    progress: Callable[[StudyProgress], None] | None,
) -> bool:
    import optuna

    sampler_name = ""
    sampler = None
    last = ""
    outage_since: float | None = None
    while True:
        if _INTERRUPTS.pending:
            return True
        try:
            spec = read_spec(study)
            if sampler is None or sampler_name != spec.sampler:
                sampler_name = spec.sampler
                sampler = make_sampler(spec.sampler, n_objectives=len(spec.objectives),
                                       n_trials=spec.n_trials, seed=seed, parallel=parallel)
                study.sampler = sampler
            if deadline is not None and time.monotonic() >= deadline:
                return False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(study)
            counts = count_trials(study.get_trials(deepcopy=False))
            if counts.finished >= spec.n_trials:
                return False
            if counts.finished + counts.running >= spec.n_trials:
                time.sleep(POLL_S)
                continue
            if _INTERRUPTS.pending:
                return True
            objective = make_objective(spec, space, cores=cores, workdir=workdir, worker=worker)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    study.optimize(objective, n_trials=1, catch=(_TrialFailed,), gc_after_trial=False)
            except KeyboardInterrupt:
                return True
            done = study.get_trials(deepcopy=False)[-1:]
            if done:
                t = done[0]
                last = f"trial {t.number}: {t.user_attrs.get(STATUS_ATTR, t.state.name.lower())}"
            if progress is not None:
                progress(progress_of(study, spec, last=last))
            outage_since = None
        except Exception as exc:
            # A database restart or a dropped connection: wait for it to come back (the
            # engine's pool_pre_ping reconnects), and give up with one line if it does not.
            if not is_outage(exc):
                raise
            now = time.monotonic()
            outage_since = now if outage_since is None else outage_since
            if now - outage_since >= STORAGE_OUTAGE_S:
                raise outage_error(exc, now - outage_since) from None
            logger.warning("study storage unreachable; retrying (%s)", first_line(exc))
            time.sleep(POLL_S)
