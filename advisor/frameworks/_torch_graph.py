"""Build an :mod:`advisor.models` spec as a ``torch.nn`` module (NCHW input, logits out).

The spec's layers become one ``nn.Sequential``; a residual block is a small module holding its
body's ``nn.Sequential`` and returning ``x + body(x)``. Batch norm is ``nn.BatchNorm2d`` with the
spec's momentum and epsilon: ``model.train()`` normalises with the batch's statistics and updates
the running ones, ``model.eval()`` uses the running ones. torch updates the running variance with
the unbiased batch variance, Keras and ONNX with the biased one; over ``N*H*W`` values per channel
the difference is a factor ``n/(n-1)``, negligible at any useful batch.
"""

from __future__ import annotations

import functools
from typing import Any

from advisor._imports import try_import
from advisor.models import BN_EPS, BN_MOMENTUM, Layer, ModelSpec, layer_shapes, sequence_shapes

__all__ = ["build_module"]


@functools.cache
def _residual_class() -> Any:
    nn = try_import("torch", feature="The torch backend").nn

    class Residual(nn.Module):  # type: ignore[misc, name-defined]
        """``x + body(x)``: the body keeps the shape (checked by the spec)."""

        def __init__(self, body: Any) -> None:
            super().__init__()
            self.body = body

        def forward(self, x: Any) -> Any:
            return x + self.body(x)

    return Residual


def build_module(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Return ``spec`` as an ``nn.Sequential`` taking NCHW float32 and returning logits.

    Args:
        spec: The architecture.
        input_shape: ``(height, width, channels)`` as in :mod:`advisor.models`.
        num_classes: Size of the classifier layer.
    """
    nn = try_import("torch", feature="The torch backend").nn
    return nn.Sequential(*_modules(nn, layer_shapes(spec, tuple(input_shape), num_classes), spec.name))


def _modules(nn: Any, shaped: Any, model: str) -> list[Any]:
    modules: list[Any] = []
    for layer, shape_in, shape_out in shaped:
        modules.append(_module(nn, layer, shape_in, shape_out, model))
        if layer.activation == "relu":
            modules.append(nn.ReLU())
    return modules


def _module(nn: Any, layer: Layer, shape_in: tuple[int, ...], shape_out: tuple[int, ...], model: str) -> Any:
    """The one module of ``layer``: the layer-kind dispatch of this backend."""
    if layer.kind == "conv":
        # Stride 1, "same" padding: the spec's convolution.
        return nn.Conv2d(shape_in[2], shape_out[2], layer.kernel, padding="same", bias=layer.bias)
    if layer.kind == "maxpool":
        return nn.MaxPool2d(2, 2)
    if layer.kind == "avgpool":
        return nn.AvgPool2d(2, 2)
    if layer.kind == "flatten":
        return nn.Flatten()  # NCHW order; consistent within this framework
    if layer.kind == "bn":
        return nn.BatchNorm2d(shape_in[2], eps=BN_EPS, momentum=BN_MOMENTUM)
    if layer.kind == "gap":
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    if layer.kind == "residual":
        body = _modules(nn, sequence_shapes(layer.body, shape_in, model=model), model)
        return _residual_class()(nn.Sequential(*body))
    return nn.Linear(shape_in[0], shape_out[0])
