"""Frozen, validated records that flow between the stages.

Every record validates itself when built and round-trips through JSON (``to_dict`` /
``from_dict``). Nothing here imports a deep-learning framework.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from advisor.errors import invalid_parameter
from advisor.knobs import FRAMEWORK_INFO, FRAMEWORKS, KNOBS, OPTIMIZERS, get_knob, knob_applies

__all__ = [
    "FRAMEWORKS",
    "OPTIMIZERS",
    "STATUSES",
    "Workload",
    "Config",
    "EpochRecord",
    "GpuInfo",
    "HardwareProfile",
    "TrialResult",
]

STATUSES = ("ok", "failed", "timeout", "oom", "diverged", "pruned")
ORT_EXECUTION_MODES = get_knob("execution_mode").choices
ORT_GRAPH_LEVELS = get_knob("graph_optimization").choices


def _check_int(owner: str, name: str, value: Any, *, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
        high is not None and value > high
    ):
        bound = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
        raise invalid_parameter(name, owner, bound, value)


def _check_choice(owner: str, name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise invalid_parameter(name, owner, "one of " + ", ".join(map(repr, choices)), value)


class _JsonRecord:
    """Mixin: JSON round-trip for flat dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - names
        if unknown:
            raise invalid_parameter("keys", cls.__name__, f"a subset of {sorted(names)}", sorted(unknown))
        return cls(**dict(data))

    @classmethod
    def from_json(cls, text: str) -> Any:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class Workload(_JsonRecord):
    """What is trained on: a dataset, a model and how much of the data.

    Attributes:
        dataset: A registry name (``mnist``, ``digits``, ``synthetic:28x28x1``) or a ``.npz`` path.
        model: A model name from :mod:`advisor.models`.
        train_samples: Stratified subset of the training set; ``None`` keeps all of it.
        test_samples: Stratified subset of the test set; ``None`` keeps all of it.
        data_dir: A folder that holds the dataset's canonical files; ``None`` uses the cache.
        seed: Seed of the subset draw.
    """

    dataset: str
    model: str
    train_samples: int | None = None
    test_samples: int | None = None
    data_dir: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise invalid_parameter("dataset", "Workload", "a non-empty string", self.dataset)
        if not isinstance(self.model, str) or not self.model:
            raise invalid_parameter("model", "Workload", "a non-empty string", self.model)
        for name in ("train_samples", "test_samples"):
            value = getattr(self, name)
            if value is not None:
                _check_int("Workload", name, value, low=1)
        _check_int("Workload", "seed", self.seed, low=0)


