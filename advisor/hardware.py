"""What this machine is: CPU, cores, memory, BLAS libraries, GPUs, and measured GEMM speed.

:func:`identity` is cheap (no subprocess but one ``nvidia-smi`` call, memoised) and gives the
``profile_id`` every trial records. :func:`detect` adds the BLAS/OpenMP libraries numpy loads and any
cached calibration. :func:`calibrate` measures float32 GEMM GFLOP/s at several thread counts, each
in a fresh process with its thread variables set, and caches the profile as JSON per profile id.
Nothing here imports a deep-learning framework.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import psutil

from advisor._atomic import atomic_write
from advisor.errors import invalid_parameter
from advisor.knobs import THREAD_VARIABLES
from advisor.records import GpuInfo, HardwareProfile

__all__ = ["identity", "detect", "calibrate", "load_cached", "cache_dir", "gemm_gflops", "cpu_bf16_support"]

logger = logging.getLogger(__name__)

_MEMO: dict[str, HardwareProfile] = {}
_TIMEOUT_S = 30.0

_BLAS_SCRIPT = "import json, numpy, threadpoolctl; print(json.dumps(threadpoolctl.threadpool_info()))"

# Runs in a child whose thread variables are already set: time n x n float32 GEMMs.
_GEMM_SCRIPT = """
import json, sys, time
import numpy as np
n, repeats = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
a @ b  # warm-up: thread pool start and page faults
rates = []
for _ in range(repeats):
    t0 = time.perf_counter()
    a @ b
    rates.append(2.0 * n ** 3 / (time.perf_counter() - t0) / 1e9)
print(json.dumps(rates))
"""



def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model", "Processor") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


#: CPU flags (Linux /proc/cpuinfo names) with native bfloat16 arithmetic: AVX-512 BF16 or AMX.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_bf16_support() -> str | None:
    """The CPU flag that gives native bfloat16 arithmetic, or ``None`` when there is none (or no
    ``/proc/cpuinfo`` to tell). Without one, bfloat16 is emulated and slower than float32."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    flags = set(value.split())
                    return next((f for f in BF16_FLAGS if f in flags), None)
    except OSError:
        pass
    return None


def _affinity() -> tuple[int, ...]:
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def _gpus_nvml() -> tuple[GpuInfo, ...] | None:
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            gpus = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(handle)
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**20
                gpus.append(GpuInfo(index=i, name=name if isinstance(name, str) else name.decode(),
                                    memory_mb=float(mem),
                                    driver=driver if isinstance(driver, str) else driver.decode()))
            return tuple(gpus)
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no driver, no device: nothing to report
        logger.debug("NVML found no GPU: %s", exc)
        return None


