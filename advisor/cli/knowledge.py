"""``advisor knowledge``: export studies to the trial table, merge tables, summarise one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, List, NoReturn, Optional

import typer
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import count_text, err, fail, out, print_json, user_errors
from advisor.cli.tune import DEFAULT_STORAGE, StorageOption
from advisor.errors import AdvisorError

knowledge_app = typer.Typer(
    help=(
        "The knowledge base: one row per trial, exported from any number of studies and machines.\n\n"
        "Example: advisor knowledge export --storage sqlite:///advisor.db --out kb.csv.gz"
    ),
    no_args_is_help=True,
)
app.add_typer(knowledge_app, name="knowledge")


def _write_failed(path: Path, exc: OSError) -> NoReturn:
    """Report an operating-system error while writing ``path`` as one line (exit 1)."""
    if isinstance(exc, AdvisorError):
        raise exc
    reason = exc.strerror or str(exc) or type(exc).__name__
    fail(f"Cannot write {path}: {reason}; the previous file, if any, is unchanged.")


@knowledge_app.command("export")
@user_errors
def export_command(
    storage: StorageOption = DEFAULT_STORAGE,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="Table to write (.csv.gz), replaced atomically.")] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Merge the trials into your own knowledge base instead of --out: "
                                                      "advisor recommend reads your runs of a workload on this machine "
                                                      "as measured evidence.")] = False,
    study: Annotated[Optional[List[str]], typer.Option(
        "--study", "--study-name", help="Study to export; repeat for several. Default: every study in the storage.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Export every trial that carries an advisor result (failed and pruned ones too).

    Example: advisor knowledge export --storage sqlite:///advisor.db --study mnist-torch --out kb.csv.gz

    Example: advisor knowledge export --study mnist-torch --mine   (the study's trials become evidence for recommend)
    """
    from advisor import knowledge
    from advisor.errors import InvalidParameterError

    if (out_file is None) == (not mine):
        raise InvalidParameterError("Give --out FILE (a table to write) or --mine (merge into your own knowledge "
                                    "base), one of the two.")
    target = knowledge.user_knowledge_path() if mine else out_file
    assert target is not None
    try:
        from advisor.tuning import require_existing

        require_existing(storage)
        count = (knowledge.export(storage, studies=study or None, into=target) if mine
                 else knowledge.export(storage, studies=study or None, out=target))
    except OSError as exc:  # a full disk, a read-only folder: the previous file is left as it was
        _write_failed(target, exc)
    if as_json:
        print_json({"rows": int(count), "skipped": count.skipped, "unreadable": count.unreadable,
                    "unreadable_reasons": list(count.reasons), "studies": list(count.studies), "out": str(target),
                    **({"rows_after_merge": count.merged.rows_out, "duplicates": count.merged.duplicates} if mine else {})})
        return
    if mine:
        out.print(f"Merged {count_text(int(count), 'trial')} from {len(count.studies)} stud{'y' if len(count.studies) == 1 else 'ies'} into your "
                  f"knowledge base {target} ({count_text(count.merged.rows_out, 'trial')} there now, {count.merged.duplicates} "
                  "already held).")
    else:
        out.print(f"Exported {count_text(int(count), 'trial')} from {len(count.studies)} stud{'y' if len(count.studies) == 1 else 'ies'} to {out_file}.")
    if count.skipped:
        err.print(f"Skipped {count.skipped} trials without an 'advisor.result' attribute (not run by the advisor, "
                  "or still running).")
    if count.unreadable:
        err.print(f"Skipped {count.unreadable} trials whose 'advisor.result' this version cannot read; first: "
                  f"{count.reasons[0]}", highlight=False)


@knowledge_app.command("merge")
@user_errors
def merge_command(
    inputs: Annotated[List[Path], typer.Argument(help="Tables to merge.")],
    out_file: Annotated[Path, typer.Option("--out", help="Merged table to write (may be one of the inputs).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Merge tables, deduplicating on trial id (conflicting rows with one id are an error).

    Example: advisor knowledge merge a.csv.gz b.csv.gz --out all.csv.gz
    """
    from advisor import knowledge

    try:
        stats = knowledge.merge(inputs, out_file)
    except OSError as exc:
        _write_failed(out_file, exc)
    if as_json:
        print_json({"inputs": stats.inputs, "rows_in": stats.rows_in, "rows_out": stats.rows_out,
                    "duplicates": stats.duplicates, "out": str(out_file)})
        return
    out.print(f"Merged {stats.inputs} tables: {stats.rows_in} rows in, {stats.rows_out} distinct trials out "
              f"({stats.duplicates} duplicates) -> {out_file}")


def _counts_table(title: str, counts: dict[str, Any]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("value")
    table.add_column("rows", justify="right")
    for key, value in counts.items():
        table.add_row(key if key not in ("", "None") else "(unknown)", str(value))
    return table


@knowledge_app.command("info")
@user_errors
def info_command(
    file: Annotated[Optional[Path], typer.Argument(
        help="A knowledge-base table (.csv.gz); default your own (what --verify and --budget wrote).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Row counts by status, framework, dataset, training size and device kind.

    Example: advisor knowledge info surrogate/knowledge.csv.gz --json

    Example: advisor knowledge info   (your own knowledge base, and where it is)
    """
    from advisor import knowledge

    if file is None:
        file = knowledge.user_knowledge_path()
        if not file.exists():
            fail(f"Your knowledge base {file} does not exist yet: advisor measure, advisor recommend --verify N or "
                 f"--budget T, and advisor knowledge export --mine write it.")
    summary = knowledge.summarize(knowledge.read(file))
    if as_json:
        print_json(summary)
        return
    n = summary["studies"]
    out.print(f"{file}: {count_text(summary['rows'], 'trial')} from {n} stud{'y' if n == 1 else 'ies'} (schema "
              f"{summary['schema_version']}); {summary['contended']} contended, {summary['synthetic']} synthetic")
    for key, title in (("by_status", "status"), ("by_framework", "framework"), ("by_dataset", "dataset"),
                       ("by_train_samples", "training samples"), ("by_device_kind", "device kind")):
        out.print(_counts_table(title, summary[key]))
