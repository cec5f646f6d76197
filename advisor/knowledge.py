"""The knowledge base: a flat table with one row per trial, exported from any number of studies.

The table is a gzip-compressed CSV (``*.csv.gz``) written with the standard library only. Every
file starts with a header row; the first column, ``schema_version``, repeats :data:`SCHEMA_VERSION`
on every row so that any CSV reader can tell which schema it holds. An empty cell means "unknown"
(``None``); for ``str`` columns an empty cell reads back as ``""``. Non-finite floats are written as
empty cells. ``bool`` cells are ``true`` / ``false``; ``json`` cells hold compact JSON.

Schema version 1 (column: type, meaning):

=============================  =======  =========================================================
schema_version                 int      :data:`SCHEMA_VERSION` of the file
trial_id                       str      unique id of the trial (the merge key)
study                          str      Optuna study name ("" outside a study)
trial_number                   int      Optuna trial number
started_at                     str      ISO-8601 start time
advisor_version                str      advisor version that ran the trial
framework                      str      torch | tensorflow | onnxruntime | sklearn
framework_version              str      version of the framework
library_versions               json     {library: version} seen in the trial child
threadpools                    str      threadpoolctl summary, e.g. ``openblas=2,openmp=2``
threads_applied                json     thread settings the framework reported back
hardware_id                    str      hardware profile id
device_kind                    str      cpu | gpu
gpu_model                      str      GPU name ("" on the CPU)
cores_granted                  int      number of CPU cores the trial was pinned to
dataset_name                   str      registry name or file name of the dataset
dataset_fingerprint            str      sha256 of the exact source files and subset
dataset_variant                str      e.g. ``official``, ``synthetic``
synthetic                      bool     synthetic data: timing only, no accuracy meaning
seed                           int      seed of the data-subset draw (training seed: cfg_seed)
model                          str      model name (:mod:`advisor.models`)
input_h, input_w, input_c      int      input shape (NHWC, without the batch)
num_classes                    int      classes
train_samples, test_samples    int      samples actually used
flops_per_sample               float    training FLOPs of one sample (forward + backward)
params                         int      trainable parameters
cfg_<knob>                     various  one column per knob of :mod:`advisor.knobs` (every
                                        :class:`~advisor.records.Config` field except
                                        ``framework``), e.g. cfg_batch_size, cfg_schedule;
                                        a file without a newer knob's column reads that
                                        knob's default
status                         str      ok | failed | timeout | oom | diverged | pruned
train_time_s                   float    training time (no start-up, import, loading, eval)
epochs_completed               int      epochs that finished
epoch_times                    json     per-epoch training seconds
time_to_accuracy               json     {accuracy: seconds to reach it}
test_accuracy, best_accuracy   float    final and best test accuracy
accuracy_curve                 json     test accuracy after each epoch
final_loss                     float    last epoch's mean training loss
eval_time_s                    float    evaluation seconds
inference_throughput           float    samples per second at inference
peak_memory_mb                 float    peak RSS of the trial's process tree (MiB)
gpu_peak_memory_mb             float    peak GPU memory (MiB)
cpu_utilization                float    mean busy cores of the process tree
cpu_utilization_granted        float    the same as a fraction of the cores granted
contention_cpu_s               float    CPU seconds used by other processes meanwhile
contended                      bool     the timing was disturbed; kept out of time models
import_time_s                  float    framework import seconds
data_load_time_s               float    data loading seconds
wall_time_s                    float    whole trial, from spawn
error                          str      error text of a failed trial
hw_gemm_gflops_1               float    calibrated GEMM GFLOP/s on 1 thread (joined at export)
hw_gemm_gflops_threads         float    the same at the trial's thread count
hw_gemm_gflops_max             float    the best calibrated GEMM GFLOP/s
hw_cores                       int      physical cores of the machine
hw_memory_gb                   float    memory of the machine
=============================  =======  =========================================================
"""

from __future__ import annotations

import csv
import dataclasses
import gc
import gzip
import io
import json
import math
import os
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from advisor.errors import KnowledgeBaseError, StorageError
from advisor.knobs import KNOBS
from advisor.records import Config, HardwareProfile, TrialResult

__all__ = [
    "SCHEMA_VERSION",
    "COLUMNS",
    "RESULT_ATTR",
    "Table",
    "MergeStats",
    "ExportCount",
    "row_from_result",
    "config_from_row",
    "gflops_at",
    "write",
    "read",
    "merge",
    "export",
    "summarize",
    "user_knowledge_path",
    "append_to_user_knowledge",
]

