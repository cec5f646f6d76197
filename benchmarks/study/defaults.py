"""Study part 1: do framework defaults transfer? Each seed framework's stock settings on all four.

Every preset of :mod:`advisor.presets` (the seed study's stock MNIST and CIFAR-10 settings of
TensorFlow, Caffe, Torch and Theano) is measured on each of our four frameworks, ``--repeats``
times (training seeds 0, 1, ...), each trial in a fresh child through ``advisor.harness.run_trial``.
One Optuna study per (preset, framework), named ``defaults-<preset>-<framework>``, in the study
storage; each trial's TrialResult is its user attribute ``advisor.result`` (as in collect.py), so
``advisor knowledge export`` reads these studies too. A preset a framework cannot run (ONNX
Runtime's training API has no momentum SGD) is recorded as not applicable: an empty study whose
attribute ``study.not_applicable`` says why. Nothing is substituted for it.

Epochs are scaled to this machine: ``ceil(stock epochs x --epochs-scale)``, capped at
``--max-epochs`` (stock CIFAR-10 TensorFlow is 2,560 epochs). Each study stores the scaling in its
attributes and report.py states it. Learning-rate schedules are not modelled (see presets.py).

Resumable: every trial carries a key (workload + config, seed included) in ``study.key``; a run
counts the keys the storage already holds and runs only the missing trials, visiting the cells
round-robin so that an interrupted run still covers every cell. This module also holds the study
plumbing that knobs.py, profiles.py and joint.py share (cells, keys, recording, reading back).

Usage:
    python benchmarks/study/defaults.py --dry-run
    python benchmarks/study/defaults.py --repeats 3 --epochs-scale 1 --max-epochs 20 --cores 0,1
    python benchmarks/study/defaults.py --dataset digits --train-samples 300 --epochs 1 --max-trials 2
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import REPO, SHARED  # noqa: E402

from advisor.records import FRAMEWORKS, Config, TrialResult, Workload  # noqa: E402

log = logging.getLogger("study")

DEFAULT_STORAGE = f"sqlite:///{REPO / 'benchmarks' / 'study' / 'study.db'}"
KEY_ATTR = "study.key"
RESULT_ATTR = "advisor.result"
#: Where each dataset's canonical files sit under --data-dir, and the model its seed study used.
DATA_SUBDIR = {"mnist": "mnist", "cifar10": "cifar-10-batches-bin", "fashion-mnist": "fashion-mnist"}
MODEL_FOR = {"mnist": "lenet5", "cifar10": "cifar_quick", "fashion-mnist": "lenet5", "digits": "lenet5"}
NOT_APPLICABLE_ATTR = "study.not_applicable"
# scikit-learn's conv layers run on the project's numpy im2col engine, which needs minutes per
# epoch beyond this many training images (collect.py keeps the same bound).
NUMPY_CONV_MAX = 5000


# ---------------------------------------------------------------------------------------------
# Shared plumbing: cells, trial keys, running, recording, reading back
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One study of a plan: its workload and the trials it should hold, in run order.

    Attributes:
        study: Study name.
        workload: What every trial of the study trains.
        configs: One config per planned trial (repeats differ by ``seed``).
        attrs: Study user attributes describing the cell (kind, preset, knob, scaling...).
        not_applicable: Why the cell cannot run; it then plans no trial.
    """

    study: str
    workload: Workload
    configs: tuple[Config, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)
    not_applicable: str | None = None


def trial_key(workload: Workload, config: Config) -> str:
    """The identity of a planned trial: its workload and full config (seed included)."""
    return json.dumps({"workload": workload.to_dict(), "config": config.to_dict()}, sort_keys=True)


def workload_for(dataset: str, *, data_dir: str | Path, model: str | None = None,
                 train_samples: int | None = None, test_samples: int | None = None) -> Workload:
    """The workload of ``dataset`` read from its canonical files under ``data_dir``."""
    sub = DATA_SUBDIR.get(dataset)
    return Workload(dataset=dataset, model=model or MODEL_FOR.get(dataset, "mlp"), train_samples=train_samples,
                    test_samples=test_samples, data_dir=str(Path(data_dir) / sub) if sub else None, seed=0)


def parse_cores(text: str | None) -> list[int]:
    """``"0,1"`` -> ``[0, 1]``; ``None`` -> the CPUs this process may use."""
    if not text:
        return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return [int(c) for c in text.split(",") if c.strip()]


