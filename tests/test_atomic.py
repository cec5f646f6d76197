"""One atomic write for the package, and files that respect the umask (not mkstemp's 0600)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Iterator

import pytest

from advisor._atomic import atomic_write, current_umask

sys.path.insert(0, str(Path(__file__).parent))
from _knowledge_rows import rows  # noqa: E402


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_write_replaces_whole_and_follows_the_umask(tmp_path: Path, umask: int) -> None:
    assert current_umask() == umask
    path = atomic_write(tmp_path / "sub" / "a.txt", "first")
    atomic_write(path, b"second")
    assert path.read_bytes() == b"second" and _mode(path) == 0o666 & ~umask
    assert [p.name for p in path.parent.iterdir()] == ["a.txt"]  # no temporary file left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = atomic_write(tmp_path / "a.txt", "old")
    with pytest.raises(TypeError):
        atomic_write(path, 3)  # type: ignore[arg-type]
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_pareto_knowledge_and_surrogate_files_have_the_umask_permissions(tmp_path: Path, umask: int) -> None:
    from advisor import knowledge
    from advisor import surrogate as sg
    from advisor.pareto import compute_front, export_front
    from tests.test_pareto import _points

    expected = 0o666 & ~umask
    table = tmp_path / "k.csv.gz"
    knowledge.write(rows(80, seed=2), table)
    front = export_front(compute_front(_points(), ("time", "accuracy", "memory"), study="s"), "json",
                         tmp_path / "front.json")
    model = sg.save(sg.fit_file(table, num_boost_round=5), tmp_path / "model")
    written = [table, front, *sorted(model.parent.iterdir())]
    assert len(written) > 5 and {p.name: _mode(p) for p in written} == {p.name: expected for p in written}
