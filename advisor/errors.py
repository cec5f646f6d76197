"""The advisor's exceptions.

Every exception also subclasses the builtin it refines, so callers that catch ``ValueError`` or
``FileNotFoundError`` keep working. Messages are one line: what was wrong, what is accepted, and
how to fix it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AdvisorError",
    "InvalidParameterError",
    "UnknownNameError",
    "DatasetError",
    "DatasetFileError",
    "ChecksumError",
    "SearchSpaceError",
    "StorageError",
    "KnowledgeBaseError",
    "SurrogateError",
    "MissingDependencyError",
    "DeviceError",
    "ConstraintError",
    "invalid_parameter",
]


class AdvisorError(Exception):
    """Base class of every error the advisor raises on purpose."""


class InvalidParameterError(AdvisorError, ValueError, TypeError):
    """A parameter has a value outside what is accepted."""


class UnknownNameError(AdvisorError, KeyError):
    """A framework, dataset, model, sampler or other registry name is not known."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DatasetError(AdvisorError, ValueError):
    """A dataset cannot be used as given."""


class DatasetFileError(DatasetError, OSError):
    """A dataset file is missing, truncated or malformed."""


class ChecksumError(DatasetError):
    """A downloaded file does not have the expected SHA-256."""


class SearchSpaceError(AdvisorError, ValueError):
    """A search-space file is invalid."""


class StorageError(AdvisorError, RuntimeError):
    """A study storage cannot be opened or written."""


class KnowledgeBaseError(AdvisorError, ValueError):
    """A knowledge-base table has the wrong schema or content."""


class SurrogateError(AdvisorError, ValueError):
    """A surrogate model is missing, corrupt or does not match its table."""


class MissingDependencyError(AdvisorError, ImportError):
    """An optional package needed for a feature is not installed."""


class DeviceError(AdvisorError, RuntimeError):
    """A requested device (for example CUDA) is not available."""


class ConstraintError(AdvisorError, ValueError):
    """A constraint is malformed or cannot be satisfied."""


def invalid_parameter(name: str, owner: str, accepted: str, got: Any) -> InvalidParameterError:
    """Build the one message shape used for every invalid parameter.

    Args:
        name: The parameter's name.
        owner: What the parameter belongs to (a class, a command, a file).
        accepted: A description of the accepted values.
        got: The value that was given.

    Returns:
        An ``InvalidParameterError`` ready to raise.
    """
    exc = InvalidParameterError(
        f"The {name!r} parameter of {owner} must be {accepted}. Got {got!r} instead."
    )
    exc.parameter, exc.owner, exc.accepted, exc.got = name, owner, accepted, got  # type: ignore[attr-defined]
    return exc


def did_you_mean(value: str, choices: Any, aliases: dict[str, str] | None = None) -> str:
    """``" Did you mean 'x'?"`` for the nearest of ``choices`` (or a known alias), else ``""``."""
    import difflib

    text = str(value)
    guess = (aliases or {}).get(text.lower())
    if guess is None:
        matches = difflib.get_close_matches(text.lower(), [str(c) for c in choices], n=1, cutoff=0.6)
        guess = matches[0] if matches else None
    return f" Did you mean {guess!r}?" if guess else ""
