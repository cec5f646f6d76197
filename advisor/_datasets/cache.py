"""The dataset cache folder, and a persistent cache of file digests.

Fingerprints are content-derived, but hashing 180 MB of CIFAR-10 on every trial would cost more
than loading it. Digests are therefore remembered per file, keyed by (real path, size,
modification time), in ``<cache>/digests.json``; a changed file gets new size or mtime and is
hashed again. The cache is an optimisation only: when it cannot be read or written the digests
are simply recomputed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path

from advisor._atomic import atomic_write

__all__ = ["cache_root", "sha256_file", "lookup_digests", "store_digests"]

_log = logging.getLogger(__name__)
_DIGESTS_FILE = "digests.json"
_RACY_NS = 3_000_000_000
_memory: dict[str, dict[str, object]] = {}
_memory_lock = threading.Lock()


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where downloads live: ``cache_dir`` if given, else ``$ADVISOR_DATA``, else the user cache."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("ADVISOR_DATA")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("advisor")) / "datasets"


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _key(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def _read_table(file: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def lookup_digests(path: str | os.PathLike[str]) -> dict[str, str]:
    """Digests remembered for ``path`` if the file is unchanged since, else ``{}``."""
    key = _key(Path(path))
    if key is None:
        return {}
    name, size, mtime = key
    with _memory_lock:
        entry = _memory.get(name)
    if entry is None:
        entry = _read_table(cache_root() / _DIGESTS_FILE).get(name)
    if not isinstance(entry, dict) or entry.get("size") != size or entry.get("mtime_ns") != mtime:
        return {}
    with _memory_lock:
        _memory[name] = entry
    return {k: v for k, v in entry.items() if k.endswith("sha256") and isinstance(v, str)}


def store_digests(path: str | os.PathLike[str], digests: dict[str, str]) -> None:
    """Remember ``digests`` (names ending in ``sha256``) for the current state of ``path``.

    A file modified in the last few seconds is not remembered: a second write within the same
    timestamp tick would keep size and mtime and go unnoticed (git's "racily clean" problem).
    """
    key = _key(Path(path))
    if key is None:
        return
    name, size, mtime = key
    if time.time_ns() - mtime < _RACY_NS:
        return
    entry: dict[str, object] = {**lookup_digests(path), **digests, "size": size, "mtime_ns": mtime}
    with _memory_lock:
        _memory[name] = entry
    root = cache_root()
    try:
        from filelock import FileLock

        root.mkdir(parents=True, exist_ok=True)
        table_path = root / _DIGESTS_FILE
        with FileLock(str(table_path) + ".lock", timeout=30):
            table = _read_table(table_path)
            table[name] = entry
            atomic_write(table_path, json.dumps(table, sort_keys=True), fsync=False)
    except Exception as exc:  # an unwritable cache costs a re-hash later, nothing more
        _log.debug("could not record digests in %s: %s", root, exc)
