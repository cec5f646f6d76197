"""How good the surrogate is: grouped cross-validation, and the model card that publishes it.

Every scheme holds out whole groups, so the figures say how well the models transfer, not how
well they interpolate between near-identical trials:

- ``leave-one-dataset-out``: train without a dataset, predict it;
- ``leave-one-train-size-out``: train without a training-set size, predict it;
- ``leave-one-hardware-out``: train without a device kind / hardware profile (only when the table
  holds at least two);
- ``random-5-fold``: the optimistic baseline.

Figures per objective and scheme, pooled over the held-out predictions: Spearman's rho between
predicted median and measured value, MAPE (time and memory) or MAE (accuracy), and the coverage
of the 10-90% band (0.8 when the band is calibrated).
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from advisor.surrogate.features import FeatureSchema, schema_from_columns
from advisor.surrogate.model import (
    CALIBRATION_FOLDS,
    DEFAULT_ROUNDS,
    LOG_OBJECTIVES,
    MIN_ROWS,
    OBJECTIVES,
    fit,
    training_columns,
)

__all__ = ["SCHEMES", "Figures", "Evaluation", "spearman", "repeat_noise", "evaluate", "time_to_accuracy",
           "training_meta", "model_card"]

SCHEMES = ("leave-one-dataset-out", "leave-one-train-size-out", "leave-one-hardware-out", "random-5-fold")


@dataclass(frozen=True)
class Figures:
    """Held-out quality of one objective under one scheme.

    Attributes:
        objective: ``train_time_s``, ``test_accuracy`` or ``peak_memory_mb``.
        scheme: One of :data:`SCHEMES`.
        n_rows: Held-out predictions pooled.
        n_folds: Folds that could be fitted.
        spearman: Rank correlation of prediction and measurement.
        mape: Mean absolute percentage error (time, memory), as a fraction.
        mae: Mean absolute error (accuracy).
        coverage: Fraction of measurements inside the predicted 10-90% band.
    """

    objective: str
    scheme: str
    n_rows: int
    n_folds: int
    spearman: float | None
    mape: float | None
    mae: float | None
    coverage: float | None


@dataclass(frozen=True)
class Evaluation:
    """All figures, plus the schemes that could not run and why."""

    table: str
    n_rows: int
    figures: tuple[Figures, ...]
    skipped: tuple[str, ...]
    noise: dict[str, Any] = field(default_factory=dict)
    time_to_accuracy: dict[str, Any] = field(default_factory=dict)

    def get(self, objective: str, scheme: str) -> Figures | None:
        return next((f for f in self.figures if f.objective == objective and f.scheme == scheme), None)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "n_rows": self.n_rows, "figures": [asdict(f) for f in self.figures],
                "skipped": list(self.skipped), "repeat_noise": dict(self.noise),
                "time_to_accuracy": dict(self.time_to_accuracy)}


def repeat_noise(columns: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """How much repeated runs of one configuration differ: the floor under any model's error.

    Rows that share workload, hardware and every config value except the seed form a group; each
    objective's figure is the mean deviation of its usable rows (as the model would train on them)
    from their group's median: absolute for accuracy, relative for time and memory. The ``loo_``
    figure scores each row against the median of the *other* rows of its group instead, which is
    the error of a predictor that knows everything but the seed: the honest floor for held-out rows.

    Returns:
        ``{objective: {"groups": n, "rows": n, "mae" | "mape": value, "loo_mae" | "loo_mape": value}}``
        for objectives with repeats.
    """
    config_keys = sorted(k for k in columns if k.startswith("cfg_") and k != "cfg_seed")
    keys = ("dataset_name", "train_samples", "test_samples", "model", "framework", "device_kind", "hardware_id")
    out: dict[str, Any] = {}
    for objective in OBJECTIVES:
        picked, values = training_columns(columns, objective)
        groups: dict[tuple[Any, ...], list[float]] = {}
        for i, v in enumerate(values):
            key = tuple(picked[k][i] for k in keys if k in picked) + tuple(picked[k][i] for k in config_keys)
            groups.setdefault(key, []).append(float(v))
        repeated = [np.array(g) for g in groups.values() if len(g) >= 2]
        if not repeated:
            continue
        # each run predicted by the median of the other runs of its configuration: what a perfect
        # model, which knows everything but the seed's luck, would err on a new run
        others = [(g, np.array([np.median(np.delete(g, i)) for i in range(len(g))])) for g in repeated]
        if objective in LOG_OBJECTIVES:
            dev = np.concatenate([np.abs(g / np.median(g) - 1.0) for g in repeated])
            loo = np.concatenate([np.abs(pred - g) / g for g, pred in others])
            out[objective] = {"groups": len(repeated), "rows": int(len(dev)), "mape": float(dev.mean()),
                              "loo_mape": float(loo.mean())}
        else:
            dev = np.concatenate([np.abs(g - np.median(g)) for g in repeated])
            loo = np.concatenate([np.abs(pred - g) for g, pred in others])
            out[objective] = {"groups": len(repeated), "rows": int(len(dev)), "mae": float(dev.mean()),
                              "loo_mae": float(loo.mean())}
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    ranks[order] = np.arange(len(x), dtype=float)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]  # ties share their mean rank


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float | None:
    """Spearman's rho (ties averaged); ``None`` when either side is constant or too short."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def _groups(picked: Mapping[str, Sequence[Any]], scheme: str, seed: int) -> np.ndarray | None:
    n = len(picked["trial_id"])
    if scheme == "leave-one-dataset-out":
        keys = [str(v) for v in picked["dataset_name"]]
    elif scheme == "leave-one-train-size-out":
        keys = [str(v) for v in picked["train_samples"]]
    elif scheme == "leave-one-hardware-out":
        keys = [f"{k}/{h}" for k, h in zip(picked["device_kind"], picked["hardware_id"])]
    else:
        folds = np.arange(n) % 5
        np.random.default_rng(seed).shuffle(folds)
        return folds if n >= 5 else None
    _, codes = np.unique(np.array(keys, dtype=object).astype(str), return_inverse=True)
    return codes if codes.max(initial=0) >= 1 else None


