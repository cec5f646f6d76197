"""``advisor measure``: run one trial in a child process and show what it measured."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import count_text, err, out, print_json, user_errors
from advisor.cli._knob_options import knob_options
from advisor.errors import InvalidParameterError, invalid_parameter
from advisor.knobs import FRAMEWORKS

EXIT_NOT_OK = 2
# Defaults that train every built-in model on digits to >= 90 % in 10 epochs on every framework
# (momentum SGD at Caffe's stock momentum; Adam at its usual rate).
DEFAULT_SGD_LR = 0.05
DEFAULT_ADAM_LR = 0.001
DEFAULT_MOMENTUM = 0.9
_UNITS = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024.0}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_memory(text: str) -> float:
    """Parse ``"2GB"``, ``"512MiB"``, ``"1.5g"`` or a plain number of MiB into MiB.

    Raises:
        InvalidParameterError: When ``text`` is not a positive size.
    """
    match = _SIZE.match(text)
    value = float(match.group(1)) * _UNITS[match.group(2).lower()] if match else 0.0
    if not match or not value > 0:
        raise invalid_parameter("--memory-cap", "advisor measure", "a size such as 512MB or 2GB", text)
    return value


def _choices(values: tuple[str, ...]) -> str:
    return "|".join(values)


def _fmt(value: Any, spec: str = ".4g", unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:{spec}}{unit}"


@app.command("measure")
@user_errors
@knob_options(defaults={
    "optimizer": "momentum (adam on onnxruntime)", "learning_rate": f"{DEFAULT_SGD_LR}, or {DEFAULT_ADAM_LR} with adam/adamw",
    "momentum": f"{DEFAULT_MOMENTUM} with optimizer momentum"})
def measure_command(
    framework: Annotated[Optional[str], typer.Option(help=f"Framework: {_choices(FRAMEWORKS)} (sklearn needs no extra install). Default: the --config file's, else sklearn.")] = None,
    dataset: Annotated[Optional[str], typer.Option(help="Dataset: a registry name (mnist, fashion-mnist, cifar10, digits, synthetic:28x28x1) or a .npz path. Default: the --config file's, else digits.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model (mlp, lenet5, cifar_quick, bn_cnn, resnet9_w16, ...); default: the --config file's, else one that suits the dataset's input shape.")] = None,
    config_file: Annotated[Optional[Path], typer.Option("--config", help="Run a config as it is: a recommendation (advisor recommend --json > rec.json), a choice, a trial result or a config JSON. Knob options given too override its values.")] = None,
    choice: Annotated[int, typer.Option("--choice", min=1, help="Which choice of a recommendation file to run (1 = the best).")] = 1,
    train_samples: Annotated[Optional[int], typer.Option("--train-samples", help="Stratified subset of the training set.")] = None,
    test_samples: Annotated[Optional[int], typer.Option("--test-samples", help="Stratified subset of the test set.")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Folder holding the dataset's canonical files.")] = None,
    time_limit: Annotated[Optional[float], typer.Option("--time-limit", help="Wall-time limit of the trial in seconds.")] = None,
    memory_cap: Annotated[Optional[str], typer.Option("--memory-cap", help="Memory cap of the trial's processes, e.g. 2GB.")] = None,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Keep the trial's folder (config, log, events) here.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the full result as JSON.")] = False,
    record: Annotated[bool, typer.Option("--record/--no-record", help="Add the trial to your knowledge base ($ADVISOR_HOME/knowledge.csv.gz), where advisor recommend reads your runs of a workload on this machine as measured evidence.")] = True,
    *,
    knobs: dict[str, Any],
) -> None:
    """Train one configuration in a fresh process and report time, accuracy and resources.

    Exit codes: 0 when the trial ends ok; 2 when it ran but ended otherwise (failed, timeout, oom, diverged); 1 for bad input.

    Every knob of advisor.knobs is an option; those not given keep their defaults.

    Example: advisor measure --framework torch --dataset mnist --data-dir ../shared/datasets/mnist --model bn_cnn --optimizer momentum --nesterov --lr 0.2 --schedule onecycle --warmup 0.2 --batch-size 256 --epochs 2 --threads 2

    Example: advisor recommend --dataset mnist --cpu --json > rec.json && advisor measure --config rec.json --choice 1 --data-dir ../shared/datasets/mnist
    """
    from advisor import datasets, models
    from advisor.cli._common import check_data_dir
    from advisor.harness import Limits, run_trial
    from advisor.records import Config, EpochRecord, Workload

    # Everything is validated before a process is spawned: bad input costs no trial.
    if config_file is not None:
        from advisor.cli._config_file import read_config_file

        entries = read_config_file(config_file)
        if choice > len(entries):
            raise InvalidParameterError(f"--choice {choice}: {config_file} holds {len(entries)} config(s)")
        picked = entries[choice - 1]
        recorded = picked.config.to_dict()
        if framework is not None and framework != recorded["framework"]:
            raise InvalidParameterError(f"--framework {framework} differs from the --config file's "
                                        f"{recorded['framework']} (its knobs are that framework's)")
        framework = recorded.pop("framework")
        knobs = {**recorded, **knobs}  # the options given on the command line win
        dataset = dataset or picked.dataset
        model = model or picked.model
    framework = framework or "sklearn"
    dataset = dataset or "digits"
    optimizer = knobs.setdefault("optimizer", "adam" if framework == "onnxruntime" else "momentum")
    knobs.setdefault("learning_rate", DEFAULT_ADAM_LR if optimizer in ("adam", "adamw") else DEFAULT_SGD_LR)
    knobs.setdefault("momentum", DEFAULT_MOMENTUM if optimizer == "momentum" else 0.0)
    config = Config(framework=framework, **knobs)
    info = datasets.get_info(dataset)
    datasets.check_flip(info, config.augment_flip)
    model_name = model or models.default_model_for(tuple(info.input_shape))
    models.param_count(models.get_model(model_name), tuple(info.input_shape), info.num_classes)
    if data_dir is not None:  # the files are checked here, before a child is spawned
        check_data_dir(info.name, data_dir)
    workload = Workload(dataset=dataset, model=model_name, train_samples=train_samples,
                        test_samples=test_samples, data_dir=None if data_dir is None else str(data_dir),
                        seed=config.seed)
    limits = Limits(wall_time_s=time_limit, memory_mb=None if memory_cap is None else parse_memory(memory_cap))
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)

    def progress(record: EpochRecord) -> bool:
        err.print(
            f"epoch {record.epoch}/{config.epochs}  loss {_fmt(record.loss)}  "
            f"test accuracy {_fmt(record.test_accuracy)}  train {record.train_time_s:.2f}s",
            highlight=False,
        )
        return True

    length = (f"up to {count_text(config.epochs, 'epoch')} in {config.time_budget_s:g} s of training"
              if config.time_budget_s else count_text(config.epochs, "epoch"))
    if config.stop_at_accuracy:
        length += f", stopping at test accuracy {config.stop_at_accuracy:g}"
    err.print(f"measuring {framework} {model_name} on {info.name} ({length}, "
              f"{count_text(config.threads, 'thread')}, {config.device})...", highlight=False)
    result = run_trial(workload, config, limits=limits, workdir=workdir, on_epoch=progress)
    if json_output:
        print_json(result.to_dict())
    else:
        _table(result)
    if record:
        _record(result)
    if result.status != "ok":
        raise typer.Exit(code=EXIT_NOT_OK)


def _record(result: Any) -> None:
    """Merge the trial into the user's knowledge base; a file that cannot be read or written costs
    the record, not the measurement (printed already), and is left as it was."""
    from advisor import hardware, knowledge

    path = knowledge.user_knowledge_path()
    try:
        knowledge.append_to_user_knowledge([result], hardware=hardware.load_cached(), path=path)
    except Exception as exc:  # noqa: BLE001 - any reason the file could not take it: said in one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        err.print(f"warning: the trial was not recorded in {path}: {reason}", highlight=False)
        return
    err.print(f"recorded in {path}: advisor recommend counts it as your own run (--no-record leaves a trial out)",
              highlight=False)


def _table(result: Any) -> None:
    table = Table(title=f"trial {result.trial_id[:12]}: {result.status}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    c = result.config
    rows = [
        ("workload", f"{c.framework} {result.workload.model} on {result.dataset_name or result.workload.dataset}"
                     f" ({result.train_samples} train / {result.test_samples} test)"),
        ("config", f"batch {c.batch_size}, lr {c.learning_rate:g}, {c.optimizer}, {count_text(c.threads, 'thread')}, {c.device}"),
        ("epochs", f"{result.epochs_completed}/{c.epochs}"),
        ("test accuracy", f"{_fmt(result.test_accuracy)} (best {_fmt(result.best_accuracy)})"),
        ("final loss", _fmt(result.final_loss)),
        ("train time", _fmt(result.train_time_s, ".3f", " s")),
        ("eval time", _fmt(result.eval_time_s, ".3f", " s")),
        ("inference", _fmt(result.inference_throughput, ".0f", " samples/s")),
        ("import / data load", f"{_fmt(result.import_time_s, '.2f', ' s')} / {_fmt(result.data_load_time_s, '.2f', ' s')}"),
        ("wall time", _fmt(result.wall_time_s, ".2f", " s")),
        ("peak memory", _fmt(result.peak_memory_mb, ".0f", " MiB")),
        ("CPU", f"{_fmt(result.cpu_utilization, '.2f')} busy cores of {len(result.cores_granted)} granted"
                + ("  [contended]" if result.contended else "")),
    ]
    if result.gpu_peak_memory_mb is not None:
        rows.append(("GPU peak memory", _fmt(result.gpu_peak_memory_mb, ".0f", " MiB")))
    warm_up = result.extra.get("compile_time_s")
    if isinstance(warm_up, (int, float)):  # torch.compile ran on a dummy batch before the timed epochs
        rows.append(("compile warm-up", f"{warm_up:.2f} s, before the first epoch: not in the train time"))
    if result.time_to_accuracy:
        rows.append(("time to accuracy", ", ".join(f"{k}: {v:.2f}s" for k, v in result.time_to_accuracy.items())))
    if result.error:
        rows.append(("error", result.error.splitlines()[0]))
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
