"""Analytic parameter counts and FLOPs of the model specs, checked against real builders."""

from __future__ import annotations

import numpy as np
import pytest

from advisor import models
from advisor.errors import InvalidParameterError, UnknownNameError
from advisor.frameworks._numpy_cnn import NumpyNet
from advisor.records import Config
from advisor.surrogate import features as F

SHAPES = [(8, 8, 1), (28, 28, 1), (32, 32, 3)]
# The specs the numpy engine builds; the batch-norm and residual ones are refused there (and
# built by torch, tensorflow and onnxruntime in test_model_graphs).
NUMPY_MODELS = ("mlp", "lenet5", "cifar_quick")
CASES = [(name, shape) for name in NUMPY_MODELS for shape in SHAPES]


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


def test_bn_cnn_on_mnist_shape_by_hand() -> None:
    spec = models.get_model("bn_cnn")
    # Three stages conv 3x3 (no bias) + bn + pool: 28 -> 14 -> 7 -> 3 (floor); 3x3x128 = 1152 -> 10.
    convs = 2 * 28 * 28 * 32 * 9 * 1 + 2 * 14 * 14 * 64 * 9 * 32 + 2 * 7 * 7 * 128 * 9 * 64
    assert convs == 451_584 + 7_225_344 + 7_225_344
    assert models.forward_flops(spec, (28, 28, 1), 10) == convs + 2 * 1152 * 10 == 14_925_312
    weights = 9 * 1 * 32 + 9 * 32 * 64 + 9 * 64 * 128  # 288 + 18,432 + 73,728: no conv biases
    scale_shift = 2 * (32 + 64 + 128)  # bn gamma and beta; the running statistics are not counted
    assert models.param_count(spec, (28, 28, 1), 10) == weights + scale_shift + 1152 * 10 + 10 == 104_426
    # conv, bn, pool outputs per stage, then flatten and dense
    stages = (2 * 28 * 28 + 14 * 14) * 32 + (2 * 14 * 14 + 7 * 7) * 64 + (2 * 7 * 7 + 3 * 3) * 128
    assert models.activation_count(spec, (28, 28, 1), 10) == stages + 1152 + 10 == 99_530


def _resnet9_by_hand(w: int) -> tuple[int, int]:
    """(params, forward FLOPs) of resnet9 at base width ``w`` on 32x32x3, stage by stage."""
    # (side at which the conv runs, input channels, output channels) of the eight 3x3 convs;
    # a pooling stage runs its conv before the pool, at the larger side.
    convs = [(32, 3, w), (32, w, 2 * w), (16, 2 * w, 2 * w), (16, 2 * w, 2 * w),
             (16, 2 * w, 4 * w), (8, 4 * w, 8 * w), (4, 8 * w, 8 * w), (4, 8 * w, 8 * w)]
    params = sum(9 * cin * cout + 2 * cout for _, cin, cout in convs) + 8 * w * 10 + 10
    flops = sum(2 * side * side * cout * 9 * cin for side, cin, cout in convs) + 2 * 8 * w * 10
    return params, flops


def test_resnet9_on_cifar_shape_by_hand() -> None:
    assert _resnet9_by_hand(64) == (6_573_130, 758_523_904)  # Myrtle's ResNet-9: ~6.57 M parameters
    assert _resnet9_by_hand(16) == (412_954, 48_073_216)
    for name in ("resnet9_w16", "resnet9_w32", "resnet9_w64"):
        spec = models.get_model(name)
        width = int(name.rsplit("w", 1)[1])
        params, flops = _resnet9_by_hand(width)
        assert models.param_count(spec, (32, 32, 3), 10) == params
        assert models.forward_flops(spec, (32, 32, 3), 10) == flops
    # Residual bodies count: drop both blocks and 4 of the 8 convs' work disappears.
    spec = models.get_model("resnet9_w16")
    plain = models.ModelSpec("plain", tuple(l for l in spec.layers if l.kind != "residual"), "", True)
    res1 = 2 * (9 * 32 * 32 + 64)
    res3 = 2 * (9 * 128 * 128 + 256)
    assert models.param_count(plain, (32, 32, 3), 10) == 412_954 - res1 - res3


