"""ONNX Runtime training-API backend (onnxruntime-training; importing it also imports torch).

The spec is written as a plain ONNX graph (:mod:`advisor.frameworks._onnx_graph`), turned into
training artifacts (training, eval and optimizer graphs plus a checkpoint) by
``onnxruntime.training.artifacts.generate_artifacts`` in a temporary folder, and trained with
``onnxruntime.training.api``'s ``Module`` / ``Optimizer`` / ``CheckpointState``.

Test accuracy is computed with the same ``Module`` in eval mode: its eval graph shares the
training state, so it always sees the current weights, and it costs no export and no new session
per epoch. Both graphs also return the logits (``additional_output_names``).

Optimizers: ``adam`` and ``adamw`` are both ORT's AdamW, whose weight decay is decoupled (after
the Adam step, ``w *= 1 - lr * wd``), unlike the L2 penalty of torch's Adam and of the Keras
backend; ``sgd`` is ORT's plain SGD, which has neither momentum nor weight decay (``Config``
refuses a non-zero ``weight_decay`` with it rather than dropping it silently).

The learning-rate schedule is applied per step with the training API's
``Optimizer.set_learning_rate``, called only when the scheduled rate changes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from advisor._imports import try_import
from advisor.errors import DeviceError, invalid_parameter
from advisor.frameworks import _onnx_graph
from advisor.frameworks.base import EVAL_BATCH, Trainer
from advisor.models import ModelSpec
from advisor.records import Config

__all__ = ["OnnxRuntimeTrainer"]

_FEATURE = "The onnxruntime backend"
_GRAPH_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}
_MODES = {"sequential": "ORT_SEQUENTIAL", "parallel": "ORT_PARALLEL"}


class OnnxRuntimeTrainer(Trainer):
    """Trains a spec from :mod:`advisor.models` with ONNX Runtime's on-device training API."""

    name = "onnxruntime"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._ort: Any = None
        self._api: Any = None
        self._options: Any = None
        self._device = "cpu"
        self._dir: str | None = None
        self._cleanup: Any = None
        self.module_: Any = None
        self.optimizer_: Any = None
        self.state_: Any = None
        self.step_ = 0  # global optimizer step: the schedule's clock
        self._rate: float | None = None  # the rate last given to the optimizer

    # -- setup ---------------------------------------------------------------------------------

    def configure(self) -> dict[str, Any]:
        cfg = self.config
        ort = try_import("onnxruntime", feature=_FEATURE)
        self._api = try_import("onnxruntime.training.api", feature=_FEATURE)
        self._ort = ort
        if cfg.is_cuda:
            index = int(cfg.device.split(":")[1]) if ":" in cfg.device else 0
            self._check_cuda(index)
            self._device = f"cuda:{index}"
        options = ort.SessionOptions()
        options.intra_op_num_threads = cfg.threads
        options.inter_op_num_threads = cfg.inter_op_threads
        options.execution_mode = getattr(ort.ExecutionMode, _MODES[cfg.execution_mode or "sequential"])
        if cfg.graph_optimization is not None:
            options.graph_optimization_level = getattr(
                ort.GraphOptimizationLevel, _GRAPH_LEVELS[cfg.graph_optimization]
            )
        self._options = options
        level_names = {v: k for k, v in _GRAPH_LEVELS.items()}
        mode_names = {v: k for k, v in _MODES.items()}
        return {
            "intra_op_threads": int(options.intra_op_num_threads),
            "inter_op_threads": int(options.inter_op_num_threads),
            "execution_mode": mode_names[options.execution_mode.name],
            "graph_optimization": level_names[options.graph_optimization_level.name],
            "device": self._device,
        }

    def _check_cuda(self, index: int) -> None:
        ort = self._ort
        available = ort.get_available_providers()
        if "CUDAExecutionProvider" not in available:
            raise DeviceError(
                f"CUDA device {self.config.device!r} requested but onnxruntime sees no GPU: "
                f"its providers are {available}."
            )
        # The PyPI GPU wheel lists the CUDA provider even where its CUDA libraries or the GPU are
        # missing; only creating a session tells. ORT then falls back to the CPU and logs why.
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])], "probe",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
        probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _onnx_graph.OPSET)])
        probe.ir_version = _onnx_graph.IR_VERSION
        try:
            session = ort.InferenceSession(
                probe.SerializeToString(), providers=[("CUDAExecutionProvider", {"device_id": index})]
            )
            providers = session.get_providers()
        except Exception as exc:  # ORT raises its own pybind error types
            providers = [f"error: {str(exc).splitlines()[0]}"]
        if "CUDAExecutionProvider" not in providers:
            raise DeviceError(
                f"CUDA device {self.config.device!r} requested but onnxruntime sees no GPU: "
                f"CUDAExecutionProvider could not be created on device {index} (got {providers}; "
                "the GPU or the CUDA/cuDNN libraries this build needs are missing, see ORT's log)."
            )

    def versions(self) -> dict[str, str]:
        ort = self._ort or try_import("onnxruntime", feature=_FEATURE)
        onnx = try_import("onnx", feature=_FEATURE)
        out = {"onnxruntime": str(ort.__version__), "onnx": str(onnx.__version__),
               "build_device": str(ort.get_device())}
        try:
            out["onnxruntime-training"] = metadata.version("onnxruntime-training")
        except metadata.PackageNotFoundError:
            pass
        return out

    # -- model ---------------------------------------------------------------------------------

    def build(self, spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
        if self._api is None:
            raise RuntimeError("OnnxRuntimeTrainer.configure() must run before build().")
        from onnxruntime.training import artifacts, onnxblock

        cfg = self.config
        model = _onnx_graph.build_model(spec, tuple(input_shape), num_classes, seed=cfg.seed)
        trainable, frozen = _onnx_graph.split_parameters(model)
        if frozen and cfg.execution_mode == "parallel":
            # The parallel executor ignores the kernel's in/out aliasing that updates the running
            # statistics: they would stay at their initial values and evaluation would be wrong.
            raise invalid_parameter(
                "execution_mode", f"framework 'onnxruntime' with model {spec.name!r}",
                "'sequential' (the parallel executor does not update batch norm's running statistics)",
                cfg.execution_mode,
            )
        if cfg.optimizer in ("adam", "adamw"):
            # Decoupled weight decay (AdamW), not torch's L2-in-the-gradient; eps as torch's Adam.
            optimizer: Any = onnxblock.optim.AdamW(eps=1e-8, weight_decay=cfg.weight_decay)
        else:
            optimizer = artifacts.OptimType.SGD
        # In a trial child the working directory is the trial's folder (it holds trial.json), so
        # the artifacts stay with the trial; elsewhere (tests, notebooks) they go to the temp dir.
        here = os.getcwd()
        parent = here if os.path.isfile(os.path.join(here, "trial.json")) else None
        self._dir = tempfile.mkdtemp(prefix="ort-artifacts-", dir=parent)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)
        folder = Path(self._dir)
        artifacts.generate_artifacts(
            model,
            requires_grad=trainable,
            frozen_params=frozen,  # batch norm's running statistics
            loss=artifacts.LossType.CrossEntropyLoss,
            optimizer=optimizer,
            artifact_directory=folder,
            additional_output_names=[_onnx_graph.OUTPUT_NAME],
        )
        _onnx_graph.fix_eval_model(folder / "eval_model.onnx")
        api = self._api
        self.state_ = api.CheckpointState.load_checkpoint(os.fspath(folder / "checkpoint"))
        self.module_ = api.Module(
            folder / "training_model.onnx", self.state_, folder / "eval_model.onnx",
            device=self._device, session_options=self._options,
        )
        self.optimizer_ = api.Optimizer(folder / "optimizer_model.onnx", self.module_)
        self._set_rate(cfg.learning_rate)
        return int(self.module_.get_parameters_size(trainable_only=True))

    def describe(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "onnx_opset": _onnx_graph.OPSET,
            # 'adam' and 'adamw' alike: ORT's only Adam is AdamW
            "ort_optimizer": "SGD" if cfg.optimizer == "sgd" else "AdamW",
            "weight_decay_kind": "none" if cfg.optimizer == "sgd" else "decoupled",
            "avgpool_as": "Slice+Reshape+ReduceMean",
            "eval_path": "training Module in eval mode",
        }

    # -- training ------------------------------------------------------------------------------

    def train_epoch(self, x: np.ndarray, y: np.ndarray) -> float:
        module, optimizer = self.module_, self.optimizer_
        bs = self.config.batch_size
        # The NHWC -> NCHW copy stays inside the timed epoch: it is this backend's layout cost.
        xs = _to_nchw(x)
        ys = np.ascontiguousarray(y, dtype=np.int64)
        module.train()
        total = 0.0
        for start in range(0, len(xs), bs):
            xb, yb = xs[start:start + bs], ys[start:start + bs]
            self._set_rate(self.lr_at(self.step_))
            self.step_ += 1
            loss, _ = module(xb, yb)
            optimizer.step()
            module.lazy_reset_grad()
            # The loss comes back as numpy, so each step has finished when this line runs.
            total += float(loss) * len(xb)
        return total / max(len(xs), 1)

    def _set_rate(self, rate: float) -> None:
        if rate != self._rate:
            self.optimizer_.set_learning_rate(rate)
            self._rate = rate

    def current_learning_rate(self) -> float | None:
        return float(self.optimizer_.get_learning_rate())

    def predict(self, x: np.ndarray) -> np.ndarray:
        module = self.module_
        xs = _to_nchw(x)
        out = []
        module.eval()
        try:
            for start in range(0, len(xs), EVAL_BATCH):
                xb = xs[start:start + EVAL_BATCH]
                # The eval graph still computes the loss; its labels do not affect the logits.
                _, logits = module(xb, np.zeros(len(xb), dtype=np.int64))
                out.append(np.argmax(logits, axis=1))
        finally:
            module.train()
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)

    def gpu_peak_memory_mb(self) -> float | None:
        # ORT exposes no peak-memory counter for the training API's CUDA arena; the parent's NVML
        # sampling of the trial process measures GPU memory instead.
        return None

    def close(self) -> None:
        self.module_ = self.optimizer_ = self.state_ = None
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None


def _to_nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).transpose(0, 3, 1, 2))