@dataclass(frozen=True)
class Config(_JsonRecord):
    """One training configuration: hyper-parameters, training recipe, thread and device settings.

    Each field is a knob of :mod:`advisor.knobs`, which holds its bounds, default and the
    frameworks that honour it; validation is derived from those declarations. Framework-specific
    knobs are ``None`` (or off) when they do not apply (``onednn`` for onnxruntime, ``xla``
    outside tensorflow, ...); any other value there is refused in one line naming the framework.
    """

    framework: str
    batch_size: int = 64
    learning_rate: float = 0.01
    epochs: int = 1
    optimizer: str = "sgd"
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    schedule: str = "constant"
    warmup_fraction: float = 0.0
    label_smoothing: float = 0.0
    augment_translate: int = 0
    augment_flip: bool = False
    threads: int = 1
    inter_op_threads: int = 1
    onednn: bool | None = None
    xla: bool | None = None
    execution_mode: str | None = None
    graph_optimization: str | None = None
    channels_last: bool = False
    compile: bool = False
    bfloat16: bool = False
    device: str = "cpu"
    mixed_precision: bool = False
    cudnn_benchmark: bool = False
    seed: int = 0
    time_budget_s: float = 0.0
    stop_at_accuracy: float = 0.0

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> "Config":
        """A config as a past trial recorded it, read even where today's rules refuse it.

        A trial that ran (or failed) under older rules is still a fact of the knowledge base:
        its result must stay readable when a rule tightens (``compile`` now needs oneDNN on the
        CPU, for example). Unknown keys and wrong types are still refused; only the cross-knob
        rules of :meth:`__post_init__` are skipped. Use :meth:`from_dict` for anything that is
        about to run.
        """
        try:
            return cls.from_dict(data)  # type: ignore[no-any-return]
        except ValueError:
            names = {f.name: f for f in dataclasses.fields(cls)}
            unknown = set(data) - set(names)
            if unknown or data.get("framework") not in FRAMEWORKS:
                raise
            for knob in KNOBS:  # each value on its own must still be one the knob accepts
                if knob.name in data and not knob.is_valid(data[knob.name]):
                    raise
            record = object.__new__(cls)
            for name, f in names.items():
                default = f.default if f.default is not dataclasses.MISSING else None
                object.__setattr__(record, name, data.get(name, default))
            return record

    def __post_init__(self) -> None:
        o = "Config"
        _check_choice(o, "framework", self.framework, FRAMEWORKS)
        fw = FRAMEWORK_INFO[self.framework]
        owner = f"Config (framework {self.framework!r})"
        for knob in KNOBS:
            value = getattr(self, knob.name)
            if not knob.is_valid(value):
                raise invalid_parameter(knob.name, o, knob.accepted(), value)
            if not knob.is_off(value) and not knob_applies(knob, self.framework):
                off = "unset" if knob.off is None else repr(knob.off)
                raise invalid_parameter(
                    knob.name, owner, f"{off}: it applies to {', '.join(knob.frameworks or ())} only", value)
        if not (self.device == "cpu" or self.device == "cuda"
                or (self.device.startswith("cuda:") and self.device[5:].isdigit())):
            raise invalid_parameter("device", o, "'cpu', 'cuda' or 'cuda:<index>'", self.device)
        for name in ("mixed_precision", "cudnn_benchmark"):
            if getattr(self, name) and not self.is_cuda:
                raise invalid_parameter(name, f"{o} (device {self.device!r})", "false on the CPU (CUDA only)",
                                        True)
        if self.compile and self.onednn is False and not self.is_cuda:
            # torch.compile's CPU convolution kernels assume oneDNN's layouts: with oneDNN off the
            # compiled graph fails its own stride checks (seen on torch 2.13, lenet5 on digits).
            raise invalid_parameter("compile", f"{o} (onednn off)", "false unless onednn is on (CPU)", True)
        if self.bfloat16 and self.mixed_precision:
            raise invalid_parameter("bfloat16", o, "false when mixed_precision (float16) is on", True)
        if self.optimizer not in fw.optimizers:
            why = " (ONNX Runtime's training SGD has no momentum)" if self.optimizer == "momentum" else ""
            raise invalid_parameter("optimizer", owner, "one of " + ", ".join(map(repr, fw.optimizers)) + why,
                                    self.optimizer)
        if self.optimizer == "momentum" and self.momentum == 0.0:
            raise invalid_parameter("momentum", o, "> 0 when optimizer is 'momentum'", self.momentum)
        if self.nesterov and self.optimizer != "momentum":
            raise invalid_parameter("nesterov", o, "false unless optimizer is 'momentum'", self.nesterov)
        if self.weight_decay > 0 and self.optimizer not in fw.decay_optimizers:
            raise invalid_parameter(
                "weight_decay", f"Config (framework {self.framework!r}, optimizer {self.optimizer!r})",
                "0 (its runtime has no weight decay for this optimizer; use optimizer "
                + " or ".join(map(repr, fw.decay_optimizers)) + ")", self.weight_decay,
            )

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def to_dict(self) -> dict[str, Any]:
        # Every field is a scalar, so a plain copy equals dataclasses.asdict (which deep-copies
        # recursively and cost a tenth of a second for recommend's 1,500 candidates).
        return {name: getattr(self, name) for name in _CONFIG_FIELDS}


_CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(Config))


@dataclass(frozen=True)
class EpochRecord(_JsonRecord):
    """One epoch as the child reported it."""

    epoch: int
    train_time_s: float  # cumulative training time at the end of this epoch
    epoch_time_s: float
    loss: float
    test_accuracy: float
    eval_time_s: float
    #: Peak RSS of the trial's process tree so far, as the parent's monitor saw it when this
    #: epoch's event arrived (None in records from before it was kept). Lets early stopping bound
    #: the memory objective while a trial runs.
    peak_memory_mb: float | None = None


@dataclass(frozen=True)
class GpuInfo(_JsonRecord):
    index: int
    name: str
    memory_mb: float
    driver: str | None = None