def add_common_args(ap: argparse.ArgumentParser, *, repeats: int = 3, trial_timeout: float = 1800.0) -> None:
    """The options every study script shares."""
    ap.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL (SQLite or PostgreSQL)")
    ap.add_argument("--data-dir", default=str(SHARED), help="folder holding mnist/ and cifar-10-batches-bin/")
    ap.add_argument("--repeats", type=int, default=repeats, help="trials per configuration (seeds 0..n-1)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (cells, trials) and run nothing")
    ap.add_argument("--max-trials", type=int, default=None, help="stop after this many new trials")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--cores", default=None, help="CPU ids for the trials, e.g. 0,1 (default: all allowed)")
    ap.add_argument("--trial-timeout", type=float, default=trial_timeout, help="wall-time limit per trial (s)")
    ap.add_argument("--memory-mb", type=float, default=16000.0, help="memory cap per trial (MiB)")
    ap.add_argument("--workdir", default=None, help="keep each trial's folder here (default: keep none)")
    ap.add_argument("--dataset", default=None, help="override the dataset of every cell (e.g. digits)")
    ap.add_argument("--model", default=None, help="override the model of every cell")
    ap.add_argument("--train-samples", type=int, default=None, help="override the training-set size (0 = all)")
    ap.add_argument("--test-samples", type=int, default=None, help="override the test-set size (0 = all)")
    ap.add_argument("--epochs", type=int, default=None, help="override the epochs of every trial")
    ap.add_argument("--retry-contended", action="store_true",
                    help="run again every planned trial whose stored run was contended (that run is kept, marked)")


def pending(cell: Cell, held: Counter[str]) -> list[Config]:
    """The planned configs of ``cell`` that the storage does not hold yet (multiset difference)."""
    held = Counter(held)
    todo = []
    for config in cell.configs:
        key = trial_key(cell.workload, config)
        if held[key] > 0:
            held[key] -= 1
        else:
            todo.append(config)
    return todo


def open_study(storage: str, name: str) -> Any:
    """Create or load a study with the objectives time (min), accuracy (max), memory (min)."""
    import optuna

    from advisor.tuning import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = open_storage(storage, heartbeat_interval=None, grace_period=None)
    return optuna.create_study(study_name=name, storage=rdb, directions=["minimize", "maximize", "minimize"],
                               load_if_exists=True)


def held_keys(study: Any, *, retry_contended: bool = False) -> Counter[str]:
    """The trial keys a study holds (every finished trial counts, failed ones included).

    With ``retry_contended`` a trial during which other processes used its cores does not count,
    so the plan runs it again; the contended run stays in the study, marked as such.
    """
    def counts(t: Any) -> bool:
        if KEY_ATTR not in t.user_attrs:
            return False
        result = t.user_attrs.get(RESULT_ATTR)
        return not (retry_contended and isinstance(result, Mapping) and result.get("contended"))

    return Counter(t.user_attrs[KEY_ATTR] for t in study.get_trials(deepcopy=False) if counts(t))


def _tag_study(study: Any, cell: Cell) -> None:
    attrs = {**cell.attrs, "study.workload": cell.workload.to_dict()}
    if cell.not_applicable:
        attrs[NOT_APPLICABLE_ATTR] = cell.not_applicable
    old = study.user_attrs.get("study.workload")
    if old is not None and old != attrs["study.workload"]:
        raise SystemExit(f"Study {cell.study!r} already holds trials of another workload ({old}); "
                         f"use another --storage for this one.")
    for key, value in attrs.items():
        if study.user_attrs.get(key) != value:
            study.set_user_attr(key, value)


def record(study: Any, key: str, result: TrialResult, extra: Mapping[str, Any] | None = None) -> None:
    """Store one measured trial the way collect.py and advisor.tuning do."""
    import optuna

    from advisor._tuning._read import json_safe, knob_params  # the forms advisor.tuning stores

    attrs = {RESULT_ATTR: json_safe(result.to_dict()), "advisor.status": result.status, KEY_ATTR: key,
             **json_safe(dict(extra or {}))}
    if result.error:
        attrs["advisor.error"] = str(result.error)[:2000]
    values: list[Any] | None = [result.train_time_s, result.test_accuracy, result.peak_memory_mb]
    if result.status == "ok" and all(v is not None for v in values or ()):
        state = optuna.trial.TrialState.COMPLETE
    else:
        values = None
        state = optuna.trial.TrialState.PRUNED if result.status == "pruned" else optuna.trial.TrialState.FAIL
    knobs, distributions = knob_params(result.config)  # swept knobs show (and slice) in optuna-dashboard
    study.add_trial(optuna.trial.create_trial(values=values, state=state, user_attrs=attrs, params=knobs,
                                              distributions=distributions))


