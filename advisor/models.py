"""Portable architecture specs, with analytic parameter counts and FLOPs.

A spec is a short list of layers that every framework module builds the same way, so that a
comparison between frameworks compares frameworks, not models. Conventions shared by all builders:

- inputs are NHWC float32 (each builder may transpose to its own layout);
- ``conv`` is stride 1 with ``same`` padding and a bias unless ``bias=False`` (a convolution
  followed by batch norm needs none); pooling is 2×2 with stride 2 (floor);
- ``bn`` is batch normalisation over the channel axis: a trainable scale and shift per channel
  (``2*C`` parameters) and running statistics that are state, not parameters. All builders use
  :data:`BN_MOMENTUM` (the weight of the new batch, as torch's ``momentum``; Keras and ONNX call
  ``1 - BN_MOMENTUM`` momentum) and :data:`BN_EPS`. Training normalises with the batch's
  statistics, evaluation with the running ones;
- ``residual`` computes ``x + body(x)``; its body must give back the shape it was given;
- ``gap`` averages each channel over height and width, giving ``(C,)``;
- ``dense`` with ``units=None`` is the classifier layer, sized to the number of classes;
- the classifier outputs logits; the loss is softmax cross-entropy on all frameworks.

FLOPs count a multiply-add as two operations and ignore activations, pooling, batch norm and the
residual addition, which are negligible next to convolutions and matrix products. A training step
costs about three forward passes (forward, gradient with respect to activations, gradient with
respect to weights).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from advisor.errors import InvalidParameterError, UnknownNameError, invalid_parameter

__all__ = [
    "Layer",
    "ModelSpec",
    "Shaped",
    "BN_MOMENTUM",
    "BN_EPS",
    "MODELS",
    "get_model",
    "layer_shapes",
    "sequence_shapes",
    "walk_layers",
    "resnet9",
    "param_count",
    "forward_flops",
    "activation_count",
    "training_flops_per_sample",
    "default_model_for",
]

LAYER_KINDS = ("conv", "maxpool", "avgpool", "flatten", "dense", "bn", "residual", "gap")
ACTIVATIONS = (None, "relu")
BN_MOMENTUM = 0.1
BN_EPS = 1e-5
#: Families built by name (``<family>_w<N>``) and the base widths N each accepts, inclusive.
FAMILY_WIDTHS = {"resnet9": (8, 128), "bn_cnn": (4, 128)}

Shaped = tuple["Layer", tuple[int, ...], tuple[int, ...]]  # (layer, input shape, output shape)


@dataclass(frozen=True)
class Layer:
    """One layer of a spec.

    Attributes:
        kind: One of :data:`LAYER_KINDS`.
        units: Output channels (conv) or units (dense); ``None`` on the last dense means classes.
        kernel: Square kernel size for conv.
        activation: ``"relu"`` or ``None``, applied to the layer's output.
        bias: Whether a conv adds a bias (``False`` before a ``bn``, which has its own shift).
        body: The layers of a ``residual`` block, whose output is ``input + body(input)``.
    """

    kind: str
    units: int | None = None
    kernel: int = 0
    activation: str | None = None
    bias: bool = True
    body: tuple[Layer, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in LAYER_KINDS:
            raise invalid_parameter("kind", "Layer", f"one of {LAYER_KINDS}", self.kind)
        if self.activation not in ACTIVATIONS:
            raise invalid_parameter("activation", "Layer", "'relu' or None", self.activation)
        if not self.bias and self.kind != "conv":
            raise invalid_parameter(
                "bias", f"Layer {self.kind!r}", "True (only a conv may drop its bias)", self.bias
            )
        object.__setattr__(self, "body", tuple(self.body))  # a list would break hashing
        if (self.kind == "residual") != bool(self.body) or not all(isinstance(l, Layer) for l in self.body):
            raise invalid_parameter(
                "body", f"Layer {self.kind!r}", "a non-empty tuple of Layers on a residual, () elsewhere",
                self.body,
            )


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: tuple[Layer, ...]
    description: str
    is_convolutional: bool

    def resolved_layers(self, num_classes: int) -> tuple[Layer, ...]:
        """Layers with the classifier's ``units=None`` replaced by ``num_classes``."""
        return tuple(
            replace(l, units=num_classes) if l.kind == "dense" and l.units is None else l for l in self.layers
        )


def walk_layers(layers: Iterable[Layer]) -> Iterator[Layer]:
    """Every layer of ``layers``, each residual followed by its body's layers (depth first)."""
    for layer in layers:
        yield layer
        yield from walk_layers(layer.body)


def _spec(name: str, description: str, *layers: Layer) -> ModelSpec:
    conv = any(l.kind == "conv" for l in walk_layers(layers))
    return ModelSpec(name=name, layers=tuple(layers), description=description, is_convolutional=conv)


def _conv_bn(units: int, *, pool: bool = False) -> tuple[Layer, ...]:
    """Conv 3x3 without bias, optional 2x2 max-pool, batch norm and ReLU."""
    pooling = (Layer("maxpool"),) if pool else ()
    return (Layer("conv", units, 3, bias=False), *pooling, Layer("bn", activation="relu"))


