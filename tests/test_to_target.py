"""Time to an accuracy target read from the learning-curve model (``advisor._recommend._to_target``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from advisor import recommend as rc
from advisor._recommend._candidates import Candidate
from advisor._recommend._to_target import READINGS, reading_epochs, times_to_target
from advisor.cli import app
from advisor.records import Config
from advisor.surrogate.model import Band

from _knowledge_rows import CPU_PROFILE, fitted_table


def test_a_short_run_is_read_at_every_epoch_and_a_long_one_at_spread_epochs() -> None:
    assert reading_epochs(1) == [] and reading_epochs(2) == [1] and reading_epochs(5) == [1, 2, 3, 4]
    long = reading_epochs(60)
    assert len(long) == READINGS and long[0] == 1 and long[-1] == 59 and long == sorted(set(long))


class _Linear:
    """A surrogate whose accuracy after epoch k of an E-epoch schedule is k / E times 0.5, 0.75 and
    1.0 (lo, mid, hi): its curve is the first feature column the encoder writes."""

    def predict_matrix(self, x: np.ndarray, *, objectives: Any = None) -> dict[str, Band]:
        assert objectives == ("test_accuracy",)
        share = x[:, 0]
        return {"test_accuracy": Band(0.5 * share, 0.75 * share, 1.0 * share)}


def _encode(cands: list[Candidate], reading: tuple[list[int], list[int]]) -> np.ndarray:
    assert all(span == c.config.epochs for c, span in zip(cands, reading[1]))  # the schedule is the candidate's
    return np.array([[k / span] for k, span in zip(*reading)])


def test_each_time_edge_is_read_where_the_opposite_accuracy_edge_first_reaches_the_target() -> None:
    cands = [Candidate(Config(framework="torch", epochs=10), "portfolio", None),
             Candidate(Config(framework="torch", epochs=1), "portfolio", None),
             Candidate(Config(framework="torch", epochs=10), "portfolio", None)]
    t = [np.array([100.0, 10.0, 100.0]), np.array([200.0, 20.0, 200.0]), np.array([400.0, 40.0, 400.0])]
    raw = Band(np.array([0.5, 0.5, 0.5]), np.array([0.75, 0.75, 0.75]), np.array([1.0, 1.0, 1.0]))
    # the recommender's final bands: the first candidate's as predicted, the third's median raised by 0.1
    a = [np.array([0.5, 0.5, 0.5]), np.array([0.75, 0.75, 0.85]), np.array([1.0, 1.0, 1.0])]
    whole = times_to_target(cands, np.array([0, 1, 2]), t, a, raw, 0.44, _Linear(), _encode)
    # hi edge 1.0 k/10 >= 0.44 at k=5; mid 0.75 k/10 at k=6; lo 0.5 k/10 at k=9
    assert (t[0][0], t[1][0], t[2][0]) == pytest.approx((50.0, 120.0, 360.0))
    # shifted median: 0.75 k/10 + 0.1 >= 0.44 at k=5
    assert t[1][2] == pytest.approx(100.0)
    # one epoch: nothing to read before its end, the whole run's time
    assert (t[0][1], t[1][1], t[2][1]) == (10.0, 20.0, 40.0) and 1 not in whole
    assert whole[0] == (100.0, 200.0, 400.0) and whole[2] == (100.0, 200.0, 400.0)


def test_an_edge_that_never_reaches_the_target_before_the_end_keeps_the_whole_runs_time() -> None:
    cands = [Candidate(Config(framework="torch", epochs=10), "portfolio", None)]
    t = [np.array([100.0]), np.array([200.0]), np.array([400.0])]
    raw = Band(np.array([0.5]), np.array([0.75]), np.array([1.0]))
    a = [raw.lo.copy(), raw.mid.copy(), raw.hi.copy()]
    whole = times_to_target(cands, np.array([0]), t, a, raw, 0.7, _Linear(), _encode)
    # hi reaches 0.7 at k=7, mid only at k=10 (the end), lo never
    assert (t[0][0], t[1][0], t[2][0]) == pytest.approx((70.0, 200.0, 400.0)) and whole == {0: (100.0, 200.0, 400.0)}
    assert times_to_target(cands, np.array([], dtype=int), t, a, raw, 0.7, _Linear(), _encode) == {}


ROUNDS = 80


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TEST DATA: constructed trials with per-epoch curves (see _knowledge_rows) and a model."""
    return fitted_table(tmp_path_factory.mktemp("tta"), 240, seed=11, rounds=ROUNDS, portfolio=True)


def test_a_target_question_predicts_the_time_to_the_target_and_keeps_the_whole_runs(
        shipped: tuple[Path, Path]) -> None:
    rec = rc.recommend("mnist", table=shipped[0], model_dir=shipped[1], profile=CPU_PROFILE, candidates_per_framework=100,
                       constraints=rc.Constraints(min_accuracy=0.8), prefer="fast", top=10)
    read = [c for c in [*rec.choices, rec.baseline] if c is not None and c.schedule_time_s is not None]
    assert read, "no predicted candidate reached the target before the end of its run"
    for c in read:
        assert c.basis == "predicted" and c.time_s.mid <= c.schedule_time_s.mid and c.time_s.hi <= c.schedule_time_s.hi
        assert c.time_s.lo <= c.time_s.mid <= c.time_s.hi
    assert any(c.time_s.mid < c.schedule_time_s.mid for c in read)
    assert any("read from the predicted curve" in w for w in rec.warnings)
    # a time bound is not a target: its runs do not stop, and no curve is read
    bound = rc.recommend("mnist", table=shipped[0], model_dir=shipped[1], profile=CPU_PROFILE,
                         candidates_per_framework=100, constraints=rc.Constraints(max_time_s=600.0), top=5)
    assert all(c.schedule_time_s is None for c in bound.choices)
    result = CliRunner().invoke(app, ["recommend", "--table", str(shipped[0]), "--model-dir", str(shipped[1]),
                                      "--candidates", "100", "--dataset", "mnist", "--target-accuracy", "80%",
                                      "--top", "10", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert any(c["schedule_time_s"] is not None for c in [*data["choices"], data["baseline"]])


def test_on_data_the_table_does_not_hold_the_whole_schedules_time_is_kept(shipped: tuple[Path, Path]) -> None:
    """There the curve's level is not known: a time read from it would be a guess at the level."""
    rec = rc.recommend("fashion-mnist", table=shipped[0], model_dir=shipped[1], profile=CPU_PROFILE,
                       candidates_per_framework=100, constraints=rc.Constraints(min_accuracy=0.5), prefer="fast", top=5)
    assert rec.extrapolation and rec.choices
    assert all(c.schedule_time_s is None for c in [*rec.choices, rec.baseline] if c is not None)
    assert any("the whole schedule's (on data the table does not hold" in w for w in rec.warnings)
