"""The PyTorch (eager) backend: the "Torch" lineage of the study.

Imported only inside the trial child, after the parent has set ``OMP_NUM_THREADS`` and friends;
:meth:`TorchTrainer.configure` then applies the in-process settings (intra/inter-op threads,
oneDNN, device) before the first operation.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

import numpy as np

from advisor._imports import try_import
from advisor.errors import DeviceError
from advisor.frameworks._torch_graph import build_module
from advisor.frameworks.base import EVAL_BATCH, Trainer, batches
from advisor.models import ModelSpec

__all__ = ["TorchTrainer"]

_logger = logging.getLogger(__name__)


def _parallel_summary(info: str) -> dict[str, str]:
    """Pick the parallel backend, MKL and oneDNN versions out of ``torch.__config__.parallel_info()``."""
    out: dict[str, str] = {}
    for raw in info.splitlines():
        line = raw.strip()
        if line.startswith("ATen parallel backend:"):
            out["parallel_backend"] = line.split(":", 1)[1].strip()
        elif "Math Kernel Library Version" in line:
            out["mkl"] = line.split("Version", 1)[1].split("-")[0].strip()
        elif line.startswith("Intel(R) MKL-DNN"):
            out["onednn"] = line.split()[2].lstrip("v") if len(line.split()) > 2 else line
        elif line.startswith("OpenMP") and "openmp" not in out:
            out["openmp"] = line.split()[1]
    return out


class TorchTrainer(Trainer):
    """Builds a spec as ``torch.nn.Sequential`` (see :mod:`._torch_graph`) and trains it eagerly.

    Inputs arrive NHWC; each ``train_epoch``/``predict`` converts the whole array once to an NCHW
    tensor on the device. That copy is part of the timed epoch: it is this framework's data
    pipeline. On CUDA, ``mixed_precision`` turns on ``torch.autocast`` (float16) with a
    ``GradScaler``; on the CPU it has no effect and is reported as off.
    """

    name = "torch"

    def _torch(self) -> Any:
        return try_import("torch", feature="The torch backend")

    def configure(self) -> dict[str, Any]:
        torch = self._torch()
        c = self.config
        # Inter-op threads can be set only before the first inter-op parallel work, and only once
        # per process; when that is too late, report what is in force instead.
        try:
            torch.set_num_interop_threads(c.inter_op_threads)
        except RuntimeError as exc:
            if torch.get_num_interop_threads() != c.inter_op_threads:
                _logger.warning("torch inter-op threads stay at %d: %s", torch.get_num_interop_threads(), exc)
        torch.set_num_threads(c.threads)
        if c.onednn is not None:
            torch.backends.mkldnn.enabled = c.onednn
        torch.manual_seed(c.seed)
        self.device_ = self._device(torch)
        self.amp_ = bool(c.mixed_precision and self.device_.type == "cuda")
        self._check_bfloat16(torch)
        if self.device_.type == "cuda":
            torch.cuda.set_device(self.device_)
            torch.backends.cudnn.benchmark = c.cudnn_benchmark
            torch.cuda.reset_peak_memory_stats(self.device_)
        return {
            "intra_op_threads": int(torch.get_num_threads()),
            "inter_op_threads": int(torch.get_num_interop_threads()),
            "onednn": bool(torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()),
            "device": str(self.device_),
            "mixed_precision": self.amp_,
            "cudnn_benchmark": bool(self.device_.type == "cuda" and c.cudnn_benchmark),
            "bfloat16": bool(c.bfloat16),
            "channels_last": bool(c.channels_last),
            "compile": bool(c.compile),
        }

    def _check_bfloat16(self, torch: Any) -> None:
        """Refuse bfloat16 autocast where the device has no native bfloat16 arithmetic."""
        if not self.config.bfloat16:
            return
        if self.device_.type == "cuda":
            if not torch.cuda.is_bf16_supported():
                raise DeviceError(f"bfloat16 needs a GPU with bfloat16 support; {torch.cuda.get_device_name()} has none.")
            return
        from advisor.hardware import cpu_bf16_support

        if cpu_bf16_support() is None:
            raise DeviceError("bfloat16 needs a CPU with avx512_bf16 or amx_bf16 (emulated bfloat16 is slower "
                              "than float32); this CPU has neither: drop --bfloat16.")

    def _autocast(self) -> Any:
        """The autocast context of a training or inference step (a no-op in float32)."""
        torch = self._torch()
        if self.amp_:
            return torch.autocast(device_type="cuda", dtype=torch.float16)
        if self.config.bfloat16:
            return torch.autocast(device_type=self.device_.type, dtype=torch.bfloat16)
        return nullcontext()

    def _device(self, torch: Any) -> Any:
        c = self.config
        if not c.is_cuda:
            return torch.device("cpu")
        if not torch.cuda.is_available():
            why = "no CUDA device is visible" if torch.version.cuda else "this build has no CUDA support"
            raise DeviceError(
                f"CUDA device {c.device!r} requested but torch sees no GPU: {why} "
                f"(torch {torch.__version__}); use device 'cpu' or a machine with a GPU."
            )
        index = int(c.device.split(":", 1)[1]) if ":" in c.device else 0
        count = torch.cuda.device_count()
        if index >= count:
            raise DeviceError(
                f"CUDA device {c.device!r} requested but torch sees only {count} GPU(s): "
                f"use an index below {count}."
            )
        return torch.device("cuda", index)

    def versions(self) -> dict[str, str]:
        torch = self._torch()
        out = {"torch": str(torch.__version__), "numpy": np.__version__}
        if torch.version.cuda is not None:
            out["cuda"] = str(torch.version.cuda)
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        if cudnn is not None:
            out["cudnn"] = str(cudnn)
        try:
            out.update(_parallel_summary(torch.__config__.parallel_info()))
        except Exception:  # a provenance nicety: never fail a trial over it
            _logger.debug("torch parallel_info unavailable", exc_info=True)
        return out

    def build(self, spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
        torch = self._torch()
        c = self.config
        if not hasattr(self, "device_"):
            self.device_ = self._device(torch)
            self.amp_ = bool(c.mixed_precision and self.device_.type == "cuda")
        torch.manual_seed(c.seed)  # weights depend on the seed alone, not on what ran before
        self.model_ = build_module(spec, input_shape, num_classes).to(self.device_)
        if c.channels_last and len(input_shape) == 3:
            self.model_ = self.model_.to(memory_format=torch.channels_last)
        params = list(self.model_.parameters())
        if c.optimizer == "adam":
            self.optimizer_ = torch.optim.Adam(params, lr=c.learning_rate, weight_decay=c.weight_decay)
        elif c.optimizer == "adamw":
            self.optimizer_ = torch.optim.AdamW(params, lr=c.learning_rate, weight_decay=c.weight_decay)
        else:
            momentum = c.momentum if c.optimizer == "momentum" else 0.0
            self.optimizer_ = torch.optim.SGD(
                params, lr=c.learning_rate, momentum=momentum, weight_decay=c.weight_decay,
                nesterov=c.nesterov,
            )
        self.loss_fn_ = torch.nn.CrossEntropyLoss(label_smoothing=c.label_smoothing)
        self.step_ = 0
        self.forward_ = self.model_
        self.compile_time_s_: float | None = None
        if c.compile:
            self.forward_ = torch.compile(self.model_)
            self.compile_time_s_ = self._warm_up(input_shape, num_classes)
        self.scaler_ = torch.amp.GradScaler("cuda") if self.amp_ else None
        return sum(int(p.numel()) for p in self.model_.parameters() if p.requires_grad)

    def _warm_up(self, input_shape: tuple[int, ...], num_classes: int) -> float:
        """Compile the training graph on one dummy batch, outside the timed epochs; return seconds.

        Forward and backward run, but no optimizer step: the weights, the optimizer state and the
        batch-norm statistics (saved and restored) stay as built.
        """
        import time

        torch = self._torch()
        bs = self.config.batch_size
        xb = self._to_tensor(np.zeros((bs, *input_shape), np.float32))
        yb = torch.zeros(bs, dtype=torch.int64, device=self.device_)
        buffers = {k: v.clone() for k, v in self.model_.state_dict().items() if "running" in k or "num_batches" in k}
        self.model_.train()
        t0 = time.perf_counter()
        with self._autocast():
            loss = self.loss_fn_(self.forward_(xb), yb)
        loss.backward()
        if self.device_.type == "cuda":
            torch.cuda.synchronize(self.device_)
        elapsed = time.perf_counter() - t0
        self.optimizer_.zero_grad(set_to_none=True)
        if buffers:
            self.model_.load_state_dict(buffers, strict=False)
        return elapsed

    def describe(self) -> dict[str, Any]:
        return {
            "compile_time_s": self.compile_time_s_,
            "memory_format": "channels_last" if self.config.channels_last else "contiguous",
            "autocast": "float16" if self.amp_ else "bfloat16" if self.config.bfloat16 else None,
        }

    def current_learning_rate(self) -> float | None:
        return float(self.optimizer_.param_groups[0]["lr"])

    def _to_tensor(self, x: np.ndarray) -> Any:
        torch = self._torch()
        t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        if t.dim() == 4:  # NHWC -> NCHW, one contiguous copy (NHWC kept in memory for channels_last)
            t = t.permute(0, 3, 1, 2)
            if self.config.channels_last:
                return t.to(self.device_).contiguous(memory_format=self._torch().channels_last)
        return t.to(self.device_).contiguous()

    def train_epoch(self, x: np.ndarray, y: np.ndarray) -> float:
        torch = self._torch()
        xs = self._to_tensor(x)
        ys = torch.from_numpy(np.asarray(y, dtype=np.int64)).to(self.device_)
        model, opt, loss_fn = self.forward_, self.optimizer_, self.loss_fn_
        self.model_.train()
        total = torch.zeros((), dtype=torch.float32, device=self.device_)
        bs = self.config.batch_size
        groups = opt.param_groups
        for start in batches(len(xs), bs):
            xb, yb = xs[start:start + bs], ys[start:start + bs]
            lr = self.lr_at(self.step_)
            if lr != groups[0]["lr"]:
                for group in groups:
                    group["lr"] = lr
            self.step_ += 1
            opt.zero_grad(set_to_none=True)
            with self._autocast():
                loss = loss_fn(model(xb), yb)
            if self.scaler_ is not None:
                self.scaler_.scale(loss).backward()
                self.scaler_.step(opt)
                self.scaler_.update()
            else:
                loss.backward()
                opt.step()
            # Accumulate on the device: no host sync per batch.
            total += loss.detach().float() * len(yb)
        return float((total / max(len(xs), 1)).item())  # .item() waits for the device

    def predict(self, x: np.ndarray) -> np.ndarray:
        torch = self._torch()
        xs = self._to_tensor(x)
        model = self.forward_
        self.model_.eval()
        out = []
        with torch.inference_mode(), self._autocast():
            for start in batches(len(xs), EVAL_BATCH):
                out.append(model(xs[start:start + EVAL_BATCH]).argmax(dim=1))
        if not out:
            return np.empty(0, dtype=np.int64)
        return torch.cat(out).cpu().numpy().astype(np.int64, copy=False)

    def gpu_peak_memory_mb(self) -> float | None:
        if not hasattr(self, "device_") or self.device_.type != "cuda":
            return None
        torch = self._torch()
        return float(torch.cuda.max_memory_allocated(self.device_)) / 2**20

    def close(self) -> None:
        for name in ("model_", "forward_", "optimizer_", "scaler_"):
            if hasattr(self, name):
                delattr(self, name)
        if hasattr(self, "device_") and self.device_.type == "cuda":
            self._torch().cuda.empty_cache()
