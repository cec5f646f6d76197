"""The trial child: ``python -m advisor.harness.child TRIAL_DIR``.

It runs in a fresh interpreter whose environment (thread variables, TensorFlow switches,
``CUDA_VISIBLE_DEVICES``) and CPU affinity the parent has already set, so they are in force
before any framework or BLAS library loads. It reads ``TRIAL_DIR/trial.json``, trains with
:func:`advisor.frameworks.base.run_protocol`, and reports through JSON lines written to the file
descriptor named by ``ADVISOR_EVENT_FD``:

``started`` → ``imported`` → ``data_loaded`` → ``training`` → ``epoch`` (one per epoch) → ``final``,

or ``diverged`` / ``error`` followed by a non-zero exit. Every event carries ``t`` (monotonic
clock, shared with the parent on Linux) and ``cpu_s`` (CPU seconds of this process so far).
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
import traceback
from typing import Any

EXIT_ERROR = 1
EXIT_DIVERGED = 3
EXIT_BAD_USAGE = 64
TRACEBACK_TAIL = 3000

# Test-only hook: tests/test_harness.py sets this to make the child misbehave on purpose, so the
# parent's defences can be exercised without a broken framework. Values: "garbage" (non-JSON
# lines), "huge_line" (one endless line), "segfault" (SIGSEGV), "exit" (exit 7 with no event).
# It has no other use; production runs never set it.
TEST_BEHAVIOUR_VARIABLE = "ADVISOR_TEST_CHILD_BEHAVIOUR"


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class Channel:
    """Write events as JSON lines to a file descriptor, one ``write`` loop per line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write_bytes(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]

    def emit(self, event: dict[str, Any]) -> None:
        event = dict(event)
        event["t"] = time.monotonic()
        event["cpu_s"] = _cpu_seconds()
        line = json.dumps(_finite(event), default=str, allow_nan=False)
        self.write_bytes(line.encode() + b"\n")


def _misbehave(channel: Channel, behaviour: str) -> None:
    """The test-only behaviours described at :data:`TEST_BEHAVIOUR_VARIABLE`."""
    if behaviour == "garbage":
        for i in range(10_000):
            channel.write_bytes(b"this is not json %d\n" % i)
        time.sleep(60)
    elif behaviour == "huge_line":
        block = b"x" * (1024 * 1024)
        for _ in range(512):  # 512 MiB without a newline
            channel.write_bytes(block)
        time.sleep(60)
    elif behaviour == "segfault":
        import ctypes

        channel.emit({"event": "started", "pid": os.getpid()})
        ctypes.string_at(0)
    elif behaviour == "exit":
        os._exit(7)


def _affinity() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return []


def _set_affinity(cores: list[int]) -> None:
    # The parent pins the child before exec; this covers platforms where it could not.
    if cores and hasattr(os, "sched_setaffinity") and set(cores) != set(_affinity()):
        os.sched_setaffinity(0, cores)


def _import_trainer(framework: str) -> type:
    from advisor.errors import AdvisorError, MissingDependencyError
    from advisor.frameworks import get_trainer_class

    try:
        return get_trainer_class(framework)
    except ImportError as exc:
        if isinstance(exc, AdvisorError):
            raise
        missing = getattr(exc, "name", None) or framework
        raise MissingDependencyError(
            f"framework {framework!r} needs the {missing.split('.')[0]!r} package, which cannot be "
            f"imported ({exc}); install it with: pip install 'advisor[{framework}]'"
        ) from exc


