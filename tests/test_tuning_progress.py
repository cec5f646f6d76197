"""Live progress of a study: every trial's last epoch is in the storage, running trials show one
row each (epoch, accuracy, elapsed), with the best finished trial and an ETA."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor._tuning._read import EPOCH_ATTR, TrialCounts
from advisor._tuning._spec import RunningTrial, progress_of, read_spec
from advisor.cli.tune import _Display
from advisor.records import Workload
from advisor.tuning import StudyProgress, load_trials, run_study

from tests.test_tuning import tiny_space


def test_a_study_reports_running_trials_best_and_eta(tmp_path: Path) -> None:
    import optuna

    db = f"sqlite:///{tmp_path}/p.db"
    seen: list[StudyProgress] = []
    summary = run_study(study_name="p", workload=Workload(dataset="digits", model="mlp", train_samples=200,
                                                          test_samples=100),
                        storage=db, space=str(tiny_space(tmp_path / "sk.yaml", "sklearn", epochs=3)),
                        objectives="accuracy,time", n_trials=2, progress=seen.append)
    assert summary.counts.complete == 2 and seen
    _, trials = load_trials("p", db)
    for t in trials:  # each epoch was written as it finished: the last one stays
        live = t.user_attrs[EPOCH_ATTR]
        assert live["epoch"] == live["epochs"] == t.params["epochs"] and 0 <= live["accuracy"] <= 1
    # a trial running now (asked, with one epoch written) shows as a row; the ETA counts it
    study = optuna.load_study(study_name="p", storage=db)
    running = study.ask()
    running.set_user_attr(EPOCH_ATTR, {"epoch": 1, "epochs": 3, "accuracy": 0.5, "elapsed_s": 1.0})
    spec = read_spec(study)
    p = progress_of(study, spec)
    (row,) = p.running
    assert (row.number, row.epoch, row.epochs, row.accuracy) == (running.number, 1, 3, 0.5)
    best = max(trials, key=lambda t: t.values[0])
    assert p.best.startswith(f"trial {best.number}: accuracy {best.values[0]:.4g}")
    assert p.eta_s == 0.0  # the budget (2) is finished


def test_display_shows_one_row_per_running_trial_and_the_eta() -> None:
    display = _Display(10, "s", plain=False)
    display(StudyProgress(study="s", n_trials=10, counts=TrialCounts(finished=3, complete=3, running=2),
                          front_size=2, hypervolume=0.5,
                          running=(RunningTrial(number=3, elapsed_s=12.0, epoch=2, epochs=5, accuracy=0.91234),
                                   RunningTrial(number=4, elapsed_s=1.0)),
                          best="trial 1: accuracy 0.95, time 3 s", eta_s=125.0))
    lines = display.rows.plain.splitlines()
    assert lines[0] == "  trial 3: epoch 2/5 · accuracy 0.9123 · 12 s"
    assert lines[1] == "  trial 4: starting · 1 s"
    assert lines[2] == "  best trial 1: accuracy 0.95, time 3 s · ETA 2.08 min"


def test_progress_written_to_a_file_is_a_line_per_finished_trial(capsys: pytest.CaptureFixture[str]) -> None:
    """Not on a terminal (``advisor tune ... 2> tune.log``) a live display would show nothing until
    the end: each finished trial writes one whole line instead, and polls in between write none."""
    def at(finished: int, last: str) -> StudyProgress:
        return StudyProgress(study="s", n_trials=4, counts=TrialCounts(finished=finished, complete=finished),
                             front_size=1, hypervolume=0.25, last=last, best="trial 0: accuracy 0.9",
                             eta_s=30.0 if finished < 4 else 0.0)

    display = _Display(4, "s")  # pytest's stderr is not a terminal
    assert display.plain
    with display:
        for p in (at(0, ""), at(1, "trial 0: ok"), at(1, "trial 0: ok"), at(4, "trial 3: ok")):
            display(p)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["study s: starting",
                     "[1/4] · trial 0: ok · ok 1 · pruned 0 · failed 0 · front 1 · hypervolume 0.2500 · "
                     "best trial 0: accuracy 0.9 · ETA 30 s",
                     "[4/4] · trial 3: ok · ok 4 · pruned 0 · failed 0 · front 1 · hypervolume 0.2500 · "
                     "best trial 0: accuracy 0.9"]


def test_a_storage_with_heartbeats_opens_without_a_library_warning(tmp_path: Path) -> None:
    """Optuna marks its stale-trial retry callback experimental; every `advisor tune` printed that
    warning (two lines of a library's source) above the progress."""
    import warnings

    from advisor.tuning import open_storage

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        open_storage(f"sqlite:///{tmp_path}/h.db", heartbeat_interval=10, grace_period=20)
    assert [str(w.message) for w in caught] == []
