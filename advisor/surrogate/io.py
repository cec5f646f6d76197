"""Save and load a surrogate as LightGBM text models plus one JSON meta file. Never pickle.

Layout of a model folder::

    meta.json                       feature schema, versions, training table + sha256, row counts
    train_time_s.q10.txt ...        one LightGBM text model per objective and quantile

The shipped files live in the repository's top-level ``surrogate/`` folder (``knowledge.csv.gz``,
``model/``, ``MODEL_CARD.md``), which the package sees as ``advisor/shipped``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, TypeGuard

from advisor._atomic import atomic_write
from advisor import __version__
from advisor.errors import SurrogateError
from advisor.surrogate._compat import import_lightgbm
from advisor.surrogate.features import FEATURES, FeatureSchema
from advisor.surrogate.model import (ACCURACY_COMPANION, MEMORY_BASIS, MEMORY_TARGET, OBJECTIVES, QUANTILES,
                                     TIME_BASIS, TIME_TARGET, Surrogate)

__all__ = [
    "META_NAME",
    "FORMAT_VERSION",
    "shipped_dir",
    "shipped_table",
    "shipped_model_dir",
    "SHIPPED_TABLE_LABEL",
    "table_label",
    "file_sha256",
    "save",
    "load",
    "table_warning",
    "fit_file",
]

META_NAME = "meta.json"
FORMAT_VERSION = 1


def shipped_dir() -> Path:
    """The folder of shipped knowledge: ``advisor/shipped``, else the repository's ``surrogate/``."""
    import advisor

    pkg = Path(advisor.__file__).resolve().parent
    for candidate in (pkg / "shipped", pkg.parent / "surrogate"):
        if candidate.is_dir():
            return candidate
    return pkg / "shipped"


def shipped_table() -> Path:
    return shipped_dir() / "knowledge.csv.gz"


#: How a model's meta names the shipped table (a machine's absolute path would not travel with it).
SHIPPED_TABLE_LABEL = "surrogate/knowledge.csv.gz"


def table_label(table_path: str | Path) -> str:
    """How a model's meta and card name a table: :data:`SHIPPED_TABLE_LABEL` for the shipped one,
    any other by its path as given."""
    if str(table_path) == SHIPPED_TABLE_LABEL:
        return SHIPPED_TABLE_LABEL
    try:
        if Path(table_path).resolve() == shipped_table().resolve():
            return SHIPPED_TABLE_LABEL
    except OSError:
        pass
    return str(table_path)


def shipped_model_dir() -> Path:
    return shipped_dir() / "model"


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _model_file(objective: str, alpha: float) -> str:
    return f"{objective}.q{round(alpha * 100):02d}.txt"


def save(surrogate: Surrogate, directory: str | Path, *, table_path: str | Path | None = None) -> Path:
    """Write the boosters as text and ``meta.json`` (written last, so a folder with a meta is complete).

    Args:
        surrogate: The fitted surrogate.
        directory: Output folder (created).
        table_path: The training table, recorded with its sha256.

    Returns:
        The meta file's path.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, str]] = {}
    for objective, models in surrogate.boosters.items():
        files[objective] = {}
        for alpha, booster in models.items():
            name = _model_file(objective, alpha)
            atomic_write(directory / name, booster.model_to_string())
            files[objective][str(alpha)] = name
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "advisor_version": __version__,
        "trained_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **{k: v for k, v in surrogate.meta.items() if k not in ("table", "table_sha256")},
        "feature_schema": surrogate.schema.to_dict(),
        "files": files,
        "table": table_label(table_path) if table_path is not None else surrogate.meta.get("table"),
        "table_sha256": file_sha256(table_path) if table_path is not None else surrogate.meta.get("table_sha256"),
    }
    path = directory / META_NAME
    atomic_write(path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    # Booster files of a model saved here before that this one does not have (an objective it
    # dropped): the meta no longer names them, so they would only mislead.
    written = {name for per in files.values() for name in per.values()}
    for old in directory.glob("*.q[0-9]*.txt"):
        if old.name not in written:
            old.unlink()
    return path


def _check_schema(meta: dict[str, Any], path: Path) -> FeatureSchema:
    try:
        schema = FeatureSchema.from_dict(meta["feature_schema"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SurrogateError(f"Surrogate meta {path} has no readable feature schema ({exc!r}); refit it with `advisor surrogate fit`.") from None
    # A model fitted before newer knobs existed has the head of today's list: it still loads.
    if schema.features != FEATURES[:len(schema.features)]:
        theirs, ours = schema.features, FEATURES
        i = next((k for k, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(theirs), len(ours)))
        got = theirs[i].name if i < len(theirs) else "<none>"
        want = ours[i].name if i < len(ours) else "<none>"
        raise SurrogateError(
            f"Surrogate meta {path}: its feature schema does not match this advisor's (feature {i} is "
            f"{got!r}, expected {want!r}); refit it with `advisor surrogate fit`."
        )
    return schema


def _finite(value: Any) -> TypeGuard[float]:
    """A JSON number (not a boolean) that is finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _coefficients_ok(coefficients: Any, width: int) -> bool:
    return isinstance(coefficients, dict) and bool(coefficients) and all(
        isinstance(k, str) and isinstance(v, list) and len(v) == width and all(_finite(c) and c >= 0 for c in v)
        for k, v in coefficients.items())


