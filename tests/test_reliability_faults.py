"""Faults during tuning: killed workers and parents, ^C and SIGTERM, a restarted database, a full disk.

Every case asserts what is kept (finished trials, their ids), what the interrupted trial became
(FAIL, or retried), that nothing is left RUNNING, and that resuming reaches the budget.

Covered elsewhere and not repeated here:
- SIGKILL of a worker mid-trial on PostgreSQL: tests/test_distributed.py (the SQLite twin is here);
- SIGKILL of ``run_trial``'s process leaves no orphan child: tests/test_harness.py
  ``test_child_dies_when_the_parent_is_killed`` (here: the same through a whole study, then resumed);
- SIGTERM to a one-worker ``advisor tune``: tests/test_tuning.py
  ``test_sigterm_keeps_finished_trials_and_the_study_resumes`` (here: ^C, and SIGTERM with two workers);
- a child that floods or garbles its progress channel: tests/test_harness.py
  ``test_hostile_event_channel_fails_the_trial_with_bounded_memory`` (here: at study level).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil
import pytest

from advisor.records import Workload
from advisor.tuning import count_trials, create_study, open_storage, run_study
from test_reliability_load import LOAD_WORKLOAD, quick_space, record, start_worker, stop_all

REPO = Path(__file__).resolve().parents[1]
POSTGRES_SH = REPO / ".ci" / "postgres.sh"


# ----------------------------------------------------------------------------------- helpers


def _trials(name: str, url: str) -> list[Any]:
    import optuna

    return optuna.load_study(study_name=name, storage=open_storage(url, heartbeat_interval=None)
                             ).get_trials(deepcopy=False)


def _wait_for(predicate: Callable[[], Any], *, timeout: float, what: str, alive: subprocess.Popen[Any] | None = None,
              log: Path | None = None) -> Any:
    """Poll until ``predicate()`` is truthy (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # noqa: BLE001 - the study may not exist yet, or SQLite is busy
            value = None
        if value:
            return value
        if alive is not None and alive.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
            pytest.fail(f"the process exited ({alive.returncode}) before {what}: {tail}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _running_trial(name: str, url: str, *, worker_suffix: str | None = None, min_complete: int = 0) -> Any:
    """A RUNNING trial whose process was spawned, once ``min_complete`` trials are complete."""
    trials = _trials(name, url)
    if sum(t.state.name == "COMPLETE" for t in trials) < min_complete:
        return None
    for t in trials:
        if t.state.name == "RUNNING" and "advisor.started" in t.user_attrs and (
                worker_suffix is None or str(t.user_attrs.get("advisor.worker", "")).endswith(worker_suffix)):
            return t
    return None


def _live_processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if text in " ".join(proc.info["cmdline"] or ()) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _assert_no_orphans(marker: str) -> None:
    # The trial children die with their parent (PR_SET_PDEATHSIG); give the kernel a moment.
    deadline = time.monotonic() + 15
    while _live_processes_mentioning(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = _live_processes_mentioning(marker)
    for proc in alive:
        proc.kill()
    assert alive == [], "orphaned trial processes"


def _result_ids(trials: list[Any], state: str = "COMPLETE") -> set[str]:
    return {t.user_attrs["advisor.result"]["trial_id"] for t in trials
            if t.state.name == state and "advisor.result" in t.user_attrs}


def _record_counts(case: str, action: str, before: list[Any], after: list[Any], *, outcome: str) -> None:
    """Trials before the fault and after recovery; lost = complete before, missing after."""
    kept, now = _result_ids(before), _result_ids(after)
    ids = [t.user_attrs["advisor.result"]["trial_id"] for t in after if "advisor.result" in t.user_attrs]
    record(case, action=action, outcome=outcome, before=count_trials(before).finished,
           after=count_trials(after).finished, lost=len(kept - now), duplicated=len(ids) - len(set(ids)),
           states=sorted(t.state.name for t in after))


def _one_line_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[-3000:]
    return lines[0]


# --------------------------------------------------------------------- killed workers (SQLite)


def test_sigkill_of_a_worker_mid_trial_on_sqlite(tmp_path: Path) -> None:
    """The SQLite twin of tests/test_distributed.py: the killed trial is failed, retried once."""
    url = f"sqlite:///{tmp_path / 'kill.db'}"
    name, n = "kill", 4
    create_study(study_name=name, storage=url, space=str(quick_space(tmp_path / "q.yaml")), workload=LOAD_WORKLOAD,
                 objectives="time,accuracy", n_trials=n, sampler="random", heartbeat_interval=1, grace_period=3)
    trials_dir = tmp_path / "trials"
    victim = start_worker(name, url, tmp_path / "victim.log", workdir=trials_dir)
    survivor = start_worker(name, url, tmp_path / "survivor.log", workdir=trials_dir)
    try:
        killed = _wait_for(lambda: _running_trial(name, url, worker_suffix=f"-{victim.pid}"), timeout=180,
                           what="the victim's trial", alive=victim, log=tmp_path / "victim.log")
        os.killpg(victim.pid, signal.SIGKILL)  # the worker and everything in its session, mid-trial
        victim.wait(timeout=30)
        at_kill = _trials(name, url)
        assert survivor.wait(timeout=300) == 0, (tmp_path / "survivor.log").read_text()[-3000:]
    finally:
        stop_all([victim, survivor])
    _assert_no_orphans(str(trials_dir))

    trials = _trials(name, url)
    counts = count_trials(trials)
    _record_counts("SIGKILL of a worker mid-trial (SQLite)", "2 `advisor worker`; killpg(SIGKILL) of one "
                   f"inside trial {killed.number}", at_kill, trials,
                   outcome=f"trial {killed.number} FAIL, retried once by the survivor; {counts.retried} retried")
    assert (counts.finished, counts.running, counts.waiting, counts.retried) == (n, 0, 0, 1)
    assert len(trials) == n + 1
    dead = trials[killed.number]
    assert dead.state.name == "FAIL" and "advisor.result" not in dead.user_attrs
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed.number]
    assert len(retries) == 1 and retries[0].params == dead.params
    ids = [t.user_attrs["advisor.result"]["trial_id"] for t in trials if t.number != killed.number]
    assert len(ids) == n and len(set(ids)) == n  # none lost, none duplicated


# ------------------------------------------------------- SIGKILL of the whole tuning process


_STUDY_SCRIPT = textwrap.dedent("""
    import sys
    from advisor.records import Workload
    from advisor.tuning import run_study
    run_study(study_name="sigkill", storage=sys.argv[1], space=sys.argv[2], workload=Workload(
              dataset="synthetic:8x8x1", model="mlp", train_samples=64, test_samples=32),
              objectives="time,accuracy", n_trials=50, sampler="random", heartbeat_interval=1,
              grace_period=2, workdir=sys.argv[3])
""")


def test_sigkill_of_the_tuning_process_orphans_nothing_and_resume_retries_its_trial(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sigkill.db'}"
    space = quick_space(tmp_path / "q.yaml")
    trials_dir = tmp_path / "trials"
    trials_dir.mkdir()
    log = tmp_path / "study.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", _STUDY_SCRIPT, url, str(space), str(trials_dir)],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        running = _wait_for(lambda: _running_trial("sigkill", url, min_complete=1), timeout=180,
                            what="a running trial after a complete one", alive=proc, log=log)
        proc.send_signal(signal.SIGKILL)  # the parent only: its trial child must not outlive it
        proc.wait(timeout=30)
    finally:
        stop_all([proc])
    _assert_no_orphans(str(trials_dir))

    before = _trials("sigkill", url)
    kept = _result_ids(before)
    assert len(kept) >= 1
    assert [t.number for t in before if t.state.name == "RUNNING"] == [running.number]  # stale, not lost

    # Resume with one more trial than were complete: the stale trial is failed and retried, and
    # the retry is that one trial.
    done = sum(t.state.name in ("COMPLETE", "PRUNED", "FAIL") for t in before)
    summary = run_study(study_name="sigkill", storage=url, space=str(space), workload=Workload(
        dataset="synthetic:8x8x1", model="mlp", train_samples=64, test_samples=32), objectives="time,accuracy",
        n_trials=done + 1, sampler="random", heartbeat_interval=1, grace_period=2)
    after = _trials("sigkill", url)
    _record_counts("SIGKILL of the tuning process (parent of a running trial)",
                   f"SIGKILL of a run_study process during trial {running.number}; then run_study again",
                   before, after, outcome="no orphan child; the stale trial FAIL and retried on resume")
    assert summary.counts.finished == done + 1 and summary.counts.running == 0
    assert all(t.state.name != "RUNNING" for t in after)
    dead = after[running.number]
    assert dead.state.name == "FAIL"
    retries = [t for t in after if t.system_attrs.get("failed_trial") == running.number]
    assert len(retries) == 1 and retries[0].params == dead.params and retries[0].state.name != "RUNNING"
    assert kept <= _result_ids(after)  # every trial complete before the kill is still there
    assert len(after) == len(before) + 1


def test_a_running_trial_that_never_sent_a_heartbeat_is_failed_and_retried(tmp_path: Path) -> None:
    """A worker killed between creating a trial and its first heartbeat (CI hit this race).

    Optuna alone never fails such a trial, so a resumed study waited on it forever. The trial is
    made here exactly as that worker left it: RUNNING, no heartbeat row.
    """
    import optuna
    from optuna.storages._rdb import models

    url = f"sqlite:///{tmp_path / 'nobeat.db'}"
    storage = open_storage(url, heartbeat_interval=1, grace_period=1)
    study = optuna.create_study(study_name="nobeat", storage=storage, directions=["minimize"])
    orphan = study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
    session = storage.scoped_session()
    assert session.query(models.TrialHeartbeatModel).count() == 0
    session.close()

    optuna.storages.fail_stale_trials(study)  # first sight: a heartbeat is written on its behalf
    assert [t.state.name for t in study.get_trials()] == ["RUNNING"]
    deadline = time.monotonic() + 60  # a hang guard: stale after the 1 s grace period
    while study.get_trials()[0].state.name == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
        optuna.storages.fail_stale_trials(study)
    trials = study.get_trials()
    assert trials[0].number == orphan.number and trials[0].state.name == "FAIL"
    assert [(t.state.name, t.system_attrs.get("failed_trial"), t.params) for t in trials[1:]] == [
        ("WAITING", orphan.number, trials[0].params)]


def test_a_live_trial_keeps_running_when_its_first_heartbeat_is_written_for_it(tmp_path: Path) -> None:
    """The heartbeat written for a trial without one must not fail a trial whose worker is alive."""
    import optuna

    url = f"sqlite:///{tmp_path / 'live.db'}"
    storage = open_storage(url, heartbeat_interval=1, grace_period=5)
    study = optuna.create_study(study_name="live", storage=storage, directions=["minimize"])
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
    optuna.storages.fail_stale_trials(study)  # writes the first heartbeat
    for _ in range(8):  # past the grace period, with the beats its own heartbeat thread would send
        time.sleep(1.0)
        storage.record_heartbeat(trial._trial_id)
        optuna.storages.fail_stale_trials(study)
    assert [t.state.name for t in study.get_trials()] == ["RUNNING"]
    study.tell(trial, 0.5)
    assert [t.state.name for t in study.get_trials()] == ["COMPLETE"]


# --------------------------------------------------------------- ^C and SIGTERM to advisor tune


def test_the_trials_of_a_killed_worker_are_failed_and_no_other_trial_is_touched(tmp_path: Path) -> None:
    """A worker that did not stop within the grace period is killed; its parent then records the
    killed worker's RUNNING trial as interrupted, so the stop leaves no trial RUNNING."""
    import optuna

    from advisor._tuning._read import ERROR_ATTR, PROCESS_ATTR, process_identity
    from advisor._tuning._workers import fail_trials_of_killed_workers

    url = f"sqlite:///{tmp_path / 'kill.db'}"
    study = optuna.create_study(study_name="kill", storage=open_storage(url), directions=["minimize"])
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    killed, alive, done = (study.ask(dist) for _ in range(3))
    killed.set_user_attr(PROCESS_ATTR, process_identity(4_000_001))
    alive.set_user_attr(PROCESS_ATTR, process_identity(4_000_002))  # another worker, still running
    done.set_user_attr(PROCESS_ATTR, process_identity(4_000_001))
    study.tell(done, 0.5)
    assert fail_trials_of_killed_workers("kill", url, [4_000_001]) == [killed.number]
    states = {t.number: t for t in study.get_trials()}
    assert states[killed.number].state.name == "FAIL"
    assert "was killed" in states[killed.number].user_attrs[ERROR_ATTR]
    assert states[alive.number].state.name == "RUNNING" and states[done.number].state.name == "COMPLETE"
    assert fail_trials_of_killed_workers("kill", url, [4_000_001]) == []  # nothing left to fail
    assert fail_trials_of_killed_workers("no-such-study", url, [4_000_002]) == []  # a warning, not an error


@pytest.mark.parametrize(("signame", "workers"), [("SIGINT", 1), ("SIGTERM", 2)])
def test_interrupted_tune_keeps_finished_trials_and_resumes(tmp_path: Path, signame: str, workers: int) -> None:
    """^C (SIGINT to the foreground process group, as a terminal sends it) and SIGTERM."""
    if workers > len(os.sched_getaffinity(0)):
        pytest.skip(f"{workers} workers need {workers} CPUs")
    import optuna

    db = f"sqlite:///{tmp_path / 'int.db'}"
    trials_dir = tmp_path / "trials"
    # trials of a few seconds (not the quick space's one epoch on 64 samples, which is mostly process
    # start-up), so that the stop usually lands while a trial runs
    space = quick_space(tmp_path / "q.yaml")
    space.write_text(space.read_text().replace("epochs: 1", "epochs: 3"))
    base = ["tune", "--dataset", "synthetic:8x8x1", "--model", "mlp", "--space", str(space),
            "--objectives", "time,accuracy", "--storage", db, "--study", "int", "--train-samples", "3000",
            "--test-samples", "32", "--sampler", "random", "--workers", str(workers), "--workdir", str(trials_dir)]
    # A terminal's foreground job has the default SIGINT action even when pytest runs with SIGINT
    # ignored (nohup, a background job); SIGTERM keeps whatever was inherited.
    default_sigint = (lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) if signame == "SIGINT" else None
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *base, "--trials", "60"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint)
    try:
        seen = _wait_for(lambda: _running_trial("int", db, min_complete=1), timeout=180, what="a running trial",
                         alive=proc)
        if signame == "SIGINT":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=90)
    finally:
        stop_all([proc])
    _assert_no_orphans(str(trials_dir))
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "run the same command to resume" in stderr

    trials = optuna.load_study(study_name="int", storage=db).get_trials(deepcopy=False)
    unfinished = [(t.number, t.state.name, t.user_attrs, t.datetime_start, t.datetime_complete)
                  for t in trials if t.state.name not in ("COMPLETE", "PRUNED", "FAIL")]
    assert not unfinished, (unfinished, len(trials), stderr[-3000:])
    failed = [t for t in trials if t.state.name == "FAIL"]
    # A random config on random labels may itself end as diverged/failed: such a trial carries its
    # own result; every other failed trial must be one the stop interrupted.
    interrupted = [t for t in failed if "interrupted" in str(t.user_attrs.get("advisor.error", ""))]
    others = [t for t in failed if t not in interrupted]
    described = [(t.number, t.user_attrs.get("advisor.status"), t.user_attrs.get("advisor.error")) for t in others]
    # The trial seen running was either recorded as interrupted or finished before the stop reached it
    # (the signal travels through the tune process to the workers; a trial can end in between).
    seen_after = next(t for t in trials if t.number == seen.number)
    assert interrupted or "advisor.result" in seen_after.user_attrs, (
        f"the running trial must be recorded as interrupted; failed trials: {described}")
    for t in others:
        assert t.user_attrs.get("advisor.status") in ("diverged", "failed", "timeout", "oom"), described
        assert "advisor.result" in t.user_attrs, described
    kept = _result_ids(trials)
    assert kept and len(trials) >= 2

    resumed = subprocess.run([sys.executable, "-m", "advisor", *base, "--trials", str(len(trials) + 1), "--json"],
                             capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    finished = json.loads(resumed.stdout)["counts"]["finished"]
    after = optuna.load_study(study_name="int", storage=db).get_trials(deepcopy=False)
    _record_counts(f"{signame} to `advisor tune --workers {workers}`",
                   f"{'killpg(SIGINT), as ^C in a terminal' if signame == 'SIGINT' else 'SIGTERM to the parent'}"
                   " during a trial; then the same command with --trials +1", trials, after,
                   outcome=f"exit 130, {len(interrupted)} running trial(s) recorded FAIL 'interrupted'; resumed to "
                           f"{finished} for a budget of {len(trials) + 1}")
    # Workers that start together may each take the one missing trial (see reliability.md): the
    # budget is reached, and exceeded by at most workers - 1.
    assert len(trials) + 1 <= finished <= len(trials) + workers
    gone = sum(t.user_attrs.get("advisor.status") == "interrupted" for t in after)  # kept, not counted
    assert len(after) == finished + gone and kept <= _result_ids(after)
    assert all(t.state.name in ("COMPLETE", "PRUNED", "FAIL") for t in after)


# ------------------------------------------------------------- a hostile trial inside a study


def test_a_trial_with_a_garbled_progress_channel_fails_and_the_study_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first trial's child floods its progress channel with garbage (the harness test hook);
    # the hook is removed after that trial, so the second trial is an ordinary one.
    monkeypatch.setenv("ADVISOR_TEST_CHILD_BEHAVIOUR", "garbage")
    db = f"sqlite:///{tmp_path / 'garbage.db'}"
    summary = run_study(study_name="garbage", storage=db, space=str(quick_space(tmp_path / "q.yaml")),
                        workload=LOAD_WORKLOAD, objectives="time,accuracy", n_trials=2, sampler="random",
                        wall_time_s=120, progress=lambda p: os.environ.pop("ADVISOR_TEST_CHILD_BEHAVIOUR", None))
    trials = _trials("garbage", db)
    _record_counts("garbage on the progress channel (study level)", "first trial's child writes 10,000 "
                   "non-JSON lines", [], trials, outcome=str(trials[0].user_attrs.get("advisor.error", ""))[:90])
    assert (summary.counts.finished, summary.counts.failed, summary.counts.complete) == (2, 1, 1)
    first, second = trials
    assert first.state.name == "FAIL" and first.user_attrs["advisor.status"] == "failed"
    assert first.user_attrs["advisor.error"].startswith("progress channel:")
    assert first.user_attrs["advisor.result"]["status"] == "failed"
    assert second.state.name == "COMPLETE" and second.user_attrs["advisor.result"]["status"] == "ok"


# ------------------------------------------------------------ PostgreSQL restarted mid-study


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def own_postgres() -> Iterator[tuple[str, Callable[[], None]]]:
    """A throw-away PostgreSQL cluster of this test's own (the shared one must not be restarted).

    Yields ``(url, restart)``; ``restart`` is the script's fast stop followed by a start.
    """
    if os.geteuid() != 0:
        pytest.skip(".ci/postgres.sh runs the server as the postgres user and needs root to do so")
    folder = tempfile.mkdtemp(prefix="advisor-pg-restart-", dir="/tmp")  # the postgres user must reach it
    port = str(_free_port())

    def start() -> str:
        done = subprocess.run(["bash", str(POSTGRES_SH), "start", folder, port], capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    def restart() -> None:
        subprocess.run(["bash", str(POSTGRES_SH), "stop", folder], capture_output=True, timeout=120, check=True)
        time.sleep(2.0)  # workers meet a refused connection, not only a dropped one
        start()

    try:
        yield start(), restart
    finally:
        subprocess.run(["bash", str(POSTGRES_SH), "stop", folder], capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def test_postgres_restart_mid_study_loses_no_completed_trial(own_postgres: tuple[str, Callable[[], None]],
                                                            tmp_path: Path) -> None:
    url, restart = own_postgres
    name, n = "restart", 5
    create_study(study_name=name, storage=url, space=str(quick_space(tmp_path / "q.yaml")), workload=LOAD_WORKLOAD,
                 objectives="time,accuracy", n_trials=n, sampler="random", heartbeat_interval=1, grace_period=3)
    log = tmp_path / "first.log"
    first = start_worker(name, url, log)
    try:
        _wait_for(lambda: _running_trial(name, url, min_complete=2), timeout=180, what="two complete trials",
                  alive=first, log=log)
        before = _trials(name, url)
        kept = _result_ids(before)
        restart()
        code = first.wait(timeout=300)
    finally:
        stop_all([first])
    text = log.read_text(errors="replace")

    # Resume with a fresh worker: the study reaches its budget and keeps every completed trial.
    second = start_worker(name, url, tmp_path / "second.log")
    try:
        second_code = second.wait(timeout=300)
    finally:
        stop_all([second])
    after = _trials(name, url)
    counts = count_trials(after)
    _record_counts("PostgreSQL restarted mid-study", "pg_ctl stop -m fast, 2 s down, start, while a worker "
                   "runs a trial; then a second worker", before, after,
                   outcome=f"first worker exit {code} ({'rode through' if code == 0 else 'one-line error'})"
                           f"; {counts.retried} retried")
    # The first worker either rode through the restart (pool_pre_ping reconnects, writes are
    # retried) or stopped with one clear line; a traceback is neither.
    assert "Traceback" not in text, text[-3000:]
    if code != 0:
        lines = [line for line in text.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("error: ") and "storage" in lines[-1].lower(), text[-2000:]
    assert second_code == 0, (tmp_path / "second.log").read_text()[-3000:]
    assert counts.finished == n and counts.running == 0 and counts.waiting == 0
    assert kept <= _result_ids(after), "a trial completed before the restart was lost"
    ids = [t.user_attrs["advisor.result"]["trial_id"] for t in after if "advisor.result" in t.user_attrs]
    assert len(ids) == len(set(ids))


# ---------------------------------------------------------------------------------- disk full

FSIZE_LIMIT = 512  # bytes: every output below is larger, every input smaller


class FullDisk:
    """A folder where writing fails: a full tmpfs (ENOSPC, as root) or RLIMIT_FSIZE (EFBIG).

    With RLIMIT_FSIZE the limit applies in the subprocess only, and SIGXFSZ is ignored there
    (Python ignores it at start-up too), so a write past it is an ``OSError``, as on a full disk.
    """

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.folder = folder

    def fill(self) -> None:
        """Use up the rest of the filesystem (after the test has placed its previous files)."""
        if self.kind != "tmpfs":
            return
        with open(self.folder / "filler", "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 4096)

    def files(self) -> set[str]:
        return {p.name for p in self.folder.iterdir()} - {"filler"}

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        def limit() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))

        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="ignore")
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=240, env=env,
                              preexec_fn=limit if self.kind == "rlimit" else None)


@pytest.fixture(params=["rlimit", "tmpfs"])
def full_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FullDisk]:
    folder = tmp_path / "full"
    folder.mkdir()
    if request.param == "rlimit":
        yield FullDisk("rlimit", folder)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not permitted'}); the RLIMIT_FSIZE "
                    "variant covers the case")
    try:
        yield FullDisk("tmpfs", folder)
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture(scope="module")
def results_study(tmp_path_factory: pytest.TempPathFactory) -> str:
    """TEST DATA: a SQLite study of 60 constructed trial records with three objectives."""
    import optuna
    from optuna.trial import TrialState, create_trial

    from _knowledge_rows import make_results

    url = f"sqlite:///{tmp_path_factory.mktemp('study') / 'results.db'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="full", storage=url, directions=["minimize", "maximize", "minimize"])
    study.set_user_attr("advisor.spec", {"objectives": ["time", "accuracy", "memory"]})
    for r in make_results(60):
        ok = r.status == "ok"
        study.add_trial(create_trial(
            state=TrialState.COMPLETE if ok else TrialState.FAIL,
            values=[r.train_time_s, r.test_accuracy, r.peak_memory_mb] if ok else None,
            user_attrs={"advisor.result": r.to_dict()}))
    return url


