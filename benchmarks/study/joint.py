"""Study part 3: joint multi-objective tuning against the best single-knob change.

The seed study claims that tuning several hyper-parameters together beats tuning one. For each
framework and dataset this script runs ``advisor.tuning.run_study`` (TPE, objectives train time
and test accuracy by default) over the framework's built-in CPU search space on the same workload
as knobs.py (the 5,000 / 2,000 subsets), as study ``joint-<framework>-<dataset>``. run_study
resumes a study to its budget by itself. The search space is wider than the knob sweeps (it also
searches the optimizer, momentum and weight decay): the question is whether a tuner over the
whole space finds better settings than a person changing one knob of a sensible base.

A tuner's trial runs once; a single-knob change has ``--repeats`` runs. So that the comparison is
not one lucky run against a median, ``--confirm N`` (default 3) re-runs the joint winner N times
(seeds 0..N-1) into ``joint-<framework>-<dataset>-confirm``. The winner is the joint trial that
reached the best single-knob median accuracy fastest (else the base accuracy, else the most
accurate). :func:`compare` does the comparison; report.py renders it.

Usage:
    python benchmarks/study/joint.py --dry-run
    python benchmarks/study/joint.py --frameworks torch --datasets mnist --trials 40 --confirm 3
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from defaults import (  # noqa: E402
    Cell, StudyData, _storage_exists as storage_exists_, add_common_args, config_key, limits_from, load_studies, parse_cores, run_cells, split,
    time_to, workload_for,
)
from knobs import DATASETS, TEST_SAMPLES, TRAIN_SAMPLES  # noqa: E402

from advisor.records import FRAMEWORKS, Config, TrialResult  # noqa: E402

log = logging.getLogger("study")


@dataclass(frozen=True)
class Group:
    """The repeats of one setting: ``label`` says what changed from the base."""

    label: str
    config: Config
    results: tuple[TrialResult, ...]

    def median(self, what: str) -> float:
        vals = [getattr(r, what) for r in self.results if getattr(r, what) is not None]
        return statistics.median(vals) if vals else math.nan

    def median_time_to(self, accuracy: float) -> float:
        """Lower median over the repeats of the time to ``accuracy`` (infinite for a repeat that missed).

        The lower median, because with an even number of repeats of which half missed, the plain
        median averages a time with infinity."""
        times = [time_to(r, accuracy) for r in self.results]
        return statistics.median_low([math.inf if t is None else t for t in times]) if times else math.inf


@dataclass(frozen=True)
class Comparison:
    """Joint tuning against one-knob-at-a-time on one (framework, dataset)."""

    framework: str
    dataset: str
    base: Group | None
    knob_groups: tuple[Group, ...]
    joint: tuple[TrialResult, ...]
    confirm: Group | None
    base_accuracy: float           # median final accuracy of the base config
    knob_accuracy: float           # best median final accuracy of a single-knob change
    best_knob_to_base: Group | None  # fastest (median) single-knob change to the base accuracy
    best_knob_accuracy: Group | None
    hypervolume_knobs: float
    hypervolume_joint: float


def _ok(results: Sequence[TrialResult]) -> list[TrialResult]:
    return [r for r in results if r.status == "ok" and r.train_time_s is not None and r.test_accuracy is not None]


def knob_groups(studies: dict[str, StudyData], framework: str, dataset: str) -> tuple[Group | None, list[Group]]:
    """The base group and every single-knob group of ``knob-<framework>-<dataset>-*`` studies."""
    by_key: dict[str, list[TrialResult]] = defaultdict(list)
    labels: dict[str, str] = {}
    cells = [d for d in studies.values() if d.attrs.get("study.kind") == "knob"
             and d.attrs.get("study.framework") == framework and d.attrs.get("study.dataset") == dataset]
    # The base most sweeps share: a sweep run on more cores (the threads sweep) has its own base,
    # whose runs then count as that knob's values, not as the base.
    bases = Counter(json.dumps(d.attrs["study.base"], sort_keys=True) for d in cells)
    base_cfg = Config.from_dict(json.loads(bases.most_common(1)[0][0])) if bases else None
    base_key = config_key(base_cfg) if base_cfg else None
    for data in cells:
        knob = data.attrs["study.knob"]
        for r in _ok(data.results):
            key = config_key(r.config)
            by_key[key].append(r)
            if key != base_key:
                labels[key] = f"{knob}={getattr(r.config, knob)}"
    base_group = Group("base", base_cfg, tuple(by_key[base_key])) if base_cfg and base_key in by_key else None
    groups = [Group(labels[k], rs[0].config, tuple(rs)) for k, rs in by_key.items() if k != base_key]
    return base_group, groups


def _front_hv(points: list[tuple[float, float]], ref_time: float) -> float:
    from advisor.pareto import hypervolume

    return hypervolume(points, ["minimize", "maximize"], [ref_time, 0.0], scale=[ref_time, 1.0]) if points else 0.0


def compare(studies: dict[str, StudyData], framework: str, dataset: str) -> Comparison | None:
    """Compare the joint study with the knob studies of one cell; ``None`` when neither exists."""
    base, groups = knob_groups(studies, framework, dataset)
    joint_data = studies.get(f"joint-{framework}-{dataset}")
    joint = tuple(_ok(joint_data.results)) if joint_data else ()
    if base is None and not groups and not joint:
        return None
    confirm_data = studies.get(f"joint-{framework}-{dataset}-confirm")
    confirm = None
    if confirm_data and confirm_data.attrs.get("study.winner_config"):
        # only the re-runs of the current winner (a longer joint study may have found another)
        want = config_key(replace(Config.from_dict(confirm_data.attrs["study.winner_config"]), seed=0))
        rs = [r for r in _ok(confirm_data.results) if config_key(r.config) == want]
        if rs:
            confirm = Group("joint winner, re-run", rs[0].config, tuple(rs))
    # an accuracy the base runs reached (lower median), so that at least half of them reach it
    base_acc = statistics.median_low([r.test_accuracy for r in base.results]) if base else math.nan
    knob_acc = max((g.median("test_accuracy") for g in groups), default=math.nan)
    to_base = [g for g in groups if math.isfinite(g.median_time_to(base_acc))] if base else []
    best_to_base = min(to_base, key=lambda g: g.median_time_to(base_acc)) if to_base else None
    best_acc = max(groups, key=lambda g: g.median("test_accuracy")) if groups else None
    knob_points = [(r.train_time_s, r.test_accuracy) for g in ([base] if base else []) + groups for r in g.results]
    joint_points = [(r.train_time_s, r.test_accuracy) for r in joint]
    ref = 1.1 * max([t for t, _ in knob_points + joint_points], default=1.0)
    return Comparison(framework, dataset, base, tuple(groups), joint, confirm, base_acc, knob_acc, best_to_base,
                      best_acc, _front_hv(knob_points, ref), _front_hv(joint_points, ref))


def joint_winner(c: Comparison) -> TrialResult | None:
    """The joint trial to confirm: fastest to the best single-knob accuracy, else to the base's."""
    for target in (c.knob_accuracy, c.base_accuracy):
        if math.isfinite(target):
            reached = [r for r in c.joint if time_to(r, target) is not None]
            if reached:
                return min(reached, key=lambda r: time_to(r, target))  # type: ignore[arg-type, return-value]
    return max(c.joint, key=lambda r: r.test_accuracy or 0.0) if c.joint else None


