"""Merging tables on ``trial_id``, into a file or into the user's own knowledge base."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from advisor._knowledge._io import read, write
from advisor._knowledge._rows import row_from_result
from advisor._knowledge._schema import COLUMNS
from advisor.errors import KnowledgeBaseError
from advisor.records import HardwareProfile, TrialResult

__all__ = ["MergeStats", "merge_rows", "merge", "user_knowledge_path", "append_to_user_knowledge",
           "merge_into_user_knowledge"]


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


def merge_rows(tables: Iterable[tuple[str, Iterable[dict[str, Any]]]]) -> tuple[list[dict[str, Any]], int, int]:
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
    rows, rows_in, dups = merge_rows(tables)
    write(rows, out)
    return MergeStats(inputs=len(paths), rows_in=rows_in, rows_out=len(rows), duplicates=dups)


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
    return merge_into_user_knowledge([("new trials", [row_from_result(r, hardware) for r in results])], path=path)


def merge_into_user_knowledge(tables: Sequence[tuple[str, Iterable[dict[str, Any]]]], *,
                              path: str | Path | None = None) -> MergeStats:
    """Merge named tables of rows into the user's knowledge base (created if missing), under a
    file lock; a file that cannot be read raises and is left as it was."""
    from filelock import FileLock

    target = Path(path) if path is not None else user_knowledge_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        sources: list[tuple[str, Iterable[dict[str, Any]]]] = []
        if target.exists():
            sources.append((str(target), read(target).rows))
        sources += list(tables)
        rows, rows_in, dups = merge_rows(sources)
        write(rows, target)
    return MergeStats(inputs=len(sources), rows_in=rows_in, rows_out=len(rows), duplicates=dups)
