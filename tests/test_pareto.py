"""Pareto fronts: dominance, hypervolume, constraints, references and exports."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.errors import ConstraintError, InvalidParameterError
from advisor.pareto import (
    TrialPoint, compute_front, dominates, export_front, front_to_csv, hypervolume, non_dominated,
    parse_constraint, parse_objectives, parse_reference, parse_size_mb, reference_point,
)

MIN3 = ("minimize", "maximize", "minimize")


def test_dominates_follows_directions() -> None:
    assert dominates([1.0, 0.9, 100], [2.0, 0.8, 100], MIN3)
    assert not dominates([1.0, 0.9, 100], [1.0, 0.9, 100], MIN3)  # equal: no strict improvement
    assert not dominates([1.0, 0.7, 100], [2.0, 0.8, 100], MIN3)  # lower accuracy
    assert dominates([5.0, 0.95], [5.0, 0.90], ("minimize", "maximize"))


def test_non_dominated_on_a_known_set() -> None:
    pts = [[1, 0.5], [2, 0.9], [3, 0.8], [0.5, 0.1], [2, 0.9], [4, 0.95]]
    assert non_dominated(pts, ("minimize", "maximize")) == [0, 1, 3, 4, 5]


def test_hypervolume_exact_2d_and_3d() -> None:
    # minimise both: squares [1,3]x[2,3] u [2,3]x[1,3] -> 2 + 2 - 1 = 3
    assert hypervolume([[1, 2], [2, 1]], ("minimize", "minimize"), [3, 3]) == pytest.approx(3.0)
    # maximised accuracy referenced at 0: time 1 s of ref 2, accuracy 0.5 -> 1 x 0.5
    assert hypervolume([[1, 0.5]], ("minimize", "maximize"), [2, 0.0]) == pytest.approx(0.5)
    # 3-D: two boxes [0,1]^3-ish overlapping
    pts = [[0, 0, 1], [1, 1, 0]]
    assert hypervolume(pts, ("minimize",) * 3, [2, 2, 2]) == pytest.approx(4 + 2 - 1)
    # a point that does not beat the reference adds nothing
    assert hypervolume([[3, 3]], ("minimize", "minimize"), [2, 2]) == 0.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 10), st.floats(0, 10)), min_size=1, max_size=12))
def test_hypervolume_matches_optuna(points: list[tuple[float, float, float]]) -> None:
    from optuna._hypervolume import compute_hypervolume

    ref = np.array([11.0, 11.0, 11.0])
    arr = np.array(points)
    front = arr[non_dominated(arr.tolist(), ("minimize",) * 3)]
    expected = compute_hypervolume(np.unique(front, axis=0), ref)
    assert hypervolume(points, ("minimize",) * 3, ref.tolist()) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def _points() -> list[TrialPoint]:
    raw = [(0, 1.0, 0.90, 300.0), (1, 2.0, 0.95, 310.0), (2, 3.0, 0.93, 320.0), (3, 0.5, 0.50, 290.0),
           (4, 4.0, 0.99, 400.0)]
    pts = [TrialPoint(trial_number=n, values={"time": t, "accuracy": a, "memory": m},
                      params={"batch_size": 32 * (n + 1), "learning_rate": 0.01},
                      framework="torch", hardware_id="hw1", dataset_fingerprint="fp") for n, t, a, m in raw]
    pts.append(TrialPoint(trial_number=5, values={"time": 0.1, "accuracy": 0.99, "memory": 100.0},
                          framework="torch", feasible=False))
    pts.append(TrialPoint(trial_number=6, values={"time": 0.1, "accuracy": 0.99, "memory": 100.0},
                          framework="torch", status="pruned"))
    return pts


def test_compute_front_keeps_only_feasible_complete_non_dominated_points() -> None:
    front = compute_front(_points(), ("time", "accuracy", "memory"), study="s")
    assert [p.trial_number for p in front.points] == [3, 0, 1, 4]  # sorted by time; 2 is dominated by 1
    assert {p.trial_number for p in front.others} == {2, 5}
    assert front.reference == pytest.approx({"time": 4.4, "accuracy": 0.0, "memory": 440.0})
    vecs = [[p.values[n] for n in front.objectives] for p in front.points]
    for a, b in itertools.permutations(vecs, 2):
        assert not dominates(a, b, MIN3)
    # normalised: a single point at the reference's corner has volume 0, the front a fraction
    assert 0.0 < front.hypervolume < 1.0


def test_hypervolume_grows_with_a_dominating_point_and_respects_override() -> None:
    base = compute_front(_points(), ("time", "accuracy"))
    better = compute_front(_points() + [TrialPoint(9, {"time": 0.2, "accuracy": 0.99, "memory": 1.0})],
                           ("time", "accuracy"), reference={"time": 4.4})
    assert better.hypervolume > base.hypervolume
    fixed = compute_front(_points(), ("time", "accuracy"), reference={"time": 10.0, "accuracy": 0.5})
    assert fixed.reference == {"time": 10.0, "accuracy": 0.5}
    # front (1,.9) (2,.95) (4,.99) (.5,.5: beats no reference accuracy) in units of 10 s
    expected = ((10 - 1) * (0.9 - 0.5) + (10 - 2) * (0.95 - 0.9) + (10 - 4) * (0.99 - 0.95)) / 10
    assert fixed.hypervolume == pytest.approx(expected)


def test_reference_point_defaults() -> None:
    ref = reference_point([{"time": 2.0, "memory": 100.0, "accuracy": 0.5}], ["time", "accuracy", "memory"])
    assert ref == pytest.approx({"time": 2.2, "accuracy": 0.0, "memory": 110.0})


@pytest.mark.parametrize("text, objective, op, bound", [
    ("accuracy>=0.98", "accuracy", ">=", 0.98),
    ("accuracy >= 98%", "accuracy", ">=", 0.98),
    ("memory<=2GB", "memory", "<=", 2048.0),
    ("memory<=512", "memory", "<=", 512.0),
    ("time<=60", "time", "<=", 60.0),
    ("time<=2min", "time", "<=", 120.0),
])
def test_parse_constraint(text: str, objective: str, op: str, bound: float) -> None:
    c = parse_constraint(text)
    assert (c.objective, c.op) == (objective, op) and c.bound == pytest.approx(bound)


def test_constraint_violation_sign() -> None:
    acc = parse_constraint("accuracy>=0.9")
    assert acc.violation(0.95) < 0 < acc.violation(0.85)
    mem = parse_constraint("memory<=1GB")
    assert mem.violation(1000) < 0 < mem.violation(1100)
    assert mem.violation(2048) == pytest.approx(1.0)  # relative to the bound


@pytest.mark.parametrize("text, fragment", [
    ("accuracy=>0.98", "is not understood"),
    ("acc>=0.98", "names 'acc': the objectives are time, accuracy, memory"),
    ("memory<=2XB", "has unit 'XB': memory accepts"),
    ("accuracy>=1.5", "accuracy bounds lie in [0, 1]"),
    ("time<=60; rm -rf /", "is not understood"),
    ("", "is not understood"),
])
def test_parse_constraint_errors_are_one_line(text: str, fragment: str) -> None:
    with pytest.raises(ConstraintError) as info:
        parse_constraint(text)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_parse_objectives_reference_and_size() -> None:
    assert parse_objectives("time, accuracy") == ("time", "accuracy")
    for bad in ("time,time", "speed", ""):
        with pytest.raises(InvalidParameterError):
            parse_objectives(bad)
    assert parse_reference("time=600,accuracy=0,memory=4096", ["time", "accuracy", "memory"]) == {
        "time": 600.0, "accuracy": 0.0, "memory": 4096.0}
    with pytest.raises(InvalidParameterError, match="'ref' parameter"):
        parse_reference("time=abc", ["time"])
    assert parse_size_mb("2GB") == 2048.0 and parse_size_mb("1.5 GiB") == 1536.0


def test_exports_are_written_and_readable(tmp_path: Path) -> None:
    front = compute_front(_points(), ("time", "accuracy", "memory"), study="s")
    data = json.loads(export_front(front, "json", tmp_path / "f.json").read_text())
    assert [p["trial_number"] for p in data["front"]] == [3, 0, 1, 4]
    assert data["front"][0]["hardware_id"] == "hw1" and data["front"][0]["dataset_fingerprint"] == "fp"
    assert data["hypervolume"] == pytest.approx(front.hypervolume)
    rows = list(csv.DictReader(io.StringIO(front_to_csv(front))))
    assert [int(r["trial_number"]) for r in rows] == [3, 0, 1, 4]
    assert float(rows[0]["time"]) == 0.5 and rows[0]["batch_size"] == "128"
    html = export_front(front, "html", tmp_path / "f.html").read_text()
    assert "<html>" in html and "Pareto front" in html
    # plotly.js is embedded (no <script src=...>), so the page works offline
    assert not re.search(r"<script[^>]*\bsrc=", html) and len(html) > 1_000_000
    png = export_front(front, "png", tmp_path / "sub" / "f.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000
    two = compute_front(_points(), ("time", "accuracy"))
    assert export_front(two, "html", tmp_path / "two.html").stat().st_size > 0
    assert export_front(two, "png", tmp_path / "two.png").stat().st_size > 0
    assert not [p for p in tmp_path.rglob(".*")]  # no temporary file left behind
    with pytest.raises(InvalidParameterError, match="'format' parameter"):
        export_front(front, "xlsx", tmp_path / "f.xlsx")


def test_chance_level_points_are_flagged() -> None:
    from advisor._pareto._front import CHANCE_MARGIN, is_chance_level

    assert is_chance_level(0.1, 10) and is_chance_level(0.1 + CHANCE_MARGIN, 10)
    assert not is_chance_level(0.2, 10) and not is_chance_level(0.6, 2) and is_chance_level(0.52, 2)
    assert not is_chance_level(None, 10) and not is_chance_level(0.1, None)
