"""Search spaces: the built-in files, validation messages, sampling and configs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from advisor.errors import SearchSpaceError
from advisor.records import Config
from advisor.space import combined_space, list_spaces, load_space, space_from_document

EXPECTED = {"torch-cpu", "torch-gpu", "tensorflow-cpu", "tensorflow-gpu", "onnxruntime-cpu",
            "onnxruntime-gpu", "sklearn-cpu"}


def test_every_builtin_space_validates_and_samples_valid_configs() -> None:
    assert EXPECTED <= set(list_spaces())
    for name in EXPECTED:
        space = load_space(name, cores=4)
        framework, target = name.split("-")
        assert (space.framework, space.target) == (framework, target)
        rng = np.random.default_rng(0)
        for _ in range(50):
            config = space.to_config(space.sample(rng), seed=3)
            assert isinstance(config, Config) and config.framework == framework
            assert config.device == ("cuda" if target == "gpu" else "cpu")
            assert 1 <= config.threads <= 4 and config.seed == 3


def test_framework_specific_knobs() -> None:
    ort = load_space("onnxruntime-cpu")
    assert set(ort.param("optimizer").choices) == {"sgd", "adam", "adamw"}
    assert "momentum" in ort.description.lower() and "weight decay" in ort.description.lower()
    assert ort.param("weight_decay").when == (("optimizer", ("adam", "adamw")),)
    assert not {p.name for p in ort.params} & {"label_smoothing", "nesterov", "compile"}
    torch_cpu = {p.name for p in load_space("torch-cpu").params}
    assert {"schedule", "warmup_fraction", "label_smoothing", "augment_translate", "augment_flip",
            "nesterov", "channels_last", "bfloat16", "compile"} <= torch_cpu
    sk = {p.name for p in load_space("sklearn-cpu").params}
    assert not sk & {"onednn", "xla"}
    tf = {p.name for p in load_space("tensorflow-cpu").params}
    assert {"xla", "onednn"} <= tf
    tg = load_space("torch-gpu")
    assert {"mixed_precision", "cudnn_benchmark"} <= {p.name for p in tg.params}
    assert tg.fixed["device"] == "cuda"
    assert tg.param("batch_size").high > load_space("torch-cpu").param("batch_size").high


def test_placeholders_resolve_from_cores() -> None:
    assert load_space("torch-cpu", cores=6).param("threads").high == 6
    assert load_space("tensorflow-cpu", cores=6).param("inter_op_threads").high == 3
    assert load_space("tensorflow-cpu", cores=1).param("inter_op_threads").high == 1


def test_sampling_respects_conditions_log_and_step() -> None:
    doc = {
        "framework": "torch", "target": "cpu",
        "params": {
            "optimizer": {"type": "categorical", "choices": ["sgd", "momentum"]},
            "momentum": {"type": "float", "low": 0.5, "high": 0.9, "when": {"optimizer": ["momentum"]}},
            "batch_size": {"type": "int", "low": 16, "high": 4096, "log": True},
            "epochs": {"type": "int", "low": 2, "high": 10, "step": 4},
        },
    }
    space = space_from_document(doc, name="t")
    rng = np.random.default_rng(1)
    draws = [space.sample(rng) for _ in range(2000)]
    assert all(("momentum" in d) == (d["optimizer"] == "momentum") for d in draws)
    assert {d["epochs"] for d in draws} == {2, 6, 10}
    sizes = np.array([d["batch_size"] for d in draws])
    assert sizes.min() >= 16 and sizes.max() <= 4096
    # log-uniform: about half of the draws lie below the geometric mean (256), not ~6 %.
    assert 0.4 < np.mean(sizes < 256) < 0.6
    config = space.to_config({"optimizer": "sgd", "batch_size": 32, "epochs": 2})
    assert config.momentum == 0.0 and config.optimizer == "sgd"


def test_combined_space_prefixes_and_conditions() -> None:
    space = combined_space(["sklearn", "torch"], "cpu", cores=2)
    assert space.framework == "any" and space.frameworks == ("sklearn", "torch")
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(40):
        point = space.sample(rng)
        fw = point["framework"]
        assert all(k == "framework" or k.startswith(fw + ".") for k in point)
        config = space.to_config(point)
        assert config.framework == fw
        assert config.batch_size == point[f"{fw}.batch_size"]
        seen.add(fw)
    assert seen == {"sklearn", "torch"}
    momentum = space.param("torch.momentum")
    assert momentum.when == (("framework", ("torch",)), ("torch.optimizer", ("momentum",)))


# ------------------------------------------------------------------------------- error messages

GOOD = """framework: torch
target: cpu
params:
  batch_size: {type: int, low: 16, high: 512, log: true}
  learning_rate: {type: float, low: 1.0e-4, high: 0.3, log: true}
