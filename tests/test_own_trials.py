"""The user's own knowledge base as evidence: what --verify and --budget measured on the user's data
answers the next question as measured, and leaves questions it does not answer as they were."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import advisor.knowledge as kb
from advisor import recommend as rc
from advisor._recommend._baseline import is_obvious_default, obvious_default, with_own_trials
from advisor.cli import app
from advisor.records import Config

from _knowledge_rows import CPU_PROFILE, fitted_table, make_result

runner = CliRunner()


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TEST DATA: constructed trials (see _knowledge_rows) and a model with its portfolio."""
    return fitted_table(tmp_path_factory.mktemp("own"), 240, seed=5, rounds=60, portfolio=True)


@pytest.fixture()
def npz(tmp_path: Path) -> str:
    """A user's own dataset: MNIST-shaped images no trial of the table ran on."""
    rng = np.random.default_rng(0)
    path = tmp_path / "mine.npz"
    np.savez(path, x_train=rng.integers(0, 255, (600, 28, 28, 1), dtype=np.uint8), y_train=rng.integers(0, 10, 600),
             x_test=rng.integers(0, 255, (200, 28, 28, 1), dtype=np.uint8), y_test=rng.integers(0, 10, 200))
    return rc.describe_workload(str(path)).dataset


def _run(cfg: Config, dataset: str, trial_id: str, *, seconds: float, accuracy: float,
         model: str = "lenet5") -> dict[str, Any]:
    """A row as a run of ``cfg`` on the user's ``dataset`` (this profile, 600 training images) records it."""
    row = kb.row_from_result(make_result(cfg, "mnist"), CPU_PROFILE)
    row.update(trial_id=trial_id, dataset_name=dataset, train_samples=600, test_samples=200, model=model,
               train_time_s=seconds, test_accuracy=accuracy)
    return row


def _rec(shipped: tuple[Path, Path], dataset: str, **kwargs: Any) -> rc.Recommendation:
    return rc.recommend(dataset, table=shipped[0], model_dir=shipped[1], profile=CPU_PROFILE,
                        candidates_per_framework=100, cores=1, **kwargs)


