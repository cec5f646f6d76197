"""``advisor spaces``: list, show and validate search spaces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import out, print_json, user_errors

spaces_app = typer.Typer(
    help=(
        "List, show and validate search spaces (one YAML per framework x target).\n\n"
        "Example: advisor spaces show torch-cpu"
    ),
    no_args_is_help=True,
)
app.add_typer(spaces_app, name="spaces")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
CoresOption = Annotated[Optional[int], typer.Option("--cores", min=1, help="Cores for ${cores}; default: this process's CPUs.")]


def _domain(p: dict[str, Any]) -> str:
    if p["type"] == "categorical":
        return "{" + ", ".join(str(c).lower() if isinstance(c, bool) else str(c) for c in p["choices"]) + "}"
    text = f"[{p['low']:g}, {p['high']:g}]"
    if p.get("log"):
        text += " log"
    if p.get("step") is not None:
        text += f" step {p['step']:g}"
    return text


@spaces_app.command("list")
@user_errors
def list_command(as_json: JsonOption = False) -> None:
    """List the built-in search spaces.

    Example: advisor spaces list
    """
    from advisor.space import list_spaces, load_space

    spaces = [load_space(name) for name in list_spaces()]
    if as_json:
        print_json([s.to_dict() for s in spaces])
        return
    table = Table(title="Search spaces (advisor spaces show NAME)")
    for column in ("name", "framework", "target", "params", "description"):
        table.add_column(column)
    for s in spaces:
        first = s.description.split(". ")[0].rstrip(".")
        table.add_row(s.name, s.framework, s.target, str(len(s.params)), first)
    out.print(table)


@spaces_app.command("show")
@user_errors
def show_command(
    name: Annotated[str, typer.Argument(help="A built-in space name (torch-cpu) or a YAML file.")],
    cores: CoresOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a search space's parameters, conditions and fixed settings.

    Example: advisor spaces show onnxruntime-cpu --cores 8
    """
    from advisor.space import load_space

    space = load_space(name, cores=cores)
    data = space.to_dict()
    if as_json:
        print_json(data)
        return
    table = Table(title=f"{space.name}: {space.framework} on {space.target}", caption=space.description)
    for column in ("param", "type", "domain", "when"):
        table.add_column(column)
    for pname, p in data["params"].items():
        when = ", ".join(f"{k} in {{{', '.join(map(str, v))}}}" for k, v in p.get("when", {}).items())
        table.add_row(pname, p["type"], _domain(p), when)
    for fname, value in data["fixed"].items():
        table.add_row(fname, "fixed", str(value).lower() if isinstance(value, bool) else str(value), "")
    out.print(table)


@spaces_app.command("validate")
@user_errors
def validate_command(
    file: Annotated[Path, typer.Argument(help="A search-space YAML file.")],
    cores: CoresOption = None,
) -> None:
    """Validate a search-space file; print one line naming the file and key on error (exit 1).

    Example: advisor spaces validate my-space.yaml
    """
    from advisor.space import load_space

    space = load_space(str(file) if str(file).endswith((".yaml", ".yml")) else str(file.resolve()), cores=cores)
    out.print(f"ok: {file} ({space.framework} {space.target}, {len(space.params)} params, "
              f"{len(space.fixed)} fixed)", highlight=False)
