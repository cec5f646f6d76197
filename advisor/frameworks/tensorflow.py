"""TensorFlow 2 / Keras 3 backend.

The parent puts ``TF_ENABLE_ONEDNN_OPTS``, ``TF_CPP_MIN_LOG_LEVEL`` and ``CUDA_VISIBLE_DEVICES``
into the child's environment before anything imports TensorFlow; :meth:`TensorFlowTrainer.configure`
then imports it and sets the in-process thread pools before the first op runs.

Training uses one compiled ``tf.function`` step (optionally XLA-compiled) called once per
mini-batch. Nothing is traced ahead of time: the first epoch pays the tracing (and XLA compile)
cost, as a user of the framework would. The step takes the scheduled learning rate as a scalar
argument and assigns it to the optimizer's rate variable, so a schedule never retraces.
"""

from __future__ import annotations

import logging
import os
import platform
from typing import Any

import numpy as np

from advisor._imports import try_import
from advisor.errors import DeviceError
from advisor.frameworks._keras_graph import build_model as build_keras_model
from advisor.frameworks.base import EVAL_BATCH, Trainer
from advisor.models import ModelSpec
from advisor.records import Config

__all__ = ["TensorFlowTrainer"]

_LOG = logging.getLogger(__name__)


def _onednn_state() -> tuple[bool, str]:
    """Whether TF's oneDNN custom ops are on, and where that comes from.

    TensorFlow reads ``TF_ENABLE_ONEDNN_OPTS`` once, at import. When it is unset, TF >= 2.9 turns
    oneDNN on for x86 Linux builds and leaves it off elsewhere.
    """
    raw = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    if raw is None:
        on = platform.system() == "Linux" and platform.machine().lower() in ("x86_64", "amd64")
        return on, "default (TF_ENABLE_ONEDNN_OPTS unset)"
    return raw.strip().lower() in ("1", "true", "yes", "on"), f"TF_ENABLE_ONEDNN_OPTS={raw}"


