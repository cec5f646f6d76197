"""What a recommendation is for: the workload's meta-features and the target hardware.

Both are known without loading any data or running any calibration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from advisor.errors import invalid_parameter
from advisor.records import HardwareProfile

__all__ = ["Target", "WorkloadInfo", "describe_workload", "resolve_target"]


@dataclass(frozen=True)
class Target:
    """The hardware to recommend for."""

    device_kind: str
    cores: int
    gpu_model: str | None = None
    hardware_id: str = ""
    gemm_gflops: Mapping[str, float] = field(default_factory=dict)
    physical_cores: int | None = None
    memory_gb: float | None = None


@dataclass(frozen=True)
class WorkloadInfo:
    """What is trained, known without loading any data."""

    dataset: str
    model: str
    input_shape: tuple[int, int, int]
    num_classes: int
    train_samples: int
    test_samples: int
    flops_per_sample: float
    params: int
    synthetic: bool
    train_samples_given: bool = False
    landmark: float | None = None
    #: Whether a mirrored image keeps its class (None: not known, e.g. the user's own ``.npz``).
    flip_preserves_label: bool | None = None


def describe_workload(dataset: str, *, model: str | None = None, train_samples: int | None = None) -> WorkloadInfo:
    """Meta-features of a workload from the dataset registry and the model spec (no data loaded).

    Raises:
        UnknownNameError: For an unknown dataset or model.
        InvalidParameterError: When ``train_samples`` is not in ``[1, train size]``.
    """
    from advisor import datasets, models
    from advisor._datasets.registry import is_npz_path

    info = datasets.get_info(dataset)
    name = model or models.default_model_for(info.input_shape)
    spec = models.get_model(name)
    n = info.train_size if train_samples is None else train_samples
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= info.train_size:
        raise invalid_parameter("train_samples", f"dataset {info.name!r}", f"an integer in [1, {info.train_size}]", n)
    shape = tuple(int(d) for d in info.input_shape)
    landmark = info.landmark
    if landmark is None and is_npz_path(info.name):
        from advisor._datasets.landmark import file_landmark

        landmark = file_landmark(info.name)  # the user's own data: measured once per file version
    return WorkloadInfo(
        dataset=info.name, model=name, input_shape=(shape[0], shape[1], shape[2]), num_classes=info.num_classes,
        train_samples=n, test_samples=info.test_size,
        flops_per_sample=models.training_flops_per_sample(spec, shape, info.num_classes),
        params=models.param_count(spec, shape, info.num_classes), synthetic=info.synthetic,
        train_samples_given=train_samples is not None, landmark=landmark,
        flip_preserves_label=info.flip_preserves_label,
    )


def resolve_target(device_kind: str = "cpu", *, gpu_model: str | None = None, cores: int | None = None,
                   profile: HardwareProfile | None = None) -> Target:
    """The target hardware: this machine's cached profile (or its identity: no calibration is run).

    For a GPU target on a machine without one, the GPU model is ``gpu_model`` (or unknown) and the
    CPU speed of this machine is not used.
    """
    if device_kind not in ("cpu", "gpu"):
        raise invalid_parameter("device_kind", "resolve_target", "'cpu' or 'gpu'", device_kind)
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise invalid_parameter("cores", "resolve_target", "an integer >= 1", cores)
    if profile is None:
        from advisor import hardware

        profile = hardware.load_cached() or hardware.identity()
    available = len(profile.affinity) or profile.logical_cores
    if device_kind == "cpu" and cores is not None and available and cores > available:
        # the answer is for this machine's CPU: its default and presets would run oversubscribed
        raise invalid_parameter("cores", "recommend", f"at most {available}, the cores this machine lets "
                                f"advisor use (a CPU answer is for this machine)", cores)
    n_cores = cores or available
    if device_kind == "gpu" and not profile.gpus:
        return Target("gpu", n_cores, gpu_model, "", {}, None, None)
    gpu = (gpu_model or profile.gpus[0].name) if device_kind == "gpu" else None
    return Target(device_kind, n_cores, gpu, profile.profile_id, dict(profile.gemm_gflops),
                  profile.physical_cores, profile.memory_gb)
