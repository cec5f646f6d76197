"""At 80 columns no result cuts a number or a parameter with '…' (recommend, pareto, studies list)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.cli import app
from advisor.records import Workload

from _knowledge_rows import fitted_table

runner = CliRunner()
NARROW = {"COLUMNS": "80"}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    pytest.importorskip("sklearn")
    pytest.importorskip("optuna")
    from advisor.tuning import run_study

    folder = tmp_path_factory.mktemp("narrow")
    storage = f"sqlite:///{folder}/narrow.db"
    run_study(study_name="a-rather-long-study-name-for-eighty-columns",
              workload=Workload(dataset="digits", model="mlp", train_samples=150, test_samples=60),
              storage=storage, frameworks=["sklearn"], n_trials=4, seed=1, sampler="random")
    return storage, "a-rather-long-study-name-for-eighty-columns"


@pytest.mark.parametrize("command", [["pareto"], ["studies", "list"]])
def test_study_outputs_fit_eighty_columns(tuned: tuple[str, str], command: list[str]) -> None:
    storage, study = tuned
    args = [*command, "--storage", storage] + (["--study", study] if command == ["pareto"] else [])
    result = runner.invoke(app, args, env=NARROW)
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout and study in result.stdout
    wide = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert wide.exit_code == 0 and "…" not in wide.stdout


def test_recommend_fits_eighty_columns(tmp_path: Path) -> None:
    table, model_dir = fitted_table(tmp_path, 120, seed=3, rounds=40)
    base = ["recommend", "--table", str(table), "--model-dir", str(model_dir), "--candidates", "50"]
    for extra in ([], ["--max-time", "60"], ["--gpu"]):
        result = runner.invoke(app, [*base, "--dataset", "mnist", *extra], env=NARROW)
        assert result.exit_code == 0, result.output
        assert "…" not in result.stdout, result.stdout
        assert "#1 " in result.stdout and "#dflt " in result.stdout and "MiB" in result.stdout
