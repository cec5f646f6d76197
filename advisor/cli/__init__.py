"""The ``advisor`` command line. Every sub-app lives in its own module and registers itself here.

Only this package prints. Heavy libraries are imported inside the commands, so ``advisor --help``
stays fast and loads no deep-learning framework, Optuna or LightGBM.
"""

from __future__ import annotations

import logging
import os
import sys

import typer
from typing import Any

from advisor import __version__

app = typer.Typer(
    name="advisor",
    help=(
        "Measure, tune, remember and predict deep-learning training configurations.\n\n"
        "Example: advisor recommend --dataset cifar10 --gpu"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log details to stderr."),
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )


def _register() -> None:
    # Each module adds its commands or sub-app to ``app``; order is the order shown in --help.
    from advisor.cli import (  # noqa: F401  (imported for their registration side effect)
        datasets,
        hardware,
        measure,
    )
    for name in ("spaces", "tune", "pareto", "knowledge", "surrogate", "recommend"):
        # Later stages are optional while the package is being built up; a missing module is a
        # packaging bug caught by tests/test_cli.py, which lists every expected command.
        try:
            __import__(f"advisor.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"advisor.cli.{name}":
                raise


_register()


def main() -> None:
    """Console-script entry point: usage errors (an unknown option, a value out of range) print one
    ``error:`` line and exit 1, like every other user error."""
    import sys

    # Typer ships its own copy of click; its usage errors share one base class with BadParameter.
    usage_error: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    try:
        code = app(standalone_mode=False)
    except usage_error as exc:
        message = " ".join(exc.format_message().split())
        if not message:  # a bare group command: its help was printed
            sys.exit(0)
        hint = f" (see 'advisor {exc.ctx.command_path.partition(' ')[2]} --help')".replace("  ", " ") \
            if exc.ctx is not None and exc.ctx.command_path else ""
        print(f"error: {message}{hint}", file=sys.stderr)
        sys.exit(1)
    except (typer.Abort, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
