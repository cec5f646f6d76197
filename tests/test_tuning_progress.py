"""Live progress of a study: every trial's last epoch is in the storage, running trials show one
row each (epoch, accuracy, elapsed), with the best finished trial and an ETA."""

from __future__ import annotations

from pathlib import Path

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
    display = _Display(10, "s")
    display(StudyProgress(study="s", n_trials=10, counts=TrialCounts(finished=3, complete=3, running=2),
                          front_size=2, hypervolume=0.5,
                          running=(RunningTrial(number=3, elapsed_s=12.0, epoch=2, epochs=5, accuracy=0.91234),
                                   RunningTrial(number=4, elapsed_s=1.0)),
                          best="trial 1: accuracy 0.95, time 3 s", eta_s=125.0))
    lines = display.rows.plain.splitlines()
    assert lines[0] == "  trial 3: epoch 2/5 · accuracy 0.9123 · 12 s"
    assert lines[1] == "  trial 4: starting · 1 s"
    assert lines[2] == "  best trial 1: accuracy 0.95, time 3 s · ETA 2.08 min"
