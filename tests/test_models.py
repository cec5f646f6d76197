"""Analytic parameter counts and FLOPs of the model specs, checked against real builders."""

from __future__ import annotations

import numpy as np
import pytest

from advisor import models
from advisor.errors import InvalidParameterError, UnknownNameError
from advisor.frameworks._numpy_cnn import NumpyNet
from advisor.records import Config

SHAPES = [(8, 8, 1), (28, 28, 1), (32, 32, 3)]
CASES = [(name, shape) for name in models.MODELS for shape in SHAPES]


def test_lenet5_on_mnist_shape_by_hand() -> None:
    spec = models.get_model("lenet5")
    # conv1 28x28x6 out, 5x5x1 kernels; pool -> 14x14x6; conv2 14x14x16 out, 5x5x6 kernels;
    # pool -> 7x7x16 = 784; dense 784->120->84->10.
    conv1 = 2 * 28 * 28 * 6 * 5 * 5 * 1  # 235,200
    conv2 = 2 * 14 * 14 * 16 * 5 * 5 * 6  # 940,800
    dense = 2 * (784 * 120 + 120 * 84 + 84 * 10)  # 188,160 + 20,160 + 1,680
    assert conv1 + conv2 + dense == 1_386_000
    assert models.forward_flops(spec, (28, 28, 1), 10) == 1_386_000.0
    assert models.training_flops_per_sample(spec, (28, 28, 1), 10) == 3 * 1_386_000.0
    params = (5 * 5 * 1 * 6 + 6) + (5 * 5 * 6 * 16 + 16)  # 156 + 2,416
    params += (784 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)  # 94,200 + 10,164 + 850
    assert params == 107_786
    assert models.param_count(spec, (28, 28, 1), 10) == 107_786
    # layer outputs: conv 28x28x6, pool 14x14x6, conv 14x14x16, pool 7x7x16, flatten 784, dense 120, 84, 10
    outputs = 28 * 28 * 6 + 14 * 14 * 6 + 14 * 14 * 16 + 7 * 7 * 16 + 784 + 120 + 84 + 10
    assert models.activation_count(spec, (28, 28, 1), 10) == outputs == 10_798


def test_mlp_on_mnist_shape_by_hand() -> None:
    spec = models.get_model("mlp")
    assert models.forward_flops(spec, (28, 28, 1), 10) == 2 * (784 * 256 + 256 * 128 + 128 * 10)  # 469,504
    params = (784 * 256 + 256) + (256 * 128 + 128) + (128 * 10 + 10)
    assert params == 235_146
    assert models.param_count(spec, (28, 28, 1), 10) == params
    # Dense-only: flops are twice the weights (biases are not multiply-adds).
    assert models.forward_flops(spec, (8, 8, 1), 10) == 2 * (64 * 256 + 256 * 128 + 128 * 10)
    assert models.activation_count(spec, (8, 8, 1), 10) == 64 + 256 + 128 + 10  # flatten, dense layers


def test_cifar_quick_matches_caffe_parameter_count() -> None:
    assert models.param_count(models.get_model("cifar_quick"), (32, 32, 3), 10) == 145_578


def test_layer_shapes_floor_odd_pooling() -> None:
    shapes = [out for _, _, out in models.layer_shapes(models.get_model("lenet5"), (9, 7, 2), 3)]
    assert shapes[:5] == [(9, 7, 6), (4, 3, 6), (4, 3, 16), (2, 1, 16), (32,)]


@pytest.mark.parametrize(
    ("name", "shape"), [("lenet5", (2, 2, 1)), ("cifar_quick", (4, 4, 3)), ("lenet5", (28, 28))]
)
def test_input_too_small_or_wrong_rank_is_rejected(name: str, shape: tuple[int, ...]) -> None:
    with pytest.raises(InvalidParameterError, match="input_shape"):
        models.param_count(models.get_model(name), shape, 10)


def test_unknown_model_names_the_choices() -> None:
    with pytest.raises(UnknownNameError, match="lenet5"):
        models.get_model("resnet")


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_numpy_engine_count_matches_spec(name: str, shape: tuple[int, int, int]) -> None:
    spec = models.get_model(name)
    net = NumpyNet(spec, shape, 10, seed=0)
    assert net.param_count == models.param_count(spec, shape, 10)
    assert net.forward(np.zeros((2, *shape), dtype=np.float32)).shape == (2, 10)


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_torch_module_count_matches_spec(name: str, shape: tuple[int, int, int]) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'advisor[torch]')")
    from advisor.frameworks.torch import TorchTrainer

    spec = models.get_model(name)
    trainer = TorchTrainer(Config(framework="torch"))
    count = trainer.build(spec, shape, 10)
    assert count == models.param_count(spec, shape, 10)
    assert count == sum(p.numel() for p in trainer.model_.parameters())
    with torch.no_grad():
        assert tuple(trainer.model_(torch.zeros(2, shape[2], shape[0], shape[1])).shape) == (2, 10)


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_sklearn_count_matches_spec_after_fitting(name: str, shape: tuple[int, int, int]) -> None:
    from advisor.frameworks.sklearn import SklearnTrainer

    spec = models.get_model(name)
    trainer = SklearnTrainer(Config(framework="sklearn", batch_size=4))
    expected = models.param_count(spec, shape, 10)
    assert trainer.build(spec, shape, 10) == expected
    rng = np.random.default_rng(0)
    trainer.train_epoch(rng.standard_normal((4, *shape)).astype(np.float32), np.array([0, 3, 5, 9]))
    # Counted again from the weights the library really allocated.
    assert trainer.param_count_fitted() == expected
