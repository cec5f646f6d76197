"""The ONNX Runtime training-API backend trains the shared specs through the shared protocol."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip(
    "onnxruntime.training.api",
    reason="onnxruntime-training is not installed (pip install 'advisor[onnx]')",
)
import onnxruntime  # noqa: E402

from advisor.errors import DeviceError, InvalidParameterError  # noqa: E402
from advisor.frameworks import _onnx_graph, get_trainer_class  # noqa: E402
from advisor.frameworks.base import TrialDiverged, run_protocol  # noqa: E402
from advisor.frameworks.onnxruntime import OnnxRuntimeTrainer  # noqa: E402
from advisor.models import Layer, ModelSpec, get_model, param_count  # noqa: E402
from advisor.records import Config  # noqa: E402
from tests._backend_checks import check_augmentation_changes_training_batches_but_never_the_test_set  # noqa: E402

# One config shared with the tensorflow tests: both backends must learn digits with it.
SHARED = dict(framework="onnxruntime", batch_size=32, learning_rate=1e-3, optimizer="adam", epochs=10)


@pytest.fixture(scope="module")
def digits() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[..., None]
    y = data.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, stratify=y, random_state=0)
    mean, std = x_train.mean(), x_train.std()
    return {"x_train": (x_train - mean) / std, "y_train": y_train,
            "x_test": (x_test - mean) / std, "y_test": y_test}


def _run(config: Config, model: str, data: dict[str, np.ndarray]) -> tuple[object, list[dict]]:
    trainer = OnnxRuntimeTrainer(config)
    trainer.configure()
    events: list[dict] = []
    try:
        result = run_protocol(trainer, get_model(model), num_classes=10, config=config,
                              emit=events.append, **data)
    finally:
        trainer.close()
    return result, events


def test_registry_returns_this_backend() -> None:
    assert get_trainer_class("onnxruntime") is OnnxRuntimeTrainer


@pytest.mark.parametrize("model", ["lenet5", "mlp"])
def test_learns_digits(digits: dict[str, np.ndarray], model: str) -> None:
    config = Config(**SHARED)
    result, events = _run(config, model, digits)
    assert [e["epoch"] for e in events] == list(range(1, 11))
    assert result.params == param_count(get_model(model), (8, 8, 1), 10)
    assert events[-1]["loss"] < events[0]["loss"] / 3
    assert events[-1]["test_accuracy"] >= 0.90
    assert result.description["ort_optimizer"] == "AdamW"


def test_plain_sgd_learns_digits(digits: dict[str, np.ndarray]) -> None:
    config = Config(**{**SHARED, "optimizer": "sgd", "learning_rate": 0.05, "epochs": 5})
    result, events = _run(config, "mlp", digits)
    assert events[-1]["test_accuracy"] >= 0.90
    assert result.description["ort_optimizer"] == "SGD"
    assert result.description["weight_decay_kind"] == "none"


@pytest.mark.parametrize(("model", "shape"), [
    ("lenet5", (8, 8, 1)), ("mlp", (28, 28, 1)), ("cifar_quick", (32, 32, 3)),
    ("lenet5", (28, 28, 1)), ("cifar_quick", (8, 8, 1)), ("mlp", (32, 32, 3)),
])
def test_param_count_matches_spec(model: str, shape: tuple[int, int, int]) -> None:
    trainer = OnnxRuntimeTrainer(Config(framework="onnxruntime"))
    trainer.configure()
    try:
        assert trainer.build(get_model(model), shape, 10) == param_count(get_model(model), shape, 10)
    finally:
        trainer.close()


def test_cifar_quick_trains_a_step() -> None:
    # cifar_quick's average pooling is the one layer ORT's own op could not train (see _onnx_graph).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((48, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 10, 48).astype(np.int64)
    trainer = OnnxRuntimeTrainer(Config(framework="onnxruntime", batch_size=16, optimizer="adam",
                                        learning_rate=1e-3))
    trainer.configure()
    try:
        trainer.build(get_model("cifar_quick"), (32, 32, 3), 10)
        losses = [trainer.train_epoch(x, y) for _ in range(3)]
        assert all(np.isfinite(losses)) and losses[-1] < losses[0]
        assert trainer.predict(x).shape == (48,)
    finally:
        trainer.close()


def test_average_pooling_graph_matches_numpy() -> None:
    spec = ModelSpec("pool", (Layer("avgpool"), Layer("flatten"), Layer("dense", None)), "", False)
    model = _onnx_graph.build_model(spec, (5, 7, 2), 3, seed=0)  # odd sides: floor, like AveragePool
    from onnx import numpy_helper

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert sum(v.size for v in inits.values()) == param_count(spec, (5, 7, 2), 3)
    x = np.random.default_rng(1).standard_normal((4, 2, 5, 7)).astype(np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {_onnx_graph.INPUT_NAME: x})
    pooled = x[:, :, :4, :6].reshape(4, 2, 2, 2, 3, 2).mean(axis=(3, 5))
    expected = pooled.reshape(4, -1) @ inits["dense2.weight"] + inits["dense2.bias"]
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_adamw_weight_decay_is_decoupled() -> None:
    """One step: AdamW (ORT's HF mode) shrinks the Adam-updated weights by (1 - lr * wd).

    torch's Adam would instead add wd * w to the gradient, which Adam's normalisation all but
    cancels on the first step: this rules that reading out.
    """
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 4, 1)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int64)
    lr, wd = 0.01, 0.1
    params = {}
    for decay in (0.0, wd):
        trainer = OnnxRuntimeTrainer(Config(framework="onnxruntime", batch_size=16, optimizer="adam",
                                            learning_rate=lr, weight_decay=decay, seed=3))
        trainer.configure()
        trainer.build(get_model("mlp"), (4, 4, 1), 3)
        before = trainer.module_.get_contiguous_parameters().numpy().copy()
        trainer.train_epoch(x, y)
        params[decay] = (before, trainer.module_.get_contiguous_parameters().numpy().copy())
        trainer.close()
    start, plain = params[0.0]
    start_wd, decayed = params[wd]
    np.testing.assert_array_equal(start, start_wd)
    np.testing.assert_allclose(decayed, plain * (1 - lr * wd), rtol=1e-5, atol=1e-7)
    assert np.abs(decayed - plain).max() > 1e-4  # the decay is visible at this tolerance


def test_sgd_with_weight_decay_is_refused() -> None:
    # The record refuses it before any trial starts, so the trainer never sees it.
    with pytest.raises(InvalidParameterError, match="has no weight decay"):
        Config(framework="onnxruntime", optimizer="sgd", weight_decay=1e-4)


def test_huge_learning_rate_diverges(digits: dict[str, np.ndarray]) -> None:
    config = Config(**{**SHARED, "learning_rate": 1e4, "epochs": 3})
    with pytest.raises(TrialDiverged):
        _run(config, "lenet5", digits)


@pytest.mark.parametrize(("intra", "inter", "mode", "level"), [
    (1, 2, "parallel", "basic"), (2, 1, "sequential", "disable"), (2, 2, None, None),
])
def test_configure_reports_session_options(intra: int, inter: int, mode: str | None, level: str | None) -> None:
    config = Config(framework="onnxruntime", threads=intra, inter_op_threads=inter,
                    execution_mode=mode, graph_optimization=level)
    trainer = OnnxRuntimeTrainer(config)
    report = trainer.configure()
    assert (report["intra_op_threads"], report["inter_op_threads"]) == (intra, inter)
    assert report["execution_mode"] == (mode or "sequential")
    assert report["graph_optimization"] == (level or "all")  # ORT's default level
    # The options really reach the training session: building with them must work.
    trainer.build(get_model("mlp"), (8, 8, 1), 10)
    assert trainer.module_._session_options is trainer._options
    trainer.close()


def test_artifacts_live_in_the_trial_folder_and_are_removed(tmp_path, monkeypatch) -> None:
    (tmp_path / "trial.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    trainer = OnnxRuntimeTrainer(Config(framework="onnxruntime"))
    trainer.configure()
    assert trainer.versions()["onnxruntime"] == onnxruntime.__version__
    trainer.build(get_model("mlp"), (8, 8, 1), 10)
    folder = trainer._dir
    assert folder is not None and os.path.dirname(folder) == str(tmp_path)
    assert os.path.isfile(os.path.join(folder, "training_model.onnx"))
    trainer.close()
    assert not os.path.exists(folder)


def test_cuda_without_gpu_raises_device_error() -> None:
    trainer = OnnxRuntimeTrainer(Config(framework="onnxruntime", device="cuda"))
    try:
        trainer.configure()
    except DeviceError as exc:
        assert "onnxruntime sees no GPU" in str(exc) and "\n" not in str(exc)
    else:
        pytest.skip("onnxruntime created a CUDA session here; the missing-GPU path cannot be tested")


# ------------------------------------------------------------------ recipe knobs (advisor.knobs)


@pytest.mark.parametrize(("schedule", "warmup", "optimizer"), [
    ("onecycle", 0.2, "sgd"), ("cosine", 0.0, "adamw"), ("step", 0.0, "adam"),
])
def test_learning_rate_applied_per_step_follows_the_schedule(digits, schedule: str, warmup: float,
                                                             optimizer: str) -> None:
    from advisor.frameworks.base import learning_rate_at

    config = Config(framework="onnxruntime", optimizer=optimizer, learning_rate=0.05, batch_size=8, epochs=3,
                    schedule=schedule, warmup_fraction=warmup)
    trainer = OnnxRuntimeTrainer(config)
    trainer.configure()
    trainer.build(get_model("lenet5"), (8, 8, 1), 10)
    x, y = digits["x_train"][:40], digits["y_train"][:40]
    trainer.plan(5)  # 40 samples at batch 8: 5 steps an epoch, 15 in all
    seen = []
    try:
        for step in range(15):
            start = (step % 5) * 8
            trainer.train_epoch(x[start:start + 8], y[start:start + 8])  # one batch: one step
            seen.append(trainer.current_learning_rate())  # ORT's get_learning_rate
    finally:
        trainer.close()
    expected = [learning_rate_at(config, t, 15) for t in range(15)]
    assert seen == pytest.approx(expected, rel=1e-6)  # ORT keeps the rate as float32
    assert len(set(seen)) > 2


def test_a_constant_rate_is_set_once(digits) -> None:
    config = Config(framework="onnxruntime", optimizer="adam", learning_rate=1e-3, batch_size=32, epochs=2)
    trainer = OnnxRuntimeTrainer(config)
    trainer.configure()
    trainer.build(get_model("mlp"), (8, 8, 1), 10)
    calls: list[float] = []
    real = trainer.optimizer_.set_learning_rate
    trainer.optimizer_.set_learning_rate = lambda rate: (calls.append(rate), real(rate))
    try:
        trainer.plan(10)
        trainer.train_epoch(digits["x_train"][:320], digits["y_train"][:320])
        trainer.train_epoch(digits["x_train"][:320], digits["y_train"][:320])
        assert calls == [] and trainer.current_learning_rate() == pytest.approx(1e-3)
    finally:
        trainer.close()


def test_adamw_is_the_same_ort_optimizer_as_adam() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 4, 4, 1)).astype(np.float32)
    y = rng.integers(0, 3, 32).astype(np.int64)
    params, described = {}, {}
    for optimizer in ("adam", "adamw"):
        trainer = OnnxRuntimeTrainer(Config(framework="onnxruntime", optimizer=optimizer, batch_size=16,
                                            learning_rate=0.01, weight_decay=0.1, seed=3))
        trainer.configure()
        trainer.build(get_model("mlp"), (4, 4, 1), 3)
        before = trainer.module_.get_contiguous_parameters().numpy().copy()
        trainer.train_epoch(x, y)
        params[optimizer] = trainer.module_.get_contiguous_parameters().numpy().copy()
        described[optimizer] = trainer.describe()
        trainer.close()
    np.testing.assert_array_equal(params["adam"], params["adamw"])
    assert np.abs(params["adamw"] - before).max() > 1e-3  # it trained
    assert described["adamw"]["ort_optimizer"] == "AdamW"
    assert described["adamw"]["weight_decay_kind"] == "decoupled"


def test_augmentation_changes_training_batches_but_never_the_test_set(digits) -> None:
    check_augmentation_changes_training_batches_but_never_the_test_set(OnnxRuntimeTrainer, "onnxruntime", digits)
