"""Studies read well in optuna-dashboard: metric names, parameters and short outcome attributes,
checked through the dashboard's own HTTP API, served on loopback against a study the suite ran."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from advisor.records import Workload


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback only
        return json.loads(response.read().decode())


@pytest.mark.timeout(300)
def test_dashboard_shows_metric_names_params_and_outcomes(tmp_path: Path) -> None:
    pytest.importorskip("optuna_dashboard")
    pytest.importorskip("sklearn")
    from advisor.tuning import run_study

    storage = f"sqlite:///{tmp_path}/dash.db"
    run_study(study_name="dash", workload=Workload(dataset="digits", model="mlp", train_samples=150, test_samples=60),
              storage=storage, frameworks=["sklearn"], n_trials=3, seed=2, sampler="random")
    port = _free_port()
    exe = shutil.which("optuna-dashboard")
    cmd = [exe] if exe else [sys.executable, "-m", "optuna_dashboard"]
    server = subprocess.Popen([*cmd, storage, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        studies = None
        while time.monotonic() < deadline:
            try:
                studies = _get(f"{base}/api/studies")
                break
            except OSError:
                time.sleep(0.5)
        assert isinstance(studies, dict), "optuna-dashboard did not answer on loopback"
        (summary,) = [s for s in studies["study_summaries"] if s["study_name"] == "dash"]
        detail = _get(f"{base}/api/studies/{summary['study_id']}")
        assert isinstance(detail, dict)
        names = detail.get("objective_names")
        assert names and len(names) == 3 and not any(n.startswith("Objective") for n in names), detail.keys()
        assert names[0].startswith("time") and names[1].startswith("accuracy")
        trials = detail["trials"]
        assert len(trials) == 3
        for t in trials:
            params = {p["name"] for p in t["params"]}
            assert {"batch_size", "learning_rate", "epochs"} <= params, params
            attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
            assert attrs["advisor.framework"] == "sklearn" and "advisor.test_accuracy" in attrs
            assert "T" in attrs["advisor.started"]  # an ISO time, not a raw epoch
    finally:
        server.terminate()
        server.wait(timeout=20)