SCHEMA_VERSION = 1
RESULT_ATTR = "advisor.result"

#: ``cfg_<knob>`` column types, derived from the knob declarations (:mod:`advisor.knobs`).
_CFG_TYPES = {k.name: {"choice": "str"}.get(k.type, k.type) for k in KNOBS}
#: A table written before a knob existed reads that knob's default in its ``cfg_`` column.
_OPTIONAL_DEFAULTS = {f"cfg_{k.name}": k.default for k in KNOBS}

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
    **{f"cfg_{name}": kind for name, kind in _CFG_TYPES.items()},
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

assert set(_CFG_TYPES) == {f.name for f in dataclasses.fields(Config)} - {"framework"}

_OUTCOME_FIELDS = (
    "train_time_s", "epochs_completed", "test_accuracy", "best_accuracy", "final_loss",
    "eval_time_s", "inference_throughput", "peak_memory_mb", "gpu_peak_memory_mb",
    "cpu_utilization", "cpu_utilization_granted", "contention_cpu_s", "contended",
    "import_time_s", "data_load_time_s", "wall_time_s",
)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Rows from results
# ---------------------------------------------------------------------------------------------


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
        "dataset_variant": r.dataset_variant,
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
    for name in _CFG_TYPES:
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
    return {name: _normalise(row[name], kind) for name, kind in COLUMNS.items()}


def _normalise(value: Any, kind: str) -> Any:
    """The value as it reads back from a file (so merged rows compare equal)."""
    if kind == "str":
        return "" if value is None else str(value)
    if value is None:
        return None
    if kind == "float":
        value = float(value)
        return value if math.isfinite(value) else None
    if kind == "int":
        return int(value)
    if kind == "json":
        return json.loads(json.dumps(_rounded(value), sort_keys=True, allow_nan=False, default=str))
    return bool(value)


def _rounded(obj: Any) -> Any:
    """JSON cells keep 7 significant digits: curves and per-epoch times need no more."""
    if isinstance(obj, float):
        return float(f"{obj:.7g}") if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [_rounded(v) for v in obj]
    return obj


def config_from_row(row: Mapping[str, Any]) -> Config:
    """Rebuild the :class:`Config` of a table row."""
    values = {name: row[f"cfg_{name}"] for name in _CFG_TYPES}
    for knob in KNOBS:
        if knob.nullable and knob.type == "choice":  # a str column reads an empty cell as ""
            values[knob.name] = values[knob.name] or None
    return Config(framework=row["framework"], **values)


# ---------------------------------------------------------------------------------------------
# Writing and reading
# ---------------------------------------------------------------------------------------------


