"""The device model: accelerator rows with sources, a roofline step time, and GPU answers that respect it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor import devices
from advisor.cli import app
from advisor.errors import UnknownNameError
from advisor.records import Config

from _knowledge_rows import fitted_table

runner = CliRunner()


def test_every_row_states_its_figures_and_source() -> None:
    names = {a.name for a in devices.ACCELERATORS}
    for wanted in ("T4", "L4", "A10", "V100", "A100", "H100", "H200", "RTX 3090", "RTX 4090", "GTX 1080 Ti"):
        assert any(n.endswith(wanted) for n in names), wanted
    for a in devices.ACCELERATORS:
        assert a.fp32_tflops > 0 and a.bandwidth_gbs > 0 and a.memory_gib > 0 and a.source.startswith("https://")
        assert a.peak_tflops("bf16") >= a.peak_tflops("fp32") * (1 if a.bf16_tflops else 1)
    assert devices.get_accelerator("h200").name == "NVIDIA H200"
    assert devices.get_accelerator("NVIDIA H200 NVL").name == "NVIDIA H200"  # a detected name with a suffix
    # the longest known name wins: nvidia-smi's "A100-SXM4-80GB" is an A100, not an A10
    assert devices.get_accelerator("NVIDIA A100-SXM4-80GB").name == "NVIDIA A100"
    assert devices.get_accelerator("NVIDIA A10").name == "NVIDIA A10"
    assert devices.get_accelerator(None).name == devices.DEFAULT_GPU
    with pytest.raises(UnknownNameError, match=r"Unknown GPU model 'TPU v9'.*A100.*H200"):
        devices.get_accelerator("TPU v9")


def test_step_time_lies_between_the_roofline_and_its_cap() -> None:
    a100 = devices.get_accelerator("a100")
    for batch in (16, 128, 1024):
        cfg = Config(framework="torch", batch_size=batch, epochs=1, device="cuda")
        est = devices.estimate_step(device=a100, config=cfg, flops_per_sample=1.5e8, params=500_000,
                                    activations_per_sample=2e5, layers=12, sample_bytes=3072 * 4)
        assert est.roofline_s >= batch * 1.5e8 / (a100.peak_tflops("tf32") * 1e12)  # never faster than the peak
        assert est.roofline_s <= est.expected_s <= devices.MAX_SLOWDOWN * est.roofline_s
    half = devices.estimate_step(device=a100, config=Config(framework="torch", batch_size=1024, epochs=1,
                                                            device="cuda", mixed_precision=True),
                                 flops_per_sample=1.5e8, params=500_000, activations_per_sample=2e5, layers=12,
                                 sample_bytes=3072 * 4)
    assert half.precision == "bf16" and half.roofline_s < est.roofline_s
    t4 = devices.get_accelerator("t4")
    huge = devices.estimate_step(device=t4, config=Config(framework="torch", batch_size=4096, epochs=1, device="cuda"),
                                 flops_per_sample=1e9, params=10**9, activations_per_sample=1e7, layers=50,
                                 sample_bytes=3072 * 4)
    assert huge.memory_mib > t4.memory_gib * 1024  # does not fit: recommend does not offer it


def test_gpu_answers_respect_the_device_model(tmp_path: Path) -> None:
    table, model_dir = fitted_table(tmp_path, 120, seed=4, rounds=40)  # CPU trials only
    base = ["recommend", "--table", str(table), "--model-dir", str(model_dir), "--candidates", "60",
            "--dataset", "cifar10", "--gpu"]
    result = runner.invoke(app, [*base, "--gpu-model", "H200", "--json", "--top", "5"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert any("device model of the NVIDIA H200" in r for r in data["reasons"])
    for c in data["choices"]:
        t = c["time_s"]
        assert 0 < t["lo"] <= t["mid"] <= t["hi"] <= devices.MAX_SLOWDOWN * t["lo"] * (1 + 1e-9)
        assert c["evidence"] == []  # CPU trials are never GPU evidence
        assert c["memory_mb"]["mid"] <= 141 * 1024
    bad = runner.invoke(app, [*base, "--gpu-model", "TPU v9"])
    assert bad.exit_code == 1 and "Unknown GPU model 'TPU v9'" in bad.output
