"""A portfolio: a short ordered list of recipes that do well across every workload of the table.

Greedy portfolio construction as in auto-sklearn 2.0 (Feurer et al., 2022): from the recipes
measured in the knowledge base (a trial's configuration without its run length, threads and seed,
plus its model), pick first the recipe with the best summed normalised score over the table's
workloads, then each time the recipe that raises the summed per-workload best the most. The
performance matrix is filled by the surrogate (a recipe was measured on one workload, and is
predicted on the others); a recipe's score on a workload is its best predicted median accuracy over
the epoch grid within that workload's typical budget (the median measured training time there),
normalised between the worst and the best recipe on that workload.

**The measured matrix.** A surrogate-filled matrix says little about a recipe on a dataset the
table does not hold: the trees predict its level from the datasets they know. Auto-sklearn's
portfolio is built from a matrix *measured* on every meta-dataset, and so is this one where the
table holds it: the ``portfolio-matrix`` study (:data:`MATRIX_STUDY`, ``benchmarks/study/
portfolio_matrix.py``) runs each of a few recipes chosen from the table (:func:`matrix_recipes`:
the most accurate measured within the time budget on each full-size workload), and the obvious
default, on every full-size workload under one time budget (``time_budget_s``). Recipes measured on
every matrix workload are scored by those measurements and chosen first; the surrogate-filled
greedy fills the remaining places. Each measured recipe carries its record against the obvious
default (``transfer``: wins, ties and losses over the workloads, a win being more than the
measurement noise more accurate in the same time budget): on a dataset the table does not hold,
:func:`transfer_probability` (Laplace's rule of succession over those workloads) is how likely it
is to beat or tie the default there, and a recipe that won somewhere and lost nowhere replaces it
as the robust choice (see :func:`advisor.recommend.recommend`).

**Longer budgets.** The matrix may also be run under longer budgets (``portfolio_matrix.py
--budget 300``): a recipe that wins in 60 s is not the one that wins in five minutes, where a wider
net has time to pay for itself. Each budget's greedy part is built from that budget's runs alone
(:func:`matrix_budgets`), and a recipe keeps every budget's record (``transfers``); a question takes
the record of the longest budget within its time bound (:func:`record_for`; without a bound, the
longest). The base budget's record (:data:`MATRIX_BUDGET_S`) speaks for shorter bounds too, as it
always did; a recipe measured only under a longer budget has no record below it, and is not offered
for a shorter bound (it joined because it wins given that time). The recipes that join this way come
after the base budget's portfolio of :data:`PORTFOLIO_SIZE`, and do not displace any of it.

The portfolio is written beside the fitted model (``portfolio.json``) by ``advisor surrogate fit``,
and every recommendation adds its recipes (at every epoch count of the grid) to the candidates, so
the answer is never worse than the robust choice unless a prediction or a measurement says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from advisor import knowledge

__all__ = ["PORTFOLIO_NAME", "PORTFOLIO_SIZE", "RECIPE_EXCLUDED", "MATRIX_STUDY", "MATRIX_BUDGET_S",
           "build_portfolio", "load_portfolio", "save_portfolio", "recipe_key", "full_size_workloads",
           "matrix_recipes", "measured_matrix", "longest_measured_run", "matrix_budgets", "record_for", "offered_on", "default_recipe",
           "transfer_probability"]

PORTFOLIO_NAME = "portfolio.json"
PORTFOLIO_SIZE = 8
#: Config fields a recipe leaves to the question and the machine.
RECIPE_EXCLUDED = ("epochs", "time_budget_s", "threads", "inter_op_threads", "seed", "device", "mixed_precision",
                   "cudnn_benchmark")
#: Workloads with fewer ok trials than this do not vote.
MIN_WORKLOAD_TRIALS = 20
#: Recipes considered: the best this many per workload by measured accuracy (keeps the matrix small).
PER_WORKLOAD = 25
#: The study name of the measured matrix's trials.
MATRIX_STUDY = "portfolio-matrix"
#: The matrix's time budget per trial (seconds of training, one core).
MATRIX_BUDGET_S = 60.0
#: Recipes taken into the matrix from each full-size workload.
MATRIX_PER_WORKLOAD = 2


def recipe_key(recipe: dict[str, Any]) -> str:
    return json.dumps(recipe, sort_keys=True, default=str)


def _recipe(config: dict[str, Any], model: str) -> dict[str, Any]:
    out = {k: v for k, v in config.items() if k not in RECIPE_EXCLUDED}
    out["model"] = model
    return out


def full_size_workloads(table: knowledge.Table, exclude_datasets: Sequence[str] = ()) -> dict[str, tuple[int, list[int]]]:
    """Each dataset's largest training size with at least :data:`MIN_WORKLOAD_TRIALS` ok trials
    outside the matrix, and those trials' rows: ``{dataset: (size, rows)}``."""
    cols = table.columns
    by: dict[tuple[str, int], list[int]] = {}
    for i in range(len(table)):
        if (cols["status"][i] == "ok" and not cols["synthetic"][i] and cols["test_accuracy"][i] is not None
                and cols["study"][i] != MATRIX_STUDY and cols["dataset_name"][i] not in exclude_datasets
                and cols["device_kind"][i] == "cpu"):
            by.setdefault((cols["dataset_name"][i], int(cols["train_samples"][i] or 0)), []).append(i)
    out: dict[str, tuple[int, list[int]]] = {}
    for (dataset, size), rows in by.items():
        if len(rows) >= MIN_WORKLOAD_TRIALS and size > out.get(dataset, (-1, []))[0]:
            out[dataset] = (size, rows)
    return out


