"""Load: many worker processes on one study, as fast as trials go; nothing lost, nothing duplicated.

Eight ``advisor worker`` processes join one study on SQLite and on PostgreSQL and run quick
synthetic trials (``synthetic:8x8x1``, scikit-learn MLP, one epoch, 64 samples). The CI version
runs a reduced budget; ``benchmarks/bench_reliability.py`` runs the full 200+ trial version with
the same :func:`run_load` and writes ``benchmarks/results/reliability.md``.

What is asserted is bookkeeping, never speed: every finished trial is complete, pruned or failed;
the finished count equals that sum; trial ids and Optuna numbers are distinct; every worker exits
0; no trial is left RUNNING or WAITING. Lock errors ("database is locked") are counted from the
worker logs and must be zero (the SQLite storage waits up to 60 s for the lock).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from advisor.records import Workload

LOAD_WORKLOAD = Workload(dataset="synthetic:8x8x1", model="mlp", train_samples=64, test_samples=32)
LOCK_MARKERS = ("database is locked", "database table is locked")
CI_WORKERS = 8
CI_TRIALS = 20  # per storage: 40 trials in all, about a minute each on two busy cores
REPORT_VARIABLE = "ADVISOR_RELIABILITY_REPORT"


def record(case: str, **fields: Any) -> None:
    """Append one case's numbers to the JSON-lines file that benchmarks/bench_reliability.py names
    in ``$ADVISOR_RELIABILITY_REPORT``; a plain test run records nothing."""
    path = os.environ.get(REPORT_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"case": case, **fields}, default=str) + "\n")


def quick_space(path: Path) -> Path:
    """TEST DATA: a scikit-learn space of one-epoch, one-thread trials (seconds each)."""
    path.write_text(
        "framework: sklearn\ntarget: cpu\ndescription: reliability load (one epoch, tiny)\nparams:\n"
        "  batch_size: {type: int, low: 16, high: 64, log: true}\n"
        "  learning_rate: {type: float, low: 1.0e-3, high: 0.1, log: true}\n"
        "  optimizer: {type: categorical, choices: [sgd, adam]}\n"
        "fixed:\n  epochs: 1\n  threads: 1\n")
    return path


@dataclass
class LoadReport:
    """What one load run did (the benchmark writes these numbers into reliability.md)."""

    storage_kind: str
    workers: int
    n_trials: int
    elapsed_s: float = 0.0
    trials: int = 0
    complete: int = 0
    pruned: int = 0
    failed: int = 0
    running: int = 0
    waiting: int = 0
    finished: int = 0
    distinct_numbers: int = 0
    with_result: int = 0
    distinct_ids: int = 0
    lock_errors: int = 0
    exit_codes: list[int] = field(default_factory=list)
    failed_errors: list[str] = field(default_factory=list)

    @property
    def trials_per_minute(self) -> float:
        return 60.0 * self.finished / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def duplicated(self) -> int:
        return (self.trials - self.distinct_numbers) + (self.with_result - self.distinct_ids)

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data.update(trials_per_minute=round(self.trials_per_minute, 1), duplicated=self.duplicated,
                    overshoot=self.finished - self.n_trials)
        return data


def start_worker(study: str, storage: str, log: Path, *, workdir: Path | None = None,
                 extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """One ``advisor worker`` process in its own session (so a test can kill it with its trial)."""
    argv = [sys.executable, "-m", "advisor", "worker", "--study", study, "--storage", storage]
    if workdir is not None:
        argv += ["--workdir", str(workdir)]
    env = dict(os.environ, PYTHONWARNINGS="ignore", **(extra_env or {}))
    with open(log, "wb") as fh:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def count_lock_errors(logs: list[Path]) -> int:
    total = 0
    for log in logs:
        text = log.read_text(errors="replace").lower() if log.exists() else ""
        total += sum(text.count(m) for m in LOCK_MARKERS)
    return total


def audit(study_name: str, storage: str, report: LoadReport) -> LoadReport:
    """Fill ``report`` from the storage: states, distinct numbers and trial ids."""
    import optuna

    from advisor.tuning import count_trials, open_storage

    trials = optuna.load_study(study_name=study_name,
                               storage=open_storage(storage, heartbeat_interval=None)).get_trials(deepcopy=False)
    counts = count_trials(trials)
    report.trials = len(trials)
    report.complete, report.pruned, report.failed = counts.complete, counts.pruned, counts.failed
    report.running, report.waiting, report.finished = counts.running, counts.waiting, counts.finished
    report.distinct_numbers = len({t.number for t in trials})
    ids = [t.user_attrs["advisor.result"]["trial_id"] for t in trials if "advisor.result" in t.user_attrs]
    report.with_result = len(ids)
    report.distinct_ids = len(set(ids))
    report.failed_errors = sorted({str(t.user_attrs.get("advisor.error", ""))[:160]
                                   for t in trials if t.state.name == "FAIL"})
    return report


def run_load(storage: str, *, workers: int, n_trials: int, folder: Path, storage_kind: str,
             timeout_s: float = 900.0) -> LoadReport:
    """Create a study, start ``workers`` ``advisor worker`` processes on it, wait, and audit it."""
    from advisor.tuning import create_study

    name = f"load-{storage_kind}-{uuid.uuid4().hex[:10]}"
    create_study(study_name=name, workload=LOAD_WORKLOAD, storage=storage,
                 space=str(quick_space(folder / f"{name}.yaml")), objectives="time,accuracy",
                 n_trials=n_trials, sampler="random", seed=0)
    logs = [folder / f"{name}-worker-{i}.log" for i in range(workers)]
    report = LoadReport(storage_kind=storage_kind, workers=workers, n_trials=n_trials)
    started = time.monotonic()
    procs = [start_worker(name, storage, log) for log in logs]
    try:
        deadline = started + timeout_s
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        report.elapsed_s = time.monotonic() - started
        report.exit_codes = [p.poll() if p.poll() is not None else -999 for p in procs]
        stop_all(procs)
    report.lock_errors = count_lock_errors(logs)
    return audit(name, storage, report)


def _check(report: LoadReport, logs_hint: str) -> None:
    record(f"load: {report.workers} workers, {report.storage_kind}", **report.to_dict())
    assert report.exit_codes == [0] * report.workers, (report.exit_codes, logs_hint)
    assert report.running == 0 and report.waiting == 0
    assert report.finished == report.complete + report.pruned + report.failed
    # the budget is a floor: every worker stops once it is met, none stops before
    assert report.finished >= report.n_trials
    # ... and at most the workers that each saw one trial missing at the same moment go over it
    assert report.finished <= report.n_trials + report.workers - 1
    assert report.distinct_numbers == report.trials          # no duplicated Optuna numbers
    assert report.distinct_ids == report.with_result          # no trial recorded twice
    assert report.with_result == report.trials                # every trial carries its result
    assert report.complete >= report.n_trials * 3 // 4, report.failed_errors
    assert report.lock_errors == 0


def test_eight_workers_on_one_sqlite_study(tmp_path: Path) -> None:
    report = run_load(f"sqlite:///{tmp_path / 'load.db'}", workers=CI_WORKERS, n_trials=CI_TRIALS,
                      folder=tmp_path, storage_kind="sqlite")
    _check(report, str(tmp_path))


@pytest.mark.postgres
def test_eight_workers_on_one_postgresql_study(postgres_url: str, tmp_path: Path) -> None:
    report = run_load(postgres_url, workers=CI_WORKERS, n_trials=CI_TRIALS, folder=tmp_path,
                      storage_kind="postgresql")
    _check(report, str(tmp_path))


def test_lock_errors_are_counted_from_logs(tmp_path: Path) -> None:
    # The counter must see the real message, or a zero above proves nothing.
    log = tmp_path / "w.log"
    log.write_text("sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked\nok\n")
    assert count_lock_errors([log, tmp_path / "absent.log"]) == 1


def test_audit_sees_a_duplicated_trial_id(tmp_path: Path) -> None:
    # The duplicate check must be able to fail: two trials that carry one trial id are caught.
    import optuna
    from optuna.trial import TrialState, create_trial

    url = f"sqlite:///{tmp_path / 'dup.db'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="dup", storage=url, directions=["minimize", "maximize"])
    for _ in range(2):
        study.add_trial(create_trial(state=TrialState.COMPLETE, values=[1.0, 0.5],
                                     user_attrs={"advisor.result": {"trial_id": "same"}}))
    report = audit("dup", url, LoadReport(storage_kind="sqlite", workers=1, n_trials=2))
    assert (report.trials, report.with_result, report.distinct_ids, report.duplicated) == (2, 2, 1, 1)
