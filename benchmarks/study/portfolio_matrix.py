"""The portfolio's measured matrix: a few recipes, and the obvious default, on every full-size dataset.

A portfolio chosen from surrogate predictions says little about a dataset the table does not hold
(the trees predict its level from the datasets they know). Auto-sklearn 2.0 builds its portfolio
from a matrix measured on every meta-dataset; this script measures that matrix:

- the recipes are ``advisor._recommend._portfolio.matrix_recipes`` of the shipped table (on each
  full-size workload, the most accurate recipes measured within the budget), plus the obvious
  default (Adam 1e-3, batch 128, constant rate, on the dataset's default model);
- each runs on each full-size dataset (MNIST 60k, Fashion-MNIST 60k, the 30k CIFAR-10 copy,
  digits) under one time budget (``time_budget_s``: whole epochs while the next fits, the schedule
  re-planned to end there; at most 60 epochs), one core, seed 0;
- every trial is recorded in study ``portfolio-matrix`` in a knowledge table (``--out``), which
  ``advisor knowledge merge`` adds to the shipped table; ``advisor surrogate fit`` then builds the
  portfolio from it and records each recipe's wins against the default.

Resumable: a cell (recipe, dataset) with an uncontended row in ``--out`` is not run again; a
contended one is run once more (a budgeted run's epochs depend on its speed).

Usage (one worker per core; both append to the same file under its lock)::

    python benchmarks/study/portfolio_matrix.py --dry-run
    python benchmarks/study/portfolio_matrix.py --core 0 --of 2 &
    python benchmarks/study/portfolio_matrix.py --core 1 --of 2 &
    advisor knowledge merge advisor/shipped/knowledge.csv.gz benchmarks/study/portfolio-matrix.csv.gz \\
        --out advisor/shipped/knowledge.csv.gz
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from advisor import knowledge
from advisor import surrogate as sg
from advisor._recommend._portfolio import (
    MATRIX_BUDGET_S, MATRIX_STUDY, default_recipe, full_size_workloads, matrix_recipes, offered_on, recipe_key,
)
from advisor.harness import Limits, run_trial
from advisor.records import Config, Workload

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared" / "datasets"
DATA_DIRS = {"mnist": "mnist", "fashion-mnist": "fashion-mnist", "cifar10": "cifar-10-batches-bin", "digits": None}
MAX_EPOCHS = 60


def cells(table: knowledge.Table, budget_s: float) -> list[tuple[str, dict[str, Any]]]:
    """Every (dataset, recipe as offered there) of the matrix, the default first on each dataset."""
    recipes = matrix_recipes(table, budget_s=budget_s)
    out = []
    for dataset in sorted(full_size_workloads(table)):
        keys = {recipe_key(default_recipe(dataset))}
        out.append((dataset, default_recipe(dataset)))
        for r in recipes:
            here = offered_on(r, dataset)
            if recipe_key(here) not in keys:
                keys.add(recipe_key(here))
                out.append((dataset, here))
    return out


def done_cells(path: Path) -> dict[tuple[str, str], int]:
    """(dataset, recipe key) -> clean rows already in ``path``; a contended row counts as -1."""
    from advisor._recommend._portfolio import _row_recipe

    if not path.exists():
        return {}
    t = knowledge.read(path)
    cols = t.columns
    out: dict[tuple[str, str], int] = {}
    for i in range(len(t)):
        r = _row_recipe(cols, i)
        if r is None or cols["study"][i] != MATRIX_STUDY:
            continue
        key = (str(cols["dataset_name"][i]), recipe_key(r))
        out[key] = max(out.get(key, -2), -1 if cols["contended"][i] else 1) if key in out else (
            -1 if cols["contended"][i] else 1)
    return out


def run_cell(dataset: str, recipe: dict[str, Any], core: int, budget_s: float, data_dir: Path) -> Any:
    sub = DATA_DIRS.get(dataset)
    workload = Workload(dataset=dataset, model=recipe["model"], data_dir=str(data_dir / sub) if sub else None)
    params = {k: v for k, v in recipe.items() if k != "model"}
    config = Config.from_dict({**params, "epochs": MAX_EPOCHS, "threads": 1, "seed": 0, "time_budget_s": budget_s})
    return run_trial(workload, config, cores=[core], study=MATRIX_STUDY,
                     limits=Limits(wall_time_s=3 * budget_s + 300, memory_mb=8192))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--core", type=int, default=0, help="the one CPU id this worker owns")
    ap.add_argument("--of", type=int, default=1, help="workers in all (worker k runs cells k, k+N, ...)")
    ap.add_argument("--budget", type=float, default=MATRIX_BUDGET_S, help="training seconds per trial")
    ap.add_argument("--table", default=str(sg.shipped_table()), help="the table the recipes are chosen from")
    ap.add_argument("--out", default=str(HERE / "portfolio-matrix.csv.gz"))
    ap.add_argument("--data-dir", default=str(SHARED))
    ap.add_argument("--dry-run", action="store_true", help="print the cells and what is left, run nothing")
    args = ap.parse_args(argv)
    from advisor import hardware

    profile = hardware.load_cached()
    out = Path(args.out)
    todo = cells(knowledge.read(args.table), args.budget)
    mine = [c for k, c in enumerate(todo) if k % args.of == args.core % args.of]
    for dataset, recipe in mine:
        state = done_cells(out).get((dataset, recipe_key(recipe)))
        brief = f"{dataset:14s} {recipe['framework']:11s} {recipe['model']:12s} {recipe['optimizer']}/{recipe['schedule']}"
        if args.dry_run:
            print(f"{brief}  {'done' if state == 1 else 'contended once' if state == -1 else 'to run'}")
            continue
        for attempt in (1, 2):
            if done_cells(out).get((dataset, recipe_key(recipe))) == 1:
                break
            t0 = time.time()
            result = run_cell(dataset, recipe, args.core, args.budget, Path(args.data_dir))
            knowledge.append_to_user_knowledge([result], hardware=profile, path=out)
            print(f"core {args.core} {brief} -> {result.status} acc={result.test_accuracy} "
                  f"train={result.train_time_s} epochs={result.epochs_completed} wall={time.time() - t0:.0f}s "
                  f"contended={result.contended}", flush=True)
            if not result.contended or attempt == 2:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
