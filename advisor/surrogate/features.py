"""Features that transfer across workloads and hardware.

A feature row is computed from a knowledge-base row (or a candidate shaped like one: the
:data:`advisor.knowledge.COLUMNS` names). Besides the raw config it holds derived quantities that
carry from one workload or machine to another: training FLOPs, steps, dataset meta-features and
calibrated hardware speed. A dataset's *name* is deliberately not a feature, so the models must
learn from what a dataset is (size, shape, classes, and how hard it is: its landmark score, see
:mod:`advisor._datasets.landmark`), not from which one it is.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from advisor.knobs import KNOBS, get_knob

__all__ = ["Feature", "FEATURES", "BASELINE_FEATURE", "DEVICE_FEATURE", "device_model_times", "MEMORY_BASELINE_FEATURE", "activations_per_sample", "landmarks",
           "registry_landmark", "FeatureSchema", "schema_from_columns", "encode", "feature_values"]


@dataclass(frozen=True)
class Feature:
    """One model input.

    Attributes:
        name: Feature name (also the LightGBM feature name).
        kind: ``"num"`` or ``"cat"``.
        log: Distances (nearest-trial evidence) use ``log10`` of this feature.
    """

    name: str
    kind: str = "num"
    log: bool = False


def _knob_feature(knob: Any) -> Feature:
    if knob.encoding == "cat":
        return Feature(knob.name, "cat")
    if knob.encoding == "log10":
        return Feature(f"log10_{knob.name}")
    return Feature(knob.name, log=knob.log)


#: Config knobs the surrogate sees, derived from :mod:`advisor.knobs` (``encoding``), by feature name.
_KNOB_FEATURES: dict[str, Feature] = {
    f.name: f for f in (_knob_feature(k) for k in KNOBS if k.encoding != "none")
}
_KNOB_OF_FEATURE = {_knob_feature(k).name: k.name for k in KNOBS if k.encoding != "none"}

#: The feature order that the models of the first schema were fitted with. It stays the head of
#: :data:`FEATURES`, so a model fitted on it still loads: newer knobs' features are appended after
#: it and a model that predates them simply does not read them.
_SCHEMA_1 = (
    "framework", "optimizer", "device_kind", "gpu_model", "execution_mode", "graph_optimization",
    "batch_size", "log10_learning_rate", "epochs", "momentum", "weight_decay", "threads",
    "inter_op_threads", "onednn", "xla", "mixed_precision", "cudnn_benchmark",
    "flops_per_sample", "params", "activations_per_sample", "total_flops", "steps_per_epoch",
    "total_steps", "train_samples", "test_samples", "input_h", "input_w", "input_c", "pixels",
    "num_classes", "landmark", "hw_gflops", "cores_granted", "naive_time_s", "log10_effective_lr",
    "log10_lr_x_steps", "log10_lr_per_sample", "samples_seen", "log_baseline_s_per_flop",
    "log_memory_baseline_mb",
)
#: The device model's expected training time of a GPU row (:mod:`advisor.devices`: roofline, launch
#: overhead and host feeding, per step, times the steps), NaN for CPU rows and unknown GPU models:
#: once the table holds GPU trials, the boosters learn the correction to the physics.
DEVICE_FEATURE = "device_model_time_s"
_DERIVED: dict[str, Feature] = {f.name: f for f in (
    Feature("device_kind", "cat"), Feature("gpu_model", "cat"),
    Feature("flops_per_sample", log=True), Feature("params", log=True),
    Feature("activations_per_sample", log=True), Feature("total_flops", log=True),
    Feature("steps_per_epoch", log=True), Feature("total_steps", log=True),
    Feature("train_samples", log=True), Feature("test_samples", log=True),
    Feature("input_h"), Feature("input_w"), Feature("input_c"), Feature("pixels", log=True),
    Feature("num_classes", log=True), Feature("landmark"), Feature("hw_gflops", log=True),
    Feature("cores_granted"), Feature("naive_time_s", log=True), Feature("log10_effective_lr"),
    Feature("log10_lr_x_steps"), Feature("log10_lr_per_sample"), Feature("samples_seen", log=True),
    Feature("log_baseline_s_per_flop"), Feature("log_memory_baseline_mb"),
    Feature("schedule_epochs", log=True), Feature("epoch_fraction"),
    Feature(DEVICE_FEATURE, log=True),
)}
#: Learning-curve fidelity, appended after the knobs (:mod:`advisor.surrogate._curves`): the length
#: of the run whose schedule was followed, and how far through it a reading was taken (1: finished).
_CURVE_FEATURES = ("schedule_epochs", "epoch_fraction")
FEATURES: tuple[Feature, ...] = (
    Feature("framework", "cat"),
    *(_KNOB_FEATURES.get(name) or _DERIVED[name] for name in _SCHEMA_1[1:]),
    *(f for name, f in _KNOB_FEATURES.items() if name not in _SCHEMA_1),
    *(_DERIVED[name] for name in _CURVE_FEATURES),
    _DERIVED[DEVICE_FEATURE],
)

#: Filled by the fitted surrogate, not by :func:`encode` (which leaves it NaN): the natural log of
#: its per-framework linear time baseline divided by the training FLOPs
#: (:func:`advisor.surrogate.model.time_baseline`).
BASELINE_FEATURE = "log_baseline_s_per_flop"
#: Filled by the fitted surrogate like :data:`BASELINE_FEATURE`: the natural log of its
#: per-framework memory baseline in MiB (:func:`advisor.surrogate.model.memory_baseline`).
MEMORY_BASELINE_FEATURE = "log_memory_baseline_mb"

_CATEGORICAL_SOURCE = {
    "framework": "framework",
    "device_kind": "device_kind",
    "gpu_model": "gpu_model",
    **{f.name: f"cfg_{f.name}" for f in _KNOB_FEATURES.values() if f.kind == "cat"},
}


@dataclass(frozen=True)
class FeatureSchema:
    """The feature list plus the levels of each categorical feature, learnt from a table.

    A categorical value is encoded as its index in ``levels[name]``; an unseen or empty value
    is missing (NaN), which LightGBM routes like its rarest branch.
    """

    features: tuple[Feature, ...] = FEATURES
    levels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]

    @property
    def categorical_indices(self) -> list[int]:
        return [i for i, f in enumerate(self.features) if f.kind == "cat"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": [[f.name, f.kind, f.log] for f in self.features],
            "levels": {k: list(v) for k, v in self.levels.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FeatureSchema":
        feats = tuple(Feature(str(n), str(k), bool(lg)) for n, k, lg in data["features"])
        levels = {str(k): tuple(str(x) for x in v) for k, v in dict(data["levels"]).items()}
        return cls(feats, levels)


def _floats(values: Sequence[Any]) -> np.ndarray:
    return np.array([np.nan if v is None or v == "" else float(v) for v in values], dtype=float)


def schema_from_columns(columns: Mapping[str, Sequence[Any]]) -> FeatureSchema:
    """Learn the categorical levels (sorted, non-empty values) from table columns."""
    levels = {
        name: tuple(sorted({str(v) for v in columns.get(src, ()) if v not in (None, "")}))
        for name, src in _CATEGORICAL_SOURCE.items()
    }
    return FeatureSchema(FEATURES, levels)


@functools.lru_cache(maxsize=256)
def registry_landmark(dataset_name: str) -> float:
    """The recorded landmark of a registry dataset; NaN for an ``.npz`` path, synthetic data, an
    unknown name or a dataset without one (no file is read)."""
    from advisor._datasets.registry import canonical_name, get_info, is_npz_path

    try:
        if not dataset_name or is_npz_path(dataset_name):  # no file is read for a landmark
            return float("nan")
        mark = get_info(canonical_name(dataset_name)).landmark
    except Exception:  # noqa: BLE001 - any name the registry does not know
        return float("nan")
    return float("nan") if mark is None else float(mark)


def landmarks(columns: Mapping[str, Sequence[Any]]) -> np.ndarray:
    """Each row's dataset landmark: the ``landmark`` column where there is one (a candidate carries
    its workload's), else the registry's value for ``dataset_name``; NaN where neither is known."""
    n = len(columns["framework"])
    given = _floats(columns["landmark"]) if "landmark" in columns else np.full(n, np.nan)
    if "dataset_name" in columns and np.isnan(given).any():
        looked_up = np.array([registry_landmark(str(v or "")) for v in columns["dataset_name"]], dtype=float)
        given = np.where(np.isnan(given), looked_up, given)
    return given


@functools.lru_cache(maxsize=256)
def activations_per_sample(model: str, h: float, w: float, c: float, classes: float) -> float:
    """:func:`advisor.models.activation_count` of ``model`` on this input; NaN for an unknown model
    or a missing or impossible shape."""
    from advisor.models import activation_count, get_model

    try:
        return float(activation_count(get_model(model), (int(h), int(w), int(c)), int(classes)))
    except Exception:  # noqa: BLE001 - an unknown model, a missing or impossible shape
        return float("nan")


def feature_values(columns: Mapping[str, Sequence[Any]]) -> dict[str, np.ndarray]:
    """Numeric features as float arrays, computed column-wise (categoricals excluded).

    Args:
        columns: Knowledge-base columns (at least the ``cfg_*``, workload and ``hw_*`` ones).

    Returns:
        Feature name -> array; unknown values are NaN.
    """
    batch = _floats(columns["cfg_batch_size"])
    epochs = _floats(columns["cfg_epochs"])
    train = _floats(columns["train_samples"])
    fps = _floats(columns["flops_per_sample"])
    h, w = _floats(columns["input_h"]), _floats(columns["input_w"])
    at_threads = _floats(columns["hw_gemm_gflops_threads"])
    gflops = np.where(np.isnan(at_threads), _floats(columns["hw_gemm_gflops_max"]), at_threads)
    steps = np.ceil(train / batch)
    channels, classes = _floats(columns["input_c"]), _floats(columns["num_classes"])
    models = columns["model"] if "model" in columns else [""] * len(batch)
    activations = np.array([activations_per_sample(str(m or ""), *shape) for m, *shape in
                            zip(models, h.tolist(), w.tolist(), channels.tolist(), classes.tolist())], dtype=float)
    total_flops = fps * train * epochs
    schedule = _floats(columns["schedule_epochs"]) if "schedule_epochs" in columns else epochs.copy()
    schedule = np.where(np.isnan(schedule), epochs, schedule)
    with np.errstate(divide="ignore", invalid="ignore"):
        lr = _floats(columns["cfg_learning_rate"])
        log_lr = np.where(lr > 0, np.log10(np.where(lr > 0, lr, 1.0)), np.nan)
        naive = np.where(gflops > 0, total_flops / (gflops * 1e9), np.nan)
        momentum = np.nan_to_num(_floats(columns["cfg_momentum"]), nan=0.0)
        effective = log_lr - np.log10(np.clip(1.0 - momentum, 0.01, 1.0))
    knobs = {name: _knob_column(columns, knob) for name, knob in _KNOB_OF_FEATURE.items()
             if _KNOB_FEATURES[name].kind == "num"}
    knobs["log10_learning_rate"] = log_lr
    return {
        **knobs,
        "flops_per_sample": fps,
        "params": _floats(columns["params"]),
        "activations_per_sample": activations,
        "total_flops": total_flops,
        "steps_per_epoch": steps,
        "total_steps": steps * epochs,
        "train_samples": train,
        "test_samples": _floats(columns["test_samples"]),
        "input_h": h,
        "input_w": w,
        "input_c": channels,
        "pixels": h * w,
        "num_classes": classes,
        "landmark": landmarks(columns),
        "hw_gflops": gflops,
        "cores_granted": _floats(columns["cores_granted"]),
        "naive_time_s": naive,
        # How far training moves the weights, which decides between learning, stalling and
        # diverging: the learning rate with momentum's 1 / (1 - m) gain, that rate times the number
        # of updates, and per sample of a batch; and how many samples training sees in all.
        "log10_effective_lr": effective,
        "log10_lr_x_steps": effective + np.log10(steps * epochs),
        "log10_lr_per_sample": effective - np.log10(batch),
        "samples_seen": train * epochs,
        "schedule_epochs": schedule,
        "epoch_fraction": np.where(schedule > 0, epochs / np.where(schedule > 0, schedule, 1.0), np.nan),
        BASELINE_FEATURE: np.full(len(batch), np.nan),
        MEMORY_BASELINE_FEATURE: np.full(len(batch), np.nan),
        DEVICE_FEATURE: device_model_times(columns, steps * epochs),
    }


def device_model_times(columns: Mapping[str, Sequence[Any]], total_steps: np.ndarray) -> np.ndarray:
    """:data:`DEVICE_FEATURE` per row: the device model's expected time of the run's steps
    (:func:`advisor.devices.run_seconds`), for rows on a GPU whose model :mod:`advisor.devices`
    knows; NaN elsewhere."""
    out = np.full(len(total_steps), np.nan)
    kinds = columns.get("device_kind") or [None] * len(total_steps)
    gpu_rows = [i for i, k in enumerate(kinds) if k == "gpu"]
    if not gpu_rows:
        return out
    from types import SimpleNamespace

    from advisor import devices

    for i in gpu_rows:
        try:
            device = devices.get_accelerator(str(columns["gpu_model"][i] or "") or None)
            # the knob values as recorded (no Config validation: thousands of candidates per answer)
            config = SimpleNamespace(framework=columns["framework"][i],
                                     **{k.name: columns[f"cfg_{k.name}"][i] for k in KNOBS if f"cfg_{k.name}" in columns})
            shape = (int(columns["input_h"][i]), int(columns["input_w"][i]), int(columns["input_c"][i]))
            step = devices.estimate_model_step(device, config, str(columns["model"][i]), shape,
                                               int(columns["num_classes"][i]))
        except Exception:  # noqa: BLE001 - an unknown GPU, model or an unreadable row: no physics for it
            continue
        out[i] = devices.run_seconds(step, total_steps[i], str(columns["framework"][i]))[1]
    return out


def _knob_column(columns: Mapping[str, Sequence[Any]], knob: str) -> np.ndarray:
    """A knob's column as floats; a candidate or table without it reads the knob's default."""
    column = columns.get(f"cfg_{knob}")
    if column is None:
        default = get_knob(knob).default
        return np.full(len(columns["framework"]), np.nan if default is None else float(default))
    return _floats(column)


def encode(columns: Mapping[str, Sequence[Any]], schema: FeatureSchema) -> np.ndarray:
    """The feature matrix (rows x features, float64) in ``schema`` order."""
    numeric = feature_values(columns)
    n = len(columns["framework"])
    out = np.empty((n, len(schema.features)), dtype=float)
    for j, feat in enumerate(schema.features):
        if feat.kind == "cat":
            index = {level: float(i) for i, level in enumerate(schema.levels.get(feat.name, ()))}
            src = columns.get(_CATEGORICAL_SOURCE[feat.name])
            if src is None:  # a knob newer than the columns: its default
                src = [get_knob(feat.name).default] * n
            out[:, j] = [index.get(str(v), np.nan) if v not in (None, "") else np.nan for v in src]
        else:
            out[:, j] = numeric[feat.name]
    return out
