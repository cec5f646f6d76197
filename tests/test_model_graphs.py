"""The graph builders (batch norm, residual blocks, global pooling) give the same model on torch,
TensorFlow and ONNX Runtime: one contract, run against every backend through one fixture."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pytest

from advisor import models
from advisor.errors import InvalidParameterError
from advisor.frameworks import get_trainer_class
from advisor.frameworks.base import run_protocol
from advisor.models import BN_EPS, BN_MOMENTUM, Layer, ModelSpec
from advisor.records import Config

BACKENDS = {
    "torch": ("torch", "torch is not installed (pip install 'advisor[torch]')"),
    "tensorflow": ("tensorflow", "tensorflow is not installed (pip install 'advisor[tensorflow]')"),
    "onnxruntime": (
        "onnxruntime.training.api", "onnxruntime-training is not installed (pip install 'advisor[onnx]')"
    ),
}
SHAPES = [(8, 8, 1), (28, 28, 1), (32, 32, 3)]
# Batch norm first: its statistics depend on the data alone, not on weights the optimizer moves.
BN_FIRST = ModelSpec("bn_first", (Layer("bn"), Layer("gap"), Layer("dense", None)), "", False)
WIDER = ModelSpec("wider", (
    Layer("conv", 4, 3), Layer("residual", body=(Layer("conv", 8, 3),)), Layer("gap"), Layer("dense", None),
), "a residual body that widens its input", True)


def _need(backend: str) -> str:
    module, reason = BACKENDS[backend]
    pytest.importorskip(module, reason=reason)
    return backend


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return _need(str(request.param))


@contextmanager
def _built(backend: str, spec: ModelSpec, shape: tuple[int, ...], **config: Any) -> Iterator[tuple[Any, int]]:
    trainer = get_trainer_class(backend)(Config(framework=backend, **config))
    trainer.configure()
    try:
        yield trainer, trainer.build(spec, shape, 10)
    finally:
        trainer.close()


def _eval_logits(backend: str, trainer: Any, x: np.ndarray) -> np.ndarray:
    """Logits of NHWC ``x`` in evaluation mode (running statistics)."""
    if backend == "torch":
        import torch

        trainer.model_.eval()
        with torch.no_grad():
            return trainer.model_(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()).numpy()
    if backend == "tensorflow":
        return np.asarray(trainer.model_(x, training=False))
    trainer.module_.eval()
    try:
        _, logits = trainer.module_(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), np.zeros(len(x), np.int64))
    finally:
        trainer.module_.train()
    return np.asarray(logits)


def _first_bn(backend: str, trainer: Any) -> dict[str, Any]:
    """The first batch norm's running mean and variance, momentum (torch's sense) and epsilon."""
    if backend == "torch":
        import torch

        bn = next(m for m in trainer.model_.modules() if isinstance(m, torch.nn.BatchNorm2d))
        return {"mean": bn.running_mean.numpy(), "var": bn.running_var.numpy(), "momentum": bn.momentum,
                "eps": bn.eps}
    if backend == "tensorflow":
        import keras

        bn = next(l for l in trainer.model_.layers if isinstance(l, keras.layers.BatchNormalization))
        return {"mean": bn.moving_mean.numpy(), "var": bn.moving_variance.numpy(), "momentum": 1 - bn.momentum,
                "eps": bn.epsilon}
    import onnx

    graph = onnx.load(f"{trainer._dir}/training_model.onnx").graph
    node = next(n for n in graph.node if n.op_type in ("BatchNormalization", "BatchNormInternal"))
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    params = trainer.state_.parameters
    return {"mean": params[node.input[3]].data, "var": params[node.input[4]].data,
            "momentum": 1 - attrs["momentum"], "eps": attrs["epsilon"]}


@pytest.mark.parametrize("name", list(models.MODELS))
def test_built_parameter_count_and_logits_match_the_spec(backend: str, name: str) -> None:
    spec = models.get_model(name)
    for shape in SHAPES:
        with _built(backend, spec, shape) as (trainer, count):
            assert count == models.param_count(spec, shape, 10), shape
            x = np.random.default_rng(0).standard_normal((2, *shape), np.float32)
            logits = _eval_logits(backend, trainer, x)
            assert logits.shape == (2, 10) and np.isfinite(logits).all()


def test_a_residual_body_that_changes_the_shape_is_refused(backend: str) -> None:
    with pytest.raises(InvalidParameterError, match="residual block of model 'wider'"):
        with _built(backend, WIDER, (8, 8, 1)):
            pass


def test_running_statistics_follow_one_momentum_on_every_backend(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((24, 4, 4, 2)) * [1.0, 3.0] + [2.0, -1.0]).astype(np.float32)
    y = rng.integers(0, 10, 24)
    with _built(backend, BN_FIRST, (4, 4, 2), batch_size=8, optimizer="adam", learning_rate=1e-3) as (trainer, _):
        trainer.train_epoch(x, y)
        bn = _first_bn(backend, trainer)
        assert (bn["momentum"], bn["eps"]) == pytest.approx((BN_MOMENTUM, BN_EPS), rel=1e-6)
        # torch updates the running variance with the unbiased batch variance, Keras and ONNX with
        # the biased one (documented in advisor.frameworks._torch_graph).
        ddof = 1 if backend == "torch" else 0
        mean, var = np.zeros(2), np.ones(2)
        for start in range(0, 24, 8):
            batch = x[start:start + 8].reshape(-1, 2).astype(np.float64)
            mean = (1 - BN_MOMENTUM) * mean + BN_MOMENTUM * batch.mean(axis=0)
            var = (1 - BN_MOMENTUM) * var + BN_MOMENTUM * batch.var(axis=0, ddof=ddof)
        np.testing.assert_allclose(bn["mean"], mean, rtol=1e-5)
        np.testing.assert_allclose(bn["var"], var, rtol=1e-5)
        # Evaluation normalises with these statistics, not the batch's: with the statistics of a
        # batch of one, every sample would come out as the same logits.
        one, other = _eval_logits(backend, trainer, x[:1]), _eval_logits(backend, trainer, x[1:2])
        assert np.abs(one - other).max() > 1e-3


def test_residual_net_trains_and_predicts(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 8, 8, 3)).astype(np.float32)
    y = rng.integers(0, 10, 32).astype(np.int64)
    spec = models.get_model("resnet9_w8")
    config = dict(batch_size=16, optimizer="adam", learning_rate=1e-3)
    with _built(backend, spec, (8, 8, 3), **config) as (trainer, count):
        assert count == models.param_count(spec, (8, 8, 3), 10)
        losses = [trainer.train_epoch(x, y) for _ in range(4)]
        assert np.isfinite(losses).all() and losses[-1] < losses[0]
        pred = trainer.predict(x)
        assert pred.shape == (32,) and pred.dtype == np.int64


def test_bn_cnn_learns_digits(backend: str) -> None:
    """Accuracy is measured in evaluation mode, so it also proves the running statistics are used."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[..., None]
    x_train, x_test, y_train, y_test = train_test_split(
        x, data.target.astype(np.int64), test_size=0.25, stratify=data.target, random_state=0
    )
    config = Config(framework=backend, batch_size=32, learning_rate=3e-3, optimizer="adam", epochs=3)
    trainer = get_trainer_class(backend)(config)
    trainer.configure()
    events: list[dict[str, Any]] = []
    try:
        run_protocol(trainer, models.get_model("bn_cnn"), num_classes=10, config=config, emit=events.append,
                     x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    finally:
        trainer.close()
    assert events[-1]["test_accuracy"] >= 0.9


@pytest.mark.parametrize("level", ["disable", "all"])
def test_onnxruntime_eval_graph_uses_the_trained_state(level: str) -> None:
    """The running statistics are updated in place by the kernel, at any graph optimisation level."""
    _need("onnxruntime")
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((16, 4, 4, 2)) * 2 + 1).astype(np.float32)
    config = dict(batch_size=8, optimizer="adam", learning_rate=0.05, graph_optimization=level, threads=2)
    with _built("onnxruntime", BN_FIRST, (4, 4, 2), **config) as (trainer, _):
        trainer.train_epoch(x, rng.integers(0, 10, 16))
        p = {name: np.asarray(trainer.state_.parameters[name].data) for name in (
            "bn0.scale", "bn0.bias", "bn0.running_mean", "bn0.running_var", "dense2.weight", "dense2.bias")}
        assert np.abs(p["bn0.scale"] - 1).max() > 1e-3  # the step moved the trainable ones
        first, second = x[:8].mean(axis=(0, 1, 2)), x[8:].mean(axis=(0, 1, 2))
        np.testing.assert_allclose(p["bn0.running_mean"], 0.9 * 0.1 * first + 0.1 * second, rtol=1e-5)
        z = (x.mean(axis=(1, 2)) - p["bn0.running_mean"]) / np.sqrt(p["bn0.running_var"] + BN_EPS)
        expected = (z * p["bn0.scale"] + p["bn0.bias"]) @ p["dense2.weight"] + p["dense2.bias"]
        np.testing.assert_allclose(_eval_logits("onnxruntime", trainer, x), expected, rtol=1e-4, atol=1e-5)


def test_onnxruntime_refuses_the_parallel_executor_for_batch_norm() -> None:
    _need("onnxruntime")
    with pytest.raises(InvalidParameterError, match="execution_mode.*'bn_cnn'.*running statistics") as info:
        with _built("onnxruntime", models.get_model("bn_cnn"), (8, 8, 1), execution_mode="parallel"):
            pass
    assert "\n" not in str(info.value)
    with _built("onnxruntime", models.get_model("lenet5"), (8, 8, 1), execution_mode="parallel") as (_, count):
        assert count == models.param_count(models.get_model("lenet5"), (8, 8, 1), 10)


@pytest.mark.parametrize("name", ["bn_cnn", "resnet9_w16"])
def test_sklearn_refuses_batch_norm_nets_in_one_line(name: str) -> None:
    trainer = get_trainer_class("sklearn")(Config(framework="sklearn"))
    trainer.configure()
    try:
        with pytest.raises(InvalidParameterError) as info:
            trainer.build(models.get_model(name), (28, 28, 1), 10)
    finally:
        trainer.close()
    message = str(info.value)
    assert "\n" not in message and f"Got {name!r} instead" in message and "sklearn" in message
