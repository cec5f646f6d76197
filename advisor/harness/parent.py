"""Run one trial in a child process: spawn, watch, enforce limits, classify, record.

Every outcome of a trial becomes a :class:`~advisor.records.TrialResult` with a status, the way
Optuna's ``_run_trial`` turns every outcome into a trial state. :func:`run_trial` raises only for
bad arguments, never because the trial went wrong.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import psutil

from advisor._atomic import atomic_write
from advisor.errors import invalid_parameter
from advisor.harness.env import build_child_env, resolve_cores
from advisor.harness.events import EventReader
from advisor.harness.monitor import TreeMonitor, busy_cpu_seconds
from advisor.harness.outcome import TrialLog, build_result
from advisor.records import Config, EpochRecord, TrialResult, Workload

__all__ = ["Limits", "run_trial"]

logger = logging.getLogger(__name__)

LOG_NAME = "child.log"
EVENTS_NAME = "events.jsonl"
TRIAL_NAME = "trial.json"
MAX_LOG_BYTES = 512 * 1024 * 1024  # a child that writes more output than this is killed
_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Limits:
    """Resource limits of one trial.

    Attributes:
        wall_time_s: The whole trial, measured from spawn; when exceeded the process tree is
            killed and the status is ``"timeout"``.
        memory_mb: Summed resident memory of the process tree in MiB; when exceeded the tree is
            killed and the status is ``"oom"``.
    """

    wall_time_s: float | None = None
    memory_mb: float | None = None

    def __post_init__(self) -> None:
        for name in ("wall_time_s", "memory_mb"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
            ):
                raise invalid_parameter(name, "Limits", "a number > 0 or None", value)


def _preexec(cores: tuple[int, ...], parent_pid: int) -> Callable[[], None]:
    """What the forked child runs before ``exec``: die with the parent, and pin to ``cores``."""
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None

    def run() -> None:
        if prctl is not None:
            # Delivered when the thread that forked us ends; run_trial's thread waits for the
            # child, so in practice that is when the parent dies.
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent_pid:  # the parent died before prctl took effect
                os._exit(70)
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)

    return run


class _Trial:
    """The state of one running trial, shared by the waiting thread, the reader and the monitor."""

    def __init__(self, workload: Workload, config: Config, *, limits: Limits, cores: tuple[int, ...],
                 trial_dir: Path, on_epoch: Callable[[EpochRecord], bool] | None, python: str) -> None:
        self.workload = workload
        self.config = config
        self.limits = limits
        self.cores = cores
        self.trial_dir = trial_dir
        self.on_epoch = on_epoch
        self.python = python
        self.log = TrialLog()
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._reaped = False
        self._monitor: TreeMonitor | None = None

    # -- verdicts and killing ------------------------------------------------------------------
    def kill(self, status: str, message: str | None) -> None:
        """Record ``status`` unless a verdict exists already, then kill the whole tree."""
        self.log.decide(status, message)
        self.kill_tree()

    def kill_tree(self) -> None:
        with self._lock:
            if self._pid is None:
                return
            if not self._reaped:
                try:
                    os.killpg(self._pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            procs = self._monitor.processes() if self._monitor is not None else []
        for proc in procs:
            try:
                if proc.pid != self._pid or not self._reaped:
                    proc.kill()
            except psutil.Error:
                pass

    # -- events --------------------------------------------------------------------------------
    def handle(self, event: dict[str, Any], events_file: Any) -> None:
        try:
            events_file.write(json.dumps(event, default=str) + "\n")
        except OSError as exc:  # a full disk mid-trial: the trial fails, the run goes on
            self.kill("failed", _one_line(f"cannot write {EVENTS_NAME} in {self.trial_dir}", exc))
        try:
            record = self.log.add(event)
        except (KeyError, TypeError, ValueError) as exc:
            self.kill("failed", f"progress channel: malformed {event.get('event')!r} event ({exc})")
            return
        if record is not None and self._monitor is not None:
            # Rounded down: the epoch's peak so far never exceeds the trial's final, unrounded peak.
            peak = math.floor(self._monitor.peak_rss_mb * 10) / 10
            record = dataclasses.replace(record, peak_memory_mb=peak)
            self.log.epochs[-1] = record
        if record is not None and self.on_epoch is not None and self.log.status is None:
            if self.on_epoch(record) is False:
                self.kill("pruned", f"stopped by on_epoch after epoch {record.epoch}")

    # -- the run -------------------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        """Spawn the child, wait for it, and return the measurements for :func:`build_result`."""
        read_fd, write_fd = os.pipe()
        env, applied = build_child_env(self.config, event_fd=write_fd)
        self.log.env_applied = applied
        argv = [self.python, "-m", "advisor.harness.child", str(self.trial_dir)]
        busy0 = busy_cpu_seconds(self.cores)
        with open(self.trial_dir / LOG_NAME, "wb") as log_file, \
                open(self.trial_dir / EVENTS_NAME, "w", encoding="utf-8", buffering=1) as events_file:
            try:
                proc = subprocess.Popen(
                    argv, env=env, cwd=self.trial_dir, stdin=subprocess.DEVNULL, stdout=log_file,
                    stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=True,
                    preexec_fn=_preexec(self.cores, os.getpid()), close_fds=True,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                os.close(read_fd)
                self.log.decide("failed", f"could not start the trial process {argv[0]!r}: {exc}")
                return {"spawned": False}
            finally:
                os.close(write_fd)
            t_spawn = time.monotonic()
            with self._lock:
                self._pid = proc.pid
            deadline = None if self.limits.wall_time_s is None else t_spawn + self.limits.wall_time_s
            self._monitor = TreeMonitor(proc.pid, deadline=deadline, memory_mb=self.limits.memory_mb,
                                        on_limit=self.kill)
            reader = EventReader(read_fd, max_events=self.config.epochs + 16,
                                 on_broken=lambda message: self.kill("failed", message))
            try:
                self._monitor.start()
                reader.start()
                status = self._wait(proc.pid, reader, events_file, log_file)
            finally:
                if not self._reaped:  # an exception (a failing on_epoch, ^C) left it running
                    self.kill_tree()
                    status = self._reap(proc.pid)
                self._monitor.stop()
                reader.stop()
            t_exit = time.monotonic()
            reader.eof.wait(2.0)
            reader.join(2.0)
            while True:
                try:
                    self.handle(reader.events.get_nowait(), events_file)
                except queue.Empty:
                    break
            self._monitor.join(2.0)
        proc.returncode = status[0]
        busy1 = busy_cpu_seconds(self.cores)
        survivors = self._survivors()
        return {
            "spawned": True,
            "pid": proc.pid,
            "exit_code": status[0],
            "rusage": status[1],
            "wall_s": t_exit - t_spawn,
            "monitor": self._monitor.summary(),
            "busy_s": None if busy0 is None or busy1 is None else busy1 - busy0,
            "survivors": survivors,
            "log_path": self.trial_dir / LOG_NAME,
        }

    def _wait(self, pid: int, reader: EventReader, events_file: Any, log_file: Any
              ) -> tuple[int, Any]:
        next_log_check = 0.0
        while True:
            try:
                self.handle(reader.events.get(timeout=_POLL_S), events_file)
            except queue.Empty:
                pass
            if _has_exited(pid):
                # Sweep the group while the zombie still holds its id, then reap.
                self.kill_tree()
                return self._reap(pid)
            now = time.monotonic()
            if now >= next_log_check:
                next_log_check = now + 1.0
                if os.fstat(log_file.fileno()).st_size > MAX_LOG_BYTES:
                    self.kill("failed", f"the trial process wrote more than {MAX_LOG_BYTES >> 20} MiB of output")

    def _reap(self, pid: int) -> tuple[int, Any]:
        _, wait_status, rusage = os.wait4(pid, 0)
        with self._lock:
            self._reaped = True
        return os.waitstatus_to_exitcode(wait_status), rusage

    def _survivors(self) -> list[int]:
        assert self._monitor is not None
        alive = []
        for proc in self._monitor.processes():
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.Error:
                continue
        if alive:
            for proc in alive:
                try:
                    proc.kill()
                except psutil.Error:
                    pass
            _, alive = psutil.wait_procs(alive, timeout=2.0)
            alive = [p for p in alive if _is_live(p)]
            if alive:
                logger.error("trial processes survived their trial: %s", [p.pid for p in alive])
        return [p.pid for p in alive]


def _is_live(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _has_exited(pid: int) -> bool:
    """Whether ``pid`` (our child) has exited, without reaping it."""
    if hasattr(os, "waitid"):
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    try:  # pragma: no cover - non-Linux fallback
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _trial_dir(workdir: str | Path | None, trial_id: str, trial_number: int | None) -> tuple[Path, bool]:
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="advisor-trial-")), True
    name = f"trial-{trial_id[:12]}" if trial_number is None else f"trial-{trial_number:05d}-{trial_id[:8]}"
    path = Path(workdir) / name
    path.mkdir(parents=True, exist_ok=False)
    return path, False


def _one_line(what: str, exc: OSError) -> str:
    return " ".join(f"{what}: {exc.strerror or exc}".split())


def _failed_log(what: str, exc: OSError) -> TrialLog:
    log = TrialLog()
    log.decide("failed", _one_line(what, exc))
    return log


def _absolute_paths(workload: Workload) -> Workload:
    """Resolve relative data paths against the caller's folder: the child runs in its trial folder."""
    changes: dict[str, Any] = {}
    if workload.data_dir and not os.path.isabs(workload.data_dir):
        changes["data_dir"] = os.path.abspath(workload.data_dir)
    dataset = workload.dataset
    if not os.path.isabs(dataset) and (dataset.endswith(".npz") or os.sep in dataset) and os.path.exists(dataset):
        changes["dataset"] = os.path.abspath(dataset)
    return dataclasses.replace(workload, **changes) if changes else workload


