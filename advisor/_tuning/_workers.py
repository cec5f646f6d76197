"""Local worker processes on disjoint CPU sets, and the worker entry point.

``run_study(workers=N)`` starts N processes ``python -m advisor._tuning._workers JSON`` (an argv
list, never a shell); each one calls :func:`advisor.tuning.run_worker` on its own slice of the
CPU affinity set, so trials running side by side do not share cores.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from advisor.errors import InvalidParameterError

__all__ = ["split_cores", "run_local_workers", "fail_trials_of_killed_workers"]

logger = logging.getLogger("advisor.tuning")

#: Seconds a stopped worker gets to record its running trial as interrupted before it is killed.
STOP_GRACE_S = 30


def split_cores(affinity: Sequence[int], n: int) -> list[list[int]]:
    """Split the affinity set into ``n`` disjoint, contiguous, near-equal slices.

    Raises:
        InvalidParameterError: When there are fewer CPUs than workers.
    """
    cpus = sorted(affinity)
    if n < 1 or n > len(cpus):
        raise InvalidParameterError(
            f"The 'workers' parameter of run_study must be between 1 and the {len(cpus)} CPUs this "
            f"process may use (each worker gets its own cores). Got {n!r} instead.")
    size, extra = divmod(len(cpus), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(cpus[start:end])
        start = end
    return out


def run_local_workers(
    *, study_name: str, storage: str, chunks: Sequence[Sequence[int]], seed: int,
    timeout: float | None, workdir: str | Path | None, poll: Callable[[], None] | None,
) -> tuple[bool, list[str]]:
    """Start one worker process per CPU slice and wait for all of them.

    Args:
        study_name: The (existing) study.
        storage: Its storage URL.
        chunks: One CPU slice per worker.
        seed: Base sampler seed; worker ``i`` uses ``seed + i``.
        timeout: Seconds after which workers start no new trial.
        workdir: Folder for trial folders.
        poll: Called about once a second while the workers run (progress display).

    Returns:
        ``(interrupted, notes)``: notes name the log of any worker that exited with an error.
    """
    log_dir = Path(tempfile.mkdtemp(prefix="advisor-workers-"))
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    interrupted = False
    try:
        for i, cores in enumerate(chunks):
            args = {"study_name": study_name, "storage": storage, "cores": list(cores),
                    "seed": seed + i, "timeout": timeout, "worker": f"local-{i}",
                    "workdir": None if workdir is None else str(workdir)}
            log = log_dir / f"worker-{i}.log"
            with open(log, "wb") as fh:
                proc = subprocess.Popen([sys.executable, "-m", "advisor._tuning._workers", json.dumps(args)],
                                        stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                        start_new_session=True)  # ^C reaches them once, from us
            procs.append((proc, log))
        while any(p.poll() is None for p, _ in procs):
            if poll is not None:
                poll()
            time.sleep(1.0)
    except KeyboardInterrupt:
        interrupted = True
        for p, _ in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE_S
        killed = []
        for p, _ in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                killed.append(p.pid)
        if killed:
            fail_trials_of_killed_workers(study_name, storage, killed)
    notes = []
    for i, (p, log) in enumerate(procs):
        if p.returncode not in (0, 130) and not interrupted:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            notes.append(f"worker {i} exited with code {p.returncode} ({tail[0] if tail else 'no output'}); log: {log}")
        interrupted = interrupted or p.returncode == 130
    if not notes:
        shutil.rmtree(log_dir, ignore_errors=True)
    return interrupted, notes


def fail_trials_of_killed_workers(study_name: str, storage: str, pids: Sequence[int]) -> list[int]:
    """Record as failed (interrupted) the RUNNING trials of worker processes on this host that had to
    be killed, so a stop leaves no trial RUNNING; returns their numbers.

    A killed worker sends no more heartbeats, so its trial would otherwise stay RUNNING until the
    next worker's stale-trial check, one grace period later.
    """
    import optuna
    from optuna.trial import TrialState

    from advisor._tuning._read import ERROR_ATTR, PROCESS_ATTR, STATUS_ATTR, process_identity
    from advisor._tuning._storage import open_storage

    owners = {process_identity(pid) for pid in pids}
    try:
        rdb = open_storage(storage)
        study = optuna.load_study(study_name=study_name, storage=rdb)
        failed = []
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if t.user_attrs.get(PROCESS_ATTR) not in owners:
                continue
            try:
                rdb.set_trial_user_attr(t._trial_id, STATUS_ATTR, "failed")
                rdb.set_trial_user_attr(t._trial_id, ERROR_ATTR, "interrupted: the study was stopped during this "
                                        f"trial, and its worker did not stop within {STOP_GRACE_S} s and was killed")
                if rdb.set_trial_state_values(t._trial_id, TrialState.FAIL):
                    failed.append(t.number)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # finished after all
        return failed
    except Exception as exc:  # noqa: BLE001 - the stop goes on; a later stale-trial check fails them
        logger.warning("could not record the killed workers' trials as failed: %s", exc)
        return []


def _main(argv: list[str]) -> int:
    from advisor.errors import AdvisorError
    from advisor.tuning import run_worker

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # The parent stops us with SIGINT. A parent started with SIGINT ignored (nohup, a background
    # job in a script) passes that on to us, and the worker would then run on and be killed mid-trial.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = json.loads(argv[0])
    try:
        summary = run_worker(study_name=args["study_name"], storage=args["storage"], cores=args["cores"],
                             seed=args["seed"], timeout=args["timeout"], workdir=args["workdir"],
                             worker=args["worker"])
    except AdvisorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 130 if summary.interrupted else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(_main(sys.argv[1:]))
