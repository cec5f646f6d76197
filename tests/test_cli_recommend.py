"""The CLI of the later stages: `advisor recommend`, `advisor knowledge ...`, `advisor surrogate ...`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import advisor.knowledge as kb
from advisor import surrogate as sg
from advisor.cli import app
from advisor.cli.recommend import _UNITS_MB, _UNITS_S, parse_accuracy, parse_quantity

from _knowledge_rows import fitted_table, make_results, rows

runner = CliRunner()


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TEST DATA: a CPU-only table of constructed trials and a model fitted on it."""
    return fitted_table(tmp_path_factory.mktemp("cli"), 200, seed=21, rounds=60)


def _args(shipped: tuple[Path, Path], *extra: str) -> list[str]:
    return ["recommend", "--table", str(shipped[0]), "--model-dir", str(shipped[1]), "--candidates", "100", *extra]


def _one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_recommend_json(shipped: tuple[Path, Path]) -> None:
    result = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--top", "4", "--json"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["choices"]) == 4 and data["extrapolation"] is False
    ids = set(kb.read(shipped[0])["trial_id"])
    for choice in data["choices"]:
        assert choice["config"]["framework"] == choice["framework"]
        assert choice["time_s"]["lo"] <= choice["time_s"]["mid"] <= choice["time_s"]["hi"]
        assert {e["trial_id"] for e in choice["evidence"]} <= ids


def test_recommend_text_says_predicted_and_extrapolation(shipped: tuple[Path, Path]) -> None:
    result = runner.invoke(app, _args(shipped, "--dataset", "cifar10", "--gpu", "--gpu-model", "NVIDIA H200"))
    assert result.exit_code == 0, result.output
    assert "'pred' rows come from the surrogate" in result.stdout and "EXTRAPOLATION" in result.stdout
    assert "no measured GPU trials" in result.stdout
    # A GPU request never cites CPU trials as evidence of GPU speed.
    assert "measured nearby" not in result.stdout
    assert "no measured trial on a GPU to cite: the figures are predicted only" in result.stdout
    cpu = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--cpu"))
    assert cpu.exit_code == 0, cpu.output
    assert "measured nearby (distance " in cpu.stdout or "measured run: trial " in cpu.stdout


def test_recommend_text_says_when_the_workload_is_new(shipped: tuple[Path, Path]) -> None:
    seen = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--cpu"))
    assert seen.exit_code == 0, seen.output
    assert "New workload" not in seen.stdout
    new = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--cpu", "--train-samples", "7000"))
    assert new.exit_code == 0, new.output
    assert "New workload: the surrogate was fitted on no trial of mnist at 7,000 training samples" in new.stdout


def test_recommend_constraints_from_the_command_line(shipped: tuple[Path, Path]) -> None:
    result = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--max-memory", "0.5GB", "--json"))
    assert result.exit_code == 0, result.output
    assert all(c["memory_mb"]["mid"] <= 512 for c in json.loads(result.stdout)["choices"])
    line = _one_line_error(runner.invoke(app, _args(shipped, "--dataset", "mnist", "--min-accuracy", "99.99%")))
    assert "--min-accuracy 0.9999" in line and "best predicted accuracy" in line


@pytest.mark.parametrize("args, expected", [
    (["--dataset", "imagenet"], "Unknown dataset 'imagenet'"),
    (["--dataset", "mnist", "--max-memory", "lots"], "'--max-memory' option must be a positive number"),
    (["--dataset", "mnist", "--min-accuracy", "1.5"], "'--min-accuracy' option must be a fraction"),
    (["--dataset", "mnist", "--frameworks", "caffe"], "--frameworks must be names from"),
    (["--dataset", "mnist", "--max-time", "0.0001s"], "--max-time 0.0001s"),
])
def test_recommend_bad_input_is_one_line(shipped: tuple[Path, Path], args: list[str], expected: str) -> None:
    assert expected in _one_line_error(runner.invoke(app, _args(shipped, *args)))


def test_recommend_corrupt_model_or_empty_table(shipped: tuple[Path, Path], tmp_path: Path) -> None:
    model = tmp_path / "model"
    sg.save(sg.load(shipped[1]), model, table_path=shipped[0])
    (model / "peak_memory_mb.q90.txt").write_text("garbage")
    line = _one_line_error(runner.invoke(app, ["recommend", "--dataset", "mnist", "--table", str(shipped[0]),
                                               "--model-dir", str(model)]))
    assert "peak_memory_mb.q90.txt is corrupt" in line
    empty = tmp_path / "empty.csv.gz"
    kb.write([], empty)
    line = _one_line_error(runner.invoke(app, ["recommend", "--dataset", "mnist", "--table", str(empty)]))
    assert "no trials with status 'ok'" in line


