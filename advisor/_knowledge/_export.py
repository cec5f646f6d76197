"""Exporting the trials of Optuna studies into a knowledge-base table."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from advisor._knowledge._io import write
from advisor._knowledge._merge import merge_rows
from advisor._knowledge._rows import row_from_result
from advisor._knowledge._schema import RESULT_ATTR
from advisor.errors import StorageError
from advisor.records import HardwareProfile, TrialResult

__all__ = ["ExportCount", "export"]


class ExportCount(int):
    """The number of rows written by :func:`export`, carrying what was skipped.

    Attributes:
        skipped: Trials without an ``"advisor.result"`` user attribute (not run by the advisor, or
            still running).
        unreadable: Trials whose ``"advisor.result"`` this version cannot read (unknown keys,
            values of the wrong type); each reason once in ``reasons``.
        studies: Names of the studies read.
    """

    skipped: int
    unreadable: int
    reasons: tuple[str, ...]
    studies: tuple[str, ...]
    #: With ``into=``: the merge into that knowledge base (rows there after it, duplicates).
    merged: Any = None

    def __new__(cls, rows: int, *, skipped: int, studies: Sequence[str], unreadable: int = 0,
                reasons: Sequence[str] = ()) -> "ExportCount":
        obj = super().__new__(cls, rows)
        obj.skipped = skipped
        obj.unreadable = unreadable
        obj.reasons = tuple(reasons)
        obj.studies = tuple(studies)
        return obj


class _Profiles:
    """Hardware profiles by id: given ones, then study attributes, then this machine's cache."""

    def __init__(self, given: Iterable[HardwareProfile] | None) -> None:
        self.known: dict[str, HardwareProfile | None] = {p.profile_id: p for p in given or ()}
        self.use_cache = given is None

    def add(self, profile: HardwareProfile) -> None:
        if self.known.get(profile.profile_id) is None:
            self.known[profile.profile_id] = profile

    def get(self, profile_id: str) -> HardwareProfile | None:
        if profile_id and profile_id not in self.known and self.use_cache:
            try:
                from advisor import hardware as hw

                self.known[profile_id] = hw.load_cached(profile_id)
            except Exception:  # noqa: BLE001 - no cached profile simply means nothing to join
                self.known[profile_id] = None
        return self.known.get(profile_id)


def export(
    storage_url: str,
    *,
    studies: Sequence[str] | None = None,
    out: str | Path | None = None,
    into: str | Path | None = None,
    hardware: Iterable[HardwareProfile] | None = None,
) -> ExportCount:
    """Export every trial of some studies that carries an ``"advisor.result"`` attribute.

    Failed and pruned trials are exported too (their status says so). A study may also carry
    hardware profiles in its ``"advisor.hardware"`` user attribute (a profile dict or a list).

    Args:
        storage_url: An Optuna storage URL (``sqlite:///x.db``, ``postgresql://...``).
        studies: Study names; ``None`` exports every study in the storage.
        out: The table file to write (replaced atomically).
        into: Instead of ``out``, a knowledge base to merge the rows into, under its lock (the
            user's own: :func:`~advisor.knowledge.merge_into_user_knowledge`); the count's
            ``merged`` says what it then holds.
        hardware: Profiles to join on ``hardware_id``; ``None`` uses the profiles cached on this
            machine by ``advisor hardware --calibrate``, if any.

    Returns:
        The number of rows written, with ``.skipped`` and ``.studies``.

    Raises:
        StorageError: When the storage or a study cannot be opened.
        KnowledgeBaseError: When two trials share an id with different content.
    """
    import optuna  # the storage of record; imported here so the module stays light

    from advisor.tuning import open_storage  # psycopg2 driver selection, URL validation

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        storage = open_storage(storage_url, heartbeat_interval=None, grace_period=None)
        names = list(studies) if studies else optuna.get_all_study_names(storage=storage)
    except Exception as exc:  # noqa: BLE001 - optuna raises many storage-specific errors
        raise StorageError(f"Cannot open the study storage {storage_url!r}: {exc}") from None
    profiles = _Profiles(hardware)
    rows: list[dict[str, Any]] = []
    skipped = unreadable = 0
    reasons: dict[str, None] = {}
    for name in names:
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except Exception as exc:  # noqa: BLE001
            raise StorageError(f"Cannot load study {name!r} from {storage_url!r}: {exc}") from None
        attr = study.user_attrs.get("advisor.hardware")
        for p in attr if isinstance(attr, list) else [attr] if attr else []:
            try:
                prof = HardwareProfile.from_dict(p)
            except (TypeError, ValueError, KeyError):
                continue
            profiles.add(prof)
        for trial in study.get_trials(deepcopy=False):
            data = trial.user_attrs.get(RESULT_ATTR)
            if not isinstance(data, Mapping):
                skipped += 1
                continue
            data = dict(data)
            data["study"] = data.get("study") or name
            if data.get("trial_number") is None:
                data["trial_number"] = trial.number
            if not data.get("trial_id"):
                data["trial_id"] = f"{name}:{trial.number}"
            try:
                result = TrialResult.from_dict(data)
            except (KeyError, TypeError, ValueError) as exc:
                unreadable += 1
                reasons.setdefault(f"{name} trial {trial.number}: {exc}"[:300])
                continue
            rows.append(row_from_result(result, profiles.get(result.hardware_id)))
    merged, _, _ = merge_rows([(f"{storage_url}", rows)])
    stats = None
    if into is not None:
        from advisor._knowledge._merge import merge_into_user_knowledge

        stats = merge_into_user_knowledge([(storage_url, merged)], path=into)
    elif out is not None:
        write(merged, out)
    else:
        raise TypeError("export() needs out= (a file to write) or into= (a knowledge base to merge into)")
    count = ExportCount(len(merged), skipped=skipped, studies=names, unreadable=unreadable, reasons=list(reasons))
    count.merged = stats
    return count