def _row_recipe(cols: dict[str, Any], i: int) -> dict[str, Any] | None:
    try:
        cfg = knowledge.config_from_row({k: v[i] for k, v in cols.items()})
    except Exception:  # noqa: BLE001 - a row this version cannot turn back into a config
        return None
    return _recipe(cfg.to_dict(), str(cols["model"][i]))


def longest_measured_run(table: knowledge.Table, recipe: dict[str, Any]) -> int:
    """The most samples seen (epochs completed x training samples) by any completed run of
    ``recipe`` in ``table``, on any dataset; 0 where the table never ran it. Flips are left out of
    the comparison: they are offered per dataset (:func:`offered_on`), the rest of the recipe is not.
    How far a curve read off the surrogate is evidence (:func:`advisor._recommend._rules.beyond_measured`).
    """
    cols = table.columns
    want = recipe_key({k: v for k, v in recipe.items() if k != "augment_flip"})
    best = 0
    for i in range(len(table)):
        if (cols["model"][i] != recipe.get("model") or cols["framework"][i] != recipe.get("framework")
                or cols["status"][i] != "ok" or not cols["epochs_completed"][i] or not cols["train_samples"][i]):
            continue
        r = _row_recipe(cols, i)
        if r is not None and recipe_key({k: v for k, v in r.items() if k != "augment_flip"}) == want:
            best = max(best, int(cols["epochs_completed"][i]) * int(cols["train_samples"][i]))
    return best


