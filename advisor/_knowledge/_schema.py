"""The knowledge-base schema: its columns and their types, and the column-wise :class:`Table`.

The columns are documented in :mod:`advisor.knowledge`; the ``cfg_`` columns follow the knob
declarations of :mod:`advisor.knobs`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from advisor.errors import KnowledgeBaseError
from advisor.knobs import KNOBS
from advisor.records import Config

__all__ = ["SCHEMA_VERSION", "RESULT_ATTR", "CFG_TYPES", "OPTIONAL_DEFAULTS", "COLUMNS", "Table", "summarize"]

SCHEMA_VERSION = 1
RESULT_ATTR = "advisor.result"

#: ``cfg_<knob>`` column types, derived from the knob declarations (:mod:`advisor.knobs`).
CFG_TYPES = {k.name: {"choice": "str"}.get(k.type, k.type) for k in KNOBS}
#: A table written before a knob existed reads that knob's default in its ``cfg_`` column.
OPTIONAL_DEFAULTS = {f"cfg_{k.name}": k.default for k in KNOBS}

#: Column name -> type (``str``, ``int``, ``float``, ``bool`` or ``json``), in file order.
COLUMNS: dict[str, str] = {
    "schema_version": "int", "trial_id": "str", "study": "str", "trial_number": "int",
    "started_at": "str", "advisor_version": "str", "framework": "str", "framework_version": "str",
    "library_versions": "json", "threadpools": "str", "threads_applied": "json",
    "hardware_id": "str", "device_kind": "str", "gpu_model": "str", "cores_granted": "int",
    "dataset_name": "str", "dataset_fingerprint": "str", "dataset_variant": "str",
    "synthetic": "bool", "seed": "int",
    "model": "str", "input_h": "int", "input_w": "int", "input_c": "int", "num_classes": "int",
    "train_samples": "int", "test_samples": "int", "flops_per_sample": "float", "params": "int",
    **{f"cfg_{name}": kind for name, kind in CFG_TYPES.items()},
    "status": "str", "train_time_s": "float", "epochs_completed": "int", "epoch_times": "json",
    "time_to_accuracy": "json", "test_accuracy": "float", "best_accuracy": "float",
    "accuracy_curve": "json", "final_loss": "float", "eval_time_s": "float",
    "inference_throughput": "float", "peak_memory_mb": "float", "gpu_peak_memory_mb": "float",
    "cpu_utilization": "float", "cpu_utilization_granted": "float", "contention_cpu_s": "float",
    "contended": "bool", "import_time_s": "float", "data_load_time_s": "float",
    "wall_time_s": "float", "error": "str",
    "hw_gemm_gflops_1": "float", "hw_gemm_gflops_threads": "float", "hw_gemm_gflops_max": "float",
    "hw_cores": "int", "hw_memory_gb": "float",
}

assert set(CFG_TYPES) == {f.name for f in dataclasses.fields(Config)} - {"framework"}


@dataclass(frozen=True)
class Table:
    """A knowledge-base table held column-wise.

    Attributes:
        columns: Column name -> list of values (one per row), in :data:`COLUMNS` order.
        path: The file it was read from, if any.
    """

    columns: dict[str, list[Any]]
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.columns["trial_id"])

    def __getitem__(self, name: str) -> list[Any]:
        return self.columns[name]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The rows as dicts (built on each access; prefer column access in loops)."""
        names = list(self.columns)
        return [dict(zip(names, values)) for values in zip(*self.columns.values())]

    def where(self, mask: Sequence[bool]) -> "Table":
        """The rows where ``mask`` is true."""
        return Table({k: [v for v, m in zip(col, mask) if m] for k, col in self.columns.items()}, self.path)

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], *, path: Path | None = None) -> "Table":
        """Build a table from row dicts; every row must hold exactly the schema's columns."""
        cols: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        for i, row in enumerate(rows, 1):
            missing = [c for c in COLUMNS if c not in row]
            extra = [c for c in row if c not in COLUMNS]
            if missing or extra:
                what = f"missing column {missing[0]!r}" if missing else f"unknown column {extra[0]!r}"
                raise KnowledgeBaseError(f"Row {i} of the knowledge base has a {what}.")
            for name in COLUMNS:
                cols[name].append(row[name])
        return cls(cols, path)


def summarize(table: Table) -> dict[str, Any]:
    """Row counts by status, framework, dataset, train size and device kind."""

    def count(name: str) -> dict[str, int]:
        return {str(k): v for k, v in sorted(Counter(table[name]).items(), key=lambda kv: (-kv[1], str(kv[0])))}

    return {
        "path": str(table.path) if table.path else None,
        "schema_version": SCHEMA_VERSION,
        "rows": len(table),
        "by_status": count("status"),
        "by_framework": count("framework"),
        "by_dataset": count("dataset_name"),
        "by_train_samples": count("train_samples"),
        "by_device_kind": count("device_kind"),
        "studies": len({s for s in table["study"] if s}),
        "contended": sum(1 for c in table["contended"] if c),
        "synthetic": sum(1 for s in table["synthetic"] if s),
    }
