"""The package's one atomic file write: a temporary file beside the target, then ``os.replace``.

A reader never sees a half-written file, a failed write leaves the old file (and no temporary
one) behind, and the result has the permissions any ordinary write would give it under the
process's umask (``mkstemp`` alone would leave it ``-rw-------``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "current_umask"]


def current_umask() -> int:
    """The process's umask, read without changing it where ``/proc`` tells it."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, then put it back at once
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, fsync: bool = True) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` atomically; create its folder if needed.

    Args:
        path: The file to write.
        data: Its whole content.
        fsync: Flush to the disk before the rename (off for scratch files that need no durability).

    Returns:
        The path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