def run_cells(cells: Sequence[Cell], *, storage: str, cores: Sequence[int], limits: Any,
              max_trials: int | None = None, workdir: str | None = None,
              observe: Callable[[], Any] | None = None, retry_contended: bool = False) -> int:
    """Run the missing trials of ``cells``, one per cell per round, and record each.

    Args:
        retry_contended: Count a contended stored trial as missing (see :func:`held_keys`).
        observe: Optional factory of an object with ``start()`` and ``stop() -> dict``; the dict
            is stored with the trial as extra user attributes (profiles.py samples with it).

    Returns:
        The number of trials run.
    """
    from advisor.harness import run_trial

    studies, queues = {}, {}
    for cell in cells:
        study = open_study(storage, cell.study)
        _tag_study(study, cell)
        studies[cell.study] = study
        queues[cell.study] = [] if cell.not_applicable else pending(
            cell, held_keys(study, retry_contended=retry_contended))
    by_name = {c.study: c for c in cells}
    done = 0
    while any(queues.values()):
        for name, queue in queues.items():
            if not queue:
                continue
            if max_trials is not None and done >= max_trials:
                return done
            config = queue.pop(0)
            cell, study = by_name[name], studies[name]
            probe = observe() if observe else None
            t0 = time.time()
            if probe is not None:
                probe.start()
            result = run_trial(cell.workload, config, limits=limits, cores=list(cores)[: config.threads],
                               workdir=workdir, study=name, trial_number=len(study.get_trials(deepcopy=False)))
            extra = probe.stop() if probe is not None else None
            record(study, trial_key(cell.workload, config), result, extra)
            done += 1
            log.info("%s %s acc=%s train=%.3gs wall=%.1fs contended=%s", name, result.status, result.test_accuracy,
                     result.train_time_s or float("nan"), time.time() - t0, result.contended)
    return done


def print_plan(cells: Sequence[Cell], *, storage: str | None = None) -> None:
    """Print the plan: every cell with its planned and (when the storage exists) missing trials."""
    total = missing = 0
    for cell in cells:
        if cell.not_applicable:
            print(f"{cell.study}: not applicable ({cell.not_applicable})")
            continue
        todo = len(cell.configs)
        if storage is not None and _storage_exists(storage):
            todo = len(pending(cell, _held_if_exists(storage, cell.study)))
        epochs = sorted({c.epochs for c in cell.configs})
        print(f"{cell.study}: {len(cell.configs)} trials ({todo} to run), epochs {epochs}, "
              f"{cell.workload.dataset}/{cell.workload.model} train={cell.workload.train_samples or 'full'}")
        total += len(cell.configs)
        missing += todo
    n_na = sum(1 for c in cells if c.not_applicable)
    print(f"plan: {len(cells)} cells ({n_na} not applicable), {total} trials, {missing} to run")


def _storage_exists(storage: str) -> bool:
    return not storage.startswith("sqlite:///") or Path(storage[len("sqlite:///"):]).exists()


def _held_if_exists(storage: str, name: str) -> Counter[str]:
    import optuna

    from advisor.tuning import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = open_storage(storage, heartbeat_interval=None, grace_period=None)
    try:
        return held_keys(optuna.load_study(study_name=name, storage=rdb))
    except KeyError:
        return Counter()


@dataclass
class StudyData:
    """One stored study read back: its attributes and its trials' results."""

    name: str
    attrs: dict[str, Any]
    results: list[TrialResult]
    trial_attrs: list[dict[str, Any]]  # user attributes of each result's trial, same order


