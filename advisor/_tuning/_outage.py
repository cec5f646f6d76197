"""Riding out a study storage outage: a database restart or a dropped connection.

A worker retries while the database is unreachable, for up to :data:`STORAGE_OUTAGE_S`, and then
gives up with one line; finished trials are already in the storage and are kept.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from advisor.errors import StorageError

__all__ = ["STORAGE_OUTAGE_S", "first_line", "is_outage", "outage_error", "retry_storage"]

logger = logging.getLogger("advisor.tuning")
STORAGE_OUTAGE_S = 120.0  # how long a worker rides out an unreachable database before giving up


def first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def is_outage(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or while handling, means the database
    is unreachable (restarting, connection dropped, SQLite lock timeout)."""
    import optuna
    import sqlalchemy.exc

    kinds = (optuna.exceptions.StorageInternalError, sqlalchemy.exc.OperationalError,
             sqlalchemy.exc.InterfaceError)
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kinds):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def outage_error(exc: BaseException, waited_s: float) -> StorageError:
    cause = exc.__cause__ or exc.__context__ or exc
    return StorageError(f"The study storage stayed unreachable for {waited_s:.0f} s ({first_line(cause)}); "
                        f"finished trials are kept: run the worker again once the database is back.")


def retry_storage(call: Callable[[], Any], *, what: str, window_s: float = STORAGE_OUTAGE_S) -> Any:
    """``call()``, retried with back-off while the database is unreachable, for up to ``window_s``.

    Raises:
        StorageError: One line, when the database stays unreachable.
    """
    started, delay = time.monotonic(), 0.5
    while True:
        try:
            return call()
        except Exception as exc:
            waited = time.monotonic() - started
            if not is_outage(exc):
                raise
            if waited >= window_s:
                raise outage_error(exc, waited) from None
            logger.warning("study storage unreachable while %s; retrying (%s)", what, first_line(exc))
            time.sleep(delay)
            delay = min(2 * delay, 5.0)
