"""Helpers shared by the CLI sub-apps: output streams, JSON, one-line errors.

Results go to stdout; progress and logs go to stderr. A user error is one line and exit code 1.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable, NoReturn, TypeVar

import typer
from rich.console import Console

from advisor._json import json_safe
from advisor.errors import AdvisorError

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
#: Below this many columns, results print as lines instead of tables: a table would cut numbers.
WIDE_COLUMNS = 120


def narrow() -> bool:
    """Whether the terminal is too narrow for the result tables (numbers are never cut with '…')."""
    return out.width < WIDE_COLUMNS

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit."""
    line = " ".join(str(message).split())
    print(f"error: {line}", file=sys.stderr)
    raise typer.Exit(code=code)


def print_json(obj: Any) -> None:
    """Write ``obj`` as strict JSON (NaN and inf become null) to stdout."""
    sys.stdout.write(json.dumps(json_safe(obj), indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def user_errors(func: F) -> F:
    """Turn an :class:`AdvisorError` (or a bad value) raised by a command into one line and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AdvisorError as exc:
            fail(str(exc))
        except OSError as exc:  # a full disk, a permission problem: the system's own words, one line
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            fail(f"{exc.strerror or exc}{where}")
        except KeyboardInterrupt:
            fail("interrupted", code=130)

    return wrapper  # type: ignore[return-value]