def load_studies(storage: str, *, prefix: str = "") -> dict[str, StudyData]:
    """Every study of ``storage`` whose name starts with ``prefix``, with its TrialResults."""
    import optuna

    from advisor.tuning import open_storage

    if not _storage_exists(storage):
        return {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = open_storage(storage, heartbeat_interval=None, grace_period=None)
    out = {}
    for name in optuna.get_all_study_names(storage=rdb):
        if not name.startswith(prefix):
            continue
        study = optuna.load_study(study_name=name, storage=rdb)
        results, attrs = [], []
        for t in study.get_trials(deepcopy=False):
            data = t.user_attrs.get(RESULT_ATTR)
            if isinstance(data, Mapping):
                try:
                    results.append(TrialResult.from_dict(data))
                except (KeyError, TypeError, ValueError):
                    continue
                attrs.append(dict(t.user_attrs))
        out[name] = StudyData(name, dict(study.user_attrs), results, attrs)
    return out


def time_to(result: TrialResult, accuracy: float) -> float | None:
    """Training seconds at the end of the first epoch whose test accuracy reached ``accuracy``."""
    for e in result.epochs:
        if e.test_accuracy == e.test_accuracy and e.test_accuracy >= accuracy:
            return e.train_time_s
    return None


def config_key(config: Config) -> str:
    """A config's identity without its training seed: the repeats of one setting share it."""
    data = config.to_dict()
    data.pop("seed")
    return json.dumps(data, sort_keys=True)


def limits_from(args: argparse.Namespace) -> Any:
    from advisor.harness import Limits

    return Limits(wall_time_s=args.trial_timeout, memory_mb=args.memory_mb)


def split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def finish(cells: Sequence[Cell], args: argparse.Namespace, *, observe: Callable[[], Any] | None = None) -> int:
    """Dry-run or run a plan (the tail every script's ``main`` shares)."""
    if args.dry_run:
        print_plan(cells, storage=args.storage)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    done = run_cells(cells, storage=args.storage, cores=parse_cores(args.cores), limits=limits_from(args),
                     max_trials=args.max_trials, workdir=args.workdir, observe=observe,
                     retry_contended=getattr(args, "retry_contended", False))
    print(f"ran {done} new trials into {args.storage}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------
# The defaults plan
# ---------------------------------------------------------------------------------------------


def plan(*, presets: Iterable[str] | None = None, frameworks: Sequence[str] = FRAMEWORKS, repeats: int = 3,
         epochs_scale: float = 1.0, max_epochs: int = 20, threads: int = 1, data_dir: str | Path = SHARED,
         dataset: str | None = None, model: str | None = None, train_samples: int | None = None,
         test_samples: int | None = None, epochs: int | None = None, allow_slow: bool = False) -> list[Cell]:
    """One cell per (preset, framework): the preset's config, ``repeats`` seeds.

    Args:
        presets: Preset names (default: all of :data:`advisor.presets.PRESETS`).
        epochs_scale: Stock epochs are multiplied by this (rounded up)...
        max_epochs: ...and capped at this.
        threads: Threads of every trial (the stock frameworks use every core).
        dataset, model, train_samples, test_samples, epochs: Overrides (tests, quick looks).
        allow_slow: Also run scikit-learn conv models on more than :data:`NUMPY_CONV_MAX` images.
    """
    from advisor.datasets import get_info

    from advisor.presets import PRESETS

    names = list(presets) if presets else list(PRESETS)
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        raise SystemExit(f"Unknown preset {unknown[0]!r}: choose among {', '.join(PRESETS)}.")
    cells = []
    for name in names:
        preset = PRESETS[name]
        ds = dataset or preset.dataset
        workload = workload_for(ds, data_dir=data_dir, model=model, train_samples=train_samples,
                                test_samples=test_samples)
        run_epochs = epochs or min(preset.epochs(scale_epochs=epochs_scale), max_epochs)
        attrs = {"study.kind": "defaults", "study.preset": name, "study.seed_framework": preset.seed_framework,
                 "study.preset_dataset": preset.dataset, "study.dataset": ds, "study.epochs_given": preset.epochs_given,
                 "study.epochs_run": run_epochs, "study.epochs_scale": epochs_scale, "study.max_epochs": max_epochs,
                 "study.note": preset.note}
        for fw in frameworks:
            # A preset run on another dataset than its own (MNIST's stock settings on Fashion-MNIST)
            # is its own study, beside the preset's own.
            study = f"defaults-{name}-{fw}" if ds == preset.dataset else f"defaults-{name}-on-{ds}-{fw}"
            why = None if preset.supports(fw) else (
                f"{fw} cannot run optimizer {preset.optimizer!r}: ONNX Runtime's training API has no momentum SGD")
            configs: list[Config] = []
            n_train = train_samples or get_info(ds).train_size
            if why is None and fw == "sklearn" and workload.model != "mlp" and n_train > NUMPY_CONV_MAX and not allow_slow:
                why = (f"skipped: scikit-learn's numpy conv engine needs minutes per epoch on {n_train:,} images "
                       f"(more than {NUMPY_CONV_MAX:,}); --allow-slow runs it")
            if why is None:
                try:
                    configs = [preset.to_config(framework=fw, epochs=run_epochs, threads=threads, seed=r)
                               for r in range(repeats)]
                except ValueError as exc:  # any other combination the framework refuses
                    why = str(exc)
            cells.append(Cell(study, workload, tuple(configs), {**attrs, "study.framework": fw}, why))
    return cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, repeats=3, trial_timeout=1800.0)
    ap.add_argument("--presets", default=None, help="comma-separated preset names (default: all)")
    ap.add_argument("--epochs-scale", type=float, default=1.0, help="multiply stock epochs by this")
    ap.add_argument("--max-epochs", type=int, default=20, help="cap on the scaled epochs")
    ap.add_argument("--allow-slow", action="store_true", help="run scikit-learn conv models on full datasets too")
    args = ap.parse_args(argv)
    cells = plan(presets=split(args.presets) if args.presets else None, frameworks=split(args.frameworks),
                 repeats=args.repeats, epochs_scale=args.epochs_scale, max_epochs=args.max_epochs,
                 threads=len(parse_cores(args.cores)), data_dir=args.data_dir, dataset=args.dataset,
                 model=args.model, train_samples=args.train_samples or None,
                 test_samples=args.test_samples or None, epochs=args.epochs, allow_slow=args.allow_slow)
    return finish(cells, args)


if __name__ == "__main__":
    raise SystemExit(main())
