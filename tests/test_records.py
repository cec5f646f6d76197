from __future__ import annotations

import json
import math

import pytest

from advisor.errors import InvalidParameterError
from advisor.records import (
    Config, EpochRecord, GpuInfo, HardwareProfile, TrialResult, Workload,
)


def _result(**changes):  # type: ignore[no-untyped-def]
    base = dict(
        trial_id="abc",
        status="ok",
        workload=Workload(dataset="digits", model="lenet5", train_samples=500),
        config=Config(framework="torch", batch_size=32, learning_rate=0.05, epochs=2,
                      optimizer="momentum", momentum=0.9, threads=2),
        epochs=(EpochRecord(1, 1.5, 1.5, 0.9, 0.81, 0.1), EpochRecord(2, 2.9, 1.4, 0.4, 0.93, 0.1)),
        cores_granted=(0, 1),
        input_shape=(8, 8, 1),
        threadpools=({"internal_api": "openblas", "num_threads": 2},),
        test_accuracy=0.93,
        train_time_s=2.9,
    )
    base.update(changes)
    return TrialResult(**base)


def test_trial_result_round_trips_through_json() -> None:
    r = _result()
    again = TrialResult.from_json(r.to_json())
    assert again == r
    data = json.loads(r.to_json())
    assert data["accuracy_curve"] == [0.81, 0.93]
    assert data["epoch_times"] == [1.5, 1.4]
    assert data["config"]["optimizer"] == "momentum"


def test_hardware_profile_round_trips() -> None:
    hw = HardwareProfile(profile_id="x1", cpu_model="cpu", physical_cores=2, logical_cores=2,
                         affinity=(0, 1), memory_gb=23.4,
                         gpus=(GpuInfo(0, "H200", 141000.0),), gemm_gflops={"1": 50.0, "2": 95.5})
    again = HardwareProfile.from_json(hw.to_json())
    assert again == hw
    assert again.device_kind == "gpu"


@pytest.mark.parametrize("field,value", [
    ("batch_size", 0), ("batch_size", 2.5), ("learning_rate", 0.0), ("learning_rate", math.nan),
    ("epochs", 0), ("optimizer", "rmsprop"), ("threads", 0), ("device", "tpu"), ("device", "cuda:x"),
    ("momentum", 1.5), ("execution_mode", "fast"),
])
def test_config_rejects_bad_values_with_one_line(field: str, value: object) -> None:
    with pytest.raises(InvalidParameterError) as info:
        Config(framework="torch", **{field: value})
    message = str(info.value)
    assert "\n" not in message
    assert repr(field) in message and "Got" in message


def test_config_rejects_unknown_framework_and_ort_momentum() -> None:
    with pytest.raises(InvalidParameterError, match="framework"):
        Config(framework="caffe")
    with pytest.raises(InvalidParameterError, match="no momentum"):
        Config(framework="onnxruntime", optimizer="momentum", momentum=0.9)


def test_invalid_parameter_is_also_value_error() -> None:
    with pytest.raises(ValueError):
        Workload(dataset="", model="mlp")


def test_status_is_validated() -> None:
    with pytest.raises(InvalidParameterError, match="status"):
        _result(status="exploded")


def test_from_dict_rejects_unknown_keys() -> None:
    data = Config(framework="sklearn").to_dict()
    data["colour"] = "red"
    with pytest.raises(InvalidParameterError, match="colour"):
        Config.from_dict(data)


def test_config_rejects_ort_sgd_weight_decay() -> None:
    with pytest.raises(InvalidParameterError, match="no weight decay"):
        Config(framework="onnxruntime", optimizer="sgd", weight_decay=1e-4)
    assert Config(framework="onnxruntime", optimizer="adam", weight_decay=1e-4).weight_decay == 1e-4


def test_config_to_dict_is_asdict() -> None:
    """Config has its own fast to_dict; it must stay exactly dataclasses.asdict (every field, in order)."""
    import dataclasses

    from advisor.records import Config

    for cfg in (Config(framework="torch"), Config(framework="tensorflow", optimizer="momentum", momentum=0.9,
                                                  xla=True, onednn=False, device="cuda:1", mixed_precision=True)):
        assert list(cfg.to_dict().items()) == list(dataclasses.asdict(cfg).items())
        assert Config.from_dict(cfg.to_dict()) == cfg
