"""The parent's end of the progress channel: JSON lines read from a pipe, with bounded memory.

The child is not trusted. A line longer than :data:`MAX_LINE_BYTES`, a line that is not a JSON
object with an ``event`` key, or more events than the trial can produce counts against the child;
past a small allowance the channel is declared broken and the trial is killed. The reader never
holds more than one line plus one read chunk in memory.
"""

from __future__ import annotations

import json
import os
import queue
import select
import threading
import time
from typing import Any, Callable

__all__ = ["EventReader", "MAX_LINE_BYTES", "MAX_GARBAGE_LINES", "MAX_GARBAGE_BYTES"]

MAX_LINE_BYTES = 64 * 1024
MAX_GARBAGE_LINES = 8
MAX_GARBAGE_BYTES = 1024 * 1024
_CHUNK = 64 * 1024
KNOWN_EVENTS = frozenset(
    {"started", "imported", "data_loaded", "training", "epoch", "final", "error", "diverged"}
)


class EventReader(threading.Thread):
    """Read events from ``fd`` until end of file or :meth:`stop`; put each on :attr:`events`.

    Each event dict gets ``_received`` (``time.monotonic()`` at arrival). When the channel breaks
    (see the module docstring), ``on_broken(message)`` is called once, from this thread, and
    reading stops. The reader owns ``fd`` and closes it.

    Args:
        fd: The read end of the pipe.
        max_events: The most events a well-behaved child sends.
        on_broken: Called with a one-line reason when the channel is declared broken.
    """

    def __init__(self, fd: int, *, max_events: int, on_broken: Callable[[str], None]) -> None:
        super().__init__(name=f"advisor-events-{fd}", daemon=True)
        self.fd = fd
        self.max_events = max_events
        self.on_broken = on_broken
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.garbage_lines = 0
        self.garbage_bytes = 0
        self.count = 0
        self.broken: str | None = None
        self.eof = threading.Event()
        self._halt = threading.Event()

    def stop(self) -> None:
        """Ask the thread to finish after the current read."""
        self._halt.set()

    def _garbage(self, nbytes: int, what: str) -> None:
        self.garbage_lines += 1
        self.garbage_bytes += nbytes
        if self.broken is None and (
            self.garbage_lines > MAX_GARBAGE_LINES or self.garbage_bytes > MAX_GARBAGE_BYTES
        ):
            self._break(
                f"progress channel: the trial process sent {self.garbage_lines} malformed lines "
                f"({self.garbage_bytes} bytes; last: {what})"
            )

    def _break(self, message: str) -> None:
        self.broken = message
        self.on_broken(message)

    def _line(self, raw: bytes) -> None:
        try:
            event = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            self._garbage(len(raw), "not JSON")
            return
        if not isinstance(event, dict) or event.get("event") not in KNOWN_EVENTS:
            self._garbage(len(raw), "not a known event")
            return
        self.count += 1
        if self.count > self.max_events:
            self._break(f"progress channel: the trial process sent more than {self.max_events} events")
            return
        event["_received"] = time.monotonic()
        self.events.put(event)

    def run(self) -> None:
        buf = bytearray()
        skipping = 0  # bytes of an over-long line discarded so far; 0 when not inside one
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while not self._halt.is_set() and self.broken is None:
                if not poller.poll(50):
                    continue
                chunk = os.read(self.fd, _CHUNK)
                if not chunk:
                    break
                start = 0
                while self.broken is None:
                    nl = chunk.find(b"\n", start)
                    piece = chunk[start:] if nl < 0 else chunk[start:nl]
                    if skipping:
                        skipping += len(piece)
                        if nl >= 0:
                            self._garbage(skipping, f"a line over {MAX_LINE_BYTES} bytes")
                            skipping = 0
                    elif len(buf) + len(piece) > MAX_LINE_BYTES:
                        skipping = len(buf) + len(piece)
                        buf.clear()
                        if nl >= 0:
                            self._garbage(skipping, f"a line over {MAX_LINE_BYTES} bytes")
                            skipping = 0
                        elif skipping > MAX_GARBAGE_BYTES:
                            self._garbage(skipping, f"a line over {MAX_LINE_BYTES} bytes")
                    else:
                        buf += piece
                        if nl >= 0:
                            if buf.strip():
                                self._line(bytes(buf))
                            buf.clear()
                    if nl < 0:
                        break
                    start = nl + 1
                if skipping > MAX_GARBAGE_BYTES and self.broken is None:
                    self._garbage(skipping, f"a line over {MAX_LINE_BYTES} bytes")
        except OSError as exc:
            if self.broken is None:
                self._break(f"progress channel: read failed: {exc}")
        finally:
            self.eof.set()
            try:
                os.close(self.fd)
            except OSError:
                pass
