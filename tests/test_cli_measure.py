"""``advisor measure``: input validated before any trial, results on stdout, honest exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from advisor.cli import app
from advisor.cli.measure import parse_memory
from advisor.errors import InvalidParameterError
from tests.conftest import requires

CHILD_MODULE = "advisor.harness.child"


def _no_trial_children() -> bool:
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and CHILD_MODULE in " ".join(proc.cmdline()):
                return False
        except psutil.Error:
            continue
    return True


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["measure", *args])


@pytest.mark.parametrize(("text", "mib"), [("2GB", 2048.0), ("512MB", 512.0), ("1.5GiB", 1536.0),
                                           ("300", 300.0), ("64m", 64.0), ("2048k", 2.0)])
def test_parse_memory(text: str, mib: float) -> None:
    assert parse_memory(text) == mib


@pytest.mark.parametrize("text", ["", "lots", "-1GB", "0", "2XB"])
def test_parse_memory_rejects_nonsense(text: str) -> None:
    with pytest.raises(InvalidParameterError, match="--memory-cap"):
        parse_memory(text)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--framework", "caffe"], "--framework must be one of"),
    (["--dataset", "imagenet-22k"], "imagenet-22k"),
    (["--model", "resnet9000"], "resnet9000"),
    (["--batch-size", "0"], "--batch-size must be"),
    (["--lr", "-1"], "--lr must be"),
    (["--optimizer", "rmsprop"], "--optimizer must be"),
    (["--device", "tpu"], "--device must be"),
    (["--threads", "0"], "--threads must be"),
    (["--time-limit", "0"], "--time-limit must be"),
    (["--memory-cap", "lots"], "--memory-cap"),
    (["--execution-mode", "warp"], "--execution-mode must be"),
    (["--framework", "onnxruntime", "--optimizer", "momentum"], "--optimizer (framework 'onnxruntime') must be"),
    (["--dataset", "cifar10", "--model", "lenet5", "--train-samples", "0"], "--train-samples must be"),
])
def test_bad_input_is_one_line_and_spawns_nothing(tmp_path: Path, args: list[str], fragment: str) -> None:
    workdir = tmp_path / "trials"
    result = _invoke(*args, "--workdir", str(workdir))
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.output
    assert not workdir.exists()  # validation happens before the trial folder is made
    assert _no_trial_children()


def test_model_too_big_for_the_input_is_rejected_before_spawning() -> None:
    result = _invoke("--dataset", "synthetic:2x2x1", "--model", "lenet5")
    assert result.exit_code == 1
    assert "input_shape" in result.output and "Traceback" not in result.output


def test_table_output_and_progress_for_an_ok_trial(tmp_path: Path) -> None:
    result = _invoke("--framework", "sklearn", "--dataset", "digits", "--model", "mlp", "--epochs", "2",
                     "--workdir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert ": ok" in result.output
    assert "test accuracy" in result.output
    assert "epoch 2/2" in result.output  # progress from the on_epoch callback (stderr, mixed in)
    folders = list(tmp_path.iterdir())
    assert len(folders) == 1 and (folders[0] / "trial.json").exists()
    assert _no_trial_children()


def test_a_measured_trial_joins_the_users_knowledge_base_unless_asked_not_to(tmp_path: Path) -> None:
    """What the user measures is evidence for the next answer: the trial is merged into
    $ADVISOR_HOME/knowledge.csv.gz (set per test by conftest); a file that cannot take it costs the
    record, in one line, not the measurement, and is left as it was."""
    import os

    import advisor.knowledge as kb

    path = Path(os.environ["ADVISOR_HOME"]) / "knowledge.csv.gz"
    args = ("--framework", "sklearn", "--dataset", "digits", "--model", "mlp", "--epochs", "2", "--json")
    skipped = _invoke(*args, "--no-record")
    assert skipped.exit_code == 0, skipped.output
    assert not path.exists() and "recorded" not in skipped.output
    kept = _invoke(*args)
    assert kept.exit_code == 0, kept.output
    assert f"recorded in {path}" in kept.output
    rows = kb.read(path)
    trial = json.loads(kept.stdout[kept.stdout.index("{"):])["trial_id"]
    assert list(rows["trial_id"]) == [trial] and rows["status"][0] == "ok"
    path.write_bytes(b"not a knowledge base")
    broken = _invoke(*args)
    assert broken.exit_code == 0, broken.output
    warned = [line for line in broken.output.splitlines() if line.startswith("warning: the trial was not recorded")]
    assert len(warned) == 1 and str(path) in warned[0]
    assert path.read_bytes() == b"not a knowledge base"


def test_a_trial_that_ran_but_failed_exits_2_with_its_result() -> None:
    result = CliRunner().invoke(app, [
        "measure", "--framework", "sklearn", "--dataset", "digits", "--model", "mlp", "--epochs", "2",
        "--memory-cap", "60MB", "--json",
    ])
    assert result.exit_code == 2, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "oom"
    assert "memory cap" in data["error"]
    assert _no_trial_children()


@requires("torch")
def test_torch_lenet5_on_digits_reaches_90_percent() -> None:
    result = CliRunner().invoke(app, [
        "measure", "--framework", "torch", "--dataset", "digits", "--model", "lenet5", "--epochs", "10", "--json",
    ])
    assert result.exit_code == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "ok"
    assert data["test_accuracy"] >= 0.90
    assert len(data["accuracy_curve"]) == 10
    assert data["config"]["optimizer"] == "momentum" and data["config"]["momentum"] == 0.9
    assert "epoch 10/10" in result.stderr
    assert _no_trial_children()


def test_the_command_built_for_a_config_measures_exactly_that_config() -> None:
    """knobs.measure_argv writes the command; run through the CLI, the trial's config is the same."""
    from advisor.knobs import measure_argv
    from advisor.records import Config

    config = Config(framework="sklearn", optimizer="momentum", momentum=0.8, nesterov=True, learning_rate=0.03,
                    batch_size=32, epochs=2, schedule="cosine", warmup_fraction=0.25, augment_translate=1,
                    weight_decay=1e-4, seed=7)
    argv = measure_argv(config, dataset="digits", model="mlp", train_samples=300)
    assert argv[:2] == ["advisor", "measure"]
    result = _invoke(*argv[2:], "--json")
    assert result.exit_code == 0, result.output
    measured = json.loads(result.stdout)
    assert Config.from_dict(measured["config"]) == config
    assert measured["workload"]["model"] == "mlp" and measured["train_samples"] == 300
    # Adam's command states no momentum (measure gives it none), and still measures that config
    adam = Config(framework="sklearn", optimizer="adam", learning_rate=1e-3, batch_size=64, epochs=1, seed=3)
    argv = measure_argv(adam, dataset="digits", model="mlp", train_samples=300)
    assert "--momentum" not in argv
    result = _invoke(*argv[2:], "--json")
    assert result.exit_code == 0, result.output
    assert Config.from_dict(json.loads(result.stdout)["config"]) == adam


