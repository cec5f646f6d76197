"""Study part 2: one knob at a time, from a fixed base config, per framework and dataset.

For each framework on an MNIST and a CIFAR-10 subset (5,000 train / 2,000 test images by default,
stratified, seed 0), one knob varies while every other setting keeps the base value:

- ``batch_size``: 16, 32, 64, 128, 256, 512
- ``learning_rate``: 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2 (Adam)
- ``epochs``: 1, 2, 4, 8, 16
- ``threads``: 1 .. the cores granted (intra-op threads; BLAS threads for scikit-learn)
- the parallel-library switches the framework has: ``onednn`` (torch, tensorflow), ``xla``
  (tensorflow), ``execution_mode`` and ``graph_optimization`` (onnxruntime)

Base: Adam, lr 1e-3, batch 64, 3 epochs on MNIST / 5 on CIFAR-10, every granted core, oneDNN on,
XLA off, ONNX Runtime sequential with all graph optimisations. Each value runs ``--repeats`` times
(training seeds 0..n-1), repeats outermost so that machine drift hits every value alike. One study
per (framework, dataset, knob): ``knob-<framework>-<dataset>-<knob>``; the base config is measured
in every sweep. Resumable like defaults.py (trial keys in ``study.key``).

Usage:
    python benchmarks/study/knobs.py --dry-run
    python benchmarks/study/knobs.py --frameworks torch --datasets mnist --knobs batch_size,threads
    python benchmarks/study/knobs.py --datasets cifar10 --train-samples 2000 --epochs 4 --epoch-values 1,2,4,8
    python benchmarks/study/knobs.py --dataset digits --train-samples 300 --epochs 1 --max-trials 2
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from defaults import SHARED, Cell, add_common_args, finish, parse_cores, split, workload_for  # noqa: E402

from advisor.datasets import refused_knobs  # noqa: E402
from advisor.records import FRAMEWORKS, Config  # noqa: E402

DATASETS = ("mnist", "fashion-mnist", "cifar10")
TRAIN_SAMPLES = 5000
TEST_SAMPLES = 2000
BASE_EPOCHS = {"mnist": 3, "fashion-mnist": 3, "cifar10": 5}
COMMON_KNOBS: dict[str, tuple[Any, ...]] = {
    "batch_size": (16, 32, 64, 128, 256, 512),
    "learning_rate": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
    "epochs": (1, 2, 4, 8, 16),
}
SWITCHES: dict[str, dict[str, tuple[Any, ...]]] = {
    "torch": {"onednn": (True, False)},
    "tensorflow": {"onednn": (True, False), "xla": (False, True)},
    "onnxruntime": {"execution_mode": ("sequential", "parallel"),
                    "graph_optimization": ("disable", "basic", "extended", "all")},
    "sklearn": {},
}


#: The training-recipe knobs (issue 14), each swept where its declaration says the framework honours
#: it; a value the framework or dataset refuses (``Config``, ``refused_knobs``) is left out.
RECIPE_KNOBS: dict[str, tuple[Any, ...]] = {
    "optimizer": ("adam", "adamw", "sgd", "momentum"),
    "schedule": ("constant", "step", "cosine", "onecycle"),
    "weight_decay": (0.0, 5e-4),
    "label_smoothing": (0.0, 0.1),
    "augment_translate": (0, 2),
    "augment_flip": (False, True),
    "channels_last": (False, True),
    "bfloat16": (False, True),
}


def base_config(framework: str, dataset: str, *, cores: int, epochs: int | None = None) -> Config:
    """The fixed base every knob departs from."""
    extra: dict[str, Any] = {}
    if framework in ("torch", "tensorflow"):
        extra["onednn"] = True
    if framework == "tensorflow":
        extra["xla"] = False
    if framework == "onnxruntime":
        extra.update(execution_mode="sequential", graph_optimization="all")
    return Config(framework=framework, optimizer="adam", learning_rate=1e-3, batch_size=64,
                  epochs=epochs or BASE_EPOCHS.get(dataset, 3), threads=cores, inter_op_threads=1, seed=0, **extra)


def knob_values(framework: str, *, cores: int) -> dict[str, tuple[Any, ...]]:
    """Every knob of ``framework`` with the values it takes."""
    from advisor.knobs import get_knob

    recipe = {k: v for k, v in RECIPE_KNOBS.items()
              if get_knob(k).frameworks is None or framework in get_knob(k).frameworks}
    return {**COMMON_KNOBS, "threads": tuple(range(1, cores + 1)), **SWITCHES[framework], **recipe}


def vary(base: Config, knob: str, value: Any, *, cores: int) -> Config:
    """``base`` with one knob changed (and what that knob drags along, e.g. inter-op threads)."""
    changes: dict[str, Any] = {knob: value}
    if knob == "optimizer" and value == "momentum":
        changes["momentum"] = 0.9  # momentum SGD without momentum is plain SGD
    if knob == "execution_mode" and value == "parallel":
        changes["inter_op_threads"] = max(1, cores // 2)  # the search space's ${cores_half}
    return dataclasses.replace(base, **changes)


def plan(*, frameworks: Sequence[str] = FRAMEWORKS, datasets: Sequence[str] = DATASETS,
         knobs: Sequence[str] | None = None, repeats: int = 3, cores: int = 1, data_dir: str | Path = SHARED,
         dataset: str | None = None, model: str | None = None, train_samples: int | None = TRAIN_SAMPLES,
         test_samples: int | None = TEST_SAMPLES, epochs: int | None = None,
         epoch_values: Sequence[int] | None = None) -> list[Cell]:
    """One cell per (framework, dataset, knob); ``dataset`` replaces ``datasets`` (an override).

    ``epochs`` replaces the base's epochs; the epochs sweep then takes ``epoch_values`` when given,
    else just ``epochs`` and ``epochs + 1`` (which keeps a quick look tiny).
    """
    cells = []
    for ds in ([dataset] if dataset else datasets):
        workload = workload_for(ds, data_dir=data_dir, model=model, train_samples=train_samples,
                                test_samples=test_samples)
        for fw in frameworks:
            base = base_config(fw, ds, cores=cores, epochs=epochs)
            for knob, values in knob_values(fw, cores=cores).items():
                if knobs and knob not in knobs:
                    continue
                if knob == "epochs" and epoch_values:
                    values = tuple(sorted(set(epoch_values)))
                elif knob == "epochs" and epochs is not None:
                    values = tuple(sorted({epochs, epochs + 1}))  # an override keeps the sweep tiny
                if knob in refused_knobs(ds):
                    continue
                kept = []
                for v in values:
                    try:
                        vary(base, knob, v, cores=cores)
                    except ValueError:  # this framework's Config refuses the value (one line, by design)
                        continue
                    kept.append(v)
                values = tuple(kept)
                if len(values) < 2:
                    continue
                configs = tuple(dataclasses.replace(vary(base, knob, v, cores=cores), seed=r)
                                for r in range(repeats) for v in values)
                attrs = {"study.kind": "knob", "study.framework": fw, "study.dataset": ds, "study.knob": knob,
                         "study.values": list(values), "study.base": base.to_dict()}
                cells.append(Cell(f"knob-{fw}-{ds}-{knob}", workload, configs, attrs))
    return cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, repeats=3, trial_timeout=900.0)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--knobs", default=None, help="comma-separated knob names (default: all)")
    ap.add_argument("--epoch-values", default=None,
                    help="the epochs sweep, e.g. 1,2,4,8 (default 1,2,4,8,16; with --epochs: that and one more)")
    ap.set_defaults(train_samples=TRAIN_SAMPLES, test_samples=TEST_SAMPLES)
    args = ap.parse_args(argv)
    cells = plan(frameworks=split(args.frameworks), datasets=split(args.datasets),
                 knobs=split(args.knobs) if args.knobs else None, repeats=args.repeats,
                 cores=len(parse_cores(args.cores)), data_dir=args.data_dir, dataset=args.dataset, model=args.model,
                 train_samples=args.train_samples or None, test_samples=args.test_samples or None,
                 epochs=args.epochs,
                 epoch_values=[int(v) for v in split(args.epoch_values)] if args.epoch_values else None)
    return finish(cells, args)


if __name__ == "__main__":
    raise SystemExit(main())
