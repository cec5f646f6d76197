"""Sampling a trial's process tree: memory, CPU time, limits, and CPU used by others.

The monitor is a thread in the parent. At every tick it lists the child's process tree, sums the
resident memory and the CPU time of every process it has seen (a process that has ended keeps its
last CPU time), and enforces the wall-time limit and the memory cap through a callback. It also
measures its own cost, so a result can say how much the measurement disturbed the measured.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import psutil

__all__ = ["TreeMonitor", "MonitorSummary", "busy_cpu_seconds"]

logger = logging.getLogger(__name__)
MB = 1024.0 * 1024.0
CHILDREN_EVERY = 4  # ticks between two listings of the tree


def busy_cpu_seconds(cores: Sequence[int]) -> float | None:
    """Seconds the given CPUs have spent busy since boot (all processes), or ``None``.

    Busy is everything but idle and I/O wait. Guest time is already inside user time on Linux.
    """
    try:
        per_cpu = psutil.cpu_times(percpu=True)
    except (OSError, NotImplementedError):
        return None
    total = 0.0
    for index in cores:
        if index >= len(per_cpu):
            return None
        t = per_cpu[index]
        total += t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) + getattr(
            t, "softirq", 0.0
        ) + getattr(t, "steal", 0.0)
    return total


@dataclass(frozen=True)
class MonitorSummary:
    """What the monitor saw over its life."""

    peak_rss_mb: float
    tree_cpu_s: float
    samples: int
    sampler_cpu_s: float
    wall_s: float
    pids: tuple[int, ...]


class TreeMonitor(threading.Thread):
    """Sample the process tree rooted at ``pid`` every ``interval`` seconds.

    Args:
        pid: The trial child's pid.
        interval: Seconds between samples (0.05 = 20 Hz).
        deadline: ``time.monotonic()`` value at which the wall-time limit expires, or ``None``.
        memory_mb: Cap on the summed RSS of the tree in MiB, or ``None``.
        on_limit: Called once, from this thread, as ``on_limit(status, message)`` with status
            ``"timeout"`` or ``"oom"`` when a limit is exceeded; it must kill the tree.
    """

    def __init__(
        self,
        pid: int,
        *,
        interval: float = 0.05,
        deadline: float | None = None,
        memory_mb: float | None = None,
        on_limit: Callable[[str, str], None],
    ) -> None:
        super().__init__(name=f"advisor-monitor-{pid}", daemon=True)
        self.pid = pid
        self.interval = interval
        self.deadline = deadline
        self.memory_mb = memory_mb
        self.on_limit = on_limit
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._procs: dict[tuple[int, float], psutil.Process] = {}
        self._cpu: dict[tuple[int, float], float] = {}
        self._peak_rss = 0.0
        self._samples = 0
        self._sampler_cpu = 0.0
        self._wall = 0.0
        self._limit_hit = False
        try:
            root = psutil.Process(pid)
            self._procs[(pid, root.create_time())] = root
        except psutil.Error:
            pass

    def stop(self) -> None:
        """Stop sampling; :meth:`summary` is final once the thread has been joined."""
        self._halt.set()

    def processes(self) -> list[psutil.Process]:
        """Every process of the tree seen so far, plus the current children of the root."""
        with self._lock:
            procs = list(self._procs.values())
        for proc in list(procs):
            if proc.pid == self.pid:
                try:
                    procs.extend(proc.children(recursive=True))
                except psutil.Error:
                    pass
        return procs

    def _sample(self) -> None:
        with self._lock:
            known = list(self._procs.items())
        root = next((p for (pid, _), p in known if pid == self.pid), None)
        # Listing children scans every process on the machine: do it at a quarter of the rate.
        if root is not None and self._samples % CHILDREN_EVERY == 0:
            try:
                for child in root.children(recursive=True):
                    key = (child.pid, child.create_time())
                    if key not in self._procs:
                        with self._lock:
                            self._procs[key] = child
                        known.append((key, child))
            except psutil.Error:
                pass
        rss = 0.0
        for key, proc in known:
            try:
                with proc.oneshot():
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue
                    rss += proc.memory_info().rss / MB
                    t = proc.cpu_times()
                    self._cpu[key] = t.user + t.system
            except psutil.Error:
                continue
        self._samples += 1
        self._peak_rss = max(self._peak_rss, rss)
        if self._limit_hit:
            return
        if self.memory_mb is not None and rss > self.memory_mb:
            self._limit_hit = True
            self.on_limit(
                "oom", f"memory cap exceeded: the trial used {rss:.0f} MiB (cap {self.memory_mb:.0f} MiB)"
            )
        elif self.deadline is not None and time.monotonic() >= self.deadline:
            self._limit_hit = True
            self.on_limit("timeout", "wall-time limit reached")

    def run(self) -> None:
        cpu0 = time.thread_time()
        t0 = time.monotonic()
        next_tick = t0
        try:
            while not self._halt.is_set():
                self._sample()
                next_tick += self.interval
                now = time.monotonic()
                if self.deadline is not None and not self._limit_hit:
                    # Wake for the deadline itself, not just the next tick.
                    wait = min(next_tick, self.deadline) - now
                else:
                    wait = next_tick - now
                if wait < 0:
                    next_tick = now  # fell behind: do not try to catch up in a burst
                    wait = 0
                self._halt.wait(wait)
        except Exception:  # the monitor must never take the parent down
            logger.exception("process-tree monitor of pid %d stopped", self.pid)
        finally:
            self._sampler_cpu = time.thread_time() - cpu0
            self._wall = time.monotonic() - t0

    @property
    def peak_rss_mb(self) -> float:
        """Peak RSS of the tree in MiB over the samples taken so far."""
        return self._peak_rss

    def summary(self) -> MonitorSummary:
        """Peak memory, tree CPU time and the monitor's own cost."""
        with self._lock:
            pids = tuple(pid for pid, _ in self._procs)
        return MonitorSummary(
            peak_rss_mb=self._peak_rss,
            tree_cpu_s=sum(self._cpu.values()),
            samples=self._samples,
            sampler_cpu_s=self._sampler_cpu,
            wall_s=self._wall,
            pids=pids,
        )
