"""Portable architecture specs, with analytic parameter counts and FLOPs.

A spec is a short list of layers that every framework module builds the same way, so that a
comparison between frameworks compares frameworks, not models. Conventions shared by all builders:

- inputs are NHWC float32 (each builder may transpose to its own layout);
- ``conv`` is stride 1 with ``same`` padding and a bias; pooling is 2×2 with stride 2 (floor);
- ``dense`` with ``units=None`` is the classifier layer, sized to the number of classes;
- the classifier outputs logits; the loss is softmax cross-entropy on all frameworks.

FLOPs count a multiply-add as two operations and ignore activations and pooling, which are
negligible next to convolutions and matrix products. A training step costs about three forward
passes (forward, gradient with respect to activations, gradient with respect to weights).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from advisor.errors import UnknownNameError, invalid_parameter

__all__ = [
    "Layer",
    "ModelSpec",
    "MODELS",
    "get_model",
    "layer_shapes",
    "param_count",
    "forward_flops",
    "activation_count",
    "training_flops_per_sample",
    "default_model_for",
]

LAYER_KINDS = ("conv", "maxpool", "avgpool", "flatten", "dense")
ACTIVATIONS = (None, "relu")


@dataclass(frozen=True)
class Layer:
    """One layer of a spec.

    Attributes:
        kind: One of ``conv``, ``maxpool``, ``avgpool``, ``flatten``, ``dense``.
        units: Output channels (conv) or units (dense); ``None`` on the last dense means classes.
        kernel: Square kernel size for conv.
        activation: ``"relu"`` or ``None``.
    """

    kind: str
    units: int | None = None
    kernel: int = 0
    activation: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in LAYER_KINDS:
            raise invalid_parameter("kind", "Layer", f"one of {LAYER_KINDS}", self.kind)
        if self.activation not in ACTIVATIONS:
            raise invalid_parameter("activation", "Layer", "'relu' or None", self.activation)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: tuple[Layer, ...]
    description: str
    is_convolutional: bool

    def resolved_layers(self, num_classes: int) -> tuple[Layer, ...]:
        """Layers with the classifier's ``units=None`` replaced by ``num_classes``."""
        return tuple(
            Layer(l.kind, num_classes, l.kernel, l.activation) if l.kind == "dense" and l.units is None else l
            for l in self.layers
        )


def _spec(name: str, description: str, *layers: Layer) -> ModelSpec:
    conv = any(l.kind == "conv" for l in layers)
    return ModelSpec(name=name, layers=tuple(layers), description=description, is_convolutional=conv)


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
    )
}


def get_model(name: str) -> ModelSpec:
    """Return the spec called ``name``.

    Raises:
        UnknownNameError: When no such model exists.
    """
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownNameError(
            f"Unknown model {name!r}: choose one of {', '.join(sorted(MODELS))}."
        ) from None


def layer_shapes(
    spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int
) -> Iterator[tuple[Layer, tuple[int, ...], tuple[int, ...]]]:
    """Yield ``(layer, input shape, output shape)`` for each layer (shapes without batch).

    Raises:
        InvalidParameterError: When the input is too small for the spec or has the wrong rank.
    """
    if len(input_shape) != 3:
        raise invalid_parameter("input_shape", f"model {spec.name!r}", "(height, width, channels)", input_shape)
    shape: tuple[int, ...] = tuple(input_shape)
    for layer in spec.resolved_layers(num_classes):
        if layer.kind == "conv":
            if len(shape) != 3:
                raise invalid_parameter("layers", f"model {spec.name!r}", "conv before flatten", spec.name)
            out: tuple[int, ...] = (shape[0], shape[1], int(layer.units or 0))
        elif layer.kind in ("maxpool", "avgpool"):
            if shape[0] < 2 or shape[1] < 2:
                raise invalid_parameter(
                    "input_shape", f"model {spec.name!r}", "large enough for every 2x2 pooling", input_shape
                )
            out = (shape[0] // 2, shape[1] // 2, shape[2])
        elif layer.kind == "flatten":
            size = 1
            for d in shape:
                size *= d
            out = (size,)
        else:  # dense
            if len(shape) != 1:
                raise invalid_parameter("layers", f"model {spec.name!r}", "flatten before dense", spec.name)
            out = (int(layer.units or 0),)
        yield layer, shape, out
        shape = out


def param_count(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
    """Trainable parameters (weights and biases) of ``spec`` on this input."""
    total = 0
    for layer, shape_in, shape_out in layer_shapes(spec, input_shape, num_classes):
        if layer.kind == "conv":
            total += layer.kernel * layer.kernel * shape_in[2] * shape_out[2] + shape_out[2]
        elif layer.kind == "dense":
            total += shape_in[0] * shape_out[0] + shape_out[0]
    return total


def forward_flops(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> float:
    """Forward-pass FLOPs for one sample (2 per multiply-add)."""
    total = 0
    for layer, shape_in, shape_out in layer_shapes(spec, input_shape, num_classes):
        if layer.kind == "conv":
            total += 2 * shape_out[0] * shape_out[1] * shape_out[2] * layer.kernel * layer.kernel * shape_in[2]
        elif layer.kind == "dense":
            total += 2 * shape_in[0] * shape_out[0]
    return float(total)


def activation_count(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
    """Output elements of every layer for one sample: what element-wise work, pooling and the
    activation memory of training scale with (FLOPs count only the multiply-adds)."""
    return sum(math.prod(shape_out) for _, _, shape_out in layer_shapes(spec, input_shape, num_classes))


def training_flops_per_sample(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> float:
    """FLOPs of one training step per sample: about three forward passes."""
    return 3.0 * forward_flops(spec, input_shape, num_classes)


def default_model_for(input_shape: tuple[int, ...]) -> str:
    """A sensible default model for inputs of this shape."""
    return "cifar_quick" if input_shape[-1] == 3 and input_shape[0] >= 16 else "lenet5"