def _subset(columns: Mapping[str, Sequence[Any]], idx: np.ndarray) -> dict[str, list[Any]]:
    return {k: [v[i] for i in idx] for k, v in columns.items()}


def _figures(objective: str, scheme: str, y: np.ndarray, lo: np.ndarray, mid: np.ndarray,
             hi: np.ndarray, n_folds: int) -> Figures:
    if not len(y):
        return Figures(objective, scheme, 0, n_folds, None, None, None, None)
    err = np.abs(mid - y)
    relative = objective in LOG_OBJECTIVES
    return Figures(
        objective=objective,
        scheme=scheme,
        n_rows=int(len(y)),
        n_folds=n_folds,
        spearman=spearman(mid, y),
        mape=float(np.mean(err / y)) if relative else None,
        mae=None if relative else float(np.mean(err)),
        coverage=float(np.mean((lo <= y) & (y <= hi))),
    )


def evaluate(
    columns: Mapping[str, Sequence[Any]],
    *,
    table: str = "",
    schemes: Sequence[str] = SCHEMES,
    objectives: Sequence[str] = OBJECTIVES,
    seed: int = 0,
    num_threads: int = 1,
    num_boost_round: int = DEFAULT_ROUNDS,
) -> Evaluation:
    """Cross-validate the surrogate on a table, holding out whole groups.

    Args:
        columns: The table's columns (``Table.columns``).
        table: How to name the table in the result.
        schemes: Which of :data:`SCHEMES` to run.
        objectives: Which objectives to evaluate.
        seed: Seed of the models and of the random folds.
        num_threads: LightGBM threads.
        num_boost_round: Boosting rounds per model.

    Returns:
        An :class:`Evaluation`; a scheme with fewer than two groups is listed in ``skipped``.
    """
    schema: FeatureSchema = schema_from_columns(columns)
    figures: list[Figures] = []
    skipped: list[str] = []
    for objective in objectives:
        picked, y_all = training_columns(columns, objective)
        if len(y_all) < MIN_ROWS:
            skipped.append(f"{objective}: only {len(y_all)} usable rows")
            continue
        for scheme in schemes:
            groups = _groups(picked, scheme, seed)
            if groups is None:
                skipped.append(f"{objective} / {scheme}: fewer than two groups")
                continue
            ys, los, mids, his = [], [], [], []
            n_folds = 0
            for g in np.unique(groups):
                test = np.flatnonzero(groups == g)
                train = np.flatnonzero(groups != g)
                if len(train) < MIN_ROWS:
                    continue
                model = fit(_subset(picked, train), seed=seed, num_threads=num_threads,
                            num_boost_round=num_boost_round, objectives=(objective,), schema=schema)
                band = model.predict(_subset(picked, test))[objective]
                ys.append(y_all[test])
                los.append(band.lo)
                mids.append(band.mid)
                his.append(band.hi)
                n_folds += 1
            if not n_folds:
                skipped.append(f"{objective} / {scheme}: no fold kept {MIN_ROWS} training rows")
                continue
            figures.append(_figures(objective, scheme, np.concatenate(ys), np.concatenate(los),
                                    np.concatenate(mids), np.concatenate(his), n_folds))
    tta: dict[str, Any] = {}
    if "leave-one-dataset-out" in schemes and {"train_time_s", "test_accuracy"} <= set(objectives):
        tta = time_to_accuracy(columns, schema=schema, seed=seed, num_threads=num_threads,
                               num_boost_round=num_boost_round)
    return Evaluation(table=table, n_rows=len(columns["trial_id"]), figures=tuple(figures), skipped=tuple(skipped),
                      noise=repeat_noise(columns), time_to_accuracy=tta)