def _finished(storage: str, name: str) -> int:
    from advisor.tuning import list_studies

    return next((s.counts.finished for s in list_studies(storage) if s.name == name), 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, repeats=3, trial_timeout=900.0)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--trials", type=int, default=40, help="budget of each joint study (finished trials)")
    ap.add_argument("--objectives", default="time,accuracy")
    ap.add_argument("--sampler", default="tpe")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--confirm", type=int, default=3, help="re-runs of the joint winner (0: none)")
    ap.set_defaults(train_samples=TRAIN_SAMPLES, test_samples=TEST_SAMPLES)
    args = ap.parse_args(argv)
    from advisor.tuning import run_study

    cells = [(fw, ds) for ds in ([args.dataset] if args.dataset else split(args.datasets))
             for fw in split(args.frameworks)]
    storage_exists = storage_exists_(args.storage)
    if args.dry_run:
        for fw, ds in cells:
            have = _finished(args.storage, f"joint-{fw}-{ds}") if storage_exists else 0
            print(f"joint-{fw}-{ds}: {args.trials} trials ({max(0, args.trials - have)} to run), "
                  f"then {args.confirm} confirmation runs in joint-{fw}-{ds}-confirm")
        print(f"plan: {len(cells)} cells, {len(cells) * (args.trials + args.confirm)} trials")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    budget = math.inf if args.max_trials is None else args.max_trials
    for fw, ds in cells:
        name = f"joint-{fw}-{ds}"
        workload = workload_for(ds, data_dir=args.data_dir, model=args.model, train_samples=args.train_samples or None,
                                test_samples=args.test_samples or None)
        have = _finished(args.storage, name) if storage_exists else 0
        target = int(min(args.trials, have + budget))
        if target > have:
            summary = run_study(study_name=name, workload=workload, storage=args.storage, frameworks=[fw],
                                objectives=split(args.objectives), n_trials=target, sampler=args.sampler,
                                seed=args.seed, limits=limits_from(args), workdir=args.workdir)
            budget -= summary.counts.finished - have
            storage_exists = True
            if summary.interrupted:
                return 130
        if args.confirm and budget > 0:
            c = compare(load_studies(args.storage), fw, ds)
            winner = joint_winner(c) if c else None
            if winner is not None and _finished(args.storage, name) >= args.trials:
                cfg = winner.config
                cell = Cell(f"{name}-confirm", workload, tuple(replace(cfg, seed=r) for r in range(args.confirm)),
                            {"study.kind": "confirm", "study.framework": fw, "study.dataset": ds,
                             "study.winner": winner.trial_id, "study.winner_config": cfg.to_dict()})
                budget -= run_cells([cell], storage=args.storage, cores=parse_cores(args.cores),
                                    limits=limits_from(args), max_trials=None if math.isinf(budget) else int(budget),
                                    workdir=args.workdir)
        if budget <= 0:
            break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
