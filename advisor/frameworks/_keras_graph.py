"""Build an :mod:`advisor.models` spec as a Keras 3 model (NHWC input, logits out).

The functional API, because a residual block adds its input to its body's output. Conventions:

- Weight decay is an L2 penalty on every trainable weight (kernels, biases, batch-norm scales and
  shifts), so that it means what torch's ``weight_decay`` means (see the TensorFlow backend).
- Batch norm is ``BatchNormalization`` over the last axis with Keras' ``momentum = 1 -``
  :data:`~advisor.models.BN_MOMENTUM` and :data:`~advisor.models.BN_EPS`; ``training=True`` uses
  the batch's statistics and updates the moving ones, ``training=False`` uses the moving ones.
  The moving statistics are non-trainable variables, not parameters.
- Every layer computes in ``compute_dtype`` except the classifier (the spec's last layer), which
  computes in float32 so that the softmax cross-entropy is stable under mixed precision.
"""

from __future__ import annotations

from typing import Any, Iterable

from advisor.models import BN_EPS, BN_MOMENTUM, Layer, ModelSpec, Shaped, layer_shapes, sequence_shapes

__all__ = ["build_model"]


def build_model(
    keras: Any, spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int, *,
    regularizer: Any, compute_dtype: str,
) -> Any:
    """Return ``spec`` as a ``keras.Model`` named after it.

    Args:
        keras: The imported ``keras`` module.
        spec: The architecture.
        input_shape: ``(height, width, channels)``.
        num_classes: Size of the classifier layer.
        regularizer: A Keras regularizer for every trainable weight, or ``None``.
        compute_dtype: Dtype policy of every layer but the classifier (``float32`` or
            ``mixed_float16``).
    """
    inputs = keras.Input(shape=tuple(input_shape), dtype="float32")
    shaped = list(layer_shapes(spec, tuple(input_shape), num_classes))
    builder = _Builder(keras, spec.name, regularizer, compute_dtype)
    outputs = builder.sequence(shaped, inputs, classifier=len(shaped) - 1)
    return keras.Model(inputs, outputs, name=spec.name)


class _Builder:
    def __init__(self, keras: Any, model: str, regularizer: Any, compute_dtype: str) -> None:
        self.layers = keras.layers
        self.model = model
        self.reg = regularizer
        self.dtype = compute_dtype

    def sequence(self, shaped: Iterable[Shaped], x: Any, *, classifier: int = -1) -> Any:
        """Apply each layer to ``x`` in turn; layer number ``classifier`` computes in float32."""
        for i, (layer, shape_in, _) in enumerate(shaped):
            dtype = "float32" if i == classifier else self.dtype
            x = self.layer(layer, shape_in, x, dtype)
            if layer.activation is not None and layer.kind not in ("conv", "dense"):
                x = self.layers.Activation(layer.activation, dtype=dtype)(x)
        return x

    def layer(self, layer: Layer, shape_in: tuple[int, ...], x: Any, dtype: str) -> Any:
        """The one layer-kind dispatch of this backend."""
        L, reg = self.layers, self.reg
        if layer.kind == "conv":
            return L.Conv2D(
                layer.units, layer.kernel, strides=1, padding="same", activation=layer.activation,
                use_bias=layer.bias, kernel_regularizer=reg, bias_regularizer=reg if layer.bias else None,
                dtype=dtype,
            )(x)
        if layer.kind == "maxpool":
            return L.MaxPooling2D(pool_size=2, strides=2, dtype=dtype)(x)
        if layer.kind == "avgpool":
            return L.AveragePooling2D(pool_size=2, strides=2, dtype=dtype)(x)
        if layer.kind == "flatten":
            return L.Flatten(dtype=dtype)(x)
        if layer.kind == "bn":
            return L.BatchNormalization(
                axis=-1, momentum=1.0 - BN_MOMENTUM, epsilon=BN_EPS, beta_regularizer=reg,
                gamma_regularizer=reg, dtype=dtype,
            )(x)
        if layer.kind == "gap":
            return L.GlobalAveragePooling2D(dtype=dtype)(x)
        if layer.kind == "residual":
            body = self.sequence(sequence_shapes(layer.body, shape_in, model=self.model), x)
            return L.Add(dtype=dtype)([x, body])
        return L.Dense(
            layer.units, activation=layer.activation, kernel_regularizer=reg, bias_regularizer=reg, dtype=dtype,
        )(x)