def _gpus_smi() -> tuple[GpuInfo, ...]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        done = subprocess.run(
            [exe, "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("nvidia-smi failed: %s", exc)
        return ()
    if done.returncode != 0:
        return ()
    return _parse_smi(done.stdout)


def _parse_smi(text: str) -> tuple[GpuInfo, ...]:
    """Parse ``nvidia-smi --query-gpu=index,name,memory.total,driver_version`` CSV output."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], memory_mb=float(parts[2]),
                                driver=parts[3] or None))
        except ValueError:
            continue
    return tuple(gpus)


def _profile_id(cpu_model: str, physical: int, logical: int, memory_gb: float,
                gpus: Sequence[GpuInfo]) -> str:
    key = json.dumps([cpu_model, physical, logical, round(memory_gb), sorted(g.name for g in gpus)])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def identity(*, refresh: bool = False) -> HardwareProfile:
    """The machine's identity: CPU, cores, affinity, memory and GPUs, without BLAS or speed.

    Memoised in this process; cheap enough to call for every trial.

    Args:
        refresh: Detect again instead of returning the memoised profile.
    """
    if refresh or "identity" not in _MEMO:
        cpu = _cpu_model()
        logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
        physical = psutil.cpu_count(logical=False) or logical
        memory_gb = psutil.virtual_memory().total / 2**30
        gpus = _gpus_nvml()
        if gpus is None:
            gpus = _gpus_smi()
        _MEMO["identity"] = HardwareProfile(
            profile_id=_profile_id(cpu, physical, logical, memory_gb, gpus),
            cpu_model=cpu,
            physical_cores=int(physical),
            logical_cores=int(logical),
            affinity=_affinity(),
            memory_gb=round(memory_gb, 2),
            gpus=tuple(gpus),
            machine=platform.machine(),
            system=platform.system(),
        )
    return _MEMO["identity"]


def _blas(python: str) -> tuple[dict[str, Any], ...]:
    # In a fresh interpreter, so the answer is numpy's libraries, not whatever this process loaded.
    try:
        done = subprocess.run([python, "-c", _BLAS_SCRIPT], capture_output=True, text=True,
                              timeout=_TIMEOUT_S, check=False)
        if done.returncode == 0:
            return tuple(dict(d) for d in json.loads(done.stdout))
        logger.warning("BLAS detection failed: %s", done.stderr.strip()[-500:])
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        logger.warning("BLAS detection failed: %s", exc)
    return ()


def detect(*, refresh: bool = False) -> HardwareProfile:
    """The full profile of this machine: :func:`identity` plus BLAS libraries and cached speed.

    Memoised in this process. The GEMM speeds come from the cache that :func:`calibrate` writes;
    they are empty until it has run on this machine.

    Args:
        refresh: Detect again instead of returning the memoised profile.
    """
    if refresh or "detect" not in _MEMO:
        base = identity(refresh=refresh)
        cached = load_cached(base.profile_id)
        _MEMO["detect"] = HardwareProfile.from_dict({
            **base.to_dict(),
            "blas": [dict(b) for b in _blas(sys.executable)],
            "gemm_gflops": dict(cached.gemm_gflops) if cached else {},
        })
    return _MEMO["detect"]


def cache_dir() -> Path:
    """Where calibrated profiles are kept: ``$ADVISOR_HOME/hardware`` or the user data folder."""
    home = os.environ.get("ADVISOR_HOME")
    if home:
        return Path(home) / "hardware"
    import platformdirs

    return Path(platformdirs.user_data_dir("advisor")) / "hardware"


def load_cached(profile_id: str | None = None) -> HardwareProfile | None:
    """The calibrated profile cached for ``profile_id`` (default: this machine), or ``None``."""
    pid = profile_id or identity().profile_id
    path = cache_dir() / f"{pid}.json"
    try:
        return HardwareProfile.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        logger.warning("ignoring unreadable hardware cache %s: %s", path, exc)
        return None


def _save(profile: HardwareProfile) -> Path:
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{profile.profile_id}.json"
    atomic_write(path, json.dumps(profile.to_dict(), indent=2, sort_keys=True))
    return path


def gemm_gflops(threads: int, *, size: int = 1024, repeats: int = 3,
                cores: Sequence[int] | None = None, python: str = sys.executable) -> float:
    """Median float32 GEMM GFLOP/s of numpy with ``threads`` threads, measured in a fresh process.

    Args:
        threads: Thread count for every BLAS/OpenMP variable of the child.
        size: Matrix side ``n`` (one GEMM costs ``2 n^3`` FLOPs).
        repeats: Timed GEMMs after one warm-up; the median is returned.
        cores: CPUs to pin the child to; default the first ``threads`` CPUs allowed.
        python: The interpreter to use.

    Raises:
        RuntimeError: When the measuring process fails.
    """
    env = dict(os.environ)
    env.update({name: str(threads) for name in THREAD_VARIABLES})
    allowed = _affinity()
    pinned = list(cores) if cores is not None else [allowed[i % len(allowed)] for i in range(threads)]

    def pin() -> None:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(pinned))

    done = subprocess.run([python, "-c", _GEMM_SCRIPT, str(size), str(repeats)], env=env,
                          capture_output=True, text=True, timeout=600, check=False, preexec_fn=pin)
    if done.returncode != 0:
        raise RuntimeError(f"GEMM calibration with {threads} threads failed: {done.stderr.strip()[-500:]}")
    return float(statistics.median(json.loads(done.stdout)))


def _default_thread_counts(cores: int) -> list[int]:
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    counts.append(cores)
    return counts


def calibrate(*, threads: Sequence[int] | None = None, size: int = 1024, repeats: int = 3) -> HardwareProfile:
    """Measure GEMM GFLOP/s at several thread counts and cache the profile.

    Args:
        threads: Thread counts to measure; default 1, 2, 4, ... up to the CPUs this process may use.
        size: Matrix side of the GEMM.
        repeats: Timed repeats per thread count (the median is kept).

    Returns:
        :func:`detect`'s profile with ``gemm_gflops`` filled in (keys are thread counts as strings).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 16:
        raise invalid_parameter("size", "calibrate", "an integer >= 16", size)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise invalid_parameter("repeats", "calibrate", "an integer >= 1", repeats)
    counts = _default_thread_counts(len(_affinity())) if threads is None else list(threads)
    if not counts or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in counts):
        raise invalid_parameter("threads", "calibrate", "a non-empty list of integers >= 1", threads)
    base = detect()
    rates = {str(t): round(gemm_gflops(t, size=size, repeats=repeats), 3) for t in sorted(set(counts))}
    profile = HardwareProfile.from_dict({**base.to_dict(), "gemm_gflops": rates})
    _save(profile)
    _MEMO["detect"] = profile
    return profile
