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
from advisor.errors import AdvisorError, InvalidParameterError

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
#: Below this many columns, results print as lines instead of tables: a table would cut numbers.
WIDE_COLUMNS = 120


def narrow() -> bool:
    """Whether the terminal is too narrow for the result tables (numbers are never cut with '…')."""
    return out.width < WIDE_COLUMNS

F = TypeVar("F", bound=Callable[..., Any])


def count_text(n: int, noun: str) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1: '1 epoch', '2 threads'."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def seconds_text(value: float) -> str:
    """A duration as people read it: seconds below 2 minutes, minutes below 2 hours, then hours."""
    if value < 120:
        return f"{value:.3g} s"
    if value < 7200:
        return f"{value / 60:.3g} min"
    return f"{value / 3600:.3g} h"


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit."""
    line = " ".join(str(message).split())
    print(f"error: {line}", file=sys.stderr)
    raise typer.Exit(code=code)


def print_json(obj: Any) -> None:
    """Write ``obj`` as strict JSON (NaN and inf become null) to stdout."""
    sys.stdout.write(json.dumps(json_safe(obj), indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


#: Names users type for a framework, and the name advisor uses.
#: Record fields whose flag is not a knob's.
_OTHER_FLAGS = {"wall_time_s": "--time-limit", "memory_mb": "--memory-cap"}
FRAMEWORK_ALIASES = {"caffe": "onnxruntime", "pytorch": "torch", "tf": "tensorflow", "keras": "tensorflow", "onnx": "onnxruntime",
                     "ort": "onnxruntime", "caffe2": "onnxruntime", "scikit-learn": "sklearn", "scikit": "sklearn"}


def flag_message(exc: Any) -> str:
    """An invalid value of a config field or a command parameter, in the words of its CLI flag
    (``--lr must be ...``), with "did you mean" for a misspelt framework or choice."""
    name, owner = getattr(exc, "parameter", None), str(getattr(exc, "owner", "") or "")
    if name is None or not owner.split(" ")[0] in ("Config", "Workload", "Limits", "recommend", "tune"):
        return str(exc)
    from advisor.errors import did_you_mean
    from advisor.knobs import FRAMEWORKS, KNOB_NAMES, get_knob

    flag = ((get_knob(name).flag if name in KNOB_NAMES else None) or _OTHER_FLAGS.get(name)
            or f"--{name.replace('_', '-')}")
    detail = owner.partition(" ")[2]  # e.g. "(framework 'onnxruntime')"
    got = exc.got
    hint = ""
    if name in ("framework", "frameworks"):
        hint = did_you_mean(str(got), FRAMEWORKS, FRAMEWORK_ALIASES)
    elif name in KNOB_NAMES and get_knob(name).choices and str(got) not in map(str, get_knob(name).choices):
        hint = did_you_mean(str(got), [str(c) for c in get_knob(name).choices])
    where = f" {detail}" if detail else ""
    return f"{flag}{where} must be {exc.accepted}. Got {got!r} instead.{hint}"


def check_data_dir(dataset: str, data_dir: Any) -> None:
    """Raise the one-line DatasetError when ``data_dir`` lacks ``dataset``'s files (datasets read
    from files only; digits and synthetic data need none)."""
    from advisor._datasets.sources import SOURCES
    from advisor.datasets import find_files

    if dataset in SOURCES:
        find_files(dataset, data_dir=str(data_dir), download=False)


def user_errors(func: F) -> F:
    """Turn an :class:`AdvisorError` (or a bad value) raised by a command into one line and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except InvalidParameterError as exc:
            fail(flag_message(exc))
        except AdvisorError as exc:
            fail(str(exc))
        except OSError as exc:  # a full disk, a permission problem: the system's own words, one line
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            fail(f"{exc.strerror or exc}{where}")
        except KeyboardInterrupt:
            fail("interrupted", code=130)

    return wrapper  # type: ignore[return-value]