def test_recommend_warns_about_a_different_table(shipped: tuple[Path, Path], tmp_path: Path) -> None:
    other = tmp_path / "other.csv.gz"
    kb.write(rows(30, seed=4), other)
    result = runner.invoke(app, ["recommend", "--dataset", "mnist", "--table", str(other), "--model-dir",
                                 str(shipped[1]), "--candidates", "50", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["table_mismatch"] is True
    assert "warning: The surrogate was trained on a different table" in result.stderr


def test_quantities() -> None:
    assert parse_quantity("2GB", _UNITS_MB, "--max-memory", "") == 2048
    assert parse_quantity("512 MB", _UNITS_MB, "--max-memory", "") == 512
    assert parse_quantity("300", _UNITS_MB, "--max-memory", "") == 300
    assert parse_quantity("10m", _UNITS_S, "--max-time", "") == 600
    assert parse_quantity("1.5h", _UNITS_S, "--max-time", "") == 5400
    assert parse_accuracy("99%") == pytest.approx(0.99) and parse_accuracy("0.75") == 0.75


def test_recommend_in_a_fresh_process(shipped: tuple[Path, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "advisor", "recommend", "--dataset", "nope", "--table",
                           str(shipped[0]), "--model-dir", str(shipped[1])], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("error: Unknown dataset 'nope'")
    done = subprocess.run([sys.executable, "-m", "advisor", "recommend", "--dataset", "cifar10", "--gpu", "--json",
                           "--table", str(shipped[0]), "--model-dir", str(shipped[1])],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["extrapolation"] is True


# -------------------------------------------------------------------------------- knowledge


def test_knowledge_export_merge_info(tmp_path: Path) -> None:
    import optuna
    from optuna.trial import TrialState, create_trial

    url = f"sqlite:///{tmp_path / 's.db'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="cli", storage=url)
    results = make_results(5)
    for r in results:
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0, user_attrs={kb.RESULT_ATTR: r.to_dict()}))
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=2.0))  # not an advisor trial
    out = tmp_path / "a.csv.gz"
    result = runner.invoke(app, ["knowledge", "export", "--storage", url, "--study", "cli", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"rows": 5, "skipped": 1, "unreadable": 0, "unreadable_reasons": [],
                                         "studies": ["cli"], "out": str(out)}

    # --mine: the study's trials join the user's own knowledge base, which recommend reads; twice is once
    mine = kb.user_knowledge_path()  # $ADVISOR_HOME, set per test
    for held in (0, 5):
        merged = runner.invoke(app, ["knowledge", "export", "--storage", url, "--mine", "--json"])
        assert merged.exit_code == 0, merged.output
        data = json.loads(merged.stdout)
        assert (data["rows"], data["out"], data["rows_after_merge"], data["duplicates"]) == (5, str(mine), 5, held)
    assert sorted(kb.read(mine)["trial_id"]) == sorted(r.trial_id for r in results)
    both = runner.invoke(app, ["knowledge", "export", "--storage", url, "--mine", "--out", str(out)])
    assert both.exit_code == 1 and "one of the two" in both.output

    other = tmp_path / "b.csv.gz"
    kb.write(rows(3, seed=7), other)
    result = runner.invoke(app, ["knowledge", "merge", str(out), str(other), str(out), "--out",
                                 str(tmp_path / "c.csv.gz"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows_out"] == 8

    result = runner.invoke(app, ["knowledge", "info", str(tmp_path / "c.csv.gz"), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["rows"] == 8 and sum(info["by_framework"].values()) == 8
    text = runner.invoke(app, ["knowledge", "info", str(tmp_path / "c.csv.gz")])
    assert text.exit_code == 0 and "8 trials" in text.stdout and "framework" in text.stdout


def test_knowledge_errors_are_one_line(tmp_path: Path) -> None:
    line = _one_line_error(runner.invoke(app, ["knowledge", "info", str(tmp_path / "missing.csv.gz")]))
    assert "does not exist" in line
    a = tmp_path / "a.csv.gz"
    data = rows(2)
    kb.write(data, a)
    changed = [dict(data[0], test_accuracy=0.01)]
    kb.write(changed, tmp_path / "b.csv.gz")
    line = _one_line_error(runner.invoke(app, ["knowledge", "merge", str(a), str(tmp_path / "b.csv.gz"),
                                               "--out", str(tmp_path / "c.csv.gz")]))
    assert data[0]["trial_id"] in line


# -------------------------------------------------------------------------------- surrogate


def test_surrogate_fit_and_evaluate(shipped: tuple[Path, Path], tmp_path: Path) -> None:
    result = runner.invoke(app, ["surrogate", "fit", "--table", str(shipped[0]), "--out", str(tmp_path / "m"),
                                 "--rounds", "20", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["table_sha256"] == sg.file_sha256(shipped[0])
    assert set(data["row_counts"]) == {"train_time_s", "test_accuracy", "peak_memory_mb"}
    assert sg.load(tmp_path / "m").meta["table"] == str(shipped[0])

    card = tmp_path / "MODEL_CARD.md"
    result = runner.invoke(app, ["surrogate", "evaluate", "--table", str(shipped[0]), "--rounds", "20", "--json",
                                 "--card", str(card)])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["figures"]
    assert {f["scheme"] for f in figures} == {"leave-one-dataset-out", "leave-one-train-size-out", "random-5-fold"}
    assert "## Held-out quality" in card.read_text()
    # a line on stderr as each objective and scheme is scored (a full run fits dozens of models)
    steps = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("[")]
    assert steps and steps[0].startswith("[1/") and "train_time_s, leave-one-dataset-out" in steps[0]
    total = int(steps[0].split("/")[1].split("]")[0])
    assert len(steps) == total and steps[-1].startswith(f"[{total}/{total}]")

    # --scheme runs only those asked for; a scheme that does not exist is one line
    one = runner.invoke(app, ["surrogate", "evaluate", "--table", str(shipped[0]), "--rounds", "20", "--json",
                              "--scheme", "leave-one-dataset-out"])
    assert one.exit_code == 0, one.output
    assert {f["scheme"] for f in json.loads(one.stdout)["figures"]} == {"leave-one-dataset-out"}
    assert "leave-one-datset-out" in _one_line_error(runner.invoke(
        app, ["surrogate", "evaluate", "--table", str(shipped[0]), "--scheme", "leave-one-datset-out"]))


def test_surrogate_fit_on_a_missing_table(tmp_path: Path) -> None:
    line = _one_line_error(runner.invoke(app, ["surrogate", "fit", "--table", str(tmp_path / "none.csv.gz"),
                                               "--out", str(tmp_path / "m")]))
    assert "does not exist" in line


def test_every_choice_carries_the_command_that_measures_exactly_it() -> None:
    """The shipped table and model: each choice's `command` parses back to its config, and running
    the quickest one (digits, offline) measures exactly that config."""
    import shlex

    from advisor.records import Config

    for dataset in ("mnist", "digits"):
        result = runner.invoke(app, ["recommend", "--dataset", dataset, "--cpu", "--json"])
        assert result.exit_code == 0, result.output
        choices = json.loads(result.stdout)["choices"]
        assert choices and all(c["command"].startswith("advisor measure ") for c in choices)
        for c in choices:
            argv = shlex.split(c["command"])
            assert argv[argv.index("--dataset") + 1] == dataset
            assert argv[argv.index("--framework") + 1] == c["framework"]
    quickest = min(choices, key=lambda c: c["time_s"]["mid"])
    measured = runner.invoke(app, [*shlex.split(quickest["command"])[1:], "--json"])
    assert measured.exit_code in (0, 2), measured.output  # 2: it ran and ended otherwise (e.g. diverged)
    assert Config.from_dict(json.loads(measured.stdout)["config"]) == Config.from_dict(quickest["config"])


def test_a_data_dir_holding_part_of_a_dataset_is_answered_for_what_it_holds(shipped: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    """--verify and --budget train on the files in --data-dir: where they hold fewer training images
    than the dataset's full size (the CIFAR-10 copy beside this project holds 3 of 5 batches), the
    answer is for that many, with a note; --train-samples still decides when given."""
    from advisor._datasets.sources import train_images_present

    from test_datasets import mnist_arrays, write_cifar_bin, write_mnist

    mnist = write_mnist(tmp_path / "mnist", mnist_arrays(n_train=40))
    assert train_images_present("mnist", mnist) == 40
    assert train_images_present("cifar10", write_cifar_bin(tmp_path / "cifar", n_batches=3, per_batch=20)) == 60
    result = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--cpu", "--json", "--data-dir", str(mnist)))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["workload"]["train_samples"] == 40
    assert "holds 40 of mnist's 60,000 training images: the answer is for 40" in " ".join(result.stderr.split())
    given = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--cpu", "--json", "--data-dir", str(mnist),
                                     "--train-samples", "30"))
    assert given.exit_code == 0 and json.loads(given.stdout)["workload"]["train_samples"] == 30
    assert "training images: the answer is for" not in given.stderr
    (tmp_path / "empty").mkdir()
    missing = runner.invoke(app, _args(shipped, "--dataset", "mnist", "--cpu", "--data-dir", str(tmp_path / "empty")))
    assert _one_line_error(missing).startswith("error: ") and "train-images-idx3-ubyte" in missing.stderr