def test_flip_is_refused_before_any_trial_on_a_dataset_it_would_mislabel() -> None:
    result = _invoke("--framework", "sklearn", "--dataset", "digits", "--augment-flip")
    assert result.exit_code == 1
    assert "augment_flip" in result.output and "'digits'" in result.output
    assert _no_trial_children()


def test_a_compiled_trial_shows_its_warm_up_apart_from_the_train_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile runs on a dummy batch before the timed epochs (benchmarks/results/compile.md:
    20-23 s on a CPU), so the train time leaves it out; the table says so and shows it, and says
    nothing of a warm-up where there was none."""
    import io

    from rich.console import Console

    import advisor.cli.measure as measure
    from advisor.records import Config
    from tests._knowledge_rows import make_result

    result = make_result(Config(framework="torch", epochs=2, compile=True), "digits")
    shown = io.StringIO()
    monkeypatch.setattr(measure, "out", Console(file=shown, width=200))
    measure._table(result)
    assert "compile warm-up" not in shown.getvalue()  # the record says nothing of one
    result.extra["compile_time_s"] = 21.5
    measure._table(result)
    line = [row for row in shown.getvalue().splitlines() if "compile warm-up" in row]
    assert len(line) == 1 and "21.50 s" in line[0] and "not in the train time" in line[0]
