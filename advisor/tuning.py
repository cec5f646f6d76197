"""Multi-objective tuning on Optuna: studies, samplers, constraints, early stopping, workers.

This is the only module that imports Optuna. A study minimises training time, maximises test
accuracy and minimises peak memory (any non-empty subset, in any order). Each trial runs through
:func:`advisor.harness.run_trial`; its :class:`~advisor.records.TrialResult` is stored as the user
attribute ``"advisor.result"``, and its status decides the Optuna state: ``ok`` -> COMPLETE,
``pruned`` -> PRUNED, anything else -> FAIL (``"advisor.status"`` says which). Failed trials never
stop a study.

The storage is the database of record: ``sqlite:///advisor.db`` by default, or a PostgreSQL URL
that any number of workers on any number of machines join with :func:`run_worker`. See
``docs/tuning.md`` for the budget rule, early stopping and the hypervolume reference point.
"""

from __future__ import annotations

import warnings

import logging
import os
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from advisor._tuning._early_stopping import EarlyStopping, optimistic_point, prune_decision
from advisor._tuning._read import (
    ERROR_ATTR, RESULT_ATTR, SPEC_ATTR, STATUS_ATTR, StudyInfo, TrialCounts, count_trials, front_of,
    objectives_of, study_points,
)
from advisor._tuning._samplers import SAMPLERS, make_sampler, resolve_sampler
from advisor._tuning._spec import StudyProgress, StudySpec, StudySummary, check_budget, progress_of, read_spec
from advisor._tuning._storage import (
    DEFAULT_GRACE_S, DEFAULT_HEARTBEAT_S, DEFAULT_STORAGE, mask_url, open_storage,
    require_existing, validate_storage_url, validate_study_name,
)
from advisor._tuning._study import sigterm_as_interrupt, worker_loop
from advisor._tuning._workers import run_local_workers, split_cores
from advisor.errors import InvalidParameterError, StorageError, invalid_parameter
from advisor.pareto import OBJECTIVES, ParetoFront, parse_constraint, parse_objectives
from advisor.records import Workload
from advisor.space import SearchSpace, available_cores, combined_space, load_space

logger = logging.getLogger("advisor.tuning")

__all__ = [
    "DEFAULT_STORAGE", "SAMPLERS", "EarlyStopping", "StudyInfo", "StudyProgress", "StudySpec",
    "StudySummary", "TrialCounts", "RESULT_ATTR", "STATUS_ATTR", "ERROR_ATTR", "SPEC_ATTR",
    "create_study", "run_study", "run_worker", "list_studies", "load_front", "load_trials", "resolve_sampler",
    "make_sampler", "optimistic_point", "prune_decision", "split_cores", "count_trials",
    "study_points", "validate_study_name", "validate_storage_url", "require_existing", "mask_url", "resolve_space", "open_storage",
]


def resolve_space(*, space: SearchSpace | str | os.PathLike[str] | None = None,
                  frameworks: Sequence[str] | None = None, target: str = "cpu",
                  cores: int | None = None) -> SearchSpace:
    """The study's space: ``space`` (object, built-in name or file), else the built-in space of
    one framework, else the combined space of several (``--framework any``)."""
    if isinstance(space, SearchSpace):
        return space
    if space is not None:
        return load_space(space, cores=cores)
    if not frameworks:
        raise InvalidParameterError("run_study needs a search space: pass 'space' or 'frameworks'.")
    if len(frameworks) == 1:
        return load_space(f"{frameworks[0]}-{target}", cores=cores)
    return combined_space(frameworks, target, cores=cores)


def _space_record(space: SearchSpace) -> dict[str, Any]:
    return {"name": space.name, "document": dict(space.document), "source": space.source}