def _assert_refused_and_intact(done: subprocess.CompletedProcess[str], disk: FullDisk, previous: Path,
                               content: bytes) -> None:
    record(f"disk full ({disk.kind}): {previous.name}", exit_code=done.returncode,
           previous_intact=previous.read_bytes() == content, leftovers=sorted(disk.files() - {previous.name}),
           stderr_lines=len([x for x in done.stderr.splitlines() if x.strip()]),
           last_line=(done.stderr.strip().splitlines() or [""])[-1][:160])
    assert done.returncode != 0, (done.stdout[-500:], done.stderr[-500:])
    assert previous.read_bytes() == content  # the previous version is intact
    assert disk.files() == {previous.name}  # and no partial or temporary file is left beside it
    _one_line_error(done.stderr)


def test_knowledge_export_on_a_full_disk(full_disk: FullDisk, results_study: str) -> None:
    previous = full_disk.folder / "kb.csv.gz"
    previous.write_bytes(b"previous version")
    full_disk.fill()
    done = full_disk.run(["-m", "advisor", "knowledge", "export", "--storage", results_study, "--out", str(previous)])
    _assert_refused_and_intact(done, full_disk, previous, b"previous version")


def test_pareto_export_on_a_full_disk(full_disk: FullDisk, results_study: str) -> None:
    previous = full_disk.folder / "front.json"
    previous.write_bytes(b'{"previous": true}')
    full_disk.fill()
    done = full_disk.run(["-m", "advisor", "pareto", "--study", "full", "--storage", results_study, "--format",
                          "json", "--out", str(previous)])
    _assert_refused_and_intact(done, full_disk, previous, b'{"previous": true}')