#: A curve counts as full-size when it trained on at least this many samples.
FULL_SIZE_SAMPLES = 10_000
#: The accuracy a held-out curve is asked to reach: this far from its first reading to its best.
TTA_LEVEL = 0.75


def _tta_cases(columns: Mapping[str, Sequence[Any]], idx: np.ndarray) -> list[tuple[int, float, float, int]]:
    """Held-out curves to score: (row, target accuracy, measured time to it, epochs), for ``ok``,
    non-synthetic, uncontended full-size trials whose curve first reaches the target after epoch 1."""
    out = []
    for i in idx:
        curve, times, epochs = columns["accuracy_curve"][i], columns["epoch_times"][i], columns["cfg_epochs"][i]
        total = columns["train_time_s"][i]
        if (columns["status"][i] != "ok" or columns["synthetic"][i] or columns["contended"][i]
                or not isinstance(curve, list) or not isinstance(times, list) or len(curve) < 2
                or len(curve) != epochs or len(times) != epochs or not total
                or (columns["train_samples"][i] or 0) < FULL_SIZE_SAMPLES):
            continue
        best = max(curve)
        if best - curve[0] < 0.01:  # no curve to speak of
            continue
        target = curve[0] + TTA_LEVEL * (best - curve[0])
        k = next(j for j, a in enumerate(curve, 1) if a >= target)
        share = float(np.sum(times[:k]) / np.sum(times))
        out.append((int(i), float(target), float(total) * share, int(epochs)))
    return out


