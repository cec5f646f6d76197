"""Hardware detection, the profile id, GEMM calibration and its cache, and ``advisor hardware``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor import hardware
from advisor.cli import app
from advisor.errors import InvalidParameterError
from advisor.records import GpuInfo, HardwareProfile

SMI_OUTPUT = """0, NVIDIA H200, 143771, 550.54.15
1, NVIDIA H200, 143771, 550.54.15
garbage line
"""


def test_identity_describes_this_machine() -> None:
    profile = hardware.identity(refresh=True)
    assert profile.cpu_model and profile.cpu_model != "unknown"
    assert profile.logical_cores >= profile.physical_cores >= 1
    assert set(profile.affinity) == set(os.sched_getaffinity(0))
    assert profile.memory_gb > 0.1
    assert len(profile.profile_id) == 16 and int(profile.profile_id, 16) >= 0
    assert hardware.identity(refresh=True).profile_id == profile.profile_id  # stable
    assert profile.blas == () and profile.gemm_gflops == {}


def test_profile_id_depends_on_what_makes_machines_differ() -> None:
    gpu = GpuInfo(index=0, name="NVIDIA H200", memory_mb=143771.0)
    base = hardware._profile_id("AMD EPYC", 2, 2, 23.5, ())
    assert hardware._profile_id("AMD EPYC", 2, 2, 23.6, ()) == base  # memory is rounded
    assert hardware._profile_id("AMD EPYC", 2, 4, 23.5, ()) != base
    assert hardware._profile_id("Intel Xeon", 2, 2, 23.5, ()) != base
    assert hardware._profile_id("AMD EPYC", 2, 2, 23.5, (gpu,)) != base


def test_nvidia_smi_output_is_parsed() -> None:
    gpus = hardware._parse_smi(SMI_OUTPUT)
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].name == "NVIDIA H200" and gpus[0].memory_mb == 143771.0 and gpus[0].driver == "550.54.15"


def test_detect_lists_numpy_blas_and_no_speed_before_calibration() -> None:
    profile = hardware.detect(refresh=True)
    assert profile.profile_id == hardware.identity().profile_id
    assert any(lib.get("user_api") == "blas" for lib in profile.blas)
    assert profile.gemm_gflops == {}
    assert hardware.load_cached() is None


def test_calibrate_measures_and_caches_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    hardware.detect(refresh=True)
    profile = hardware.calibrate(threads=[1, 2], size=128, repeats=2)
    assert set(profile.gemm_gflops) == {"1", "2"}
    assert all(v > 0 for v in profile.gemm_gflops.values())
    files = list((tmp_path / "hardware").iterdir())
    assert [f.name for f in files] == [f"{profile.profile_id}.json"]  # no temporary left behind
    assert HardwareProfile.from_json(files[0].read_text()) == profile
    assert hardware.load_cached() == profile
    assert hardware.detect(refresh=True).gemm_gflops == profile.gemm_gflops


def test_unreadable_cache_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    folder = tmp_path / "hardware"
    folder.mkdir()
    (folder / f"{hardware.identity().profile_id}.json").write_text("{not json")
    assert hardware.load_cached() is None


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"threads": [0]}, "threads"), ({"threads": []}, "threads"), ({"size": 2}, "size"), ({"repeats": 0}, "repeats"),
])
def test_calibrate_rejects_bad_arguments(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=repr(name)):
        hardware.calibrate(**kwargs)


def test_default_thread_counts_double_up_to_the_cores() -> None:
    assert hardware._default_thread_counts(1) == [1]
    assert hardware._default_thread_counts(6) == [1, 2, 4, 6]
    assert hardware._default_thread_counts(8) == [1, 2, 4, 8]


def test_hardware_module_loads_no_framework() -> None:
    code = "import sys, advisor.hardware as h; h.detect(); print(sorted(m for m in ('torch', 'tensorflow', 'onnxruntime') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no nvidia-smi: this machine has no NVIDIA GPU")
def test_gpus_are_detected_when_present() -> None:
    profile = hardware.identity(refresh=True)
    assert profile.gpus and profile.device_kind == "gpu"
    assert all(g.memory_mb > 0 and g.name for g in profile.gpus)


def test_cli_hardware_json() -> None:
    result = CliRunner().invoke(app, ["hardware", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["profile_id"] == hardware.identity().profile_id
    assert data["logical_cores"] >= 1


def test_cli_hardware_table_and_calibrate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    monkeypatch.setattr(hardware, "_default_thread_counts", lambda cores: [1])
    hardware.detect(refresh=True)
    result = CliRunner().invoke(app, ["hardware", "--calibrate"])
    assert result.exit_code == 0, result.output
    assert "GEMM GFLOP/s" in result.output and "1 threads:" in result.output
    assert hardware.load_cached() is not None
