"""``advisor measure``: run one trial in a child process and show what it measured."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import err, out, print_json, user_errors
from advisor.errors import invalid_parameter
from advisor.records import FRAMEWORKS, OPTIMIZERS, ORT_EXECUTION_MODES, ORT_GRAPH_LEVELS

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
def measure_command(
    framework: Annotated[str, typer.Option(help=f"Framework: {_choices(FRAMEWORKS)} (sklearn needs no extra install).")] = "sklearn",
    dataset: Annotated[str, typer.Option(help="Dataset: a registry name (mnist, digits, synthetic:28x28x1) or a .npz path.")] = "digits",
    model: Annotated[Optional[str], typer.Option(help="Model (mlp, lenet5, cifar_quick); default suits the dataset's input shape.")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Mini-batch size.")] = 64,
    learning_rate: Annotated[Optional[float], typer.Option("--lr", "--learning-rate", help="Learning rate; default 0.05, or 0.001 with adam.")] = None,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 1,
    optimizer: Annotated[Optional[str], typer.Option(help=f"Optimizer: {_choices(OPTIMIZERS)}; default momentum (adam on onnxruntime, whose SGD has no momentum).")] = None,
    momentum: Annotated[Optional[float], typer.Option(help="Momentum; default 0.9 with --optimizer momentum, else 0.")] = None,
    weight_decay: Annotated[float, typer.Option("--weight-decay", help="L2 weight decay.")] = 0.0,
    threads: Annotated[int, typer.Option(help="Intra-op / BLAS / OpenMP threads; also the number of cores granted.")] = 1,
    inter_op_threads: Annotated[int, typer.Option("--inter-op-threads", help="Inter-op threads (torch, tensorflow, onnxruntime).")] = 1,
    onednn: Annotated[Optional[bool], typer.Option("--onednn/--no-onednn", help="oneDNN on or off (torch, tensorflow); default: the framework's.")] = None,
    xla: Annotated[Optional[bool], typer.Option("--xla/--no-xla", help="XLA JIT on or off (tensorflow).")] = None,
    execution_mode: Annotated[Optional[str], typer.Option("--execution-mode", help=f"onnxruntime execution mode: {_choices(ORT_EXECUTION_MODES)}.")] = None,
    graph_optimization: Annotated[Optional[str], typer.Option("--graph-optimization", help=f"onnxruntime graph optimisation: {_choices(ORT_GRAPH_LEVELS)}.")] = None,
    train_samples: Annotated[Optional[int], typer.Option("--train-samples", help="Stratified subset of the training set.")] = None,
    test_samples: Annotated[Optional[int], typer.Option("--test-samples", help="Stratified subset of the test set.")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Folder holding the dataset's canonical files.")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:<index>.")] = "cpu",
    mixed_precision: Annotated[bool, typer.Option("--mixed-precision", help="Mixed precision (CUDA only).")] = False,
    cudnn_benchmark: Annotated[bool, typer.Option("--cudnn-benchmark", help="cuDNN autotuning (CUDA only).")] = False,
    seed: Annotated[int, typer.Option(help="Seed for initialisation, shuffling and subsets.")] = 0,
    time_limit: Annotated[Optional[float], typer.Option("--time-limit", help="Wall-time limit of the trial in seconds.")] = None,
    memory_cap: Annotated[Optional[str], typer.Option("--memory-cap", help="Memory cap of the trial's processes, e.g. 2GB.")] = None,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Keep the trial's folder (config, log, events) here.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the full result as JSON.")] = False,
) -> None:
    """Train one configuration in a fresh process and report time, accuracy and resources.

    Exit codes: 0 when the trial ends ok; 2 when it ran but ended otherwise (failed, timeout, oom, diverged); 1 for bad input.

    Example: advisor measure --framework torch --dataset mnist --model lenet5 --batch-size 64 --lr 0.05 --epochs 3 --threads 2
    """
    from advisor import datasets, models
    from advisor.harness import Limits, run_trial
    from advisor.records import Config, EpochRecord, Workload

    # Everything is validated before a process is spawned: bad input costs no trial.
    if optimizer is None:
        optimizer = "adam" if framework == "onnxruntime" else "momentum"
    if learning_rate is None:
        learning_rate = DEFAULT_ADAM_LR if optimizer == "adam" else DEFAULT_SGD_LR
    config = Config(
        framework=framework, batch_size=batch_size, learning_rate=learning_rate, epochs=epochs,
        optimizer=optimizer,
        momentum=(DEFAULT_MOMENTUM if optimizer == "momentum" else 0.0) if momentum is None else momentum,
        weight_decay=weight_decay, threads=threads, inter_op_threads=inter_op_threads, onednn=onednn,
        xla=xla, execution_mode=execution_mode, graph_optimization=graph_optimization, device=device,
        mixed_precision=mixed_precision, cudnn_benchmark=cudnn_benchmark, seed=seed,
    )
    info = datasets.get_info(dataset)
    model_name = model or models.default_model_for(tuple(info.input_shape))
    models.param_count(models.get_model(model_name), tuple(info.input_shape), info.num_classes)
    workload = Workload(dataset=dataset, model=model_name, train_samples=train_samples,
                        test_samples=test_samples, data_dir=None if data_dir is None else str(data_dir),
                        seed=seed)
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

    err.print(f"measuring {framework} {model_name} on {info.name} ({config.epochs} epochs, "
              f"{config.threads} threads, {config.device})...", highlight=False)
    result = run_trial(workload, config, limits=limits, workdir=workdir, on_epoch=progress)
    if json_output:
        print_json(result.to_dict())
    else:
        _table(result)
    if result.status != "ok":
        raise typer.Exit(code=EXIT_NOT_OK)


def _table(result: Any) -> None:
    table = Table(title=f"trial {result.trial_id[:12]}: {result.status}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    c = result.config
    rows = [
        ("workload", f"{c.framework} {result.workload.model} on {result.dataset_name or result.workload.dataset}"
                     f" ({result.train_samples} train / {result.test_samples} test)"),
        ("config", f"batch {c.batch_size}, lr {c.learning_rate:g}, {c.optimizer}, {c.threads} threads, {c.device}"),
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
    if result.time_to_accuracy:
        rows.append(("time to accuracy", ", ".join(f"{k}: {v:.2f}s" for k, v in result.time_to_accuracy.items())))
    if result.error:
        rows.append(("error", result.error.splitlines()[0]))
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