def _check_width(family: str, width: int) -> int:
    low, high = FAMILY_WIDTHS[family]
    if isinstance(width, bool) or not isinstance(width, int) or not low <= width <= high:
        raise invalid_parameter("width", family, f"an integer in [{low}, {high}]", width)
    return width


def resnet9(width: int) -> ModelSpec:
    """The ResNet-9 of the fast CIFAR-10 nets (DAWNBench's Myrtle entry, airbench), base width ``width``.

    Four conv stages widening ``width``, ``2*width``, ``4*width``, ``8*width`` with a residual
    block of two convs after the second and the fourth; ``width=64`` is the original.

    Raises:
        InvalidParameterError: When ``width`` is outside :data:`FAMILY_WIDTHS`.
    """
    w = _check_width("resnet9", width)
    return _spec(
        f"resnet9_w{w}",
        f"ResNet-9 (Myrtle's DAWNBench CIFAR-10 net, as in airbench) at base width {w} (64 is the "
        f"original): conv {w}, conv {2 * w} + pool, residual of two convs {2 * w}, conv {4 * w} + pool, "
        f"conv {8 * w} + pool, residual of two convs {8 * w}, global average pool, classifier; "
        "every conv 3x3 without bias, then batch norm and ReLU.",
        *_conv_bn(w),
        *_conv_bn(2 * w, pool=True),
        Layer("residual", body=_conv_bn(2 * w) + _conv_bn(2 * w)),
        *_conv_bn(4 * w, pool=True),
        *_conv_bn(8 * w, pool=True),
        Layer("residual", body=_conv_bn(8 * w) + _conv_bn(8 * w)),
        Layer("gap"),
        Layer("dense", None),
    )


def bn_cnn(width: int) -> ModelSpec:
    """A batch-norm CNN for 28x28 inputs at base width ``width``: three stages of conv 3x3
    (``width``, ``2*width``, ``4*width``, no bias), batch norm, ReLU and 2x2 max-pool, then flatten
    and the classifier.

    Raises:
        InvalidParameterError: When ``width`` is outside :data:`FAMILY_WIDTHS`.
    """
    w = _check_width("bn_cnn", width)
    return _spec(
        f"bn_cnn_w{w}",
        f"Batch-norm CNN for 28x28 images at base width {w}: three stages of conv 3x3 ({w}, {2 * w}, "
        f"{4 * w}, no bias), batch norm, ReLU and 2x2 max-pool, then flatten and the classifier.",
        *_conv_bn(w), Layer("maxpool"),
        *_conv_bn(2 * w), Layer("maxpool"),
        *_conv_bn(4 * w), Layer("maxpool"),
        Layer("flatten"),
        Layer("dense", None),
    )


#: Families built on demand by name (``<family>_w<N>``), with their base-width ranges.
_FAMILIES = {"resnet9": resnet9, "bn_cnn": bn_cnn}


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        _spec(
            "mlp",
            "Two hidden ReLU layers (256, 128): a multi-layer perceptron on flattened pixels.",
            Layer("flatten"),
            Layer("dense", 256, activation="relu"),
            Layer("dense", 128, activation="relu"),
            Layer("dense", None),
        ),
        _spec(
            "lenet5",
            "LeNet-5: conv 6@5x5, pool, conv 16@5x5, pool, dense 120, 84 (ReLU, same padding).",
            Layer("conv", 6, 5, "relu"),
            Layer("maxpool"),
            Layer("conv", 16, 5, "relu"),
            Layer("maxpool"),
            Layer("flatten"),
            Layer("dense", 120, activation="relu"),
            Layer("dense", 84, activation="relu"),
            Layer("dense", None),
        ),
        _spec(
            "cifar_quick",
            "Caffe's cifar10_quick: conv 32@5x5, max-pool, conv 32@5x5, avg-pool, conv 64@5x5, "
            "avg-pool, dense 64, classifier (2x2 pooling; same parameter count as Caffe's).",
            Layer("conv", 32, 5, "relu"),
            Layer("maxpool"),
            Layer("conv", 32, 5, "relu"),
            Layer("avgpool"),
            Layer("conv", 64, 5, "relu"),
            Layer("avgpool"),
            Layer("flatten"),
            Layer("dense", 64),
            Layer("dense", None),
        ),
        replace(bn_cnn(32), name="bn_cnn"),
        bn_cnn(16),
        resnet9(16),
        resnet9(32),
        resnet9(64),
    )
}


def get_model(name: str) -> ModelSpec:
    """Return the spec called ``name``; ``resnet9_w<N>`` is built on demand for any base width in
    :data:`FAMILY_WIDTHS`.

    Raises:
        UnknownNameError: When no such model exists.
    """
    if name in MODELS:
        return MODELS[name]
    match = re.fullmatch(rf"({'|'.join(FAMILY_WIDTHS)})_w([1-9]\d*)", name)
    if match:
        try:
            return _FAMILIES[match.group(1)](int(match.group(2)))
        except InvalidParameterError:
            pass
    families = ", ".join(f"{f}_w<N> (N in {lo}..{hi})" for f, (lo, hi) in FAMILY_WIDTHS.items())
    from advisor.errors import did_you_mean

    raise UnknownNameError(f"Unknown model {name!r}: choose one of {', '.join(sorted(MODELS))}, or {families}."
                           + did_you_mean(name, sorted(MODELS)))