def create_study(
    *,
    study_name: str,
    workload: Workload,
    storage: str = DEFAULT_STORAGE,
    space: SearchSpace | str | os.PathLike[str] | None = None,
    frameworks: Sequence[str] | None = None,
    target: str = "cpu",
    objectives: Sequence[str] | str = ("time", "accuracy", "memory"),
    n_trials: int = 20,
    sampler: str = "tpe",
    seed: int = 0,
    constraints: Sequence[str] = (),
    wall_time_s: float | None = None,
    memory_mb: float | None = None,
    limits: Any | None = None,
    early_stopping: bool | EarlyStopping = False,
    warm_start_params: Sequence[Mapping[str, Any]] | None = None,
    heartbeat_interval: int = DEFAULT_HEARTBEAT_S,
    grace_period: int = DEFAULT_GRACE_S,
    cores: int | None = None,
) -> tuple[Any, StudySpec, SearchSpace]:
    """Create a study (or load an existing one with the same settings) and store its spec.

    Workers then join it with :func:`run_worker` (or ``advisor worker``) knowing only its name and
    the storage URL. The arguments are those of :func:`run_study`; ``cores`` resolves the space's
    ``${cores}`` (default: this process's CPUs). ``limits`` (an :class:`advisor.harness.Limits`)
    overrides ``wall_time_s`` and ``memory_mb``.

    Returns:
        ``(optuna_study, spec, space)``.
    """
    import optuna

    validate_study_name(study_name)
    validate_storage_url(storage)
    names = parse_objectives(objectives)
    parsed = [parse_constraint(c) for c in constraints]
    check_budget(n_trials)
    resolve_sampler(sampler, n_objectives=len(names), n_trials=n_trials)
    the_space = resolve_space(space=space, frameworks=frameworks, target=target, cores=cores)
    if limits is not None:
        wall_time_s, memory_mb = limits.wall_time_s, limits.memory_mb
    stopping = early_stopping if isinstance(early_stopping, EarlyStopping) else (
        EarlyStopping() if early_stopping else None)
    spec = StudySpec(
        workload=workload, space=_space_record(the_space), objectives=names, n_trials=n_trials,
        constraints=tuple(c.text for c in parsed), sampler=sampler, seed=seed, wall_time_s=wall_time_s,
        memory_mb=memory_mb, early_stopping=stopping.to_dict() if stopping else None,
        heartbeat_interval=heartbeat_interval, grace_period=grace_period,
    )
    rdb = open_storage(storage, heartbeat_interval=heartbeat_interval, grace_period=grace_period)
    directions: list[Any] = [OBJECTIVES[n].direction for n in names]
    try:
        study = optuna.create_study(study_name=study_name, storage=rdb, directions=directions,
                                    load_if_exists=True)
    except ValueError as exc:  # an existing study with other directions
        raise StorageError(f"Study {study_name!r} exists in {mask_url(storage)} with other objectives: {exc}") from None
    existing = study.user_attrs.get(SPEC_ATTR)
    if existing:
        diff = StudySpec.from_dict(existing).same_study_as(spec)
        if diff is not None:
            raise InvalidParameterError(
                f"Study {study_name!r} already exists with a different {diff}: resume it with the same "
                f"settings or choose another --study name.")
    study.set_user_attr(SPEC_ATTR, spec.to_dict())
    # optuna-dashboard (and any Optuna tool) shows these names instead of "Objective 0/1/2".
    with warnings.catch_warnings():  # experimental in Optuna 3.2+, stable in use since
        warnings.simplefilter("ignore")
        study.set_metric_names([f"{n} ({OBJECTIVES[n].unit})" if OBJECTIVES[n].unit else n for n in names])
    for params in warm_start_params or ():
        if _fits(the_space, params):
            study.enqueue_trial(dict(params), skip_if_exists=True)
        else:
            logger.warning("warm-start point %s lies outside search space %s; skipped", dict(params), the_space.name)
    return study, spec, the_space


def _fits(space: SearchSpace, params: Mapping[str, Any]) -> bool:
    active = {p.name: p for p in space.active_params(params)}
    # A subset is fine: Optuna samples the parameters a warm-start point leaves out.
    return set(params) <= set(active) and all(active[k].contains(v) for k, v in params.items())