def time_to_accuracy(columns: Mapping[str, Sequence[Any]], *, schema: FeatureSchema | None = None, seed: int = 0,
                     num_threads: int = 1, num_boost_round: int = DEFAULT_ROUNDS) -> dict[str, Any]:
    """Time to an accuracy on held-out full-size learning curves, leave-one-dataset-out.

    For each held-out curve the target is :data:`TTA_LEVEL` of the way from its first reading to its
    best; the model fitted without that dataset predicts the curve epoch by epoch (the run's schedule
    length kept) and the predicted time to the target is the predicted time at the first epoch whose
    median accuracy reaches it (the last epoch when none does: counted as a miss). The figure is the
    median of ``|predicted - measured| / measured``.
    """
    schema = schema or schema_from_columns(columns)
    datasets = np.array([str(v) for v in columns["dataset_name"]], dtype=object)
    errors: list[float] = []
    shape_errors: list[float] = []
    per_dataset: dict[str, Any] = {}
    misses = 0
    for name in sorted(set(datasets.tolist())):
        test = np.flatnonzero(datasets == name)
        cases = _tta_cases(columns, test)
        train = np.flatnonzero(datasets != name)
        if not cases or len(train) < MIN_ROWS:
            continue
        model = fit(_subset(columns, train), seed=seed, num_threads=num_threads, num_boost_round=num_boost_round,
                    objectives=("train_time_s", "test_accuracy"), schema=schema, calibration_folds=0)
        rows = [(i, k) for i, _, _, e in cases for k in range(1, e + 1)]
        probe = _subset(columns, np.array([i for i, _ in rows]))
        probe["schedule_epochs"] = list(probe["cfg_epochs"])
        probe["cfg_epochs"] = [k for _, k in rows]
        bands = model.predict(probe)
        acc, tim = bands["test_accuracy"].mid, bands["train_time_s"].mid
        pos = 0
        errs, errs_shape = [], []
        for i, target, measured, epochs in cases:
            a, t = acc[pos:pos + epochs], tim[pos:pos + epochs]
            pos += epochs
            hit = np.flatnonzero(a >= target)
            misses += int(not len(hit))
            predicted = float(t[hit[0]] if len(hit) else t[-1])
            errs.append(abs(predicted - measured) / measured)
            # The same question asked of the curve's shape: the point 75% of the way up each curve.
            own = np.flatnonzero(a >= a[0] + TTA_LEVEL * (a.max() - a[0]))
            errs_shape.append(abs(float(t[own[0]]) - measured) / measured)
        errors += errs
        shape_errors += errs_shape
        per_dataset[name] = {"curves": len(errs), "median_error": float(np.median(errs)),
                             "median_error_shape": float(np.median(errs_shape))}
    if not errors:
        return {}
    return {"curves": len(errors), "median_error": float(np.median(errors)), "misses": misses,
            "median_error_shape": float(np.median(shape_errors)),
            "level": TTA_LEVEL, "per_dataset": per_dataset,
            "method": "leave-one-dataset-out; target = first reading + level x (best - first reading); "
                      "'shape': the same level read on the predicted curve's own first and best readings"}


def training_meta(columns: Mapping[str, Sequence[Any]], *, table_path: str | Path) -> dict[str, Any]:
    """What a model card says about training when no fitted model is at hand: table, hash, row counts."""
    from advisor import __version__
    from advisor.surrogate._compat import import_lightgbm
    from advisor.surrogate.io import file_sha256

    sha = file_sha256(table_path)
    return {
        "advisor_version": __version__,
        "lightgbm_version": import_lightgbm().__version__,
        "table": str(table_path),
        "table_sha256": sha,
        "row_counts": {o: int(len(training_columns(columns, o)[1])) for o in OBJECTIVES},
        "band_calibration": {"method": "conformalized quantile regression", "folds": CALIBRATION_FOLDS},
        **_shipped_offsets(sha),
    }


