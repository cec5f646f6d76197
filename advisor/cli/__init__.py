"""The ``advisor`` command line. Every sub-app lives in its own module and registers itself here.

Only this package prints. Heavy libraries are imported inside the commands, so ``advisor --help``
stays fast and loads no deep-learning framework, Optuna or LightGBM.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

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
    """Console-script entry point."""
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    app()