def _format(value: Any, kind: str) -> str:
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return repr(float(value)) if math.isfinite(value) else ""
    if kind == "json":
        return json.dumps(_rounded(value), sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
    return str(value)


def write(table: Table | Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write a table atomically (temporary file, fsync, rename); return the row count.

    The gzip header carries no timestamp, so equal tables give byte-identical files.
    """
    if not isinstance(table, Table):
        table = Table.from_rows(table)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(COLUMNS))
    formatted = [[_format(v, kind) for v in table.columns[name]] for name, kind in COLUMNS.items()]
    writer.writerows(zip(*formatted))
    data = gzip.compress(buf.getvalue().encode("utf-8"), mtime=0)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(table)


_BOOLS = {"true": True, "false": False, "": None}


def _parse_column(values: Sequence[str], kind: str) -> list[Any]:
    if kind == "str":
        return list(values)
    if kind == "float":
        return [float(v) if v else None for v in values]
    if kind == "int":
        return [int(v) if v else None for v in values]
    if kind == "bool":
        return [_BOOLS[v] for v in values]
    present = [v for v in values if v]
    # One C-level parse of the whole column; a cell such as '1,2' would parse as two values,
    # which the length check catches (the caller then locates the bad cell).
    parsed = json.loads("[" + ",".join(present) + "]") if present else []
    if len(parsed) != len(present):
        raise ValueError("a JSON cell holds more than one value")
    it = iter(parsed)
    return [next(it) if v else None for v in values]


def _bad_cell(path: Path, name: str, kind: str, values: Sequence[str]) -> KnowledgeBaseError:
    for i, v in enumerate(values, 1):
        try:
            _parse_column([v], kind)
        except (ValueError, KeyError, RecursionError):
            shown = repr(v) if len(v) <= 80 else f"{v[:60]!r}... ({len(v):,} characters)"
            return KnowledgeBaseError(
                f"Knowledge base {path}: column {name!r}, row {i} must hold a {kind} value. Got {shown} instead."
            )
    return KnowledgeBaseError(f"Knowledge base {path}: column {name!r} cannot be read as {kind}.")


def read(path: str | Path) -> Table:
    """Read and validate a knowledge-base file.

    Raises:
        KnowledgeBaseError: One line naming the file (and the column and row) when the file is
            missing, not a gzip CSV, has missing or extra columns, a cell of the wrong type, a
            different schema version, or a duplicated trial id.
    """
    path = Path(path)
    paused = gc.isenabled()
    gc.disable()  # the parse allocates ~10^5 containers and frees none: collections only cost time
    try:
        return _read(path)
    finally:
        if paused:
            gc.enable()


MAX_TABLE_BYTES = 256 << 20
"""The most a knowledge-base file may decompress to; a larger one (or a gzip bomb) is refused."""

_CHUNK = 16 << 20


def _gunzip(path: Path, *, limit: int = MAX_TABLE_BYTES) -> bytes:
    """Decompress every gzip member of ``path``, refusing output over ``limit`` bytes before it is held."""
    data = path.read_bytes()
    if not data:
        return b""
    if data[:2] != b"\037\213":
        raise gzip.BadGzipFile(f"Not a gzipped file ({data[:2]!r})")
    pieces: list[bytes] = []
    total = 0
    while data.count(0) != len(data):  # like gzip, tolerate trailing zero padding after the last member
        member = zlib.decompressobj(wbits=31)  # gzip framing; checks the CRC-32 and length trailer
        while not member.eof:
            piece = member.decompress(data, _CHUNK)
            total += len(piece)
            if total > limit:
                raise KnowledgeBaseError(
                    f"Knowledge base {path} is too large: it decompresses to more than {limit >> 20} MiB."
                )
            pieces.append(piece)
            data = member.unconsumed_tail
            if not data and not piece and not member.eof:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        data = member.unused_data
    return b"".join(pieces)


def _read(path: Path) -> Table:
    try:
        text = _gunzip(path).decode("utf-8")
        records = list(csv.reader(io.StringIO(text, newline="")))
    except FileNotFoundError:
        raise KnowledgeBaseError(f"Knowledge base {path} does not exist.") from None
    except (OSError, EOFError, UnicodeDecodeError, csv.Error, zlib.error) as exc:
        raise KnowledgeBaseError(f"Knowledge base {path} is not a gzip-compressed CSV file: {exc}") from None
    if not records:
        raise KnowledgeBaseError(f"Knowledge base {path} is empty: it has no header row.")
    header, body = records[0], records[1:]
    missing = [c for c in COLUMNS if c not in header and c not in _OPTIONAL_DEFAULTS]
    extra = [c for c in header if c not in COLUMNS]
    if missing:
        raise KnowledgeBaseError(
            f"Knowledge base {path}: missing column {missing[0]!r} (schema {SCHEMA_VERSION} has {len(COLUMNS)} columns)."
        )
    if extra:
        raise KnowledgeBaseError(f"Knowledge base {path}: unknown column {extra[0]!r} (schema {SCHEMA_VERSION}).")
    if len(header) != len(set(header)):
        dup = next(c for c, n in Counter(header).items() if n > 1)
        raise KnowledgeBaseError(f"Knowledge base {path}: column {dup!r} appears twice in the header.")
    if set(map(len, body)) - {len(header)}:
        i, rec = next((i, r) for i, r in enumerate(body, 1) if len(r) != len(header))
        raise KnowledgeBaseError(f"Knowledge base {path}: row {i} has {len(rec)} cells, the header has {len(header)}.")
    raw = dict(zip(header, zip(*body))) if body else {c: () for c in header}
    columns: dict[str, list[Any]] = {}
    for name, kind in COLUMNS.items():
        if name not in raw:  # a knob newer than the file: every row has its default
            columns[name] = [_OPTIONAL_DEFAULTS[name]] * len(body)
            continue
        try:
            columns[name] = _parse_column(raw[name], kind)
        except (ValueError, KeyError, RecursionError):
            raise _bad_cell(path, name, kind, raw[name]) from None
    versions = columns["schema_version"]
    if versions.count(SCHEMA_VERSION) != len(versions):
        i, v = next((i, v) for i, v in enumerate(versions, 1) if v != SCHEMA_VERSION)
        raise KnowledgeBaseError(
            f"Knowledge base {path}: column 'schema_version', row {i} is {v!r}; this advisor reads schema {SCHEMA_VERSION}."
        )
    ids = columns["trial_id"]
    if len(set(ids)) != len(ids):
        seen: dict[str, int] = {}
        for i, tid in enumerate(ids, 1):
            if tid in seen:
                raise KnowledgeBaseError(
                    f"Knowledge base {path}: column 'trial_id', row {i} repeats trial id {tid!r} of row {seen[tid]}."
                )
            seen[tid] = i
    if "" in ids:
        i = ids.index("") + 1
        raise KnowledgeBaseError(f"Knowledge base {path}: column 'trial_id', row {i} is empty.")
    return Table(columns, path)


# ---------------------------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeStats:
    """What a merge did.

    Attributes:
        inputs: Number of input tables.
        rows_in: Rows read from all inputs.
        rows_out: Rows written (distinct trial ids).
        duplicates: Rows that repeated a trial id already seen and were merged into it.
    """

    inputs: int
    rows_in: int
    rows_out: int
    duplicates: int


def _merge_rows(tables: Iterable[tuple[str, Iterable[dict[str, Any]]]]) -> tuple[list[dict[str, Any]], int, int]:
    """Dedupe rows on ``trial_id``; a row may fill another's unknown cells but never contradict it."""
    by_id: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    rows_in = dups = 0
    for source, rows in tables:
        for row in rows:
            rows_in += 1
            tid = row["trial_id"]
            kept = by_id.get(tid)
            if kept is None:
                by_id[tid] = dict(row)
                origin[tid] = source
                continue
            dups += 1
            for name in COLUMNS:
                a, b = kept[name], row[name]
                if a == b or b is None or b == "":
                    continue
                if a is None or a == "":
                    kept[name] = b
                    continue
                raise KnowledgeBaseError(
                    f"Trial id {tid!r} has conflicting rows in {origin[tid]} and {source}: column {name!r} is {a!r} vs {b!r}."
                )
    return list(by_id.values()), rows_in, dups


def merge(paths: Sequence[str | Path], out: str | Path) -> MergeStats:
    """Merge knowledge-base files into ``out``, deduplicating on ``trial_id``.

    Identical rows merge silently (a row may also fill cells another left unknown, such as the
    ``hw_*`` columns); rows with the same id that contradict each other raise. ``out`` may be
    one of the inputs.

    Raises:
        KnowledgeBaseError: When an input is invalid or two rows with one id conflict.
    """
    if not paths:
        raise KnowledgeBaseError("Nothing to merge: give at least one knowledge-base file.")
    tables = [(str(p), read(p).rows) for p in paths]
    rows, rows_in, dups = _merge_rows(tables)
    write(rows, out)
    return MergeStats(inputs=len(paths), rows_in=rows_in, rows_out=len(rows), duplicates=dups)


# ---------------------------------------------------------------------------------------------
# Export from Optuna storages
# ---------------------------------------------------------------------------------------------


class ExportCount(int):
    """The number of rows written by :func:`export`, carrying what was skipped.

    Attributes:
        skipped: Trials without an ``"advisor.result"`` user attribute (or an unreadable one).
        studies: Names of the studies read.
    """

    skipped: int
    studies: tuple[str, ...]

    def __new__(cls, rows: int, *, skipped: int, studies: Sequence[str]) -> "ExportCount":
        obj = super().__new__(cls, rows)
        obj.skipped = skipped
        obj.studies = tuple(studies)
        return obj


class _Profiles:
    """Hardware profiles by id: given ones, then study attributes, then this machine's cache."""

    def __init__(self, given: Iterable[HardwareProfile] | None) -> None:
        self.known: dict[str, HardwareProfile | None] = {p.profile_id: p for p in given or ()}
        self.use_cache = given is None

    def add(self, profile: HardwareProfile) -> None:
        if self.known.get(profile.profile_id) is None:
            self.known[profile.profile_id] = profile

    def get(self, profile_id: str) -> HardwareProfile | None:
        if profile_id and profile_id not in self.known and self.use_cache:
            try:
                from advisor import hardware as hw

                self.known[profile_id] = hw.load_cached(profile_id)
            except Exception:  # noqa: BLE001 - no cached profile simply means nothing to join
                self.known[profile_id] = None
        return self.known.get(profile_id)


def export(
    storage_url: str,
    *,
    studies: Sequence[str] | None = None,
    out: str | Path,
    hardware: Iterable[HardwareProfile] | None = None,
) -> ExportCount:
    """Export every trial of some studies that carries an ``"advisor.result"`` attribute.

    Failed and pruned trials are exported too (their status says so). A study may also carry
    hardware profiles in its ``"advisor.hardware"`` user attribute (a profile dict or a list).

    Args:
        storage_url: An Optuna storage URL (``sqlite:///x.db``, ``postgresql://...``).
        studies: Study names; ``None`` exports every study in the storage.
        out: The table file to write (replaced atomically).
        hardware: Profiles to join on ``hardware_id``; ``None`` uses the profiles cached on this
            machine by ``advisor hardware --calibrate``, if any.

    Returns:
        The number of rows written, with ``.skipped`` and ``.studies``.

    Raises:
        StorageError: When the storage or a study cannot be opened.
        KnowledgeBaseError: When two trials share an id with different content.
    """
    import optuna  # the storage of record; imported here so the module stays light

    from advisor.tuning import open_storage  # psycopg2 driver selection, URL validation

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        storage = open_storage(storage_url, heartbeat_interval=None, grace_period=None)
        names = list(studies) if studies else optuna.get_all_study_names(storage=storage)
    except Exception as exc:  # noqa: BLE001 - optuna raises many storage-specific errors
        raise StorageError(f"Cannot open the study storage {storage_url!r}: {exc}") from None
    profiles = _Profiles(hardware)
    rows: list[dict[str, Any]] = []
    skipped = 0
    for name in names:
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except Exception as exc:  # noqa: BLE001
            raise StorageError(f"Cannot load study {name!r} from {storage_url!r}: {exc}") from None
        attr = study.user_attrs.get("advisor.hardware")
        for p in attr if isinstance(attr, list) else [attr] if attr else []:
            try:
                prof = HardwareProfile.from_dict(p)
            except (TypeError, ValueError, KeyError):
                continue
            profiles.add(prof)
        for trial in study.get_trials(deepcopy=False):
            data = trial.user_attrs.get(RESULT_ATTR)
            if not isinstance(data, Mapping):
                skipped += 1
                continue
            data = dict(data)
            data["study"] = data.get("study") or name
            if data.get("trial_number") is None:
                data["trial_number"] = trial.number
            if not data.get("trial_id"):
                data["trial_id"] = f"{name}:{trial.number}"
            try:
                result = TrialResult.from_dict(data)
            except (KeyError, TypeError, ValueError):
                skipped += 1
                continue
            rows.append(row_from_result(result, profiles.get(result.hardware_id)))
    merged, _, _ = _merge_rows([(f"{storage_url}", rows)])
    write(merged, out)
    return ExportCount(len(merged), skipped=skipped, studies=names)


# ---------------------------------------------------------------------------------------------
# Summaries and the user's own knowledge base
# ---------------------------------------------------------------------------------------------


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


def user_knowledge_path() -> Path:
    """The user's own knowledge base: ``$ADVISOR_HOME/knowledge.csv.gz``, else in the user data dir."""
    home = os.environ.get("ADVISOR_HOME")
    if home:
        return Path(home) / "knowledge.csv.gz"
    import platformdirs

    return Path(platformdirs.user_data_dir("advisor")) / "knowledge.csv.gz"


def append_to_user_knowledge(
    results: Iterable[TrialResult],
    *,
    hardware: HardwareProfile | None = None,
    path: str | Path | None = None,
) -> MergeStats:
    """Merge trial results into the user's knowledge base (created if missing), under a file lock."""
    from filelock import FileLock

    target = Path(path) if path is not None else user_knowledge_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    new = [row_from_result(r, hardware) for r in results]
    with FileLock(str(target) + ".lock"):
        sources: list[tuple[str, Iterable[dict[str, Any]]]] = []
        if target.exists():
            sources.append((str(target), read(target).rows))
        sources.append(("new trials", new))
        rows, rows_in, dups = _merge_rows(sources)
        write(rows, target)
    return MergeStats(inputs=len(sources), rows_in=rows_in, rows_out=len(rows), duplicates=dups)