_TRIAL_SCRIPT = textwrap.dedent("""
    import json, sys
    from advisor.harness import run_trial
    from advisor.records import Config, Workload
    try:
        result = run_trial(Workload(dataset="synthetic:8x8x1", model="mlp", train_samples=64, test_samples=32),
                           Config(framework="sklearn", epochs=1, batch_size=32, threads=1), workdir=sys.argv[1])
    except BaseException as exc:
        print(json.dumps({"raised": f"{type(exc).__name__}: {exc}"}))
    else:
        print(json.dumps({"status": result.status, "error": result.error}))
""")


def test_trial_folder_on_a_full_disk_is_a_failed_trial(full_disk: FullDisk) -> None:
    full_disk.fill()
    done = full_disk.run(["-c", _TRIAL_SCRIPT, str(full_disk.folder)])
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    record(f"disk full ({full_disk.kind}): trial folder", **outcome)
    assert "raised" not in outcome, outcome  # run_trial never raises for a trial that cannot run
    assert outcome["status"] == "failed" and outcome["error"] and "\n" not in outcome["error"]


def test_full_disk_fixture_really_refuses_writes(full_disk: FullDisk) -> None:
    # The cases above prove something only if writing there fails.
    full_disk.fill()
    done = full_disk.run(["-c", f"open({str(full_disk.folder / 'probe')!r}, 'wb').write(b'x' * 65536)"])
    assert done.returncode != 0 and ("File too large" in done.stderr or "No space left" in done.stderr)


