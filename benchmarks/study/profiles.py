"""Study part 4: resource profiles: CPU use and resident memory over time, peak memory by batch.

The harness keeps each trial's summary (peak RSS, mean busy cores) but not the samples behind it:
``TrialResult.extra["monitor_samples"]`` is only their count. So this script samples the trial's
process tree itself, from the parent, while ``run_trial`` runs: every ``--interval`` seconds it
sums the RSS and CPU time of every descendant of this process (the trial child and anything it
spawns) and stores the series with the trial as the user attribute ``study.profile``
(``t`` seconds since spawn, ``rss_mb``, ``cpu_cores`` = busy cores over the last interval). The
extra sampler costs about one psutil scan per interval; the harness's own 20 Hz monitor is
unchanged, so ``peak_memory_mb`` and ``cpu_utilization`` stay comparable with every other trial.

Cells: each framework on the MNIST subset (5,000 / 2,000, LeNet-5) and, with
``--datasets mnist,cifar10``, the CIFAR-10 subset (cifar_quick), at batch sizes 16, 64, 256 and
1024 (Adam, lr 1e-3, 2 epochs, every granted core), one study per (framework, dataset):
``profile-<framework>-<dataset>``. Profiles are shapes, not timings, so ``--repeats`` is 1.

Usage:
    python benchmarks/study/profiles.py --dry-run
    python benchmarks/study/profiles.py --frameworks torch,tensorflow --cores 0,1
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from defaults import SHARED, Cell, add_common_args, finish, parse_cores, split, workload_for  # noqa: E402
from knobs import TEST_SAMPLES, TRAIN_SAMPLES, base_config  # noqa: E402

from advisor.records import FRAMEWORKS  # noqa: E402

PROFILE_ATTR = "study.profile"
BATCH_SIZES = (16, 64, 256, 1024)
MAX_POINTS = 2000  # a longer series is thinned (every other point) to keep the attribute small


class TreeSampler:
    """Samples RSS and CPU time of every descendant of this process in a thread.

    ``start()`` begins, ``stop()`` ends and returns ``{"study.profile": {...}}``.
    """

    def __init__(self, *, interval: float = 0.25) -> None:
        self.interval = interval
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="study-profile", daemon=True)
        self._t: list[float] = []
        self._rss: list[float] = []
        self._cpu: list[float] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        self._halt.set()
        self._thread.join()
        step = 1
        while len(self._t) // step > MAX_POINTS:
            step *= 2
        return {PROFILE_ATTR: {"interval_s": self.interval * step, "t": self._t[::step],
                               "rss_mb": self._rss[::step], "cpu_cores": self._cpu[::step]}}

    def _loop(self) -> None:
        import psutil

        me = psutil.Process(os.getpid())
        t0 = time.monotonic()
        seen: dict[tuple[int, float], float] = {}  # cpu seconds of every process seen (ended ones keep theirs)
        last_t, last_cpu = t0, 0.0
        while not self._halt.wait(self.interval):
            rss = 0.0
            try:
                procs = me.children(recursive=True)
            except psutil.Error:
                procs = []
            for proc in procs:
                try:
                    with proc.oneshot():
                        key = (proc.pid, proc.create_time())
                        if proc.status() == psutil.STATUS_ZOMBIE:
                            continue
                        rss += proc.memory_info().rss / 2**20
                        cpu = proc.cpu_times()
                        seen[key] = cpu.user + cpu.system
                except psutil.Error:
                    continue
            now, cpu_total = time.monotonic(), sum(seen.values())
            self._t.append(round(now - t0, 3))
            self._rss.append(round(rss, 1))
            self._cpu.append(round(max(0.0, cpu_total - last_cpu) / max(now - last_t, 1e-6), 3))
            last_t, last_cpu = now, cpu_total


def plan(*, frameworks: Sequence[str] = FRAMEWORKS, datasets: Sequence[str] = ("mnist",),
         batch_sizes: Sequence[int] = BATCH_SIZES, repeats: int = 1, cores: int = 1, data_dir: str | Path = SHARED,
         dataset: str | None = None, model: str | None = None, train_samples: int | None = TRAIN_SAMPLES,
         test_samples: int | None = TEST_SAMPLES, epochs: int | None = None) -> list[Cell]:
    """One cell per (framework, dataset): the batch sizes, ``repeats`` seeds each."""
    cells = []
    for ds in ([dataset] if dataset else datasets):
        workload = workload_for(ds, data_dir=data_dir, model=model, train_samples=train_samples,
                                test_samples=test_samples)
        for fw in frameworks:
            base = base_config(fw, ds, cores=cores, epochs=epochs or 2)
            configs = tuple(dataclasses.replace(base, batch_size=b, seed=r) for r in range(repeats) for b in batch_sizes)
            attrs = {"study.kind": "profile", "study.framework": fw, "study.dataset": ds,
                     "study.batch_sizes": list(batch_sizes), "study.base": base.to_dict()}
            cells.append(Cell(f"profile-{fw}-{ds}", workload, configs, attrs))
    return cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, repeats=1, trial_timeout=900.0)
    ap.add_argument("--datasets", default="mnist")
    ap.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between profile samples")
    ap.set_defaults(train_samples=TRAIN_SAMPLES, test_samples=TEST_SAMPLES)
    args = ap.parse_args(argv)
    cells = plan(frameworks=split(args.frameworks), datasets=split(args.datasets),
                 batch_sizes=[int(b) for b in split(args.batch_sizes)], repeats=args.repeats,
                 cores=len(parse_cores(args.cores)), data_dir=args.data_dir, dataset=args.dataset, model=args.model,
                 train_samples=args.train_samples or None, test_samples=args.test_samples or None,
                 epochs=args.epochs)
    return finish(cells, args, observe=lambda: TreeSampler(interval=args.interval))


if __name__ == "__main__":
    raise SystemExit(main())
