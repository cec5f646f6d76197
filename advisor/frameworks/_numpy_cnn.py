"""A small numpy network that builds any :mod:`advisor.models` spec, convolutions included.

scikit-learn's ``MLPClassifier`` cannot express convolution, so the ``sklearn`` backend trains
convolutional specs with this engine: the same numpy-on-BLAS lineage, written out by hand.

- Activations stay NHWC. A convolution is im2col (a strided view of the padded input, copied
  into a ``(N*H*W, k*k*C)`` matrix) followed by one matrix product on the BLAS numpy links.
- Pooling is 2×2 with stride 2 (floor), max or average; the loss is softmax cross-entropy.
- Optimizers follow PyTorch's definitions: L2 weight decay is added to every gradient (weights
  and biases), momentum is ``v = m*v + g; p -= lr*v``, and Adam uses bias correction.
- Weights use He-normal initialisation from a seeded :class:`numpy.random.Generator`; biases
  start at zero. Everything is float32 unless another dtype is asked for (the gradient check
  uses float64).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from advisor.errors import invalid_parameter
from advisor.models import Layer, ModelSpec, layer_shapes, walk_layers

__all__ = ["NumpyNet", "check_supported", "softmax_cross_entropy"]

ENGINE = "numpy-im2col"
_KINDS = ("conv", "maxpool", "avgpool", "flatten", "dense")


def check_supported(spec: ModelSpec) -> None:
    """Refuse a spec this engine cannot build (batch norm, residual blocks, global pooling).

    Raises:
        InvalidParameterError: Naming the model, at build time, before any weight is allocated.
    """
    if any(l.kind not in _KINDS or not l.bias for l in walk_layers(spec.layers)):
        raise invalid_parameter(
            "model", "framework 'sklearn' (its numpy engine)",
            "built from conv (with bias), maxpool, avgpool, flatten and dense layers; train batch "
            "norm, residual or global-pooling nets with torch, tensorflow or onnxruntime",
            spec.name,
        )


def softmax_cross_entropy(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of ``logits`` against labels ``y`` and its gradient."""
    n = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    log_probs = shifted - np.log(total)
    loss = -float(log_probs[np.arange(n), y].mean())
    grad = exp / total
    grad[np.arange(n), y] -= 1
    grad /= n
    return loss, grad


