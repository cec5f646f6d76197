"""Rows from trial results, and :class:`~advisor.records.Config` back from a row."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from advisor._datasets.sources import amend_variant
from advisor._knowledge._cells import normalise
from advisor._knowledge._schema import CFG_TYPES, COLUMNS, SCHEMA_VERSION
from advisor.errors import KnowledgeBaseError
from advisor.knobs import KNOBS
from advisor.records import Config, HardwareProfile, TrialResult

__all__ = ["gflops_at", "row_from_result", "config_from_row"]

_OUTCOME_FIELDS = (
    "train_time_s", "epochs_completed", "test_accuracy", "best_accuracy", "final_loss",
    "eval_time_s", "inference_throughput", "peak_memory_mb", "gpu_peak_memory_mb",
    "cpu_utilization", "cpu_utilization_granted", "contention_cpu_s", "contended",
    "import_time_s", "data_load_time_s", "wall_time_s",
)


def _threadpool_summary(pools: Iterable[Mapping[str, Any]]) -> str:
    parts = sorted(
        f"{p.get('internal_api') or p.get('user_api') or '?'}={p.get('num_threads', '?')}" for p in pools
    )
    return ",".join(parts)


def gflops_at(gemm: Mapping[str, float], threads: int) -> float | None:
    """GEMM GFLOP/s at ``threads``, else at the largest calibrated count below it."""
    by_threads = {int(k): float(v) for k, v in gemm.items() if str(k).isdigit()}
    below = [t for t in by_threads if t <= threads]
    return by_threads[max(below)] if below else None


def row_from_result(
    result: TrialResult | Mapping[str, Any], hardware: HardwareProfile | None = None
) -> dict[str, Any]:
    """Flatten one trial into a knowledge-base row.

    Args:
        result: A :class:`TrialResult` or its ``to_dict()`` form (as stored in Optuna).
        hardware: The profile of the machine that ran it. Its calibrated GEMM speed, cores and
            memory fill the ``hw_*`` columns when its id matches the trial's ``hardware_id``.

    Returns:
        A dict with exactly the :data:`COLUMNS` keys.
    """
    if not isinstance(result, TrialResult):
        try:
            result = TrialResult.from_dict(result)
        except (KeyError, TypeError, ValueError) as exc:
            raise KnowledgeBaseError(f"Cannot read a trial result: {exc}") from exc
    r = result
    shape = tuple(r.input_shape) + (None,) * (3 - len(r.input_shape))
    row: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "trial_id": r.trial_id,
        "study": r.study or "",
        "trial_number": r.trial_number,
        "started_at": r.started_at,
        "advisor_version": r.advisor_version,
        "framework": r.config.framework,
        "framework_version": r.framework_version,
        "library_versions": dict(r.library_versions),
        "threadpools": _threadpool_summary(r.threadpools),
        "threads_applied": dict(r.threads_applied),
        "hardware_id": r.hardware_id,
        "device_kind": r.device_kind,
        "gpu_model": r.gpu_model or "",
        "cores_granted": len(r.cores_granted) or None,
        "dataset_name": r.dataset_name or r.workload.dataset,
        "dataset_fingerprint": r.dataset_fingerprint,
        "dataset_variant": amend_variant(r.dataset_variant or ""),
        "synthetic": bool(r.synthetic),
        "seed": r.workload.seed,
        "model": r.workload.model,
        "input_h": shape[0], "input_w": shape[1], "input_c": shape[2],
        "num_classes": r.num_classes or None,
        "train_samples": r.train_samples or None,
        "test_samples": r.test_samples or None,
        "flops_per_sample": r.flops_per_sample or None,
        "params": r.params or None,
        "status": r.status,
        "epoch_times": r.epoch_times,
        "time_to_accuracy": dict(r.time_to_accuracy),
        "accuracy_curve": r.accuracy_curve,
        "error": r.error or "",
    }
    cfg = r.config.to_dict()
    for name in CFG_TYPES:
        row[f"cfg_{name}"] = cfg[name]
    for name in _OUTCOME_FIELDS:
        row[name] = getattr(r, name)
    row.update(dict.fromkeys(("hw_gemm_gflops_1", "hw_gemm_gflops_threads", "hw_gemm_gflops_max",
                              "hw_cores", "hw_memory_gb")))
    if hardware is not None and (not r.hardware_id or hardware.profile_id == r.hardware_id):
        gemm = hardware.gemm_gflops
        if gemm:
            row["hw_gemm_gflops_1"] = gemm.get("1")
            row["hw_gemm_gflops_threads"] = gflops_at(gemm, r.config.threads)
            row["hw_gemm_gflops_max"] = max(gemm.values())
        row["hw_cores"] = hardware.physical_cores
        row["hw_memory_gb"] = hardware.memory_gb
    return {name: normalise(row[name], kind) for name, kind in COLUMNS.items()}


def config_from_row(row: Mapping[str, Any]) -> Config:
    """Rebuild the :class:`Config` of a table row."""
    values = {name: row[f"cfg_{name}"] for name in CFG_TYPES}
    for knob in KNOBS:
        if knob.nullable and knob.type == "choice":  # a str column reads an empty cell as ""
            values[knob.name] = values[knob.name] or None
    return Config(framework=row["framework"], **values)
