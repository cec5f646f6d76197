"""``advisor datasets``: list, inspect and download datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import err, out, print_json, user_errors

datasets_app = typer.Typer(
    help=(
        "List, inspect and download datasets.\n\n"
        "Example: advisor datasets info cifar10 --data-dir ../shared/datasets/cifar-10-batches-bin"
    ),
    no_args_is_help=True,
)
app.add_typer(datasets_app, name="datasets")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _shape(shape: Any) -> str:
    return "x".join(str(d) for d in shape)


@datasets_app.command("list")
@user_errors
def list_command(as_json: JsonOption = False) -> None:
    """List the built-in datasets with their meta-features.

    Example: advisor datasets list --json
    """
    from advisor.datasets import list_datasets

    infos = list_datasets()
    if as_json:
        print_json([i.to_dict() for i in infos])
        return
    table = Table(title="Datasets (also: synthetic:HxWxC, or a path to an .npz file)")
    for column in ("name", "shape", "classes", "train", "test", "source"):
        table.add_column(column, justify="right" if column in ("classes", "train", "test") else "left")
    for i in infos:
        name = i.name + (" (timing only)" if i.synthetic else "")
        table.add_row(name, _shape(i.input_shape), str(i.num_classes), f"{i.train_size:,}", f"{i.test_size:,}",
                      i.source)
    out.print(table)


@datasets_app.command("info")
@user_errors
def info_command(
    name: Annotated[str, typer.Argument(help="A dataset name, synthetic:HxWxC, or a path to an .npz file.")],
    data_dir: Annotated[Optional[Path], typer.Option(
        "--data-dir", help="Folder holding the canonical files: also report what is there and its variant.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show a dataset's meta-features; with --data-dir, also the files present and their variant.

    Example: advisor datasets info mnist --data-dir ../shared/datasets/mnist
    """
    from advisor.datasets import get_info, inspect_source

    info = get_info(name)
    report = None
    if data_dir is not None and not info.synthetic:
        report = inspect_source(name, data_dir=str(data_dir))
    if as_json:
        data: dict[str, Any] = info.to_dict()
        if report is not None:
            data["present"] = report.to_dict()
        print_json(data)
        return
    table = Table(show_header=False, title=f"Dataset {info.name}")
    table.add_column("field", style="bold")
    table.add_column("value")
    rows = [("input shape", _shape(info.input_shape)), ("classes", str(info.num_classes)),
            ("train samples", f"{info.train_size:,}"), ("test samples", f"{info.test_size:,}"),
            ("synthetic", "yes (timing only: accuracy has no meaning)" if info.synthetic else "no"),
            ("source", info.source), ("description", info.description),
            ("landmark", "not measured" if info.landmark is None else f"{info.landmark:.4f} (landmark classifier accuracy)")]
    if report is not None:
        rows += [("folder", report.folder), ("format", report.format),
                 ("files", ", ".join(f"{n} ({b:,} B)" for n, b in report.files) or "-"),
                 ("present", f"{report.train_size:,} train / {report.test_size:,} test"),
                 ("variant", report.variant), ("fingerprint", report.fingerprint)]
        rows += [("note", note) for note in report.notes]
    for row in rows:
        table.add_row(*row)
    out.print(table)


@datasets_app.command("landmark")
@user_errors
def landmark_command(
    name: Annotated[str, typer.Argument(help="A dataset name or a path to an .npz file.")],
    data_dir: Annotated[Optional[Path], typer.Option(
        "--data-dir", help="Folder holding the canonical files (default: the cache; nothing is downloaded).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Measure a dataset's landmark: the test accuracy of a fixed cheap classifier (ridge on random conv features), its difficulty score.

    The surrogate predicts accuracy relative to it. Registry datasets carry a recorded value; this
    measures it again from the files.

    Example: advisor datasets landmark cifar10 --data-dir ../shared/datasets/cifar-10-batches-bin
    """
    from advisor._datasets.landmark import landmark_score, landmark_subset
    from advisor.datasets import get_info
    from advisor.errors import DatasetError

    info = get_info(name)
    if info.synthetic:
        raise DatasetError(f"{info.name} is random data: it has no landmark (accuracy has no meaning on it).")
    score = landmark_score(name, data_dir=None if data_dir is None else str(data_dir))
    if as_json:
        n_train, n_test = landmark_subset(info)
        print_json({"dataset": info.name, "landmark": score, "recorded": info.landmark,
                    "train_samples": n_train, "test_samples": n_test})
        return
    recorded = "" if info.landmark is None else f" (recorded: {info.landmark:.4f})"
    out.print(f"{info.name}: landmark {score:.4f}{recorded}")


@datasets_app.command("download")
@user_errors
def download_command(
    name: Annotated[str, typer.Argument(help="mnist, fashion-mnist or cifar10.")],
    cache_dir: Annotated[Optional[Path], typer.Option(
        "--cache-dir", help="Cache folder (default: $ADVISOR_DATA or the user cache directory).")] = None,
    mirror: Annotated[Optional[str], typer.Option(
        "--mirror", help="Base URL of a mirror that serves the same file names.")] = None,
) -> None:
    """Download a dataset's canonical files into the cache and verify their SHA-256.

    Example: advisor datasets download mnist --cache-dir ~/data
    """
    from contextlib import ExitStack

    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from advisor.datasets import download_dataset, get_info

    info = get_info(name)  # unknown names fail here, before any network access
    # The display starts with the first bytes: started at once, it leaves a blank line (even when
    # transient) above a one-line error when nothing ever arrives.
    with ExitStack() as stack:
        bars: list[Any] = []
        tasks: dict[str, Any] = {}

        def progress(file: str, done: int, total: int | None) -> None:
            if not bars:
                bars.append(stack.enter_context(Progress(
                    TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    console=err, transient=False)))
            if file not in tasks:
                tasks[file] = bars[0].add_task(file, total=total)
            bars[0].update(tasks[file], completed=done, total=total)

        folder = download_dataset(info.name, cache_dir=cache_dir, mirror=mirror, progress=progress)
    if folder is None:
        err.print(f"{info.name} needs no download ({info.source}).")
        return
    out.print(f"{info.name}: verified files in {folder}")