def run_trial(
    workload: Workload,
    config: Config,
    *,
    limits: Limits = Limits(),
    cores: Sequence[int] | None = None,
    workdir: str | Path | None = None,
    study: str | None = None,
    trial_number: int | None = None,
    on_epoch: Callable[[EpochRecord], bool] | None = None,
    python: str = sys.executable,
) -> TrialResult:
    """Train ``workload`` with ``config`` in a fresh child process and measure it.

    The child gets its own folder (``trial.json``, ``child.log``, ``events.jsonl``), an explicit
    environment (see :func:`advisor.harness.env.build_child_env`) and CPU affinity ``cores``. It is
    in its own process group and dies with the calling thread's process. The parent samples the
    tree, enforces ``limits``, and calls ``on_epoch`` in the calling thread after every epoch.

    Args:
        workload: Dataset, model and subset sizes.
        config: The configuration to train with.
        limits: Wall-time and memory limits.
        cores: CPUs to pin the child to; ``None`` takes the first ``config.threads`` CPUs this
            process may use.
        workdir: Folder in which the trial's folder is created and kept; ``None`` uses a
            temporary folder that is removed afterwards.
        study: Study name, recorded in the result.
        trial_number: Trial number within the study, recorded in the result.
        on_epoch: Called with each epoch's record; returning ``False`` stops the trial, which then
            has status ``"pruned"`` and keeps its partial curve.
        python: The interpreter that runs the child.

    Returns:
        The trial's result; trial failures are statuses, not exceptions.

    Raises:
        InvalidParameterError: When an argument has the wrong type or ``cores`` names CPUs this
            process may not use.
    """
    if not isinstance(workload, Workload):
        raise invalid_parameter("workload", "run_trial", "a Workload", workload)
    if not isinstance(config, Config):
        raise invalid_parameter("config", "run_trial", "a Config", config)
    if not isinstance(limits, Limits):
        raise invalid_parameter("limits", "run_trial", "a Limits", limits)
    workload = _absolute_paths(workload)
    granted = resolve_cores(cores, config.threads)
    trial_id = uuid.uuid4().hex
    started_at = datetime.now(timezone.utc).isoformat()
    facts: dict[str, Any] = dict(trial_id=trial_id, started_at=started_at, workload=workload, config=config,
                                 cores=granted, study=study, trial_number=trial_number)
    try:
        trial_dir, temporary = _trial_dir(workdir, trial_id, trial_number)
    except OSError as exc:  # a full disk or a folder we may not write: a failed trial, not an exception
        return build_result(_failed_log(f"cannot create the trial folder in {workdir or 'the temporary folder'}",
                                        exc), {"spawned": False}, trial_dir=None, **facts)
    try:
        spec = {
            "trial_id": trial_id,
            "workload": workload.to_dict(),
            "config": config.to_dict(),
            "cores": list(granted),
            "limits": {"wall_time_s": limits.wall_time_s, "memory_mb": limits.memory_mb},
        }
        try:
            atomic_write(trial_dir / TRIAL_NAME, json.dumps(spec, indent=2), fsync=False)
        except OSError as exc:
            return build_result(_failed_log(f"cannot write {TRIAL_NAME} in {trial_dir}", exc), {"spawned": False},
                                trial_dir=None if temporary else trial_dir, **facts)
        trial = _Trial(workload, config, limits=limits, cores=granted, trial_dir=trial_dir,
                       on_epoch=on_epoch, python=python)
        try:
            run = trial.execute()
        except OSError as exc:  # the trial folder's files could not be written (execute killed the tree)
            trial.log.decide("failed", _one_line(f"cannot write the trial folder {trial_dir}", exc))
            run = {"spawned": False}
        return build_result(trial.log, run, trial_dir=None if temporary else trial_dir, **facts)
    finally:
        if temporary:
            shutil.rmtree(trial_dir, ignore_errors=True)