def _mine(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "home" / "knowledge.csv.gz"
    path.parent.mkdir(exist_ok=True)
    kb.write(rows, path)
    return path


def test_own_rows_of_the_dataset_join_the_table_once_and_an_unreadable_file_is_a_line(
        shipped: tuple[Path, Path], npz: str, tmp_path: Path) -> None:
    table = kb.read(shipped[0])
    workload = rc.describe_workload(npz)
    assert with_own_trials(table, tmp_path / "absent.csv.gz", workload) == (table, frozenset(), None)
    cfg = Config.from_dict({"framework": "torch", "epochs": 2, "threads": 1})
    other = _run(cfg, "digits", "theirs-1", seconds=1.0, accuracy=0.9)
    known = {**table.rows[0]}  # a run the table holds already (a user who merged it into theirs)
    path = _mine(tmp_path, [_run(cfg, npz, "mine-1", seconds=5.0, accuracy=0.8), other, known])
    joined, ids, problem = with_own_trials(table, path, workload)
    assert problem is None and ids == frozenset({"mine-1"})
    assert len(joined) == len(table) + 1 and joined["trial_id"][-1] == "mine-1"
    assert len(table) == len(kb.read(shipped[0]))  # the table itself is not changed
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(b"not a gzip file")
    same, ids, problem = with_own_trials(table, broken, workload)
    assert same is table and not ids
    assert problem is not None and str(broken) in problem and "\n" not in problem


def test_a_run_of_the_users_that_answers_the_question_is_the_answer_with_the_default_measured(
        shipped: tuple[Path, Path], npz: str, tmp_path: Path) -> None:
    ask = rc.Constraints(max_time_s=60)
    before = _rec(shipped, npz, constraints=ask, top=3)
    assert all(c.basis == "predicted" for c in before.choices) and not before.own_trials
    target = rc.resolve_target("cpu", cores=1, profile=CPU_PROFILE)
    theirs = dataclasses.replace(Config.from_dict(before.choices[-1].config), time_budget_s=60.0)
    default = dataclasses.replace(obvious_default("torch", target, 20), time_budget_s=60.0)
    assert is_obvious_default(default, target) and not is_obvious_default(theirs, target)
    path = _mine(tmp_path, [_run(theirs, npz, "mine-pick", seconds=58.0, accuracy=0.97),
                            _run(default, npz, "mine-default", seconds=57.0, accuracy=0.61)])
    after = _rec(shipped, npz, constraints=ask, top=3, own_table=path)
    first = after.choices[0]
    assert first.basis == "measured" and first.accuracy.mid == pytest.approx(0.97)
    assert Config.from_dict(first.config) == theirs
    assert [e.trial_id for e in first.evidence] == ["mine-pick"]
    assert after.baseline is not None and after.baseline.basis == "measured"
    assert after.baseline.accuracy.mid == pytest.approx(0.61)
    assert set(after.own_trials) == {"mine-pick", "mine-default"}
    assert any("2 of your own runs" in w and str(path) in w for w in after.warnings)
    assert any("your own 2 runs of it are the evidence cited" in r for r in after.reasons)
    # Asked for a GPU, the same CPU runs lend only their accuracy, and the warning says so.
    gpu = _rec(shipped, npz, constraints=ask, top=3, own_table=path, device_kind="gpu")
    note = [w for w in gpu.warnings if "of your own runs" in w]
    assert len(note) == 1 and "measured accuracy" in note[0] and "measured values" not in note[0]
    # The same file left out: the answer of the table alone.
    again = _rec(shipped, npz, constraints=ask, top=3)
    assert [c.config for c in again.choices] == [c.config for c in before.choices]


def test_own_runs_that_do_not_answer_the_question_leave_the_answer_as_it_was(
        shipped: tuple[Path, Path], npz: str, tmp_path: Path) -> None:
    ask = rc.Constraints(max_time_s=15)  # the runs below took about a minute
    before = _rec(shipped, npz, constraints=ask, top=3)
    target = rc.resolve_target("cpu", cores=1, profile=CPU_PROFILE)
    slow = dataclasses.replace(obvious_default("torch", target, 20), time_budget_s=60.0)
    path = _mine(tmp_path, [_run(slow, npz, "mine-slow", seconds=58.0, accuracy=0.99)])
    after = _rec(shipped, npz, constraints=ask, top=3, own_table=path)
    assert [(c.config, c.source) for c in after.choices] == [(c.config, c.source) for c in before.choices]
    assert after.own_trials == ("mine-slow",)  # a candidate, as measured, that does not meet the bound


def test_a_short_run_of_the_users_stands_beside_the_answer_to_a_longer_bound(
        shipped: tuple[Path, Path], npz: str, tmp_path: Path) -> None:
    """A rung of the closed loop (a few epochs, a fraction of the bound) is evidence of a short run:
    it is a candidate on its measurement, the trusted recipes keep their medians, and the default's
    row is still the default run as the question runs it, not the cut."""
    ask = rc.Constraints(max_time_s=60)
    before = _rec(shipped, npz, constraints=ask, top=3)
    target = rc.resolve_target("cpu", cores=1, profile=CPU_PROFILE)
    pick = Config.from_dict(before.choices[0].config)
    cut = dataclasses.replace(pick, epochs=1)
    short_default = dataclasses.replace(obvious_default("torch", target, 2), time_budget_s=60.0)
    below = before.choices[0].accuracy.mid - 0.05  # the cut learnt less than the full run is predicted to
    path = _mine(tmp_path, [_run(cut, npz, "mine-cut", seconds=12.0, accuracy=below),
                            _run(short_default, npz, "mine-short-default", seconds=10.0, accuracy=below)])
    after = _rec(shipped, npz, constraints=ask, top=3, own_table=path)
    assert after.choices[0].config == before.choices[0].config and after.choices[0].basis == "predicted"
    assert set(after.own_trials) == {"mine-cut", "mine-short-default"}
    assert after.baseline is not None and before.baseline is not None
    assert after.baseline.basis == "predicted" and after.baseline.config == before.baseline.config


def test_a_run_of_the_users_that_stopped_short_of_a_target_is_no_shot_at_it(
        shipped: tuple[Path, Path], npz: str, tmp_path: Path) -> None:
    """A rung of the closed loop on an accuracy target (the default cut to 2 epochs, which ended
    below the target) was measured not to get there: it is not offered first as a best shot at the
    target (its measured band beat every predicted one there), nor does it stand for the default,
    which stays the run the question runs (before this: the cut run was #1 and the default's row)."""
    ask = rc.Constraints(min_accuracy=0.5)
    before = _rec(shipped, npz, constraints=ask, top=3)
    assert before.ranking.startswith("best shots") and before.baseline is not None
    target = rc.resolve_target("cpu", cores=1, profile=CPU_PROFILE)
    cut = dataclasses.replace(obvious_default("torch", target, 2), stop_at_accuracy=0.5)
    path = _mine(tmp_path, [_run(cut, npz, "mine-cut", seconds=3.0, accuracy=0.4)])
    after = _rec(shipped, npz, constraints=ask, top=3, own_table=path)
    assert after.own_trials == ("mine-cut",)
    assert [(c.config, c.source) for c in after.choices] == [(c.config, c.source) for c in before.choices]
    assert after.baseline is not None and after.baseline.basis == "predicted"
    assert after.baseline.config == before.baseline.config
    # a run of the user's that reached the target is evidence of it, and answers as measured
    reached = dataclasses.replace(obvious_default("torch", target, 3), stop_at_accuracy=0.5)
    path = _mine(tmp_path, [_run(reached, npz, "mine-reached", seconds=4.0, accuracy=0.52)])
    got = _rec(shipped, npz, constraints=ask, top=3, own_table=path)
    assert got.choices[0].basis == "measured" and got.baseline is not None and got.baseline.basis == "measured"


def test_the_cli_reads_your_knowledge_base_unless_told_not_to(shipped: tuple[Path, Path], npz: str) -> None:
    here = rc.resolve_target("cpu", cores=1)  # this machine, as the CLI sees it
    own = kb.user_knowledge_path()  # under this test's ADVISOR_HOME (conftest)
    missing = runner.invoke(app, ["knowledge", "info"])
    assert missing.exit_code == 1 and str(own) in missing.output and "--verify" in missing.output
    default = dataclasses.replace(obvious_default("torch", here, 20), time_budget_s=60.0)
    row = _run(default, npz, "mine-default", seconds=57.0, accuracy=0.999)
    row["hardware_id"] = here.hardware_id
    own.parent.mkdir(parents=True, exist_ok=True)
    kb.write([row], own)
    argv = ["recommend", "--dataset", npz, "--cpu", "--cores", "1", "--max-time", "60", "--table", str(shipped[0]),
            "--model-dir", str(shipped[1]), "--candidates", "100", "--json"]
    own.unlink()
    nothing_yet = runner.invoke(app, argv)  # no knowledge base of one's own yet: none was read
    assert nothing_yet.exit_code == 0 and json.loads(nothing_yet.stdout)["own_table"] is None
    kb.write([row], own)
    with_own = runner.invoke(app, argv)
    assert with_own.exit_code == 0, with_own.output
    data = json.loads(with_own.stdout)
    assert data["own_table"] == str(own) and data["own_trials"] == ["mine-default"]
    assert data["choices"][0]["basis"] == "measured" and data["baseline"]["basis"] == "measured"
    without = runner.invoke(app, argv + ["--no-own-trials"])
    assert without.exit_code == 0, without.output
    data = json.loads(without.stdout)
    assert data["own_table"] is None and not data["own_trials"] and data["choices"][0]["basis"] == "predicted"
    info = runner.invoke(app, ["knowledge", "info", "--json"])
    assert info.exit_code == 0 and json.loads(info.stdout)["rows"] == 1
    with gzip.open(own, "rt") as handle:  # answering did not write to it
        assert handle.read().count("mine-default") == 1


def test_a_recipe_measured_here_is_not_predicted_better_at_a_shorter_length() -> None:
    """The learning-curve prior's mirror on evidence: shorter unmeasured copies of a measured recipe
    are capped at what its measured run reached; longer ones and other recipes are left alone."""
    from advisor._recommend._baseline import Measured
    from advisor._recommend._candidates import Candidate
    from advisor._recommend._rules import capped_by_measured

    recipe = Config.from_dict({"framework": "torch", "optimizer": "momentum", "momentum": 0.9, "learning_rate": 0.1, "epochs": 30,
                               "threads": 1, "schedule": "cosine"})
    other = Config.from_dict({"framework": "torch", "optimizer": "adam", "learning_rate": 0.001, "epochs": 10,
                              "threads": 1})
    got = Measured(recipe, "bn_cnn_w8", 1, (20.0, 22.0, 25.0), (0.855, 0.864, 0.872), (300.0, 310.0, 320.0), ("m",))
    cands = [Candidate(recipe, "measured", None, model="bn_cnn_w8", measured=got),
             Candidate(dataclasses.replace(recipe, epochs=25), "portfolio", None, model="bn_cnn_w8"),
             Candidate(dataclasses.replace(recipe, epochs=60), "portfolio", None, model="bn_cnn_w8"),
             Candidate(dataclasses.replace(recipe, epochs=25), "portfolio", None, model="bn_cnn_w32"),
             Candidate(other, "portfolio", None, model="bn_cnn_w8")]
    a = [np.array([0.855, 0.80, 0.85, 0.80, 0.80]), np.array([0.864, 0.90, 0.95, 0.90, 0.90]),
         np.array([0.872, 0.97, 0.99, 0.97, 0.97])]
    capped_by_measured(cands, a)
    assert [round(float(band[1]), 3) for band in a] == [0.80, 0.872, 0.872]  # 25 epochs: capped at 0.872
    assert [float(a[k][2]) for k in range(3)] == [0.85, 0.95, 0.99]  # 60 epochs: longer, not capped
    assert [float(a[k][3]) for k in range(3)] == [0.80, 0.90, 0.97]  # another model: another recipe
    assert [float(a[k][4]) for k in range(3)] == [0.80, 0.90, 0.97]


def test_on_a_target_runs_of_a_recipe_with_and_without_a_stop_are_one_measurement() -> None:
    """A run's stop is the question's: a run stopped at a higher target passed this one on its way
    and is a repeat of the recipe's run without a stop; one stopped lower ended too soon to count."""
    from advisor._recommend._baseline import measured_configs

    from _knowledge_rows import rows

    base = rows(1, seed=3)[0]
    runs = []
    for n, (stop, curve) in enumerate(((0.0, [0.5, 0.86, 0.9, 0.93]), (0.92, [0.6, 0.88, 0.93]), (0.7, [0.5, 0.75]))):
        runs.append({**base, "cfg_seed": n, "trial_id": f"t{n}", "status": "ok", "accuracy_curve": curve,
                     "epoch_times": [2.0] * len(curve), "train_time_s": 2.0 * len(curve), "test_accuracy": curve[-1],
                     "cfg_epochs": 4, "cfg_stop_at_accuracy": stop, "epochs_completed": len(curve)})
    table = kb.Table.from_rows(runs)
    got = measured_configs(table, [0, 1, 2], models={base["model"]}, stop_at=0.88)
    assert len(got) == 1 and got[0].repeats == 2 and set(got[0].trial_ids) == {"t0", "t1"}
    assert got[0].config.stop_at_accuracy == 0.0 and got[0].time_s[1] == pytest.approx(5.0)  # 6 s and 4 s
    assert len(measured_configs(table, [0, 1, 2], models={base["model"]})) == 3  # a time bound: three recipes


def test_a_robust_recipe_run_here_is_judged_by_its_run_not_by_its_record_elsewhere(
        shipped: tuple[Path, Path], npz: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The portfolio's robust recipe stands in for evidence on data the table does not hold; once the
    user has run it there, that run decides, and the recipe is no longer the reference."""
    from advisor._recommend._candidates import Candidate, family_key

    ask = rc.Constraints(max_time_s=60)
    pick = _rec(shipped, npz, constraints=ask, top=1).choices[0]
    assert pick.source == "portfolio"
    grid = dataclasses.replace(Config.from_dict(pick.config), time_budget_s=0.0)  # the recipe's epoch-grid copies
    family = family_key(Candidate(grid, "portfolio", None, model=pick.model))
    record = {"budget_s": 60.0, "workloads": ["a", "b"], "wins": 2, "ties": 0, "losses": 0}
    offered = rc.portfolio_candidates

    def with_record(*args: Any, **kwargs: Any) -> list[Candidate]:  # that recipe alone beat the default elsewhere
        return [dataclasses.replace(c, transfer=record) if family_key(c) == family else c
                for c in offered(*args, **kwargs)]

    monkeypatch.setattr(rc, "portfolio_candidates", with_record)
    monkeypatch.setattr(rc, "transfer_probability", lambda r: 0.9 if r else None)
    before = _rec(shipped, npz, constraints=ask, top=3)
    assert "first the portfolio's robust recipe" in before.ranking
    first = Config.from_dict(before.choices[0].config)
    # a rung of the loop cut shorter than the copy offered says less than the record elsewhere
    cut = dataclasses.replace(first, epochs=1)
    path = _mine(tmp_path, [_run(cut, npz, "mine-cut", seconds=5.0, accuracy=0.01, model=pick.model)])
    after_cut = _rec(shipped, npz, constraints=ask, top=3, own_table=path)
    assert after_cut.own_trials == ("mine-cut",)
    assert "first the portfolio's robust recipe" in after_cut.ranking
    # a run as long as the copy offered decides
    path = _mine(tmp_path, [_run(first, npz, "mine-robust", seconds=5.0, accuracy=0.01, model=pick.model)])
    after = _rec(shipped, npz, constraints=ask, top=3, own_table=path)
    assert after.own_trials == ("mine-robust",)
    assert "first the portfolio's robust recipe" not in after.ranking


def test_a_users_npz_is_known_by_its_content_not_the_path_it_was_given_by(
        shipped: tuple[Path, Path], npz: str, tmp_path: Path) -> None:
    """A run of the same file under another path counts (renamed to the path asked); a run of another
    file of the same name, or of an older version of this one, does not."""
    from advisor._datasets.sources import npz_digest, npz_variant

    table = kb.read(shipped[0])
    workload = rc.describe_workload(npz)
    cfg = Config.from_dict({"framework": "torch", "epochs": 2, "threads": 1})
    moved = {**_run(cfg, "elsewhere/mine.npz", "moved", seconds=5.0, accuracy=0.8),
             "dataset_variant": npz_variant(npz_digest(npz))}
    other = {**_run(cfg, npz, "other-file", seconds=5.0, accuracy=0.8), "dataset_variant": npz_variant("0" * 64)}
    path = _mine(tmp_path, [moved, other])
    joined, ids, problem = with_own_trials(table, path, workload)
    assert problem is None and ids == frozenset({"moved"})
    assert joined["dataset_name"][-1] == npz  # the rows take the name asked