def run(trial_dir: str, channel: Channel) -> None:
    """Run the trial described in ``trial_dir/trial.json``, reporting through ``channel``."""
    with open(os.path.join(trial_dir, "trial.json"), encoding="utf-8") as fh:
        spec_data = json.load(fh)
    _set_affinity(list(spec_data.get("cores", [])))
    channel.emit({"event": "started", "pid": os.getpid(), "affinity": _affinity()})

    from advisor.records import Config, Workload

    workload = Workload.from_dict(spec_data["workload"])
    config = Config.from_dict(spec_data["config"])

    t0 = time.perf_counter()
    trainer_cls = _import_trainer(config.framework)
    trainer = trainer_cls(config)
    threads_applied = trainer.configure()
    versions = trainer.versions()
    import_time = time.perf_counter() - t0
    try:
        import threadpoolctl

        pools = threadpoolctl.threadpool_info()
    except Exception as exc:  # provenance only; never fail a trial for it
        pools = [{"error": str(exc)}]
    channel.emit({
        "event": "imported",
        "import_time_s": import_time,
        "versions": versions,
        "threads_applied": threads_applied,
        "threadpools": pools,
    })

    from advisor import datasets, models
    from advisor.frameworks.base import run_protocol

    spec = models.get_model(workload.model)
    t1 = time.perf_counter()
    data = datasets.load(workload)
    datasets.check_flip(data.info, config.augment_flip)
    load_time = time.perf_counter() - t1
    channel.emit({
        "event": "data_loaded",
        "data_load_time_s": load_time,
        "name": data.info.name,
        "fingerprint": data.fingerprint,
        "variant": data.variant,
        "synthetic": bool(data.info.synthetic),
        "input_shape": [int(d) for d in data.x_train.shape[1:]],
        "num_classes": int(data.info.num_classes),
        "train_samples": int(len(data.x_train)),
        "test_samples": int(len(data.x_test)),
        "notes": list(data.notes),
    })

    channel.emit({"event": "training"})
    result = run_protocol(
        trainer,
        spec,
        x_train=data.x_train,
        y_train=data.y_train,
        x_test=data.x_test,
        y_test=data.y_test,
        num_classes=int(data.info.num_classes),
        config=config,
        emit=channel.emit,
    )
    try:
        trainer.close()
    except Exception:  # the measurement is complete; a failing close must not undo it
        traceback.print_exc()
    channel.emit({
        "event": "final",
        "params": int(result.params),
        "description": result.description,
        "train_time_s": result.train_time_s,
        "eval_time_s": result.eval_time_s,
        "inference_throughput": result.inference_throughput,
        "gpu_peak_memory_mb": result.gpu_peak_memory_mb,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    })


def main(argv: list[str]) -> int:
    """Entry point; returns the exit code."""
    if len(argv) != 1:
        print("usage: python -m advisor.harness.child TRIAL_DIR", file=sys.stderr)
        return EXIT_BAD_USAGE
    try:
        fd = int(os.environ["ADVISOR_EVENT_FD"])
    except (KeyError, ValueError):
        print("advisor.harness.child: ADVISOR_EVENT_FD is not set to a file descriptor", file=sys.stderr)
        return EXIT_BAD_USAGE
    channel = Channel(fd)
    behaviour = os.environ.get(TEST_BEHAVIOUR_VARIABLE)
    if behaviour:
        _misbehave(channel, behaviour)
    try:
        run(argv[0], channel)
    except BaseException as exc:  # every way out becomes an event, then a non-zero exit
        return _report(channel, exc)
    return 0


def _report(channel: Channel, exc: BaseException) -> int:
    from advisor.errors import AdvisorError
    from advisor.frameworks.base import TrialDiverged

    traceback.print_exc()
    try:
        if isinstance(exc, TrialDiverged):
            channel.emit({"event": "diverged", "message": str(exc)})
            return EXIT_DIVERGED
        tail = "" if isinstance(exc, AdvisorError) else traceback.format_exc()[-TRACEBACK_TAIL:]
        channel.emit({
            "event": "error",
            "type": type(exc).__name__,
            "message": " ".join(str(exc).split()) or type(exc).__name__,
            "advisor_error": isinstance(exc, AdvisorError),
            "traceback_tail": tail,
        })
    except OSError:  # the parent is gone or closed the channel
        pass
    return EXIT_ERROR


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: framework destructors can be slow or crash after the work is
    # reported, and the parent classifies the trial by the exit code.
    os._exit(code)