def matrix_recipes(table: knowledge.Table, *, budget_s: float = MATRIX_BUDGET_S,
                   per_workload: int = MATRIX_PER_WORKLOAD, exclude_datasets: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The recipes the matrix measures: on each full-size workload, the ``per_workload`` most
    accurate distinct recipes among its trials that trained within ``budget_s``."""
    cols = table.columns
    out: dict[str, dict[str, Any]] = {}
    for _, rows in full_size_workloads(table, exclude_datasets).values():
        within = [i for i in rows if cols["train_time_s"][i] is not None and cols["train_time_s"][i] <= budget_s]
        taken = 0
        for i in sorted(within, key=lambda i: -float(cols["test_accuracy"][i])):
            r = _row_recipe(cols, i)
            if r is None or recipe_key(r) in out:
                continue
            out[recipe_key(r)] = r
            taken += 1
            if taken >= per_workload:
                break
    return list(out.values())


def default_recipe(dataset: str) -> dict[str, Any]:
    """The obvious default as a matrix recipe: on the dataset's default model."""
    from advisor._recommend._baseline import OBVIOUS_DEFAULT
    from advisor._recommend._workload import describe_workload
    from advisor.records import Config

    cfg = Config(framework="torch", epochs=1, threads=1, **OBVIOUS_DEFAULT)
    return _recipe(cfg.to_dict(), describe_workload(dataset).model)


def offered_on(recipe: dict[str, Any], dataset: str) -> dict[str, Any]:
    """The recipe as it runs on ``dataset``: knobs the dataset refuses (flips of digits) at their
    defaults, as every candidate offered there (``refused_knobs``)."""
    from advisor.datasets import refused_knobs
    from advisor.knobs import get_knob

    return {k: (get_knob(k).default if k in refused_knobs(dataset) else v) for k, v in recipe.items()}


def matrix_budgets(table: knowledge.Table) -> list[float]:
    """The time budgets the measured matrix was run under, shortest first."""
    cols = table.columns
    return sorted({float(cols["cfg_time_budget_s"][i]) for i in range(len(table))
                   if cols["study"][i] == MATRIX_STUDY and cols["cfg_time_budget_s"][i]})


def record_for(recipe: dict[str, Any], max_time_s: float | None) -> dict[str, Any] | None:
    """The recipe's measured record that speaks for a question bounded by ``max_time_s`` (see the
    module docstring): the longest budget within the bound, the base budget's for any shorter one,
    the longest without a bound; None for a recipe without a record there."""
    records = [r for r in (recipe.get("transfers") or [recipe.get("transfer")]) if isinstance(r, dict)]
    fits = [r for r in records if max_time_s is None or float(r.get("budget_s") or 0.0) <= max_time_s
            or float(r.get("budget_s") or 0.0) == MATRIX_BUDGET_S]
    return max(fits, key=lambda r: float(r.get("budget_s") or 0.0)) if fits else None


def measured_matrix(table: knowledge.Table, exclude_datasets: Sequence[str] = (), budget_s: float = MATRIX_BUDGET_S,
                    ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, float]], dict[str, float]]:
    """The measured matrix under one time budget: ``(recipes, accuracy, default)``.

    ``recipes``: recipe key -> recipe; ``accuracy``: recipe key -> {dataset: median accuracy of its
    matrix runs there}; ``default``: dataset -> the obvious default's median accuracy in the same
    budget. A run that overran its budget by more than a tenth counts as chance accuracy (it did not
    answer the question), and contended runs count like any other (accuracy does not depend on them).
    """
    cols = table.columns
    runs: dict[tuple[str, str], list[float]] = {}  # (dataset, key of the recipe as run there)
    recipes: dict[str, dict[str, Any]] = {}
    for i in range(len(table)):
        if cols["study"][i] != MATRIX_STUDY or cols["dataset_name"][i] in exclude_datasets:
            continue
        budget = cols["cfg_time_budget_s"][i]
        if not budget or float(budget) != budget_s:
            continue
        r = _row_recipe(cols, i)
        if r is None:
            continue
        ok = cols["status"][i] == "ok" and cols["test_accuracy"][i] is not None
        over = ok and cols["train_time_s"][i] is not None and cols["train_time_s"][i] > 1.1 * float(budget)
        acc = float(cols["test_accuracy"][i]) if ok and not over else 1.0 / max(2, int(cols["num_classes"][i] or 2))
        recipes.setdefault(recipe_key(r), r)
        runs.setdefault((str(cols["dataset_name"][i]), recipe_key(r)), []).append(acc)
    datasets = sorted({d for d, _ in runs})
    accuracy: dict[str, dict[str, float]] = {}
    for key, r in recipes.items():  # a recipe's cell on each dataset: the recipe as offered there
        for d in datasets:
            got = runs.get((d, recipe_key(offered_on(r, d))))
            if got:
                accuracy.setdefault(key, {})[d] = float(np.median(got))
    default: dict[str, float] = {}
    for d in datasets:
        got = runs.get((d, recipe_key(default_recipe(d))))
        if got:
            default[d] = float(np.median(got))
    return recipes, accuracy, default


def transfer_probability(transfer: dict[str, Any] | None) -> float | None:
    """How likely a measured matrix recipe is to beat or tie the obvious default on a dataset the
    matrix does not hold (the issue's own bar: never worse than the default): Laplace's rule of
    succession over the workloads it did not lose, ``(wins + ties + 1) / (workloads + 2)``. None
    without a record, and 0 for a recipe that won nowhere (it would replace the default for nothing)."""
    if not transfer or not transfer.get("workloads"):
        return None
    if not transfer.get("wins"):
        return 0.0
    n = len(transfer["workloads"])
    return (float(transfer["wins"]) + float(transfer["ties"]) + 1.0) / (n + 2.0)


