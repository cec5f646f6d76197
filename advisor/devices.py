"""Accelerators from first principles: peak throughput, memory bandwidth and size, and a roofline
model of a training step, for GPU answers the knowledge base has no measurement for.

Each row states dense (no structured sparsity) peak throughput per precision in TFLOP/s, memory
bandwidth in GB/s and memory in GiB, with its public source. ``None``: the precision has no fast
path on that device (it then runs at its FP32 rate, or slower).

The time of one training step at batch size ``b``:

- **roofline**: ``max(b * training FLOPs per sample / peak, bytes moved / bandwidth)``, the bytes
  being the parameters read and written (weights, gradients, optimizer state) plus the layer
  outputs written and read back, at the step's precision; plus the launch floor, the minimum
  latency of the kernels a step runs (:data:`KERNEL_FLOOR_S` each);
- **expected**: the roofline at :data:`ACHIEVED_FRACTION` of peak (small convnets reach a fraction
  of it) plus each kernel's launch cost in the framework (:data:`LAUNCH_S`) plus the host feeding
  the batch (:data:`HOST_FEED_BYTES_PER_S`).

The expected time lies between the roofline and :data:`MAX_SLOWDOWN` times it, by construction.
Memory of a step: weights, gradients and optimizer state at FP32, one batch's layer outputs at
the step's precision (kept for the backward pass), plus the framework's CUDA context.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Any

from advisor.errors import UnknownNameError

__all__ = ["Accelerator", "ACCELERATORS", "DEFAULT_GPU", "get_accelerator", "StepEstimate", "estimate_step",
           "estimate_model_step", "run_seconds", "WARMUP_S",
           "MAX_SLOWDOWN"]


@dataclass(frozen=True)
class Accelerator:
    name: str
    aliases: tuple[str, ...]
    fp32_tflops: float
    tf32_tflops: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None
    bandwidth_gbs: float
    memory_gib: float
    source: str

    def peak_tflops(self, precision: str) -> float:
        """Peak dense throughput at ``precision`` (``fp32``, ``tf32``, ``bf16``, ``fp16``), falling
        back to FP32 where the device has no faster path."""
        value = {"fp32": self.fp32_tflops, "tf32": self.tf32_tflops, "bf16": self.bf16_tflops,
                 "fp16": self.fp16_tflops}.get(precision)
        return float(value if value else self.fp32_tflops)


ACCELERATORS: tuple[Accelerator, ...] = (
    Accelerator("NVIDIA T4", ("t4", "tesla t4"), 8.1, None, None, 65.0, 320.0, 16.0,
                "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"),
    Accelerator("NVIDIA L4", ("l4",), 30.3, 60.0, 121.0, 121.0, 300.0, 24.0,
                "https://www.nvidia.com/en-us/data-center/l4/ (datasheet; sparsity figures halved)"),
    Accelerator("NVIDIA A10", ("a10",), 31.2, 62.5, 125.0, 125.0, 600.0, 24.0,
                "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf"),
    Accelerator("NVIDIA V100", ("v100", "tesla v100", "v100-sxm2"), 15.7, None, None, 125.0, 900.0, 32.0,
                "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"),
    Accelerator("NVIDIA A100", ("a100", "a100-sxm4-80gb", "a100 80gb"), 19.5, 156.0, 312.0, 312.0, 2039.0, 80.0,
                "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"),
    Accelerator("NVIDIA H100", ("h100", "h100 sxm", "h100-sxm5-80gb"), 67.0, 494.7, 989.4, 989.4, 3350.0, 80.0,
                "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (SXM; sparsity halved)"),
    Accelerator("NVIDIA H200", ("h200", "h200 sxm"), 67.0, 494.7, 989.4, 989.4, 4800.0, 141.0,
                "https://www.nvidia.com/en-us/data-center/h200/ (SXM; sparsity figures halved)"),
    Accelerator("NVIDIA GeForce RTX 3090", ("rtx 3090", "3090", "geforce rtx 3090"), 35.6, 35.6, 71.0, 71.0, 936.0,
                24.0, "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf "
                      "(tensor FLOPs with FP32 accumulate, dense)"),
    Accelerator("NVIDIA GeForce RTX 4090", ("rtx 4090", "4090", "geforce rtx 4090"), 82.6, 82.6, 165.2, 165.2,
                1008.0, 24.0, "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf "
                              "(tensor FLOPs with FP32 accumulate, dense)"),
    Accelerator("NVIDIA GeForce GTX 1080 Ti", ("gtx 1080 ti", "1080 ti", "1080ti"), 11.3, None, None, None, 484.0,
                11.0, "https://www.nvidia.com/en-us/geforce/products/10series/geforce-gtx-1080-ti/ (boost clock "
                      "1582 MHz x 3584 cores x 2; FP16 runs at 1/64 rate, so no fast path)"),
)
#: The row a GPU request assumes when neither --gpu-model nor a detected GPU names one.
DEFAULT_GPU = "NVIDIA A100"

#: Host cost of launching one kernel in each framework's runtime (seconds): Python dispatch plus
#: the driver call, on one host thread. torch's is fitted to the steady-state steps of the trials
#: run on a lent H200 (benchmarks/results/gpu-model.md); the others keep their earlier ratio to
#: torch's, which no GPU trial has checked yet.
LAUNCH_S = {"torch": 41e-6, "tensorflow": 61e-6, "onnxruntime": 49e-6, "sklearn": 0.0}
#: Kernels per layer and step: forward, activation, two backward (inputs, weights), the
#: activation's backward and the optimizer's update of the layer's tensors.
KERNELS_PER_LAYER = 8
#: The least time a kernel takes on the device, however small (launch latency).
KERNEL_FLOOR_S = 4e-6
#: The fraction of peak small convolutional nets reach in practice.
ACHIEVED_FRACTION = 0.3
#: Host to device feeding (pinned copies of uint8/float batches), bytes per second.
HOST_FEED_BYTES_PER_S = 8e9
#: The expected time never exceeds this multiple of the roofline.
MAX_SLOWDOWN = 20.0
#: Once per run, on top of the steps: the first epoch's CUDA and cuDNN warm-up (kernel selection,
#: allocator growth, lazy module loading). torch's is the median first-epoch excess of the H200
#: trials (benchmarks/results/gpu-model.md); the others are unmeasured and set from torch's by the
#: graph tracing they add (TensorFlow's tf.function, ONNX Runtime's session build).
WARMUP_S = {"torch": 0.5, "tensorflow": 2.0, "onnxruntime": 1.0, "sklearn": 0.0}
#: A framework's CUDA context and workspace (MiB).
CONTEXT_MIB = {"torch": 500.0, "tensorflow": 800.0, "onnxruntime": 450.0, "sklearn": 0.0}


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("nvidia", "").replace("-", " ").split())


def get_accelerator(name: str | None) -> Accelerator:
    """The row for ``name`` (case, "NVIDIA" and dashes ignored; a known alias or a prefix match of a
    detected name such as ``NVIDIA H200 NVL``); :data:`DEFAULT_GPU` for ``None``.

    Raises:
        UnknownNameError: One line listing the known rows.
    """
    if name is None:
        name = DEFAULT_GPU
    key = _norm(name)
    for acc in ACCELERATORS:
        if key == _norm(acc.name) or key in acc.aliases:
            return acc
    # A detected name with a suffix (memory size, form factor): the longest known name it starts
    # with, so "A100-SXM4-80GB" is an A100, not an A10.
    prefixes = [(len(p), acc) for acc in ACCELERATORS
                for p in (_norm(acc.name), *(a for a in acc.aliases if len(a) > 3)) if key.startswith(p)]
    if prefixes:
        return max(prefixes, key=lambda pa: pa[0])[1]
    known = ", ".join(a.name.replace("NVIDIA ", "") for a in ACCELERATORS)
    raise UnknownNameError(f"Unknown GPU model {name!r}: the device model knows {known}.")


@dataclass(frozen=True)
class StepEstimate:
    roofline_s: float
    expected_s: float
    memory_mib: float
    precision: str


def precision_of(config: Any, device: Accelerator) -> str:
    """The precision a config computes in on ``device``: bf16/fp16 with mixed precision or bfloat16
    (bf16 where the device has it, else fp16), else TF32 where the device has it (the frameworks'
    default for matrix products on Ampere and later), else FP32."""
    if getattr(config, "bfloat16", False) or getattr(config, "mixed_precision", False):
        return "bf16" if device.bf16_tflops else ("fp16" if device.fp16_tflops else "fp32")
    return "tf32" if device.tf32_tflops else "fp32"


def run_seconds(step: StepEstimate, steps: int | float, framework: str) -> tuple[float, float]:
    """``(roofline, expected)`` seconds of a run of ``steps`` steps: the expected time adds the
    framework's one-off warm-up (:data:`WARMUP_S`), and stays within :data:`MAX_SLOWDOWN` times the
    roofline like the step itself."""
    roofline = steps * step.roofline_s
    expected = steps * step.expected_s + WARMUP_S.get(framework, 0.5)
    return roofline, min(expected, MAX_SLOWDOWN * roofline)


@functools.lru_cache(maxsize=256)
def _model_facts(model: str, input_shape: tuple[int, ...], num_classes: int) -> tuple[float, int, float, int, int]:
    """FLOPs per sample, parameters, layer outputs per sample, weighted layers and bytes per sample
    of a registry model on an input (walking the spec costs far more than the roofline itself)."""
    import math

    from advisor import models

    spec = models.get_model(model)
    return (models.training_flops_per_sample(spec, input_shape, num_classes),
            models.param_count(spec, input_shape, num_classes),
            float(models.activation_count(spec, input_shape, num_classes)),
            sum(1 for layer in models.walk_layers(spec.layers) if layer.kind in ("conv", "dense", "bn")),
            4 * math.prod(input_shape))


def estimate_model_step(device: Accelerator, config: Any, model: str, input_shape: tuple[int, ...],
                        num_classes: int) -> StepEstimate:
    """:func:`estimate_step` for a registry model on an input: its FLOPs, parameters, layer outputs
    and weighted layers (conv, dense, batch norm) from :mod:`advisor.models`."""
    flops, params, activations, layers, sample_bytes = _model_facts(model, tuple(input_shape), int(num_classes))
    return estimate_step(device=device, config=config, flops_per_sample=flops, params=params,
                         activations_per_sample=activations, layers=layers, sample_bytes=sample_bytes)


def estimate_step(*, device: Accelerator, config: Any, flops_per_sample: float, params: int,
                  activations_per_sample: float, layers: int, sample_bytes: int) -> StepEstimate:
    """Roofline and expected time of one training step, and the step's device memory (see the module)."""
    b = int(config.batch_size)
    precision = precision_of(config, device)
    width = 2 if precision in ("bf16", "fp16") else 4
    state = 3 if config.optimizer in ("adam", "adamw") else (2 if config.optimizer == "momentum" else 1)
    compute = b * flops_per_sample / (device.peak_tflops(precision) * 1e12)
    traffic = params * 4 * (2 + 2 * state) + 3 * b * activations_per_sample * width
    memory_s = traffic / (device.bandwidth_gbs * 1e9)
    kernels = max(1, layers) * KERNELS_PER_LAYER
    roofline = max(compute, memory_s) + kernels * KERNEL_FLOOR_S
    launch = kernels * LAUNCH_S.get(config.framework, 10e-6)
    feed = b * sample_bytes / HOST_FEED_BYTES_PER_S
    expected = max(compute, memory_s) / ACHIEVED_FRACTION + launch + feed
    expected = min(max(expected, roofline), MAX_SLOWDOWN * roofline)
    memory = (params * 4 * (1 + state) + b * activations_per_sample * width) / 2**20
    memory += CONTEXT_MIB.get(config.framework, 500.0)
    return StepEstimate(roofline, expected, memory, precision)