def _check_baselines(meta: dict[str, Any], path: Path) -> None:
    """The time and memory models' targets and baselines: ``{framework: [finite numbers >= 0, one
    per basis term]}`` (at least one framework; the boosters predict relative to it)."""
    files = meta.get("files")
    for objective, key, target, basis in (("train_time_s", "time", TIME_TARGET, TIME_BASIS),
                                          ("peak_memory_mb", "memory", MEMORY_TARGET, MEMORY_BASIS)):
        if not isinstance(files, dict) or objective not in files:
            continue
        if meta.get(f"{key}_target") != target:
            raise SurrogateError(f"Surrogate meta {path} models {key} as {meta.get(f'{key}_target')!r}, not as "
                                 f"this advisor's {target!r}; refit it with `advisor surrogate fit`.")
        baseline = meta.get(f"{key}_baseline")
        ok = isinstance(baseline, dict) and _coefficients_ok(baseline.get("coefficients"), len(basis))
        reference = baseline.get("reference_gflops") if isinstance(baseline, dict) else None
        ok = ok and (reference is None or (_finite(reference) and reference > 0))
        if not ok:
            extra = " (and a positive 'reference_gflops' or none)" if key == "time" else ""
            raise SurrogateError(f"Surrogate meta {path} is corrupt: '{key}_baseline' must hold, per framework, "
                                 f"{len(basis)} non-negative coefficients{extra}; refit it with "
                                 "`advisor surrogate fit`.")


def _check_calibration(meta: dict[str, Any], path: Path) -> None:
    """Band offsets: objective -> finite number; the seen workloads: lists of numbers of one width."""
    from advisor.surrogate.model import WORKLOAD_FEATURES

    for key in ("band_offsets", "band_offsets_new_workload", "band_offsets_new_dataset"):
        offsets = meta.get(key) or {}
        if not isinstance(offsets, dict) or not all(map(_finite, offsets.values())):
            raise SurrogateError(f"Surrogate meta {path} is corrupt: '{key}' must map objectives to finite numbers; "
                                 "refit it with `advisor surrogate fit`.")
    workloads = meta.get("workloads")
    if workloads is not None and not (isinstance(workloads, list) and all(
            isinstance(w, list) and len(w) == len(WORKLOAD_FEATURES) and all(map(_finite, w)) for w in workloads)):
        raise SurrogateError(f"Surrogate meta {path} is corrupt: 'workloads' must be a list of "
                             f"{len(WORKLOAD_FEATURES)}-number lists; refit it with `advisor surrogate fit`.")


