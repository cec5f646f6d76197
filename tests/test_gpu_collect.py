"""benchmarks/gpu/collect.sh --dry-run: the prepared GPU spread, its predicted cost within 10 minutes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "collect.sh"


@pytest.mark.parametrize("gpu", ["H200", "T4", "GTX 1080 Ti"])
def test_dry_run_lists_a_spread_that_fits_ten_minutes(gpu: str) -> None:
    done = subprocess.run([str(SCRIPT), "--dry-run", "--json", "--gpu-model", gpu], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    trials = plan["trials"]
    assert plan["predicted_total_s"] <= 600 and sum(t["predicted_s"] for t in trials) == pytest.approx(
        plan["predicted_total_s"])
    assert {t["framework"] for t in trials} == {"torch", "tensorflow", "onnxruntime"}
    assert {t["dataset"] for t in trials} == {"mnist", "fashion-mnist", "cifar10"}
    assert any(t["mixed_precision"] for t in trials) and len({t["batch_size"] for t in trials}) >= 2
    assert len({t["model"] for t in trials}) >= 4 and all(t["predicted_s"] > 0 for t in trials)
