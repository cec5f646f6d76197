"""How a search-space error shows what it found: short, whatever the YAML file holds."""

from __future__ import annotations

import reprlib
from typing import Any

from advisor.errors import SearchSpaceError

__all__ = ["MAX_SHOWN", "show", "key_name", "fail"]

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxset, _REPR.maxtuple = 2, 6, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 60, 60, 40
MAX_SHOWN = 200


def show(value: Any) -> str:
    """A short repr of a value from the file: YAML aliases can make a 1 KB file's value enormous."""
    try:
        text = _REPR.repr(value)
    except (ValueError, RecursionError):  # an int past Python's digit limit, a self-referencing alias
        text = f"<{type(value).__name__}>"
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def key_name(value: Any) -> str:
    """A key from the file as it appears in an error's dotted path, shortened when long."""
    return value if isinstance(value, str) and len(value) <= _REPR.maxstring else show(value)


def fail(where: str, key: str, message: str) -> SearchSpaceError:
    """The one-line error ``<file>: <dotted key>: <message>`` (the key may be empty)."""
    return SearchSpaceError(f"{where}: {key}: {message}" if key else f"{where}: {message}")