def _measured_part(table: knowledge.Table, exclude_datasets: Sequence[str], size: int,
                   budget_s: float = MATRIX_BUDGET_S) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The greedy portfolio over the matrix measured under ``budget_s``, each recipe with its
    ``transfer`` record there; and the record of every recipe measured there (by recipe key)."""
    from advisor._recommend._baseline import MEASURED_ACCURACY_NOISE

    recipes, accuracy, default = measured_matrix(table, exclude_datasets, budget_s)
    datasets = sorted(default)
    if len(datasets) < 2:
        return [], {}
    # Only recipes the table still selects without the excluded datasets: one chosen for being the
    # best on a held-out dataset would carry that dataset into its own test.
    selected = {recipe_key(r) for r in matrix_recipes(table, budget_s=budget_s, exclude_datasets=exclude_datasets)}
    keys = [k for k in recipes if k in selected and all(d in accuracy.get(k, {}) for d in datasets)
            and all(k != recipe_key(default_recipe(d)) for d in datasets)]
    if not keys:
        return [], {}
    scores = np.array([[accuracy[k][d] for d in datasets] for k in keys])
    lo, hi = scores.min(axis=0), scores.max(axis=0)
    norm = (scores - lo) / np.where(hi > lo, hi - lo, 1.0)
    records = {}
    for ri, key in enumerate(keys):
        diff = scores[ri] - np.array([default[d] for d in datasets])
        records[key] = {"workloads": datasets, "budget_s": budget_s,
                        "wins": int((diff > MEASURED_ACCURACY_NOISE).sum()),
                        "ties": int((np.abs(diff) <= MEASURED_ACCURACY_NOISE).sum()),
                        "losses": int((diff < -MEASURED_ACCURACY_NOISE).sum()),
                        "accuracy": {d: round(float(v), 4) for d, v in zip(datasets, scores[ri])},
                        "default_accuracy": {d: round(default[d], 4) for d in datasets}}
    return [{**recipes[keys[ri]], "transfer": records[keys[ri]]} for ri in _greedy(norm, size)], records


def _greedy(norm: np.ndarray, size: int) -> list[int]:
    """Greedy portfolio construction over a normalised score matrix (recipes x workloads)."""
    chosen: list[int] = []
    covered = np.zeros(norm.shape[1])
    for _ in range(min(size, norm.shape[0])):
        gains: np.ndarray = np.maximum(norm, covered).sum(axis=1)
        gains[chosen] = -np.inf
        pick = int(np.argmax(gains))
        if chosen and gains[pick] <= covered.sum() + 1e-9:
            break
        chosen.append(pick)
        covered = np.maximum(covered, norm[pick])
    return chosen


def build_portfolio(table: knowledge.Table, surrogate: Any, *, device_kind: str = "cpu",
                    size: int = PORTFOLIO_SIZE, exclude_datasets: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The greedy portfolio of ``size`` recipes (see the module docstring), best first: the
    measured matrix's recipes first (with their ``transfer`` record), then the surrogate-filled ones;
    then each longer budget's records, and the recipes that win only there (beyond ``size``: they
    enter questions whose bound reaches their budget, see :func:`record_for`)."""
    measured, _ = _measured_part(table, exclude_datasets, size)
    portfolio = measured
    if len(measured) < size and surrogate is not None:  # None: the measured part alone
        taken = {recipe_key(_bare(r)) for r in measured}
        filled = [r for r in _filled_part(table, surrogate, device_kind=device_kind, size=size,
                                          exclude_datasets=exclude_datasets) if recipe_key(r) not in taken]
        portfolio = (measured + filled)[:size] if measured else filled
    for budget in matrix_budgets(table):  # longer budgets: their records, and the recipes that win there
        if budget != MATRIX_BUDGET_S:
            _add_records(portfolio, *_measured_part(table, exclude_datasets, size, budget))
    return portfolio


def _bare(recipe: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in recipe.items() if k not in ("transfer", "transfers")}


def _add_records(portfolio: list[dict[str, Any]], longer: list[dict[str, Any]],
                 records: dict[str, dict[str, Any]]) -> None:
    """One longer budget's records (in place): each recipe of ``portfolio`` measured there adds its
    record (every record in ``transfers``, the first budget's as ``transfer``), and each recipe of
    that budget's greedy part (``longer``) not yet in it joins it: a recipe that wins given time."""
    keys = [recipe_key(_bare(r)) for r in portfolio]
    portfolio += [r for r in longer if recipe_key(_bare(r)) not in keys]
    for r in portfolio:
        record = records.get(recipe_key(_bare(r)))
        if record is None:
            continue
        have = [t for t in r.get("transfers") or [r.get("transfer")] if t and t.get("budget_s") != record["budget_s"]]
        r["transfers"] = have + [record]
        r.setdefault("transfer", record)