class _Conv:
    """Stride-1 ``same`` convolution with bias, as im2col + matmul."""

    def __init__(self, layer: Layer, shape_in: tuple[int, ...], rng: np.random.Generator,
                 dtype: Any, *, need_input_grad: bool) -> None:
        k, c_in, c_out = layer.kernel, shape_in[2], int(layer.units or 0)
        self.k = k
        # TensorFlow/PyTorch "same" for stride 1: total padding k-1, the extra one on the far side.
        self.pad = ((k - 1) // 2, k - 1 - (k - 1) // 2)
        self.relu = layer.activation == "relu"
        self.need_input_grad = need_input_grad
        fan_in = k * k * c_in
        self.w = (rng.standard_normal((fan_in, c_out)) * np.sqrt(2.0 / fan_in)).astype(dtype)
        self.b = np.zeros(c_out, dtype=dtype)
        self.params = [self.w, self.b]
        self.grads = [np.zeros_like(self.w), np.zeros_like(self.b)]

    def _im2col(self, x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        lo, hi = self.pad
        xp = np.pad(x, ((0, 0), (lo, hi), (lo, hi), (0, 0)))
        s = xp.strides
        # (N, H, W, kh, kw, C): every output pixel's receptive field, without copying yet.
        view = as_strided(xp, shape=(n, h, w, self.k, self.k, c),
                          strides=(s[0], s[1], s[2], s[1], s[2], s[3]), writeable=False)
        return view.reshape(n * h * w, self.k * self.k * c)  # the one copy

    def forward(self, x: np.ndarray, *, train: bool = True) -> np.ndarray:
        self.x_shape = x.shape
        cols = self._im2col(x)
        self.cols: np.ndarray | None = cols if train else None  # the largest array: kept only for backward
        out = cols @ self.w
        out += self.b
        if self.relu:
            np.maximum(out, 0, out=out)
        out = out.reshape(x.shape[0], x.shape[1], x.shape[2], -1)
        self.out = out
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray | None:
        if self.relu:
            dout = dout * (self.out > 0)
        d2 = dout.reshape(-1, dout.shape[-1])
        if self.cols is None:
            raise RuntimeError("backward() needs a forward(train=True) first")
        np.matmul(self.cols.T, d2, out=self.grads[0])
        self.grads[1][...] = d2.sum(axis=0)
        self.cols = None
        if not self.need_input_grad:
            return None
        n, h, w, c = self.x_shape
        dcols = (d2 @ self.w.T).reshape(n, h, w, self.k, self.k, c)
        lo, hi = self.pad
        dxp = np.zeros((n, h + lo + hi, w + lo + hi, c), dtype=dout.dtype)
        for i in range(self.k):  # col2im: scatter each kernel offset back onto the input
            for j in range(self.k):
                dxp[:, i:i + h, j:j + w, :] += dcols[:, :, :, i, j, :]
        return dxp[:, lo:lo + h, lo:lo + w, :]


class _Pool:
    """2×2 pooling with stride 2; odd trailing rows and columns are dropped (floor)."""

    params: list[np.ndarray] = []
    grads: list[np.ndarray] = []

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def forward(self, x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        h2, w2 = h // 2, w // 2
        self.x_shape = x.shape
        blocks = x[:, :2 * h2, :2 * w2, :].reshape(n, h2, 2, w2, 2, c)
        if self.kind == "avgpool":
            return blocks.mean(axis=(2, 4), dtype=x.dtype)
        # (N, h2, w2, C, 4): the four candidates of each window on the last axis.
        flat = blocks.transpose(0, 1, 3, 5, 2, 4).reshape(n, h2, w2, c, 4)
        self.argmax = flat.argmax(axis=-1)
        return np.take_along_axis(flat, self.argmax[..., None], axis=-1)[..., 0]

    def backward(self, dout: np.ndarray) -> np.ndarray:
        n, h, w, c = self.x_shape
        h2, w2 = h // 2, w // 2
        if self.kind == "avgpool":
            blocks = np.broadcast_to((dout * 0.25)[:, :, None, :, None, :], (n, h2, 2, w2, 2, c))
        else:
            flat = np.zeros((n, h2, w2, c, 4), dtype=dout.dtype)
            np.put_along_axis(flat, self.argmax[..., None], dout[..., None], axis=-1)
            blocks = flat.reshape(n, h2, w2, c, 2, 2).transpose(0, 1, 4, 2, 5, 3)
        dx = np.zeros(self.x_shape, dtype=dout.dtype)
        dx[:, :2 * h2, :2 * w2, :] = blocks.reshape(n, 2 * h2, 2 * w2, c)
        return dx


class _Flatten:
    params: list[np.ndarray] = []
    grads: list[np.ndarray] = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x_shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout.reshape(self.x_shape)


class _Dense:
    def __init__(self, layer: Layer, shape_in: tuple[int, ...], rng: np.random.Generator,
                 dtype: Any, *, need_input_grad: bool) -> None:
        fan_in, units = shape_in[0], int(layer.units or 0)
        self.relu = layer.activation == "relu"
        self.need_input_grad = need_input_grad
        self.w = (rng.standard_normal((fan_in, units)) * np.sqrt(2.0 / fan_in)).astype(dtype)
        self.b = np.zeros(units, dtype=dtype)
        self.params = [self.w, self.b]
        self.grads = [np.zeros_like(self.w), np.zeros_like(self.b)]

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = x
        out = x @ self.w
        out += self.b
        if self.relu:
            np.maximum(out, 0, out=out)
        self.out = out
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray | None:
        if self.relu:
            dout = dout * (self.out > 0)
        np.matmul(self.x.T, dout, out=self.grads[0])
        self.grads[1][...] = dout.sum(axis=0)
        return dout @ self.w.T if self.need_input_grad else None


class NumpyNet:
    """A spec built from numpy layers, with its optimizer.

    Args:
        spec: The architecture.
        input_shape: ``(H, W, C)`` of one sample.
        num_classes: Output classes.
        optimizer: ``sgd``, ``momentum`` or ``adam``.
        learning_rate: Step size.
        momentum: Momentum factor (``momentum`` only).
        nesterov: Nesterov momentum, as torch's SGD has it (``momentum`` only).
        schedule: The learning rate of each step, given the number of steps taken before it;
            ``None`` keeps ``learning_rate``.
        weight_decay: L2 factor added to every gradient, as PyTorch's ``weight_decay``.
        seed: Seed of the weight initialisation.
        dtype: Floating type of weights and activations.
    """

    def __init__(self, spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int, *,
                 optimizer: str = "sgd", learning_rate: float = 0.01, momentum: float = 0.0,
                 nesterov: bool = False, schedule: Callable[[int], float] | None = None,
                 weight_decay: float = 0.0, seed: int = 0, dtype: Any = np.float32) -> None:
        if optimizer not in ("sgd", "momentum", "adam"):
            raise invalid_parameter("optimizer", "NumpyNet", "'sgd', 'momentum' or 'adam'", optimizer)
        check_supported(spec)
        self.dtype = np.dtype(dtype)
        self.optimizer = optimizer
        self.learning_rate = float(learning_rate)
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.schedule = schedule
        self.weight_decay = float(weight_decay)
        rng = np.random.default_rng(seed)
        self.layers: list[Any] = []
        for layer, shape_in, _ in layer_shapes(spec, tuple(input_shape), num_classes):
            # The first layer with weights needs no gradient with respect to its input.
            first = not any(lay.params for lay in self.layers)
            if layer.kind == "conv":
                self.layers.append(_Conv(layer, shape_in, rng, self.dtype, need_input_grad=not first))
            elif layer.kind == "dense":
                self.layers.append(_Dense(layer, shape_in, rng, self.dtype, need_input_grad=not first))
            elif layer.kind == "flatten":
                self.layers.append(_Flatten())
            else:
                self.layers.append(_Pool(layer.kind))
        self.params = [p for lay in self.layers for p in lay.params]
        self.grads = [g for lay in self.layers for g in lay.grads]
        self._state = [np.zeros_like(p) for p in self.params]  # momentum buffer or Adam's m
        self._state2 = [np.zeros_like(p) for p in self.params] if optimizer == "adam" else []
        self._steps = 0

    @property
    def param_count(self) -> int:
        return sum(int(p.size) for p in self.params)

    def forward(self, x: np.ndarray, *, train: bool = False) -> np.ndarray:
        """Logits for a batch ``x`` (NHWC); ``train`` keeps what the backward pass needs."""
        out = np.asarray(x, dtype=self.dtype)
        for layer in self.layers:
            out = layer.forward(out, train=train) if isinstance(layer, _Conv) else layer.forward(out)
        return out

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> float:
        """Forward and backward on one batch; fills :attr:`grads` and returns the mean loss."""
        loss, dout = softmax_cross_entropy(self.forward(x, train=True), y)
        for layer in reversed(self.layers):
            dout = layer.backward(dout)
            if dout is None:
                break
        return loss

    def step(self) -> None:
        """Apply one optimizer update with the gradients in :attr:`grads`."""
        if self.schedule is not None:
            self.learning_rate = float(self.schedule(self._steps))
        lr, wd = self.learning_rate, self.weight_decay
        self._steps += 1
        if self.optimizer == "adam":
            b1, b2, eps = 0.9, 0.999, 1e-8
            c1, c2 = 1 - b1 ** self._steps, 1 - b2 ** self._steps
        for i, (p, g) in enumerate(zip(self.params, self.grads)):
            if wd:
                g = g + wd * p
            if self.optimizer == "sgd":
                p -= lr * g
            elif self.optimizer == "momentum":
                v = self._state[i]
                v *= self.momentum
                v += g
                # torch's Nesterov form: step along g + m * buf with the buffer just updated
                p -= lr * (g + self.momentum * v) if self.nesterov else lr * v
            else:
                m, s = self._state[i], self._state2[i]
                m *= b1
                m += (1 - b1) * g
                s *= b2
                s += (1 - b2) * (g * g)
                p -= (lr / c1) * m / (np.sqrt(s / c2) + eps)

    def train_epoch(self, x: np.ndarray, y: np.ndarray, *, batch_size: int) -> float:
        """One pass over ``x`` in order; returns the sample-weighted mean loss (NaN if it blew up)."""
        total = 0.0
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for start in range(0, len(x), batch_size):
                xb, yb = x[start:start + batch_size], y[start:start + batch_size]
                loss = self.loss_and_grads(xb, yb)
                if not np.isfinite(loss):
                    return float("nan")
                self.step()
                total += loss * len(xb)
        return total / max(len(x), 1)

    def predict(self, x: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
        """Predicted labels as int64."""
        out = np.empty(len(x), dtype=np.int64)
        with np.errstate(over="ignore", invalid="ignore"):
            for start in range(0, len(x), batch_size):
                out[start:start + batch_size] = self.forward(x[start:start + batch_size]).argmax(axis=1)
        return out
