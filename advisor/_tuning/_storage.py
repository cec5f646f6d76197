"""Storage URLs and study names: validation, masking and opening Optuna's RDB storage."""

from __future__ import annotations

import importlib.util
import logging
import re
import time
import warnings
from pathlib import Path
from typing import Any

from advisor.errors import InvalidParameterError, StorageError, invalid_parameter

__all__ = ["DEFAULT_STORAGE", "mask_url", "validate_storage_url", "validate_study_name", "open_storage"]

DEFAULT_STORAGE = "sqlite:///advisor.db"
_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg2", "postgresql+psycopg")
DEFAULT_HEARTBEAT_S = 10
DEFAULT_GRACE_S = 60
#: Opens of a new database tried when another process created its tables at the same moment.
SCHEMA_RACE_ATTEMPTS = 4
#: What the loser of that race is told: a table, or the schema's version row, is already there.
_SCHEMA_RACE_MARKERS = ("already exists", "alembic_version")

logger = logging.getLogger("advisor.tuning")


def _heartbeat_tolerant(base: Any) -> Any:
    """``RDBStorage`` whose heartbeat survives a failed write and whose dead trials never hang.

    - Optuna's heartbeat thread ends at the first exception, so a database restart would stop the
      heartbeats of a trial that is still running; after the grace period another worker would
      fail it and run it again. A heartbeat that cannot be written is logged and skipped instead.
    - Optuna counts a RUNNING trial as stale only from its last heartbeat, and the first heartbeat
      is written by a thread after the trial is created. A worker killed in between leaves a
      RUNNING trial with no heartbeat at all, which Optuna never fails, so a resumed study waits
      on it forever. A stale-trial check that finds such a trial writes a first heartbeat for it
      (database time, like every heartbeat): if its worker is alive its own thread overwrites it,
      and if not, the trial is stale one grace period later and is failed and retried as usual.
    """

    class _Storage(base):  # type: ignore[misc, valid-type]
        def _get_stale_trial_ids(self, study_id: int) -> list[int]:
            stale: list[int] = super()._get_stale_trial_ids(study_id)
            for trial_id in self._running_without_heartbeat(study_id):
                self.record_heartbeat(trial_id)
            return stale

        def _running_without_heartbeat(self, study_id: int) -> list[int]:
            from optuna.storages._rdb import models
            from optuna.trial import TrialState

            session = self.scoped_session()
            try:
                beating = session.query(models.TrialHeartbeatModel.trial_id)
                rows = (session.query(models.TrialModel.trial_id)
                        .filter(models.TrialModel.study_id == study_id)
                        .filter(models.TrialModel.state == TrialState.RUNNING)
                        .filter(models.TrialModel.trial_id.not_in(beating)).all())
                return [row[0] for row in rows]
            finally:
                session.close()

        def record_heartbeat(self, trial_id: int) -> None:
            try:
                super().record_heartbeat(trial_id)
            except Exception as exc:  # noqa: BLE001 - any database error; the next beat retries
                logger.warning("heartbeat of trial id %s not recorded (%s)", trial_id,
                               " ".join(str(exc).split())[:200])

    return _Storage


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for messages and summaries)."""
    return re.sub(r"(://[^/:@]*:)[^@/]*@", r"\1***@", url)


def validate_study_name(name: Any) -> str:
    """A study name is printable text of 1 to 128 characters.

    Raises:
        InvalidParameterError: Otherwise.
    """
    if not isinstance(name, str) or not 1 <= len(name) <= 128 or not name.isprintable():
        shown = name if not isinstance(name, str) else name[:40] + ("..." if len(name) > 40 else "")
        raise invalid_parameter("study", "the study", "printable text of 1 to 128 characters", shown)
    return name


def validate_storage_url(url: Any) -> str:
    """Check the scheme of a storage URL (``sqlite:///path`` or ``postgresql://...``).

    Raises:
        InvalidParameterError: On anything else, with the password masked.
    """
    accepted = "a URL such as sqlite:///advisor.db or postgresql://user@host:5432/db"
    if not isinstance(url, str) or "://" not in url:
        raise invalid_parameter("storage", "the study", accepted, url)
    scheme = url.split("://", 1)[0].lower()
    if scheme not in _SCHEMES:
        raise invalid_parameter("storage", "the study", accepted, mask_url(url))
    if scheme == "sqlite":
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else None
        if path is None:
            raise invalid_parameter("storage", "the study", accepted + " (three slashes)", url)
        if path and path != ":memory:" and not Path(path).parent.exists():
            raise StorageError(f"Cannot open storage {url}: the folder {str(Path(path).parent)!r} does not exist.")
    return url


def require_existing(url: str) -> str:
    """For read-only commands: a SQLite storage must already exist (reading must not create a file).

    Raises:
        StorageError: When the SQLite file is missing (PostgreSQL URLs are not checked here).
    """
    url = validate_storage_url(url)
    if url.lower().startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:" and not Path(path).exists():
            raise StorageError(f"No storage at {url}: the file {path!r} does not exist (nothing was created); "
                               "give the file that 'advisor tune --storage' wrote.")
    return url


def open_storage(url: str, *, heartbeat_interval: int | None = DEFAULT_HEARTBEAT_S,
                 grace_period: int | None = DEFAULT_GRACE_S) -> Any:
    """Open an Optuna ``RDBStorage`` with heartbeats and retry of stale trials.

    A worker that dies mid-trial stops sending heartbeats; after ``grace_period`` seconds the next
    worker that starts a trial marks it failed and enqueues a retry
    (:class:`optuna.storages.RetryHeartbeatStaleTrialCallback`, the non-deprecated name of
    ``RetryFailedTrialCallback``).

    Args:
        url: ``sqlite:///path`` or ``postgresql://...``.
        heartbeat_interval: Seconds between heartbeats of a running trial; ``None`` disables them.
        grace_period: Seconds without a heartbeat after which a trial is stale.

    Raises:
        StorageError: When the database cannot be reached or opened.
        MissingDependencyError: When PostgreSQL is asked for and psycopg2 is missing.
    """
    import optuna
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    from advisor._imports import try_import

    validate_storage_url(url)
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme.startswith("postgresql"):
        if scheme == "postgresql":
            # SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3; use psycopg2 when only it is here.
            driver = "psycopg" if importlib.util.find_spec("psycopg") is not None else "psycopg2"
            url = f"postgresql+{driver}://{rest}"
        else:
            driver = scheme.split("+", 1)[1]
        try_import(driver, feature="a PostgreSQL storage")
        engine_kwargs: dict[str, Any] = {"pool_pre_ping": True}
    else:
        # Several local workers share one SQLite file: wait for the lock instead of failing.
        engine_kwargs = {"connect_args": {"timeout": 60}}
    kwargs: dict[str, Any] = {}
    if heartbeat_interval is not None:
        with warnings.catch_warnings():  # experimental in Optuna, said once per process to the user otherwise
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            retry = RetryHeartbeatStaleTrialCallback(max_retry=3)
        kwargs = {
            "heartbeat_interval": int(heartbeat_interval),
            "grace_period": int(grace_period or DEFAULT_GRACE_S),
            "heartbeat_stale_trial_callback": retry,
        }
    for attempt in range(SCHEMA_RACE_ATTEMPTS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return _heartbeat_tolerant(RDBStorage)(url, engine_kwargs=engine_kwargs, **kwargs)
        except (InvalidParameterError, ImportError):
            raise
        except Exception as exc:  # sqlalchemy's OperationalError and friends
            first = " ".join(str(exc).split())[:300]
            # Two processes opening a new database at once both create its tables and write its
            # schema version; the one that loses finds them there. The schema is then complete: open again.
            if any(m in first for m in _SCHEMA_RACE_MARKERS) and attempt + 1 < SCHEMA_RACE_ATTEMPTS:
                time.sleep(0.5 * (attempt + 1))
                continue
            raise StorageError(f"Cannot open storage {mask_url(url)}: {first}") from None
    raise AssertionError("unreachable")  # the loop returns or raises
