"""Helpers shared by the benchmark scripts: trial runs, medians, markdown tables, JSON logs."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SHARED = REPO.parent / "shared" / "datasets"


def median(values: Iterable[float]) -> float:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else float("nan")


def cv(values: Sequence[float]) -> float:
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return float("nan")
    return statistics.stdev(vals) / statistics.mean(vals)


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            if v != v:
                return "n/a"
            return f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_line() -> str:
    from advisor.hardware import detect

    hw = detect()
    try:
        autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    except OSError:
        autogroup = "n/a"
    return (f"{hw.cpu_model}, {hw.physical_cores} physical / {hw.logical_cores} logical cores, "
            f"{hw.memory_gb:.0f} GB, Python {platform.python_version()}, profile {hw.profile_id}. "
            f"The machine is shared: the benchmark ran at nice {os.nice(0)} with "
            f"kernel.sched_autogroup_enabled={autogroup}, so that other work at normal priority "
            f"yields the cores; trials during which other processes still used the granted cores "
            f"are marked contended")


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(record, default=str) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def command_line() -> str:
    return " ".join(["python", *[a if " " not in a else repr(a) for a in sys.argv]])


def git_rev() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


os.environ.setdefault("MPLBACKEND", "Agg")


def outcome_point(result: Any) -> tuple[float, float, float] | None:
    """(train time, test accuracy, peak memory) of a TrialResult with status ok, else None."""
    if result is None or result.status != "ok" or None in (
            result.train_time_s, result.test_accuracy, result.peak_memory_mb):
        return None
    return (float(result.train_time_s), float(result.test_accuracy), float(result.peak_memory_mb))
