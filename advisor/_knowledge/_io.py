"""Writing and reading a knowledge-base file: a gzip-compressed CSV, validated when read."""

from __future__ import annotations

import csv
import gc
import gzip
import io
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from advisor._atomic import atomic_write
from advisor._knowledge._cells import format_cell, parse_column
from advisor._knowledge._schema import COLUMNS, OPTIONAL_DEFAULTS, SCHEMA_VERSION, Table
from advisor.errors import KnowledgeBaseError

__all__ = ["MAX_TABLE_BYTES", "write", "read"]

MAX_TABLE_BYTES = 256 << 20
"""The most a knowledge-base file may decompress to; a larger one (or a gzip bomb) is refused."""

_CHUNK = 16 << 20


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
    formatted = [[format_cell(v, kind) for v in table.columns[name]] for name, kind in COLUMNS.items()]
    writer.writerows(zip(*formatted))
    data = gzip.compress(buf.getvalue().encode("utf-8"), mtime=0)
    atomic_write(path, data)
    return len(table)


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
    missing = [c for c in COLUMNS if c not in header and c not in OPTIONAL_DEFAULTS]
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
            columns[name] = [OPTIONAL_DEFAULTS[name]] * len(body)
            continue
        try:
            columns[name] = parse_column(raw[name], kind)
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


def _bad_cell(path: Path, name: str, kind: str, values: Sequence[str]) -> KnowledgeBaseError:
    for i, v in enumerate(values, 1):
        try:
            parse_column([v], kind)
        except (ValueError, KeyError, RecursionError):
            shown = repr(v) if len(v) <= 80 else f"{v[:60]!r}... ({len(v):,} characters)"
            return KnowledgeBaseError(
                f"Knowledge base {path}: column {name!r}, row {i} must hold a {kind} value. Got {shown} instead."
            )
    return KnowledgeBaseError(f"Knowledge base {path}: column {name!r} cannot be read as {kind}.")