def test_resnet9_activations_count_the_residual_bodies() -> None:
    spec = models.get_model("resnet9_w16")
    w = 16
    # prep conv, bn; conv, pool, bn at 32 -> 16; two (conv, bn) in the block plus its sum; ...
    expected = 2 * 32 * 32 * w + (32 * 32 + 2 * 16 * 16) * 2 * w + 5 * 16 * 16 * 2 * w
    expected += (16 * 16 + 2 * 8 * 8) * 4 * w + (8 * 8 + 2 * 4 * 4) * 8 * w + 5 * 4 * 4 * 8 * w
    expected += 8 * w + 10  # gap, classifier
    assert models.activation_count(spec, (32, 32, 3), 10) == expected == 170_122
    assert F.activations_per_sample("resnet9_w16", 32, 32, 3, 10) == expected
    assert F.activations_per_sample("bn_cnn", 28, 28, 1, 10) == 99_530
    assert F.activations_per_sample("resnet9_w24", 32, 32, 3, 10) > expected  # built on demand


def test_resnet9_width_is_in_the_name_and_built_on_demand() -> None:
    assert {n for n in models.MODELS if n.startswith("resnet9")} == {"resnet9_w16", "resnet9_w32", "resnet9_w64"}
    spec = models.get_model("resnet9_w24")
    assert spec.name == "resnet9_w24" and spec == models.resnet9(24) and spec.is_convolutional
    assert "24" in spec.description and "ResNet-9" in spec.description
    for name in ("resnet9_w7", "resnet9_w129", "resnet9_w016", "resnet9_w", "resnet9"):
        with pytest.raises(UnknownNameError, match=r"resnet9_w<N> \(N in 8\.\.128\)") as info:
            models.get_model(name)
        assert "\n" not in str(info.value)
    with pytest.raises(InvalidParameterError, match="width"):
        models.resnet9(4)


def test_bn_cnn_family_by_width() -> None:
    assert models.get_model("bn_cnn").layers == models.bn_cnn(32).layers
    spec = models.get_model("bn_cnn_w8")
    assert spec == models.bn_cnn(8) and models.param_count(spec, (28, 28, 1), 10) == 8_834
    with pytest.raises(UnknownNameError, match=r"bn_cnn_w<N> \(N in 4\.\.128\)"):
        models.get_model("bn_cnn_w2")


def test_residual_body_that_changes_the_shape_is_refused() -> None:
    wider = models.ModelSpec("wider", (
        models.Layer("conv", 4, 3), models.Layer("residual", body=(models.Layer("conv", 8, 3),)),
        models.Layer("gap"), models.Layer("dense", None),
    ), "", True)
    with pytest.raises(InvalidParameterError, match=r"residual block of model 'wider'.*\(8, 8, 4\).*\(8, 8, 8\)"):
        models.param_count(wider, (8, 8, 1), 10)
    pooled = models.ModelSpec("pooled", (
        models.Layer("conv", 4, 3), models.Layer("residual", body=(models.Layer("maxpool"),)),
        models.Layer("flatten"), models.Layer("dense", None),
    ), "", True)
    with pytest.raises(InvalidParameterError, match="residual block"):
        list(models.layer_shapes(pooled, (8, 8, 1), 10))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"kind": "residual"}, "body"),
    ({"kind": "conv", "units": 4, "kernel": 3, "body": (models.Layer("bn"),)}, "body"),
    ({"kind": "residual", "body": ("bn",)}, "body"),
    ({"kind": "dense", "units": 4, "bias": False}, "bias"),
    ({"kind": "bn", "activation": "tanh"}, "activation"),
])
def test_invalid_layers_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        models.Layer(**kwargs)


def test_residual_layers_are_hashable_and_bodies_are_tuples() -> None:
    block = models.Layer("residual", body=[models.Layer("conv", 4, 3, bias=False), models.Layer("bn")])
    assert isinstance(block.body, tuple) and hash(block) == hash(models.Layer("residual", body=block.body))
    assert [l.kind for l in models.walk_layers((block, models.Layer("gap")))] == ["residual", "conv", "bn", "gap"]


@pytest.mark.parametrize("layer", [models.Layer("bn"), models.Layer("gap")])
def test_bn_and_gap_need_feature_maps(layer: models.Layer) -> None:
    spec = models.ModelSpec("flat", (models.Layer("flatten"), layer, models.Layer("dense", None)), "", False)
    with pytest.raises(InvalidParameterError, match="before flatten"):
        models.param_count(spec, (8, 8, 1), 10)


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
