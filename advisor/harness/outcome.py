"""From a child's events and the parent's measurements to one :class:`TrialResult`.

:class:`TrialLog` collects the events and the verdict (the first terminal decision wins: a
``final`` event, a ``diverged`` or ``error`` event, or a kill by the parent). :func:`build_result`
classifies what is left undecided from the exit status and fills every field of the record.
"""

from __future__ import annotations

import math
import signal
import threading
from pathlib import Path
from typing import Any

import advisor
from advisor.records import Config, EpochRecord, TrialResult, Workload

__all__ = ["ACCURACY_THRESHOLDS", "TrialLog", "build_result", "time_to_accuracy"]

ACCURACY_THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99)
LOG_TAIL_BYTES = 4096
CONTENDED_FRACTION = 0.10  # others' CPU above this share of the granted core-seconds
_MIN_WINDOW_S = 0.05
# Keys under which Trainer.versions() may report the framework itself.
_FRAMEWORK_KEYS = {
    "torch": ("torch",),
    "tensorflow": ("tensorflow", "keras"),
    "onnxruntime": ("onnxruntime", "onnxruntime-training", "onnxruntime_training"),
    "sklearn": ("scikit-learn", "sklearn"),
}


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


# Fields build_result reads as numbers; a child that sends anything else breaks the channel.
_FLOATS = ("t", "cpu_s", "import_time_s", "data_load_time_s", "train_time_s", "eval_time_s",
           "inference_throughput", "gpu_peak_memory_mb", "max_rss_mb")
_INTS = ("params", "num_classes", "train_samples", "test_samples")


def _check_fields(event: dict[str, Any]) -> None:
    for key in _FLOATS:
        if event.get(key) is not None:
            float(event[key])
    for key in _INTS:
        if key in event:
            int(event[key])
    if "input_shape" in event:
        [int(d) for d in event["input_shape"]]
    for key in ("versions", "threads_applied"):
        if key in event and not isinstance(event[key], dict):
            raise TypeError(f"{key!r} must be an object")
    if event["event"] == "final":
        for key in ("params", "train_time_s", "eval_time_s"):
            if event.get(key) is None:
                raise KeyError(key)
    if event["event"] in ("training", "epoch") and ("t" not in event or "cpu_s" not in event):
        raise KeyError("t")


