"""GPU figures from the device model when the table holds no trial of the requested device kind."""

from __future__ import annotations

from typing import Any

import numpy as np

from advisor._recommend._candidates import Candidate
from advisor._recommend._workload import WorkloadInfo

__all__ = ["CPU_VIEW", "device_figures"]

#: The same training run on a CPU: what the accuracy model of CPU trials is asked about a GPU run.
CPU_VIEW = {"device": "cpu", "mixed_precision": False, "cudnn_benchmark": False, "threads": 1}


def device_figures(device: Any, cands: list[Candidate], workload: WorkloadInfo,
                   ) -> tuple[tuple[list[np.ndarray], list[np.ndarray], np.ndarray], str]:
    """Time and memory bands from :mod:`advisor.devices` (roofline ... expected ... 3x expected,
    capped at the roofline's :data:`~advisor.devices.MAX_SLOWDOWN`), and which candidates fit."""
    import math

    from advisor import devices

    n = len(cands)
    t = [np.zeros(n), np.zeros(n), np.zeros(n)]
    m = [np.zeros(n), np.zeros(n), np.zeros(n)]
    fits = np.ones(n, dtype=bool)
    for i, c in enumerate(cands):
        step = devices.estimate_model_step(device, c.config, c.model or workload.model, workload.input_shape,
                                           workload.num_classes)
        steps = math.ceil(workload.train_samples / c.config.batch_size) * c.config.epochs
        t[0][i], t[1][i] = devices.run_seconds(step, steps, c.config.framework)
        t[2][i] = min(3 * t[1][i], devices.MAX_SLOWDOWN * t[0][i])
        m[0][i], m[1][i], m[2][i] = 0.8 * step.memory_mib, step.memory_mib, 1.25 * step.memory_mib
        fits[i] = step.memory_mib <= device.memory_gib * 1024
    line = (f"time and memory come from the device model of the {device.name} ({device.fp32_tflops:g} TFLOP/s FP32, "
            f"{device.bf16_tflops or device.fp16_tflops or device.fp32_tflops:g} at 16 bits, {device.bandwidth_gbs:g} GB/s, "
            f"{device.memory_gib:g} GiB; --gpu-model to change): the band runs from the roofline to "
            f"{devices.MAX_SLOWDOWN:g}x it, its launch costs fitted to measured GPU runs "
            "(benchmarks/results/gpu-model.md); accuracy from the CPU trials' model (the same run trains to the same "
            "accuracy on any device)")
    return (t, m, fits), line
