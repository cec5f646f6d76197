"""Measure a GPU's dense matrix-product rate per precision and its copy bandwidth, as JSON.

The device model (advisor/devices.py) takes these ceilings from public datasheets; this script
reads them off the card itself so that ``benchmarks/results/gpu-model.md`` can set the table row
against the chip it describes. Each figure is the median of timed repeats after warm-up, with CUDA
events. Needs torch with CUDA.

Usage:
    python benchmarks/gpu/calibrate.py > gpu-calibration.json
"""

from __future__ import annotations

import json
import statistics
import sys


def _timed(torch, fn, repeats: int = 10) -> float:  # type: ignore[no-untyped-def]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("error: torch sees no GPU", file=sys.stderr)
        return 1
    out: dict[str, object] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "cuda": torch.version.cuda, "tflops": {}}
    n = 8192
    for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        seconds = _timed(torch, lambda: a @ b)
        out["tflops"][name] = round(2 * n**3 / seconds / 1e12, 1)  # type: ignore[index]
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    seconds = _timed(torch, lambda: y.copy_(x))
    out["copy_gbs"] = round(2 * x.numel() / seconds / 1e9, 1)  # bytes read plus bytes written
    # The smallest step: one tiny kernel launch, as the launch-overhead floor.
    z = torch.zeros(1, device="cuda")
    out["launch_us"] = round(_timed(torch, lambda: z.add_(1), repeats=200) * 1e6, 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