class TrialLog:
    """Events of one trial plus its verdict; thread-safe for :meth:`decide`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.status: str | None = None
        self.error: str | None = None
        self.by_type: dict[str, dict[str, Any]] = {}
        self.epochs: list[EpochRecord] = []
        self.env_applied: dict[str, str] = {}

    def decide(self, status: str, error: str | None) -> bool:
        """Set the verdict unless one exists; return whether this call set it."""
        with self._lock:
            if self.status is not None:
                return False
            self.status, self.error = status, error
            return True

    def add(self, event: dict[str, Any]) -> EpochRecord | None:
        """Take one event; return the epoch record when it is an epoch event.

        Raises:
            KeyError, TypeError, ValueError: When the event lacks a field or has a wrong type.
        """
        kind = event["event"]
        _check_fields(event)
        if kind == "epoch":
            record = EpochRecord(
                epoch=int(event["epoch"]),
                train_time_s=float(event["train_time_s"]),
                epoch_time_s=float(event["epoch_time_s"]),
                loss=_float(event.get("loss")),
                test_accuracy=_float(event.get("test_accuracy")),
                eval_time_s=float(event.get("eval_time_s") or 0.0),
            )
            self.epochs.append(record)
            self.by_type["last_epoch"] = event
            return record
        self.by_type.setdefault(kind, event)
        if kind == "final":
            self.decide("ok", None)
        elif kind == "diverged":
            self.decide("diverged", f"diverged: {event.get('message', '')}".strip())
        elif kind == "error":
            name, message = str(event.get("type", "Error")), str(event.get("message", ""))
            status = "oom" if name == "MemoryError" else "failed"
            text = message if event.get("advisor_error") else f"{name}: {message}"
            self.decide(status, text)
        return None


def time_to_accuracy(epochs: list[EpochRecord] | tuple[EpochRecord, ...],
                     thresholds: tuple[float, ...] = ACCURACY_THRESHOLDS) -> dict[str, float]:
    """Cumulative training time of the first epoch reaching each threshold (reached ones only)."""
    reached: dict[str, float] = {}
    for threshold in thresholds:
        for e in epochs:
            if math.isfinite(e.test_accuracy) and e.test_accuracy >= threshold:
                reached[f"{threshold:g}"] = e.train_time_s
                break
    return reached


def _log_tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the trial process was killed by {name} ({code})"
    return f"the trial process exited with code {code}"


def _classify(log: TrialLog, run: dict[str, Any]) -> tuple[str, str | None]:
    if not run.get("spawned"):
        return log.status or "failed", log.error
    code = int(run["exit_code"])
    if log.status is not None:
        if log.status == "ok" and code != 0 and code != -signal.SIGKILL:
            return "failed", f"{_exit_text(code)} after reporting its result"
        return log.status, log.error
    if code == -signal.SIGKILL:
        # Nobody here sent it: on Linux that is the kernel's out-of-memory killer.
        return "oom", f"{_exit_text(code)}, most likely by the kernel's out-of-memory killer"
    if code == 0:
        return "failed", "the trial process exited without reporting a result"
    return "failed", _exit_text(code)


def _versions(framework: str, versions: dict[str, Any]) -> tuple[str, dict[str, str]]:
    library = {str(k): str(v) for k, v in versions.items()}
    for key in _FRAMEWORK_KEYS.get(framework, (framework,)):
        if key in library:
            return library[key], library
    return "", library


def _hardware(config: Config) -> tuple[str, str | None]:
    from advisor import hardware

    try:
        identity = hardware.identity()
    except Exception:  # provenance must never fail a trial
        return "", None
    gpu = None
    if config.is_cuda and identity.gpus:
        index = int(config.device.split(":")[1]) if ":" in config.device else 0
        gpu = next((g.name for g in identity.gpus if g.index == index), identity.gpus[0].name)
    return identity.profile_id, gpu


def _model_facts(workload: Workload, shape: tuple[int, ...], classes: int) -> tuple[float, int]:
    from advisor import models

    try:
        spec = models.get_model(workload.model)
        return (models.training_flops_per_sample(spec, shape, classes),
                models.param_count(spec, shape, classes))
    except Exception:  # a bad model is reported by the child; meta-features stay empty
        return 0.0, 0


def build_result(log: TrialLog, run: dict[str, Any], *, trial_id: str, started_at: str,
                 workload: Workload, config: Config, cores: tuple[int, ...], study: str | None,
                 trial_number: int | None, trial_dir: Path | None) -> TrialResult:
    """Assemble the record of a finished trial from its log and the parent's measurements."""
    status, error = _classify(log, run)
    ev = log.by_type
    started, imported, data = ev.get("started", {}), ev.get("imported", {}), ev.get("data_loaded", {})
    final, training, last = ev.get("final"), ev.get("training"), ev.get("last_epoch")
    extra: dict[str, Any] = {}
    if trial_dir is not None:
        extra["trial_dir"] = str(trial_dir)
    if final and isinstance(final.get("description"), dict):
        extra.update({str(k): v for k, v in final["description"].items()})

    framework_version, library_versions = _versions(config.framework, imported.get("versions") or {})
    hardware_id, gpu_model = _hardware(config)
    shape = tuple(int(d) for d in data.get("input_shape", ()))
    classes = int(data.get("num_classes", 0))
    flops, analytic_params = _model_facts(workload, shape, classes) if shape else (0.0, 0)

    epochs = tuple(log.epochs)
    finite = [e.test_accuracy for e in epochs if math.isfinite(e.test_accuracy)]
    last_epoch = epochs[-1] if epochs else None

    peak = wall = util = util_granted = contention = sampler = None
    contended = False
    if run.get("spawned"):
        mon = run["monitor"]
        rusage = run["rusage"]
        wall = float(run["wall_s"])
        tree_cpu = max(mon.tree_cpu_s, rusage.ru_utime + rusage.ru_stime)
        peak = max(mon.peak_rss_mb, rusage.ru_maxrss / 1024.0, float((final or {}).get("max_rss_mb") or 0.0))
        # Busy cores while training: the child's own CPU clock between the start of training and
        # the last epoch, which is exact; otherwise the whole trial as the parent measured it.
        if training and last and float(last["t"]) - float(training["t"]) >= _MIN_WINDOW_S:
            util = (float(last["cpu_s"]) - float(training["cpu_s"])) / (float(last["t"]) - float(training["t"]))
        elif wall > 0:
            util = tree_cpu / wall
        if wall > 0:
            extra["cpu_utilization_trial"] = tree_cpu / wall
        util_granted = None if util is None else util / len(cores)
        if run["busy_s"] is not None:
            contention = max(0.0, run["busy_s"] - tree_cpu)
            contended = contention > CONTENDED_FRACTION * len(cores) * wall
        sampler = mon.sampler_cpu_s / mon.wall_s if mon.wall_s > 0 else None
        extra["exit_code"] = run["exit_code"]
        extra["monitor_samples"] = mon.samples
        if run["survivors"]:
            extra["survivors"] = run["survivors"]
        if status != "ok":
            tail = _log_tail(run["log_path"])
            if tail:
                extra["log_tail"] = tail
                if not ev.get("error") and not ev.get("diverged") and status == "failed":
                    error = f"{error}; last output:\n{tail}"
    if ev.get("error", {}).get("traceback_tail"):
        extra["traceback_tail"] = ev["error"]["traceback_tail"]
    if data.get("notes"):
        extra["dataset_notes"] = list(data["notes"])

    return TrialResult(
        trial_id=trial_id,
        status=status,
        workload=workload,
        config=config,
        started_at=started_at,
        study=study,
        trial_number=trial_number,
        advisor_version=advisor.__version__,
        framework_version=framework_version,
        library_versions=library_versions,
        threadpools=tuple(dict(p) for p in imported.get("threadpools") or () if isinstance(p, dict)),
        threads_applied=dict(imported.get("threads_applied") or {}),
        env_applied=dict(log.env_applied),
        cores_granted=tuple(int(c) for c in started.get("affinity") or cores),
        hardware_id=hardware_id,
        device_kind="gpu" if config.is_cuda else "cpu",
        gpu_model=gpu_model,
        dataset_name=str(data.get("name", "")),
        dataset_fingerprint=str(data.get("fingerprint", "")),
        dataset_variant=str(data.get("variant", "")),
        synthetic=bool(data.get("synthetic", False)),
        input_shape=shape,
        num_classes=classes,
        train_samples=int(data.get("train_samples", 0)),
        test_samples=int(data.get("test_samples", 0)),
        flops_per_sample=flops,
        params=int(final["params"]) if final else analytic_params,
        train_time_s=float(final["train_time_s"]) if final else (last_epoch.train_time_s if last_epoch else None),
        epochs_completed=len(epochs),
        epochs=epochs,
        time_to_accuracy=time_to_accuracy(epochs),
        test_accuracy=last_epoch.test_accuracy if last_epoch and math.isfinite(last_epoch.test_accuracy) else None,
        best_accuracy=max(finite) if finite else None,
        final_loss=last_epoch.loss if last_epoch and math.isfinite(last_epoch.loss) else None,
        eval_time_s=float(final["eval_time_s"]) if final else (sum(e.eval_time_s for e in epochs) if epochs else None),
        inference_throughput=(None if not final or final.get("inference_throughput") is None
                              else float(final["inference_throughput"])),
        peak_memory_mb=peak,
        gpu_peak_memory_mb=None if not final or final.get("gpu_peak_memory_mb") is None
        else float(final["gpu_peak_memory_mb"]),
        cpu_utilization=util,
        cpu_utilization_granted=util_granted,
        contention_cpu_s=contention,
        contended=contended,
        import_time_s=None if "import_time_s" not in imported else float(imported["import_time_s"]),
        data_load_time_s=None if "data_load_time_s" not in data else float(data["data_load_time_s"]),
        wall_time_s=wall,
        sampler_cpu_fraction=sampler,
        error=error,
        extra=extra,
    )
