"""Distributed tuning on a real PostgreSQL: two workers, one killed mid-trial, nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from advisor.records import Workload
from advisor.tuning import count_trials, create_study, list_studies, open_storage

pytestmark = pytest.mark.postgres

N_TRIALS = 6


def _space(path: Path) -> Path:
    path.write_text(
        "framework: sklearn\ntarget: cpu\nparams:\n"
        "  batch_size: {type: int, low: 16, high: 128, log: true}\n"
        "  learning_rate: {type: float, low: 1.0e-3, high: 0.1, log: true}\n"
        "  epochs: {type: int, low: 2, high: 3}\n"
        "  optimizer: {type: categorical, choices: [sgd, adam]}\n"
        "fixed:\n  threads: 1\n")
    return path


def _worker(study: str, url: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        # Its own session, so the test can kill the worker and its trial child like a lost machine.
        return subprocess.Popen([sys.executable, "-m", "advisor", "worker", "--study", study, "--storage", url],
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def test_two_workers_one_killed_mid_trial(postgres_url: str, tmp_path: Path) -> None:
    import optuna

    name = f"dist-{uuid.uuid4().hex[:12]}"
    study, _, _ = create_study(
        study_name=name, storage=postgres_url, space=str(_space(tmp_path / "sk.yaml")),
        workload=Workload(dataset="digits", model="mlp", train_samples=200, test_samples=100),
        objectives="time,accuracy", n_trials=N_TRIALS, seed=0, heartbeat_interval=1, grace_period=3)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        victim = _worker(name, postgres_url, tmp_path / "victim.log")
        survivor = _worker(name, postgres_url, tmp_path / "survivor.log")
        workers = [victim, survivor]
        # Wait until the victim is inside a trial, then kill it (and its trial child) outright.
        killed_number = None
        deadline = time.monotonic() + 120
        while killed_number is None and time.monotonic() < deadline:
            for t in study.get_trials(deepcopy=False):
                if (t.state.name == "RUNNING" and "advisor.started" in t.user_attrs
                        and str(t.user_attrs.get("advisor.worker", "")).endswith(f"-{victim.pid}")):
                    killed_number = t.number
                    break
            else:
                assert victim.poll() is None, (tmp_path / "victim.log").read_text()[-2000:]
                time.sleep(0.2)
        assert killed_number is not None, "the victim never started a trial"
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        assert survivor.wait(timeout=240) == 0, (tmp_path / "survivor.log").read_text()[-3000:]

        storage = open_storage(postgres_url, heartbeat_interval=None)
        trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
        counts = count_trials(trials)
        assert counts.finished == N_TRIALS and counts.running == 0 and counts.waiting == 0
        killed = trials[killed_number]
        assert killed.state.name == "FAIL" and "advisor.result" not in killed.user_attrs
        retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed_number]
        assert len(retries) == 1 and retries[0].params == killed.params
        assert retries[0].state.name in ("COMPLETE", "PRUNED", "FAIL")
        assert counts.retried == 1 and len(trials) == N_TRIALS + 1
        finished = [t for t in trials if t.number != killed_number]
        ids = [t.user_attrs["advisor.result"]["trial_id"] for t in finished]
        assert len(ids) == N_TRIALS and len(set(ids)) == N_TRIALS  # none lost, none duplicated
        assert {t.user_attrs["advisor.result"]["trial_number"] for t in finished} == {t.number for t in finished}

        listed = {s.name: s for s in list_studies(postgres_url)}
        assert listed[name].counts.finished == N_TRIALS and listed[name].n_trials == N_TRIALS
        # the CLI reads the same storage
        out = subprocess.run([sys.executable, "-m", "advisor", "pareto", "--study", name, "--storage",
                              postgres_url, "--format", "json"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["front"]
    finally:
        for p in workers:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        try:
            optuna.delete_study(study_name=name, storage=open_storage(postgres_url, heartbeat_interval=None))
        except KeyError:
            pass