def _filled_part(table: knowledge.Table, surrogate: Any, *, device_kind: str, size: int,
                 exclude_datasets: Sequence[str]) -> list[dict[str, Any]]:
    """The greedy portfolio over the surrogate-filled matrix."""
    from advisor._recommend._baseline import EPOCH_GRID
    from advisor._recommend._candidates import Candidate, columns
    from advisor._recommend._workload import Target, describe_workload
    from advisor.records import Config
    from advisor.surrogate.features import encode

    cols = table.columns
    ok = [i for i in range(len(table)) if cols["status"][i] == "ok" and not cols["synthetic"][i]
          and cols["test_accuracy"][i] is not None and cols["dataset_name"][i] not in exclude_datasets]
    by_workload: dict[tuple[str, int], list[int]] = {}
    for i in ok:
        by_workload.setdefault((cols["dataset_name"][i], int(cols["train_samples"][i] or 0)), []).append(i)
    workloads = {w: idx for w, idx in by_workload.items() if len(idx) >= MIN_WORKLOAD_TRIALS}
    if not workloads:
        return []
    recipes: dict[str, dict[str, Any]] = {}
    for idx in workloads.values():
        best = sorted(idx, key=lambda i: -float(cols["test_accuracy"][i]))[:PER_WORKLOAD]
        for i in best:
            r = _row_recipe(cols, i)
            if r is None:
                continue
            recipes.setdefault(recipe_key(r), r)
    keys = list(recipes)
    if not keys:
        return []
    target = Target(device_kind, 1)
    scores = np.zeros((len(keys), len(workloads)))
    for j, ((dataset, size_w), idx) in enumerate(workloads.items()):
        budget = float(np.median([cols["train_time_s"][i] for i in idx if cols["train_time_s"][i]]))
        threads = int(np.median([cols["cfg_threads"][i] or 1 for i in idx]))
        gemm = {}
        for i in idx:
            if cols["hw_gemm_gflops_threads"][i]:
                gemm = {str(cols["cfg_threads"][i] or 1): float(cols["hw_gemm_gflops_threads"][i])}
                break
        target = Target(device_kind, threads, gemm_gflops=gemm)
        for mi, model in enumerate(sorted({recipes[k]["model"] for k in keys})):
            try:
                info = describe_workload(dataset, model=model, train_samples=size_w or None)
            except Exception:  # noqa: BLE001 - a model or size this dataset cannot take
                continue
            rows = [(ri, e) for ri, k in enumerate(keys) if recipes[k]["model"] == model for e in EPOCH_GRID]
            cands = []
            for ri, e in rows:
                params = {k: v for k, v in recipes[keys[ri]].items() if k != "model"}
                cands.append(Candidate(Config.from_dict({**params, "epochs": e, "threads": threads}), "portfolio", None))
            pred = surrogate.predict_matrix(encode(columns(cands, info, target), surrogate.schema))
            acc, tim = pred["test_accuracy"].mid, pred["train_time_s"].mid
            usable = np.where(tim <= budget, acc, np.nan)
            for (ri, _), a in zip(rows, usable):
                if not np.isnan(a):
                    scores[ri, j] = max(scores[ri, j], a)
    lo, hi = scores.min(axis=0), scores.max(axis=0)
    norm = (scores - lo) / np.where(hi > lo, hi - lo, 1.0)
    return [recipes[keys[i]] for i in _greedy(norm, size)]


def save_portfolio(directory: str | Path, portfolio: dict[str, list[dict[str, Any]]], *, table_sha256: str) -> Path:
    from advisor._atomic import atomic_write
    from advisor._json import json_safe

    path = Path(directory) / PORTFOLIO_NAME
    data = {"method": "greedy portfolio construction over the table's workloads (surrogate-filled matrix)",
            "table_sha256": table_sha256, "targets": portfolio}
    atomic_write(path, json.dumps(json_safe(data), indent=2, sort_keys=True) + "\n")
    return path


def load_portfolio(directory: str | Path, device_kind: str) -> list[dict[str, Any]]:
    """The portfolio's recipes for ``device_kind`` (the CPU's when there is none for a GPU); [] when absent."""
    try:
        data = json.loads((Path(directory) / PORTFOLIO_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    targets = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, dict):
        return []
    recipes = targets.get(device_kind) or targets.get("cpu") or []
    return [r for r in recipes if isinstance(r, dict) and isinstance(r.get("model"), str)]