def test_workers_opening_a_new_sqlite_storage_at_the_same_moment_all_get_it(tmp_path: Path) -> None:
    """Each process creates the tables of a database it finds empty; the losers of that race see
    'table ... already exists' (or a duplicate schema version row) and open it again rather than failing (a second worker started
    beside the first used to die here)."""
    db = f"sqlite:///{tmp_path}/race.db"
    go = time.time() + 3.0
    code = textwrap.dedent(f"""
        import time
        from advisor.tuning import open_storage
        time.sleep(max(0.0, {go!r} - time.time()))
        open_storage({db!r}).get_all_studies()
        print("opened")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-500:] for _, err in outs]
    assert all(out.strip() == "opened" for out, _ in outs)


def test_a_schema_race_is_retried_and_other_open_errors_are_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna.storages

    from advisor.errors import StorageError

    real = optuna.storages.RDBStorage
    calls = []

    class LosingOnce(real):  # type: ignore[misc,valid-type]  # the race's loser, injected once
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("(sqlite3.OperationalError) table trial_intermediate_values already exists")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", LosingOnce)
    assert open_storage(f"sqlite:///{tmp_path}/a.db").get_all_studies() == [] and len(calls) == 2

    class Broken(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("(sqlite3.OperationalError) disk I/O error")

    monkeypatch.setattr(optuna.storages, "RDBStorage", Broken)
    with pytest.raises(StorageError, match="disk I/O error"):
        open_storage(f"sqlite:///{tmp_path}/b.db")