def layer_shapes(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> Iterator[Shaped]:
    """Yield ``(layer, input shape, output shape)`` for each top-level layer (shapes without batch).

    A ``residual`` appears once, with equal input and output shapes; its body's shapes come from
    :func:`sequence_shapes` on ``layer.body``.

    Raises:
        InvalidParameterError: When the input is too small for the spec or has the wrong rank, or a
            residual body changes the shape.
    """
    if len(input_shape) != 3:
        raise invalid_parameter("input_shape", f"model {spec.name!r}", "(height, width, channels)", input_shape)
    return sequence_shapes(spec.resolved_layers(num_classes), tuple(input_shape), model=spec.name)


def sequence_shapes(layers: Iterable[Layer], input_shape: tuple[int, ...], *, model: str) -> Iterator[Shaped]:
    """:func:`layer_shapes` of a list of layers (a spec's or a residual body's) on ``input_shape``.

    Args:
        layers: The layers, with the classifier's units already resolved.
        input_shape: The shape the first layer receives (without batch).
        model: The spec's name, for error messages.
    """
    shape: tuple[int, ...] = tuple(input_shape)
    owner = f"model {model!r}"
    for layer in layers:
        if layer.kind in ("conv", "maxpool", "avgpool", "bn", "gap") and len(shape) != 3:
            raise invalid_parameter("layers", owner, f"{layer.kind} before flatten", model)
        if layer.kind == "conv":
            out: tuple[int, ...] = (shape[0], shape[1], int(layer.units or 0))
        elif layer.kind in ("maxpool", "avgpool"):
            if shape[0] < 2 or shape[1] < 2:
                raise invalid_parameter("input_shape", owner, "large enough for every 2x2 pooling", input_shape)
            out = (shape[0] // 2, shape[1] // 2, shape[2])
        elif layer.kind == "flatten":
            out = (math.prod(shape),)
        elif layer.kind == "bn":
            out = shape
        elif layer.kind == "gap":
            out = (shape[2],)
        elif layer.kind == "residual":
            *_, (_, _, out) = sequence_shapes(layer.body, shape, model=model)
            if out != shape:
                raise invalid_parameter(
                    "body", f"a residual block of {owner}", f"layers that keep the shape {shape}", out
                )
        else:  # dense
            if len(shape) != 1:
                raise invalid_parameter("layers", owner, "flatten before dense", model)
            out = (int(layer.units or 0),)
        yield layer, shape, out
        shape = out


def _all_shapes(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> Iterator[Shaped]:
    """:func:`layer_shapes` with every residual followed by its body's layers, recursively."""

    def expand(entries: Iterable[Shaped]) -> Iterator[Shaped]:
        for layer, shape_in, shape_out in entries:
            yield layer, shape_in, shape_out
            if layer.kind == "residual":
                yield from expand(sequence_shapes(layer.body, shape_in, model=spec.name))

    return expand(layer_shapes(spec, input_shape, num_classes))


def param_count(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
    """Trainable parameters (weights, biases, batch-norm scales and shifts) of ``spec`` on this input.

    Batch norm's running statistics are state, not parameters, and are not counted.
    """
    total = 0
    for layer, shape_in, shape_out in _all_shapes(spec, input_shape, num_classes):
        if layer.kind == "conv":
            bias = shape_out[2] if layer.bias else 0
            total += layer.kernel * layer.kernel * shape_in[2] * shape_out[2] + bias
        elif layer.kind == "dense":
            total += shape_in[0] * shape_out[0] + shape_out[0]
        elif layer.kind == "bn":
            total += 2 * shape_in[2]
    return total


def forward_flops(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> float:
    """Forward-pass FLOPs for one sample (2 per multiply-add; convs inside residual blocks count)."""
    total = 0
    for layer, shape_in, shape_out in _all_shapes(spec, input_shape, num_classes):
        if layer.kind == "conv":
            total += 2 * shape_out[0] * shape_out[1] * shape_out[2] * layer.kernel * layer.kernel * shape_in[2]
        elif layer.kind == "dense":
            total += 2 * shape_in[0] * shape_out[0]
    return float(total)


def activation_count(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
    """Output elements of every layer for one sample, residual bodies' layers and each block's sum
    included: what element-wise work, pooling and the activation memory of training scale with
    (FLOPs count only the multiply-adds)."""
    return sum(math.prod(shape_out) for _, _, shape_out in _all_shapes(spec, input_shape, num_classes))


def training_flops_per_sample(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> float:
    """FLOPs of one training step per sample: about three forward passes."""
    return 3.0 * forward_flops(spec, input_shape, num_classes)


def default_model_for(input_shape: tuple[int, ...]) -> str:
    """A sensible default model for inputs of this shape."""
    return "cifar_quick" if input_shape[-1] == 3 and input_shape[0] >= 16 else "lenet5"