@dataclass(frozen=True)
class HardwareProfile(_JsonRecord):
    """What a machine is, as far as speed predictions care.

    ``profile_id`` is a stable hash of the CPU model, core counts, memory size and GPU models.
    ``gemm_gflops`` maps a thread count (as a string, for JSON) to measured GEMM GFLOP/s.
    """

    profile_id: str
    cpu_model: str
    physical_cores: int
    logical_cores: int
    affinity: tuple[int, ...]
    memory_gb: float
    gpus: tuple[GpuInfo, ...] = ()
    blas: tuple[dict[str, Any], ...] = ()
    gemm_gflops: dict[str, float] = field(default_factory=dict)
    machine: str = ""
    system: str = ""

    @property
    def device_kind(self) -> str:
        return "gpu" if self.gpus else "cpu"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["affinity"] = list(self.affinity)
        data["gpus"] = [g.to_dict() for g in self.gpus]
        data["blas"] = [dict(b) for b in self.blas]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HardwareProfile":
        data = dict(data)
        data["affinity"] = tuple(data.get("affinity", ()))
        data["gpus"] = tuple(GpuInfo.from_dict(g) for g in data.get("gpus", ()))
        data["blas"] = tuple(dict(b) for b in data.get("blas", ()))
        data["gemm_gflops"] = {str(k): float(v) for k, v in dict(data.get("gemm_gflops", {})).items()}
        return super().from_dict(data)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class TrialResult(_JsonRecord):
    """Everything one trial measured. A failed trial is a record too, never an exception.

    Times are seconds, memory is MiB. ``train_time_s`` excludes interpreter start, framework
    import, data loading and evaluation; those are recorded on their own.
    """

    # identity and provenance
    trial_id: str
    status: str
    workload: Workload
    config: Config
    started_at: str = ""
    study: str | None = None
    trial_number: int | None = None
    advisor_version: str = ""
    framework_version: str = ""
    library_versions: dict[str, str] = field(default_factory=dict)
    threadpools: tuple[dict[str, Any], ...] = ()
    threads_applied: dict[str, Any] = field(default_factory=dict)
    env_applied: dict[str, str] = field(default_factory=dict)
    cores_granted: tuple[int, ...] = ()
    hardware_id: str = ""
    device_kind: str = "cpu"
    gpu_model: str | None = None
    dataset_name: str = ""
    dataset_fingerprint: str = ""
    dataset_variant: str = ""
    synthetic: bool = False
    # workload meta-features
    input_shape: tuple[int, ...] = ()
    num_classes: int = 0
    train_samples: int = 0
    test_samples: int = 0
    flops_per_sample: float = 0.0
    params: int = 0
    # outcomes
    train_time_s: float | None = None
    epochs_completed: int = 0
    epochs: tuple[EpochRecord, ...] = ()
    time_to_accuracy: dict[str, float] = field(default_factory=dict)
    test_accuracy: float | None = None
    best_accuracy: float | None = None
    final_loss: float | None = None
    eval_time_s: float | None = None
    inference_throughput: float | None = None
    peak_memory_mb: float | None = None
    gpu_peak_memory_mb: float | None = None
    cpu_utilization: float | None = None  # mean busy cores of the trial's process tree
    cpu_utilization_granted: float | None = None  # the same as a fraction of the cores granted
    contention_cpu_s: float | None = None
    contended: bool = False
    import_time_s: float | None = None
    data_load_time_s: float | None = None
    wall_time_s: float | None = None
    sampler_cpu_fraction: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_choice("TrialResult", "status", self.status, STATUSES)

    @property
    def accuracy_curve(self) -> list[float]:
        return [e.test_accuracy for e in self.epochs]

    @property
    def train_time_with_compile_s(self) -> float | None:
        """``train_time_s`` plus torch.compile's warm-up where the run compiled (``extra``'s
        ``compile_time_s``): the harness compiles before the timed epochs, so ``train_time_s`` leaves
        it out, while XLA's compile falls in the first epoch. A study's time objective reads this,
        so a compiled trial is not cheaper on the front than the wait it cost."""
        if self.train_time_s is None:
            return None
        return self.train_time_s + float(self.extra.get("compile_time_s") or 0.0)

    @property
    def epoch_times(self) -> list[float]:
        return [e.epoch_time_s for e in self.epochs]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["workload"] = self.workload.to_dict()
        data["config"] = self.config.to_dict()
        data["epochs"] = [e.to_dict() for e in self.epochs]
        data["threadpools"] = [dict(t) for t in self.threadpools]
        data["cores_granted"] = list(self.cores_granted)
        data["input_shape"] = list(self.input_shape)
        data["accuracy_curve"] = self.accuracy_curve
        data["epoch_times"] = self.epoch_times
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrialResult":
        data = dict(data)
        data.pop("accuracy_curve", None)
        data.pop("epoch_times", None)
        data["workload"] = Workload.from_dict(data["workload"])
        data["config"] = Config.from_record(data["config"])  # a recorded fact: read under today's rules too
        data["epochs"] = tuple(EpochRecord.from_dict(e) for e in data.get("epochs", ()))
        data["threadpools"] = tuple(dict(t) for t in data.get("threadpools", ()))
        data["cores_granted"] = tuple(data.get("cores_granted", ()))
        data["input_shape"] = tuple(data.get("input_shape", ()))
        return super().from_dict(data)  # type: ignore[no-any-return]

    def replace(self, **changes: Any) -> "TrialResult":
        return dataclasses.replace(self, **changes)