def _shipped_offsets(table_sha256: str) -> dict[str, Any]:
    """The shipped model's band offsets when it was fitted on the table with this hash, else nothing.

    Reads only the model's ``meta.json``: the boosters are not needed for that.
    """
    import json

    from advisor.surrogate.io import META_NAME, shipped_model_dir

    try:
        meta = json.loads((shipped_model_dir() / META_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(meta, dict) or meta.get("table_sha256") != table_sha256:
        return {}
    return {"band_offsets": dict(meta.get("band_offsets") or {}),
            "band_offsets_new_workload": dict(meta.get("band_offsets_new_workload") or {})}


def _shown(table: str) -> str:
    """A table path as the card shows it: the shipped table by its repository path, others as given."""
    from advisor.surrogate.io import SHIPPED_TABLE_LABEL, table_label

    label = table_label(table) if table else ""
    return f"{label} (the shipped table)" if label == SHIPPED_TABLE_LABEL else str(table)


def _calibration_line(meta: Mapping[str, Any]) -> str:
    folds = (meta.get("band_calibration") or {}).get("folds", 0)
    offsets = meta.get("band_offsets") or {}
    offsets_new = meta.get("band_offsets_new_workload") or {}
    if folds < 2:
        return "The bands are the raw 10% and 90% quantile models (not calibrated)."
    show = lambda o: ", ".join(f"{k} {v:+.3g}" for k, v in o.items())  # noqa: E731
    shown = (f" The shipped model's offsets: {show(offsets)}; for a new workload: {show(offsets_new)}."
             if offsets else "")
    return ("The bands are calibrated by conformalized quantile regression, twice: out-of-fold predictions "
            f"over {folds} random folds of the training rows set how far each band's edges move (in the model's "
            f"space, log for time and memory) for a workload the model was trained on, and {folds} folds that "
            "each hold out whole workloads (a dataset at one training size) set the offset for a workload it "
            f"was not trained on (never less than the first).{shown} On rows like the training rows the band "
            "then covers about 80%; a new dataset or device is not like them (see the coverage below). Every "
            "fold of the evaluation below calibrates on its own training rows only.")


def _recorded_landmarks() -> str:
    from advisor.datasets import list_datasets

    return ", ".join(f"{d.name} {d.landmark:.3f}" for d in list_datasets() if d.landmark is not None)


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def model_card(evaluation: Evaluation, *, meta: Mapping[str, Any], summary: Mapping[str, Any],
               path: str | Path) -> Path:
    """Write ``MODEL_CARD.md``: what the surrogate was trained on, its figures, where not to trust it.

    Args:
        evaluation: The cross-validation result.
        meta: The fitted surrogate's meta (versions, row counts, table sha256).
        summary: :func:`advisor.knowledge.summarize` of the training table.
        path: Where to write the card.

    Returns:
        The path written.
    """
    def counts(name: str) -> str:
        return ", ".join(f"{k}: {v}" for k, v in dict(summary.get(name, {})).items()) or "none"

    lines = [
        "# Surrogate model card",
        "",
        f"Generated {_dt.datetime.now(_dt.timezone.utc).date().isoformat()} by advisor "
        f"{meta.get('advisor_version', '?')} with LightGBM {meta.get('lightgbm_version', '?')}.",
        "",
        "## What it predicts",
        "",
        "For a workload, a hardware target and a configuration: training time (s), test accuracy and",
        "peak memory (MiB), each as a median with a 10-90% band (LightGBM quantile regression; time and",
        "memory in log space). Predictions are never measurements: `advisor recommend --verify N` measures.",
        "",
        "- **Time** is modelled relative to a fitted per-framework baseline: non-negative coefficients of the",
        "  training GFLOPs (scaled by calibrated GEMM speed when the trials have one), steps, samples seen,",
        "  start-up and activation traffic (layer outputs per sample times samples seen); coefficients in",
        "  `meta.json` under `time_baseline`. The boosters learn the correction, which transfers across",
        "  datasets better than a time or a cost per FLOP.",
        "- **Memory** is modelled the same way, relative to a per-framework baseline of a constant (framework",
        "  and runtime), the dataset held as float32 and one batch's layer outputs as float32 (`memory_baseline`).",
        "- **Accuracy** is the lower of two models, quantile by quantile: one of accuracy minus the dataset's",
        "  landmark (the test accuracy of a fixed ridge classifier, `advisor datasets landmark NAME`: "
        + _recorded_landmarks() + "),",
        "  which carries what was learnt on easy data over to hard data, and one of plain accuracy, which",
        "  never promises more than was measured.",
        "",
        _calibration_line(meta),
        "",
        "## What it was trained on",
        "",
        f"- Table: `{_shown(meta.get('table') or evaluation.table)}` (sha256 `{meta.get('table_sha256') or '?'}`), "
        f"{summary.get('rows', '?')} trials.",
        f"- Rows per model: {', '.join(f'{k} {v}' for k, v in dict(meta.get('row_counts', {})).items())}.",
        f"- Status: {counts('by_status')}.",
        f"- Frameworks: {counts('by_framework')}.",
        f"- Datasets: {counts('by_dataset')}.",
        f"- Training sizes: {counts('by_train_samples')}.",
        f"- Device kinds: {counts('by_device_kind')}.",
        "- Accuracy trains on status `ok`, non-synthetic trials; time on uncontended `ok`/`pruned` trials;",
        "  memory on `ok`/`pruned` trials.",
        "",
        "## Held-out quality (grouped cross-validation)",
        "",
        "| objective | scheme | folds | rows | Spearman rho | MAPE | MAE | 10-90% coverage |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in evaluation.figures:
        lines.append(
            f"| {f.objective} | {f.scheme} | {f.n_folds} | {f.n_rows} | {_fmt(f.spearman)} | "
            f"{_fmt(f.mape, True)} | {_fmt(f.mae)} | {_fmt(f.coverage, True)} |"
        )
    if evaluation.skipped:
        lines += ["", "Not evaluated: " + "; ".join(evaluation.skipped) + "."]
    if evaluation.noise:
        parts = []
        for objective, n in evaluation.noise.items():
            if "mae" in n:
                figure = f"MAE {n['mae']:.4f} (from the others' median: {n.get('loo_mae', float('nan')):.4f})"
            else:
                figure = (f"{100 * n['mape']:.1f}% from the median (from the others' median: "
                          f"{100 * n.get('loo_mape', float('nan')):.1f}%)")
            parts.append(f"{objective} {figure} ({n['groups']} configurations run {n['rows']} times in all)")
        lines += ["", "Repeat noise, the floor under any model's error: rows of one configuration (same workload, "
                  "hardware and config, another seed) differ from their median by " + "; ".join(parts) + ". "
                  "The first figure scores each run against a median it helped to form, so it understates the "
                  "floor; the second predicts each run from the median of the other runs of its configuration, "
                  "which is what a model that knew everything but the seed would err on a new run."]
    tta = evaluation.time_to_accuracy
    if tta:
        per = "; ".join(f"{k} {100 * v['median_error']:.1f}% over {v['curves']}" for k, v in tta["per_dataset"].items())
        lines += ["", "## Time to accuracy (learning curves)", "",
                  "Every trial's per-epoch readings train the models too (epoch and schedule length as features, "
                  "see `advisor/surrogate/_curves.py`). On held-out full-size curves (at least "
                  f"{FULL_SIZE_SAMPLES:,} training samples), leave-one-dataset-out, the target being "
                  f"{tta['level']:.0%} of the way from the first reading to the best: median error of the predicted "
                  f"time to reach it {100 * tta['median_error']:.1f}% over {tta['curves']} curves ({per}); "
                  f"{tta['misses']} predicted curves never reached the target (scored at their last epoch). "
                  "Asked of the curve's shape instead (the same level read on the predicted curve's own first and "
                  f"best readings), the median error is {100 * tta['median_error_shape']:.1f}%: most of the first "
                  "figure's error is the level of accuracy on an unseen dataset, not the time per epoch."]
    kinds = list(dict(summary.get("by_device_kind", {})))
    lines += [
        "",
        "## Where not to trust it",
        "",
        f"- Device kinds absent from the table (it holds: {', '.join(kinds) or 'none'}): every prediction"
        " for another kind is an extrapolation, and `advisor recommend` says so and widens the band.",
        "- Datasets whose input shape, class count or training size lie far from every measured one.",
        "- Hardware without a calibrated GEMM speed (`advisor hardware --calibrate`): the time model then",
        "  loses its main hardware feature.",
        "- Frameworks, models or epoch counts outside the measured ranges; trees do not extrapolate, they",
        "  flatten, so times beyond the largest measured ones are underestimated.",
        "- A coverage well below 80% above means the bands are too narrow for that kind of transfer.",
        "- Datasets without a landmark (a user's .npz before `advisor datasets landmark` has scored it):",
        "  the accuracy model uses the median landmark of its training rows instead, so its accuracy is",
        "  predicted as if the dataset were of middling difficulty.",
        "- Run lengths beyond the longest measured curve of a workload: the learning-curve readings teach the",
        "  shape of a curve up to the epochs that were run, and trees flatten beyond them (a 30-epoch answer",
        "  on a dataset whose longest trials ran 8 epochs is an extrapolation).",
        "- Accuracy on a dataset the table does not hold: the time-to-accuracy figure above shows that the",
        "  curve's shape transfers far better than its level.",
        "- Training-recipe knobs (schedules, augmentation, label smoothing, bfloat16, ...) added after a",
        "  model was fitted: that model cannot see them, so recommend keeps them at their defaults.",
        "",
    ]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
