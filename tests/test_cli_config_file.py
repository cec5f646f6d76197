"""``--config FILE`` on ``measure`` and ``tune``: a recommendation's pick runs or queues as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.cli import app
from advisor.cli._config_file import params_for_space, read_config_file
from advisor.errors import InvalidParameterError
from advisor.records import Config
from advisor.space import load_space

runner = CliRunner()


def _recommendation(tmp_path: Path) -> tuple[Path, list[dict]]:
    result = runner.invoke(app, ["recommend", "--dataset", "digits", "--cpu", "--json"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "rec.json"
    path.write_text(result.stdout)
    return path, json.loads(result.stdout)["choices"]


def test_measure_runs_a_recommendation_choice_exactly_and_options_override_it(tmp_path: Path) -> None:
    path, choices = _recommendation(tmp_path)
    n = min(range(len(choices)), key=lambda i: choices[i]["time_s"]["mid"])  # the quickest choice
    ran = runner.invoke(app, ["measure", "--config", str(path), "--choice", str(n + 1), "--json"])
    assert ran.exit_code in (0, 2), ran.output  # 2: it ran and ended otherwise (e.g. diverged)
    result = json.loads(ran.stdout)
    assert Config.from_dict(result["config"]) == Config.from_dict(choices[n]["config"])
    assert result["workload"]["dataset"] == "digits" and result["workload"]["model"] == choices[n]["model"]
    # a knob option given too wins over the file; the rest stays the file's
    ran = runner.invoke(app, ["measure", "--config", str(path), "--choice", str(n + 1), "--epochs", "1", "--json"])
    assert ran.exit_code in (0, 2), ran.output
    config = json.loads(ran.stdout)["config"]
    assert config == {**choices[n]["config"], "epochs": 1}


def test_a_plain_config_file_and_bad_files_are_one_line(tmp_path: Path) -> None:
    cfg = Config(framework="sklearn", batch_size=32, learning_rate=0.01, epochs=2, optimizer="adam")
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    (entry,) = read_config_file(tmp_path / "cfg.json")
    assert entry.config == cfg and entry.model is None
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "odd.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "refused.json").write_text(json.dumps({**cfg.to_dict(), "batch_size": 0}))
    for name, expected in [("missing.json", "no such file"), ("bad.json", "not JSON"),
                           ("odd.json", "expected a recommendation"), ("refused.json", "batch_size")]:
        result = runner.invoke(app, ["measure", "--config", str(tmp_path / name)])
        assert result.exit_code == 1, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: --config") and expected in lines[0], lines
    result = runner.invoke(app, ["measure", "--config", str(tmp_path / "cfg.json"), "--framework", "torch"])
    assert result.exit_code == 1 and "differs from the --config file's sklearn" in result.stderr
    result = runner.invoke(app, ["measure", "--config", str(tmp_path / "cfg.json"), "--choice", "2"])
    assert result.exit_code == 1 and "holds 1 config" in result.stderr


def test_params_for_space_is_the_point_that_builds_the_same_config() -> None:
    space = load_space("torch-cpu", cores=2)
    rng = __import__("numpy").random.default_rng(3)
    for _ in range(20):
        params = space.sample(rng)
        cfg = space.to_config(params)
        back, notes = params_for_space(cfg, space)
        assert space.to_config(back) == cfg and not notes
    with pytest.raises(InvalidParameterError, match="cannot be queued in space torch-cpu"):
        params_for_space(Config(framework="sklearn"), space)
    far = space.to_config(space.sample(rng)).to_dict()
    far["learning_rate"] = 50.0
    with pytest.raises(InvalidParameterError, match="learning_rate=50.0 lies outside"):
        params_for_space(Config.from_dict(far), space)


def test_tune_queues_the_file_s_config_as_its_first_trial(tmp_path: Path) -> None:
    import optuna

    space = tmp_path / "sk.yaml"
    space.write_text("framework: sklearn\ntarget: cpu\nparams:\n"
                     "  batch_size: {type: int, low: 16, high: 128, log: true}\n"
                     "  learning_rate: {type: float, low: 1.0e-3, high: 0.1, log: true}\n"
                     "  epochs: {type: int, low: 1, high: 3}\n"
                     "fixed:\n  threads: 1\n  optimizer: adam\n")
    cfg = Config(framework="sklearn", batch_size=77, learning_rate=0.0123, epochs=2, optimizer="adam",
                 weight_decay=0.001)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    db = f"sqlite:///{tmp_path}/q.db"
    result = runner.invoke(app, ["tune", "--dataset", "digits", "--model", "mlp", "--space", str(space),
                                 "--objectives", "time,accuracy", "--storage", db, "--study", "q", "--trials", "1",
                                 "--train-samples", "300", "--test-samples", "100", "--config",
                                 str(tmp_path / "cfg.json"), "--json"])
    assert result.exit_code == 0, result.output
    # weight_decay is neither searched nor fixed by this space: said, not silently dropped
    assert "the space neither searches nor fixes weight_decay" in result.stderr
    (trial,) = optuna.load_study(study_name="q", storage=db).trials
    assert trial.params == {"batch_size": 77, "learning_rate": 0.0123, "epochs": 2}