def _check_accuracy_target(meta: dict[str, Any], path: Path) -> None:
    """``accuracy_target``: absent or null (accuracy as is), or a landmark fallback in [0, 1]."""
    target = meta.get("accuracy_target")
    if target is None:
        return
    value = target.get("landmark_fallback") if isinstance(target, dict) else None
    if not _finite(value) or not 0 <= value <= 1:
        raise SurrogateError(f"Surrogate meta {path} is corrupt: 'accuracy_target' must hold a "
                             f"'landmark_fallback' in [0, 1]; refit it with `advisor surrogate fit`.")


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at the null device for the block (LightGBM's C++ ``Log::Fatal``
    writes ``[LightGBM] [Fatal] ...`` there before raising; the raised message is kept)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
        finally:
            os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def load(directory: str | Path) -> Surrogate:
    """Load a surrogate saved by :func:`save`, with ``lightgbm.Booster(model_str=...)``.

    Raises:
        SurrogateError: One line naming the file, when the folder or a model file is missing,
            a file is corrupt, or the meta's feature schema does not match this advisor's.
    """
    directory = Path(directory)
    meta_path = directory / META_NAME
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        raise SurrogateError(f"No surrogate model at {directory}: {META_NAME} is missing; fit one with `advisor surrogate fit`.") from None
    except (OSError, ValueError) as exc:
        raise SurrogateError(f"Surrogate meta {meta_path} is corrupt: {exc}.") from None
    schema = _check_schema(meta, meta_path)
    _check_baselines(meta, meta_path)
    _check_accuracy_target(meta, meta_path)
    _check_calibration(meta, meta_path)
    lgb = import_lightgbm(lean=True)
    boosters: dict[str, dict[float, Any]] = {}
    files = meta.get("files") or {}
    if not isinstance(files, dict):
        raise SurrogateError(f"Surrogate meta {meta_path} is corrupt: 'files' must be a JSON object, "
                             f"got {type(files).__name__}.")
    wanted = list(OBJECTIVES)
    target = meta.get("accuracy_target")
    if isinstance(target, dict) and target.get("combined_with", "absent") is not None:
        # the plain-accuracy boosters the relative ones are combined with (models fitted before the
        # key existed had them too; a model that says None has none)
        wanted.append(ACCURACY_COMPANION)
    for objective in wanted:
        boosters[objective] = {}
        per_alpha = files.get(objective) or {}
        if not isinstance(per_alpha, dict):
            raise SurrogateError(f"Surrogate meta {meta_path} is corrupt: 'files' entry {objective!r} must be a "
                                 f"JSON object, got {type(per_alpha).__name__}.")
        for alpha in QUANTILES:
            name = per_alpha.get(str(alpha))
            if not name or not isinstance(name, str):
                raise SurrogateError(f"Surrogate meta {meta_path} names no model for {objective!r} at quantile {alpha}.")
            path = directory / Path(name).name
            try:
                text = path.read_text(encoding="utf-8")
                with _native_stderr_silenced():  # LightGBM's Fatal also writes to fd 2 itself
                    booster = lgb.Booster(model_str=text)
            except FileNotFoundError:
                raise SurrogateError(f"Surrogate model file {path} is missing.") from None
            except (OSError, UnicodeDecodeError, lgb.basic.LightGBMError, ValueError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise SurrogateError(f"Surrogate model file {path} is corrupt: {first}") from None
            if booster.feature_name() != schema.names:
                raise SurrogateError(
                    f"Surrogate model file {path} has {booster.num_feature()} features that do not match "
                    f"the schema in {meta_path}; refit it with `advisor surrogate fit`."
                )
            boosters[objective][alpha] = booster
    meta["directory"] = str(directory)
    return Surrogate(schema, boosters, meta)


def table_warning(surrogate: Surrogate, table_path: str | Path) -> str | None:
    """A one-line warning when ``table_path`` is not the table the surrogate was trained on."""
    recorded = surrogate.meta.get("table_sha256")
    if not recorded:
        return f"The surrogate records no training table, so it cannot be checked against {table_path}."
    try:
        actual = file_sha256(table_path)
    except OSError:
        return f"The knowledge base {table_path} cannot be read to check it against the surrogate."
    if actual != recorded:
        return (
            f"The surrogate was trained on a different table (sha256 {recorded[:12]}) than {table_path} "
            f"(sha256 {actual[:12]}); refit with `advisor surrogate fit --table {table_path}`."
        )
    return None


def fit_file(table_path: str | Path, *, seed: int = 0, num_threads: int = 1, num_boost_round: int | None = None,
             on_progress: Callable[[str], None] | None = None) -> Surrogate:
    """Read a knowledge-base file, fit the surrogate on it, and record the table and its sha256.

    ``on_progress`` is called with one line once the table is read and fitting starts.
    """
    from advisor import knowledge
    from advisor.surrogate.model import DEFAULT_ROUNDS, fit

    table = knowledge.read(table_path)
    if on_progress is not None:
        on_progress(f"Fitting the surrogate on {table_path} ({len(table)} trials)")
    surrogate = fit(table.columns, seed=seed, num_threads=num_threads,
                    num_boost_round=num_boost_round or DEFAULT_ROUNDS, source=f"knowledge base {table_path}")
    surrogate.meta["table"] = table_label(table_path)
    surrogate.meta["table_sha256"] = file_sha256(table_path)
    surrogate.meta["table_rows"] = len(table)
    return surrogate