def run_study(
    *,
    study_name: str,
    workload: Workload,
    storage: str = DEFAULT_STORAGE,
    space: SearchSpace | str | os.PathLike[str] | None = None,
    frameworks: Sequence[str] | None = None,
    target: str = "cpu",
    objectives: Sequence[str] | str = ("time", "accuracy", "memory"),
    n_trials: int = 20,
    timeout: float | None = None,
    sampler: str = "tpe",
    seed: int = 0,
    constraints: Sequence[str] = (),
    wall_time_s: float | None = None,
    memory_mb: float | None = None,
    limits: Any | None = None,
    workers: int = 1,
    early_stopping: bool | EarlyStopping = False,
    warm_start_params: Sequence[Mapping[str, Any]] | None = None,
    workdir: str | Path | None = None,
    heartbeat_interval: int = DEFAULT_HEARTBEAT_S,
    grace_period: int = DEFAULT_GRACE_S,
    progress: Callable[[StudyProgress], None] | None = None,
) -> StudySummary:
    """Create (or resume) a study and run it until it has ``n_trials`` finished trials.

    Args:
        study_name: Printable name of at most 128 characters; an existing study with the same
            workload, space, objectives and constraints is resumed and its trials count.
        workload: What to train.
        storage: ``sqlite:///path`` or ``postgresql://...``.
        space: A :class:`SearchSpace`, a built-in name or a YAML path; overrides ``frameworks``.
        frameworks: One framework (its ``<framework>-<target>`` space) or several (combined space).
        target: ``cpu`` or ``gpu``.
        objectives: Names among ``time``, ``accuracy``, ``memory``.
        n_trials: Finished trials (complete, pruned or failed) the study should have.
        timeout: Seconds after which no new trial starts.
        sampler: ``tpe``, ``nsga2``, ``gp``, ``random`` or ``auto``.
        seed: Sampler seed (worker ``i`` uses ``seed + i``) and the trials' training seed.
        constraints: Strings such as ``"accuracy>=0.98"``, ``"memory<=2GB"``, ``"time<=60"``.
        wall_time_s: Per-trial wall-time limit (status ``timeout``).
        memory_mb: Per-trial memory cap in MiB (status ``oom``).
        limits: An :class:`advisor.harness.Limits`; overrides ``wall_time_s`` and ``memory_mb``.
        workers: Local worker processes, each on a disjoint slice of the CPU affinity set.
        early_stopping: ``True`` (default settings) or an :class:`EarlyStopping`.
        warm_start_params: Parameter sets enqueued before sampling starts (points outside the
            space are skipped with a logged warning).
        workdir: Folder that keeps each trial's folder; ``None`` keeps none.
        heartbeat_interval: Seconds between heartbeats of running trials.
        grace_period: Seconds without heartbeat after which a trial is failed and retried.
        progress: Called after every trial (and every second with several workers).

    Returns:
        A :class:`StudySummary`; ``interrupted`` is set when ^C or SIGTERM stopped it.

    Raises:
        AdvisorError: Invalid arguments, search space, constraint or storage (one-line messages).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise invalid_parameter("workers", "run_study", "an integer >= 1", workers)
    if timeout is not None and not timeout > 0:
        raise invalid_parameter("timeout", "run_study", "a number of seconds > 0", timeout)
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    chunks = split_cores(affinity, workers) if workers > 1 else [affinity]
    started = time.monotonic()
    study, spec, the_space = create_study(
        study_name=study_name, workload=workload, storage=storage, space=space, frameworks=frameworks,
        target=target, objectives=objectives, n_trials=n_trials, sampler=sampler, seed=seed,
        constraints=constraints, wall_time_s=wall_time_s, memory_mb=memory_mb, limits=limits,
        early_stopping=early_stopping, warm_start_params=warm_start_params,
        heartbeat_interval=heartbeat_interval, grace_period=grace_period, cores=len(chunks[0]))

    interrupted, notes = False, list[str]()
    with sigterm_as_interrupt():
        if workers == 1:
            watcher = _Watcher(study_name, storage, spec, progress) if progress is not None else None
            try:
                interrupted = worker_loop(
                    study, space=the_space, cores=None, seed=seed,
                    deadline=None if timeout is None else started + timeout, workdir=workdir,
                    worker="local-0", parallel=False, progress=progress)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                if watcher is not None:
                    watcher.stop()
        else:
            def poll() -> None:
                if progress is not None:
                    progress(progress_of(study, spec))

            interrupted, notes = run_local_workers(
                study_name=study_name, storage=storage, chunks=chunks, seed=seed, timeout=timeout,
                workdir=workdir, poll=poll)
    return _summary(study, spec, storage=storage, workers=workers, started=started,
                    interrupted=interrupted, notes=notes)


class _Watcher:
    """Calls ``progress`` about once a second from a thread of its own while the one in-process
    worker trains, so the running trial's epochs show between trials. It reads the study through
    its own storage connection and never writes."""

    def __init__(self, study_name: str, storage: str, spec: StudySpec,
                 progress: Callable[[StudyProgress], None], every_s: float = 1.0) -> None:
        import threading

        self._stop = threading.Event()
        self._args = (study_name, storage, spec, progress, every_s)
        self._thread = threading.Thread(target=self._run, name="advisor-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import optuna

        study_name, storage, spec, progress, every_s = self._args
        try:
            study = optuna.load_study(study_name=study_name,
                                      storage=open_storage(storage, heartbeat_interval=None, grace_period=None))
        except Exception as exc:  # noqa: BLE001 - no live rows then; the per-trial updates remain
            logger.debug("progress watcher not started: %s", exc)
            return
        while not self._stop.wait(every_s):
            try:
                progress(progress_of(study, spec))
            except Exception as exc:  # noqa: BLE001 - a display must never stop a study
                logger.debug("progress not read: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _summary(study: Any, spec: StudySpec, *, storage: str, workers: int, started: float,
             interrupted: bool, notes: Sequence[str] = ()) -> StudySummary:
    trials = study.get_trials(deepcopy=False)
    return StudySummary(
        study=study.study_name, storage=mask_url(storage), n_trials=spec.n_trials,
        counts=count_trials(trials), front=front_of(trials, spec.objectives, study=study.study_name),
        sampler=resolve_sampler(spec.sampler, n_objectives=len(spec.objectives), n_trials=spec.n_trials),
        workers=workers, elapsed_s=time.monotonic() - started, interrupted=interrupted, notes=tuple(notes),
    )


def _load_study(study_name: str, storage: str, **storage_kwargs: Any) -> Any:
    import optuna

    validate_study_name(study_name)
    rdb = open_storage(storage, **storage_kwargs)
    try:
        return optuna.load_study(study_name=study_name, storage=rdb)
    except KeyError:
        raise StorageError(f"No study named {study_name!r} in {mask_url(storage)}: create it with "
                           f"'advisor tune ... --study {study_name}' or list them with 'advisor studies list'.") from None


def run_worker(
    *, study_name: str, storage: str, cores: Sequence[int] | None = None, seed: int | None = None,
    timeout: float | None = None, workdir: str | Path | None = None, worker: str | None = None,
    progress: Callable[[StudyProgress], None] | None = None,
) -> StudySummary:
    """Join an existing study from any machine and run trials until its budget is reached.

    Everything else (workload, space, objectives, constraints, limits, sampler, heartbeat) is read
    from the study's ``advisor.spec`` attribute.

    Args:
        study_name: The study, as created by :func:`run_study` / ``advisor tune``.
        storage: Its storage URL.
        cores: CPUs this worker may use (``${cores}`` of the space resolves to their count);
            ``None`` uses this process's affinity set.
        seed: Sampler seed; by default derived from the study seed, the host and the process id.
        timeout: Seconds after which no new trial starts.
        workdir: Folder that keeps each trial's folder.
        worker: A label stored on each trial (``advisor.worker``).
        progress: Called after every trial.
    """
    plain = _load_study(study_name, storage, heartbeat_interval=None)
    spec = read_spec(plain)
    study = _load_study(study_name, storage, heartbeat_interval=spec.heartbeat_interval,
                        grace_period=spec.grace_period)
    if cores is not None:
        cores = [int(c) for c in cores]
    ncores = len(cores) if cores else available_cores()
    space = spec.build_space(cores=ncores)
    tag = worker or f"{os.uname().nodename}-{os.getpid()}"
    if seed is None:
        seed = (spec.seed + zlib.crc32(tag.encode())) % (2**31)
    started = time.monotonic()
    with sigterm_as_interrupt():
        try:
            interrupted = worker_loop(
                study, space=space, cores=cores, seed=seed,
                deadline=None if timeout is None else started + timeout, workdir=workdir,
                worker=tag, parallel=True, progress=progress)
        except KeyboardInterrupt:
            interrupted = True
    return _summary(study, spec, storage=storage, workers=1, started=started, interrupted=interrupted)


def list_studies(storage: str) -> list[StudyInfo]:
    """Every study in a storage, with its trial counts and (for advisor studies) its workload."""
    import optuna

    rdb = open_storage(storage, heartbeat_interval=None)
    out = []
    for s in optuna.study.get_all_study_summaries(rdb, include_best_trial=False):
        attrs = s.user_attrs
        spec = attrs.get(SPEC_ATTR) or {}
        trials = rdb.get_all_trials(s._study_id, deepcopy=False)
        workload = spec.get("workload") or {}
        out.append(StudyInfo(
            name=s.study_name, objectives=objectives_of(attrs, len(s.directions)),
            n_trials=spec.get("n_trials"), counts=count_trials(trials),
            dataset=str(workload.get("dataset", "")), model=str(workload.get("model", "")),
            space=str((spec.get("space") or {}).get("name", "")),
            created=s.datetime_start.isoformat(timespec="seconds") if s.datetime_start else "",
            advisor=bool(spec),
        ))
    return out


def load_trials(study_name: str, storage: str) -> tuple[StudySpec | None, list[Any]]:
    """The study's spec (``None`` for a foreign study) and its FrozenTrials."""
    study = _load_study(study_name, storage, heartbeat_interval=None)
    spec = StudySpec.from_dict(study.user_attrs[SPEC_ATTR]) if study.user_attrs.get(SPEC_ATTR) else None
    return spec, study.get_trials(deepcopy=False)


def load_front(study_name: str, storage: str, *, reference: Mapping[str, float] | None = None) -> ParetoFront:
    """The Pareto front of a stored study (feasible complete trials only)."""
    study = _load_study(study_name, storage, heartbeat_interval=None)
    objectives = objectives_of(study.user_attrs, len(study.directions))
    if any(n.startswith("objective_") for n in objectives):
        raise StorageError(f"Study {study_name!r} was not created by 'advisor tune': its objectives are unknown.")
    return front_of(study.get_trials(deepcopy=False), objectives, study=study_name, reference=reference)