class TensorFlowTrainer(Trainer):
    """Trains a spec from :mod:`advisor.models` with Keras 3 on the TensorFlow backend."""

    name = "tensorflow"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._tf: Any = None
        self._keras: Any = None
        self._device = "/CPU:0"
        self._gpu_name: str | None = None
        self._mixed = False
        self._policy = "float32"
        self.step_ = 0  # global optimizer step: the schedule's clock
        self.model_: Any = None
        self.optimizer_: Any = None
        self._train_step: Any = None
        self._predict_step: Any = None

    # -- setup ---------------------------------------------------------------------------------

    def configure(self) -> dict[str, Any]:
        tf = try_import("tensorflow", feature="The tensorflow backend")
        self._tf = tf
        self._keras = try_import("keras", feature="The tensorflow backend")
        cfg = self.config
        threading = tf.config.threading
        try:
            threading.set_intra_op_parallelism_threads(cfg.threads)
            threading.set_inter_op_parallelism_threads(cfg.inter_op_threads)
        except RuntimeError as exc:
            # Only possible when TF already ran an op in this process (never in a trial child,
            # which configures first). Keep going and report the pools really in force.
            _LOG.warning("TensorFlow thread pools already fixed in this process: %s", exc)
        if cfg.is_cuda:
            index = int(cfg.device.split(":")[1]) if ":" in cfg.device else 0
            gpus = tf.config.list_physical_devices("GPU")
            if len(gpus) <= index:
                raise DeviceError(
                    f"CUDA device {cfg.device!r} requested but tensorflow sees no GPU: "
                    f"tf.config.list_physical_devices('GPU') lists {len(gpus)} device(s) "
                    f"(is_cuda_build={tf.sysconfig.get_build_info().get('is_cuda_build', False)})."
                )
            for gpu in gpus:
                try:
                    tf.config.experimental.set_memory_growth(gpu, True)
                except RuntimeError as exc:  # the runtime is already up in this process
                    _LOG.warning("Could not turn on GPU memory growth: %s", exc)
            self._device = f"/GPU:{index}"
            self._gpu_name = f"GPU:{index}"
            self._mixed = bool(cfg.mixed_precision)
        if cfg.bfloat16:
            self._check_bfloat16(gpus[index] if cfg.is_cuda else None)
        # bfloat16 has float32's exponent range: no loss scaling, unlike mixed_float16.
        self._policy = "mixed_float16" if self._mixed else "mixed_bfloat16" if cfg.bfloat16 else "float32"
        self._keras.utils.set_random_seed(cfg.seed)
        onednn, onednn_source = _onednn_state()
        return {
            "intra_op_threads": int(threading.get_intra_op_parallelism_threads()),
            "inter_op_threads": int(threading.get_inter_op_parallelism_threads()),
            "onednn": onednn,
            "onednn_source": onednn_source,
            "xla": bool(cfg.xla),
            "device": self._device,
            "mixed_precision": self._mixed,
            "bfloat16": bool(cfg.bfloat16),
        }

    def _check_bfloat16(self, gpu: Any) -> None:
        """Refuse bfloat16 where the device has no native bfloat16 arithmetic (emulated is slower)."""
        if gpu is not None:
            details = self._tf.config.experimental.get_device_details(gpu)
            if tuple(details.get("compute_capability") or (0, 0)) < (8, 0):
                raise DeviceError(f"bfloat16 needs a GPU of compute capability 8.0 or newer; "
                                  f"{details.get('device_name', gpu.name)} has none: drop --bfloat16.")
            return
        from advisor.hardware import cpu_bf16_support

        if cpu_bf16_support() is None:
            raise DeviceError("bfloat16 needs a CPU with avx512_bf16 or amx_bf16 (emulated bfloat16 is slower "
                              "than float32); this CPU has neither: drop --bfloat16.")

    def versions(self) -> dict[str, str]:
        tf = self._tf or try_import("tensorflow", feature="The tensorflow backend")
        keras = self._keras or try_import("keras", feature="The tensorflow backend")
        info = dict(tf.sysconfig.get_build_info())
        out = {
            "tensorflow": str(tf.__version__),
            "keras": str(keras.__version__),
            "cuda_build": str(bool(info.get("is_cuda_build", False))).lower(),
        }
        for key in ("cuda_version", "cudnn_version"):
            if info.get(key):
                out[key] = str(info[key])
        try:  # private, but the only place TF says whether it was built with oneDNN
            from tensorflow.python.util import _pywrap_util_port

            out["onednn_build"] = str(bool(_pywrap_util_port.IsMklEnabled())).lower()
        except (ImportError, AttributeError):
            pass
        return out

    # -- model ---------------------------------------------------------------------------------

    def build(self, spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
        tf, keras = self._tf, self._keras
        if tf is None:
            raise RuntimeError("TensorFlowTrainer.configure() must run before build().")
        cfg = self.config
        # torch's weight_decay (SGD, momentum and Adam alike) adds wd * w to the gradient of every
        # parameter, biases included. Keras' optimizer weight_decay is decoupled (AdamW-style, and
        # outside the momentum buffer), so it would not match; an L2 penalty of wd/2 * ||w||^2 on
        # every trainable weight has exactly the gradient wd * w. adamw's decay is the decoupled one.
        reg = keras.regularizers.L2(cfg.weight_decay / 2.0) if self._uses_l2() else None
        with tf.device(self._device):
            model = build_keras_model(
                keras, spec, tuple(input_shape), num_classes, regularizer=reg, compute_dtype=self._policy
            )
            optimizer = self._make_optimizer()
            optimizer.build(model.trainable_variables)
        self.model_, self.optimizer_ = model, optimizer
        self._train_step = self._make_train_step(input_shape)
        self._predict_step = self._make_predict_step(input_shape)
        # Trainable only: batch norm's moving statistics are variables but not parameters.
        return sum(int(np.prod(v.shape)) for v in model.trainable_variables)

    def _make_optimizer(self) -> Any:
        keras, cfg = self._keras, self.config
        if cfg.optimizer == "adam":
            # epsilon as torch.optim.Adam (Keras defaults to 1e-7), so one config means one
            # algorithm on every backend.
            opt = keras.optimizers.Adam(learning_rate=cfg.learning_rate, epsilon=1e-8)
        elif cfg.optimizer == "adamw":
            # Keras decays w -= lr * wd * w before the Adam step, as torch.optim.AdamW does.
            opt = keras.optimizers.AdamW(learning_rate=cfg.learning_rate, weight_decay=cfg.weight_decay,
                                         epsilon=1e-8)
        elif cfg.optimizer == "momentum":
            opt = keras.optimizers.SGD(learning_rate=cfg.learning_rate, momentum=cfg.momentum,
                                       nesterov=cfg.nesterov)
        else:
            opt = keras.optimizers.SGD(learning_rate=cfg.learning_rate)
        return keras.optimizers.LossScaleOptimizer(opt) if self._mixed else opt

    def _uses_l2(self) -> bool:
        return self.config.weight_decay > 0 and self.config.optimizer != "adamw"

    def _make_loss(self, num_classes: int) -> Any:
        """``loss(labels, logits)``: mean cross-entropy, label-smoothed as torch's (1 - e) * onehot + e / C."""
        tf, keras, smoothing = self._tf, self._keras, self.config.label_smoothing
        if smoothing <= 0:
            return keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        smoothed = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
        return lambda y, logits: smoothed(tf.one_hot(y, num_classes), logits)

    def _make_train_step(self, input_shape: tuple[int, ...]) -> Any:
        tf, cfg = self._tf, self.config
        model, optimizer, mixed = self.model_, self.optimizer_, self._mixed
        self.loss_fn_ = loss_fn = self._make_loss(int(model.outputs[0].shape[-1]))
        regularized = self._uses_l2()
        rate = optimizer.learning_rate  # the inner optimizer's variable under loss scaling
        # Keras keeps lr inside its momentum (v = m * v - lr * g), torch outside it (p -= lr * buf).
        # Rescaling v by lr_new / lr_old when the rate moves makes the two the same algorithm.
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        varying = cfg.schedule != "constant" or cfg.warmup_fraction > 0
        velocities = list(getattr(inner, "momentums", [])) if varying else []
        signature = [
            tf.TensorSpec([None, *input_shape], tf.float32),
            tf.TensorSpec([None], tf.int64),
            tf.TensorSpec([], tf.float32),
        ]

        def step(x: Any, y: Any, lr: Any) -> Any:
            if velocities:
                ratio = tf.math.divide_no_nan(lr, rate)
                for v in velocities:
                    v.assign(v * ratio)
            rate.assign(lr)
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = loss_fn(y, logits)
                # The reported loss is the data loss alone, as on the other backends.
                total = loss + tf.add_n(model.losses) if regularized else loss
                if mixed:
                    total = optimizer.scale_loss(total)
            grads = tape.gradient(total, model.trainable_variables)
            optimizer.apply(grads, model.trainable_variables)
            return loss

        return tf.function(step, input_signature=signature, jit_compile=bool(self.config.xla))

    def _make_predict_step(self, input_shape: tuple[int, ...]) -> Any:
        tf, model = self._tf, self.model_

        def forward(x: Any) -> Any:
            return tf.argmax(model(x, training=False), axis=-1, output_type=tf.int64)

        signature = [tf.TensorSpec([None, *input_shape], tf.float32)]
        return tf.function(forward, input_signature=signature, jit_compile=bool(self.config.xla))

    def describe(self) -> dict[str, Any]:
        return {
            "jit_compile": bool(self.config.xla),
            "dtype_policy": self._policy,
            "weight_decay_kind": ("l2" if self._uses_l2()
                                  else "decoupled" if self.config.weight_decay > 0 else "none"),
        }

    # -- training ------------------------------------------------------------------------------

    def train_epoch(self, x: np.ndarray, y: np.ndarray) -> float:
        tf = self._tf
        bs = self.config.batch_size
        n = len(x)
        losses, sizes = [], []
        starts = range(0, n, bs)
        rates = np.array([self.lr_at(self.step_ + i) for i in range(len(starts))], dtype=np.float32)
        self.step_ += len(starts)
        with tf.device(self._device):
            # One host-to-device copy per epoch; the slices below stay on the device.
            xt = tf.convert_to_tensor(np.asarray(x, dtype=np.float32))
            yt = tf.convert_to_tensor(np.asarray(y, dtype=np.int64))
            for i, start in enumerate(starts):
                stop = min(start + bs, n)
                loss = self._train_step(xt[start:stop], yt[start:stop], rates[i])
                losses.append(loss)
                sizes.append(stop - start)
            # One device-to-host read per epoch; reading a variable updated by the last step
            # waits for the device to finish.
            values = tf.stack(losses).numpy().astype(np.float64) if losses else np.zeros(0)
            self.model_.trainable_variables[-1].numpy()
        return float(np.dot(values, sizes) / max(n, 1))

    def predict(self, x: np.ndarray) -> np.ndarray:
        tf = self._tf
        out = []
        with tf.device(self._device):
            for start in range(0, len(x), EVAL_BATCH):
                chunk = tf.convert_to_tensor(np.asarray(x[start:start + EVAL_BATCH], dtype=np.float32))
                out.append(self._predict_step(chunk).numpy())
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)

    def current_learning_rate(self) -> float | None:
        return float(self.optimizer_.learning_rate.numpy())

    def gpu_peak_memory_mb(self) -> float | None:
        if self._gpu_name is None or self._tf is None:
            return None
        info = self._tf.config.experimental.get_memory_info(self._gpu_name)
        return float(info["peak"]) / 2**20

    def close(self) -> None:
        if self._keras is not None:
            self._keras.backend.clear_session()
        self.model_ = self.optimizer_ = self._train_step = self._predict_step = None
