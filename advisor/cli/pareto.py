"""``advisor pareto``: show or export the Pareto front of a study."""

from __future__ import annotations

import re
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor.cli import app
from advisor.cli._common import err, fail, out, user_errors
from advisor.errors import AdvisorError
from advisor.cli.tune import DEFAULT_STORAGE, StorageOption, print_front


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    html = "html"
    png = "png"


@app.command("pareto")
@user_errors
def pareto_command(
    study: Annotated[str, typer.Option("--study", "--study-name", help="The study whose front to show.")],
    storage: StorageOption = DEFAULT_STORAGE,
    fmt: Annotated[Format, typer.Option("--format", help="table (stdout), csv or json (stdout or --out), html or png (a file).")] = Format.table,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="Write to this file (atomically). html/png default to pareto-<study>.<format>.")] = None,
    ref: Annotated[Optional[str], typer.Option("--ref", help="Hypervolume reference, e.g. time=600,accuracy=0,memory=4096; default: 1.1 x worst time and memory, accuracy 0.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the front as JSON (the same as --format json).")] = False,
) -> None:
    """Show the Pareto front of a study (feasible, complete trials) or export it.

    Example: advisor pareto --study mnist-torch --storage sqlite:///advisor.db --format html --out front.html
    """
    from advisor import pareto
    from advisor.tuning import load_front, require_existing, validate_study_name

    if as_json:
        if fmt not in (Format.table, Format.json):
            fail(f"Give --json or --format {fmt.value}, not both.")
        fmt = Format.json
    validate_study_name(study)
    require_existing(storage)  # reading never creates a storage file
    # The reference names are checked before the study is read (objectives are known only then).
    reference = pareto.parse_reference(ref, list(pareto.OBJECTIVES))
    front = load_front(study, storage, reference=reference)
    unknown = set(reference) - set(front.objectives)
    if unknown:
        pareto.parse_reference(ref, front.objectives)  # raises the one-line error
    if fmt is Format.table:
        print_front(front, title=(
            f"Pareto front of {study}: {len(front.points)} of {len(front.points) + len(front.others)} "
            f"complete trials, hypervolume {front.hypervolume:.4f}"))
        return
    if out_file is None and fmt in (Format.csv, Format.json):
        text = pareto.front_to_csv(front) if fmt is Format.csv else pareto.front_to_json(front)
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if out_file is None:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", study)[:100]
        out_file = Path(f"pareto-{safe}.{fmt.value}")
    try:
        path = pareto.export_front(front, fmt.value, out_file)
    except OSError as exc:  # a full disk, a read-only folder: export_front leaves the old file as it was
        if isinstance(exc, AdvisorError):
            raise
        reason = exc.strerror or str(exc) or type(exc).__name__
        fail(f"Cannot write {out_file}: {reason}; the previous file, if any, is unchanged.")
    err.print(f"wrote {path} ({len(front.points)} front points)", highlight=False)