"""


def _error(tmp_path: Path, text: str, name: str = "my-space.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SearchSpaceError) as info:
        load_space(str(path), cores=2)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{name}: ")
    return message


def test_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert [p.name for p in load_space(str(path)).params] == ["batch_size", "learning_rate"]


@pytest.mark.parametrize("text, expected", [
    (GOOD + "parms: {}\n",
     "my-space.yaml: unknown top-level key 'parms'; accepted: framework, target, description, params, fixed"),
    (GOOD.replace("batch_size", "batchsize"), "my-space.yaml: params.batchsize: unknown parameter; accepted: batch_size"),
    (GOOD.replace("type: int", "type: integer"),
     "my-space.yaml: params.batch_size.type: must be one of int, float, categorical; found 'integer'"),
    (GOOD.replace("low: 16, ", ""), "my-space.yaml: params.batch_size: a numeric parameter needs 'low' and 'high'; 'low' is missing"),
    (GOOD.replace("low: 16", "low: 600"), "my-space.yaml: params.batch_size: 'low' (600) must be <= 'high' (512)"),
    (GOOD.replace("high: 512", 'high: "${gpus}"'),
     "my-space.yaml: params.batch_size.high: unknown placeholder '${gpus}'; accepted: ${cores}, ${cores_half}"),
    (GOOD.replace("low: 1.0e-4", "low: .nan"), "my-space.yaml: params.learning_rate.low: must be a finite number; found nan"),
    (GOOD.replace("high: 0.3", "high: .inf"), "my-space.yaml: params.learning_rate.high: must be a finite number; found inf"),
    (GOOD.replace("low: 1.0e-4", "low: 1e-4"), "params.learning_rate.low: must be a number; found the text '1e-4'"),
    (GOOD.replace("low: 16", "low: 0"), "my-space.yaml: params.batch_size: must lie within [1, 1e+06]; found [0, 512]"),
    (GOOD.replace("low: 1.0e-4, high: 0.3, log: true", "low: 0.0, high: 0.3, log: true"),
     "my-space.yaml: params.learning_rate: must lie within (0, 10000]; found [0, 0.3]"),
    (GOOD + "  epochs: {type: int, low: 1, high: 200000}\n", "params.epochs: must lie within [1, 100000]; found [1, 200000]"),
    (GOOD.replace("high: 512", "high: 2000000"), "params.batch_size: must lie within [1, 1e+06]"),
    (GOOD + "  weight_decay: {type: float, low: 0.0, high: 0.1, log: true}\n",
     "my-space.yaml: params.weight_decay.low: must be > 0 when 'log' is true; found 0.0"),
    (GOOD.replace("log: true}", "log: true, step: 16}", 1),
     "my-space.yaml: params.batch_size: 'step' and 'log: true' cannot be combined; drop one"),
    (GOOD + "  optimizer: {type: categorical, choices: []}\n",
     "my-space.yaml: params.optimizer.choices: must be a non-empty list; found []"),
    (GOOD + "  optimizer: {type: categorical, choices: [sgd, rmsprop]}\n",
     "my-space.yaml: params.optimizer.choices: accepted values are sgd, momentum, adam, adamw; found 'rmsprop'"),
    (GOOD + "  momentum: {type: float, low: 0.5, high: 0.9, when: {optim: [momentum]}}\n",
     "my-space.yaml: params.momentum.when: refers to 'optim', which is not a parameter defined above"),
    (GOOD + "  optimizer: {type: categorical, choices: [sgd, momentum]}\n"
            "  momentum: {type: float, low: 0.5, high: 0.9, when: {optimizer: [nesterov]}}\n",
     "my-space.yaml: params.momentum.when.optimizer: accepted values are sgd, momentum; found 'nesterov'"),
    (GOOD + "  xla: {type: categorical, choices: [true, false]}\n",
     "my-space.yaml: params.xla: applies to tensorflow only; found in a torch space"),
    (GOOD.replace("framework: torch", "framework: caffe"),
     "my-space.yaml: framework: must be one of torch, tensorflow, onnxruntime, sklearn; found 'caffe'"),
    ("!!python/object/apply:os.system ['echo hacked']\n",
     "my-space.yaml: not a plain YAML mapping: could not determine a constructor for the tag"),
    ("- just\n- a list\n", "my-space.yaml: the file must be a mapping"),
    ("framework: [\n", "my-space.yaml: not a plain YAML mapping:"),
])
def test_one_line_errors_name_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _error(tmp_path, text)


def test_python_tag_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    message = _error(tmp_path, f"framework: !!python/object/apply:os.system ['touch {marker}']\n")
    assert "tag:yaml.org,2002:python/object/apply:os.system" in message
    assert not marker.exists()


def test_too_large_and_too_deep(tmp_path: Path) -> None:
    big = GOOD + "description: '" + "x" * 1_100_000 + "'\n"
    assert "the file must be at most 1,000,000 bytes; found" in _error(tmp_path, big)
    deep = GOOD + "fixed: " + "[" * 50 + "]" * 50 + "\n"
    assert "nested deeper than 8 levels" in _error(tmp_path, deep)
    very_deep = "a: " + "[" * 200_000 + "]" * 200_000 + "\n"
    assert "my-space.yaml: " in _error(tmp_path, very_deep)
    # A "billion laughs" file stays cheap: aliases share objects and depth is memoised.
    laughs = GOOD + "description: &a [x, x]\n"
    laughs = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 7))
    assert "unknown top-level key 'a0'" in _error(tmp_path, laughs)


def test_unknown_builtin_name_lists_the_choices() -> None:
    with pytest.raises(SearchSpaceError, match="Unknown search space 'torch-tpu': choose one of .*torch-cpu"):
        load_space("torch-tpu")


def test_onnxruntime_momentum_is_refused(tmp_path: Path) -> None:
    text = ("framework: onnxruntime\ntarget: cpu\nparams:\n"
            "  optimizer: {type: categorical, choices: [sgd, momentum]}\n"
            "  momentum: {type: float, low: 0.5, high: 0.9, when: {optimizer: [momentum]}}\n")
    assert "params.optimizer: onnxruntime accepts sgd, adam, adamw only; found 'momentum'" in _error(tmp_path, text)


def test_cli_spaces_list_show_validate(tmp_path: Path) -> None:
    from advisor.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["spaces", "list"])
    assert result.exit_code == 0, result.output
    assert "onnxruntime-gpu" in result.output and "sklearn-cpu" in result.output
    result = runner.invoke(app, ["spaces", "show", "torch-cpu", "--cores", "3", "--json"])
    assert result.exit_code == 0, result.output
    assert '"high": 3' in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("low: 16", "low: 600"))
    result = runner.invoke(app, ["spaces", "validate", str(bad)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: bad.yaml: params.batch_size: 'low' (600) must be <= 'high' (512)"]
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    result = runner.invoke(app, ["spaces", "validate", str(good)])
    assert result.exit_code == 0 and "ok:" in result.output


def test_log_uniform_float_sampling_is_in_bounds() -> None:
    space = load_space("torch-cpu")
    lr = space.param("learning_rate")
    rng = np.random.default_rng(5)
    values = [lr.sample(rng) for _ in range(500)]
    assert min(values) >= 1e-4 and max(values) <= 0.3
    logs = np.log10(values)
    assert math.isclose(float(np.median(logs)), (math.log10(1e-4) + math.log10(0.3)) / 2, abs_tol=0.3)
