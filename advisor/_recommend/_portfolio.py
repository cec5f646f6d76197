"""A portfolio: a short ordered list of recipes that do well across every workload of the table.

Greedy portfolio construction as in auto-sklearn 2.0 (Feurer et al., 2022): from the recipes
measured in the knowledge base (a trial's configuration without its run length, threads and seed,
plus its model), pick first the recipe with the best summed normalised score over the table's
workloads, then each time the recipe that raises the summed per-workload best the most. The
performance matrix is filled by the surrogate (a recipe was measured on one workload, and is
predicted on the others); a recipe's score on a workload is its best predicted median accuracy over
the epoch grid within that workload's typical budget (the median measured training time there),
normalised between the worst and the best recipe on that workload.

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

__all__ = ["PORTFOLIO_NAME", "PORTFOLIO_SIZE", "RECIPE_EXCLUDED", "build_portfolio", "load_portfolio",
           "save_portfolio", "recipe_key"]

PORTFOLIO_NAME = "portfolio.json"
PORTFOLIO_SIZE = 8
#: Config fields a recipe leaves to the question and the machine.
RECIPE_EXCLUDED = ("epochs", "time_budget_s", "threads", "inter_op_threads", "seed", "device", "mixed_precision",
                   "cudnn_benchmark")
#: Workloads with fewer ok trials than this do not vote.
MIN_WORKLOAD_TRIALS = 20
#: Recipes considered: the best this many per workload by measured accuracy (keeps the matrix small).
PER_WORKLOAD = 25


def recipe_key(recipe: dict[str, Any]) -> str:
    return json.dumps(recipe, sort_keys=True, default=str)


def _recipe(config: dict[str, Any], model: str) -> dict[str, Any]:
    out = {k: v for k, v in config.items() if k not in RECIPE_EXCLUDED}
    out["model"] = model
    return out


def build_portfolio(table: knowledge.Table, surrogate: Any, *, device_kind: str = "cpu",
                    size: int = PORTFOLIO_SIZE, exclude_datasets: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The greedy portfolio of ``size`` recipes (see the module docstring), best first."""
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
            try:
                cfg = knowledge.config_from_row({k: v[i] for k, v in cols.items()})
            except Exception:  # noqa: BLE001 - a row this version cannot turn back into a config
                continue
            r = _recipe(cfg.to_dict(), str(cols["model"][i]))
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
    chosen: list[int] = []
    covered = np.zeros(len(workloads))
    for _ in range(min(size, len(keys))):
        gains: np.ndarray = np.maximum(norm, covered).sum(axis=1)
        gains[chosen] = -np.inf
        pick = int(np.argmax(gains))
        if chosen and gains[pick] <= covered.sum() + 1e-9:
            break
        chosen.append(pick)
        covered = np.maximum(covered, norm[pick])
    return [recipes[keys[i]] for i in chosen]


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
