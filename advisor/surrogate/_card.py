"""The model card: what the surrogate was trained on, its cross-validated figures, where not to
trust it (written by :func:`model_card` from an :class:`~advisor.surrogate.evaluate.Evaluation`)."""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from advisor.surrogate.evaluate import Evaluation

#: Trials with at least this many training samples count as full size (the time-to-accuracy figure).
FULL_SIZE_SAMPLES = 10_000

__all__ = ["model_card"]


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
            "band_offsets_new_workload": dict(meta.get("band_offsets_new_workload") or {}),
            "band_offsets_new_dataset": dict(meta.get("band_offsets_new_dataset") or {}),
            "pair_offsets_new_dataset": dict(meta.get("pair_offsets_new_dataset") or {})}


def _shown(table: str) -> str:
    """A table path as the card shows it: the shipped table by its repository path, others as given."""
    from advisor.surrogate.io import SHIPPED_TABLE_LABEL, table_label

    label = table_label(table) if table else ""
    return f"{label} (the shipped table)" if label == SHIPPED_TABLE_LABEL else str(table)


def _calibration_line(meta: Mapping[str, Any]) -> str:
    folds = (meta.get("band_calibration") or {}).get("folds", 0)
    offsets = meta.get("band_offsets") or {}
    offsets_new = meta.get("band_offsets_new_workload") or {}
    offsets_data = meta.get("band_offsets_new_dataset") or {}
    if folds < 2:
        return "The bands are the raw 10% and 90% quantile models (not calibrated)."
    show = lambda o: ", ".join(f"{k} {v:+.3g}" for k, v in o.items())  # noqa: E731
    shown = (f" The shipped model's offsets: {show(offsets)}; for a new workload: {show(offsets_new)}"
             + (f"; for a new dataset: {show(offsets_data)}" if offsets_data else "") + "."
             if offsets else "")
    return ("The bands are calibrated by conformalized quantile regression, three times: out-of-fold predictions "
            f"over {folds} random folds of the training rows set how far each band's edges move (in the model's "
            f"space, log for time and memory) for a workload the model was trained on; up to {folds} folds that "
            "each hold out whole workloads (a dataset at one training size) set the offset for a new size of a "
            f"known dataset; and folds that each hold out a whole dataset set it for a dataset the model never "
            f"saw (each never less than the one before).{shown} On rows like the training rows the band "
            "then covers about 80%; a new device is not like them (see the coverage below). Every "
            "fold of the evaluation below calibrates on its own training rows only." + _pair_line(meta))


def _pair_line(meta: Mapping[str, Any]) -> str:
    pairs = meta.get("pair_offsets_new_dataset") or {}
    if not pairs:
        return ""
    shown = ", ".join(f"{k} {v:.3g}" for k, v in pairs.items())
    return (" The held-out-dataset folds also calibrate a *difference* of two predictions for one new dataset on "
            "one hardware (random pairs; for accuracy, pairs of the better half of each workload's trials): the "
            f"half-width of its 10-90% band is {shown} (model space: log for time and memory). `recommend` "
            "reads it when it asks whether an unmeasured pick beats the obvious default on a new dataset.")


def _accuracy_lines(meta: Mapping[str, Any]) -> list[str]:
    """How the card's model predicts accuracy, as its meta says (models differ in this)."""
    target = meta.get("accuracy_target") or {}
    marks = ("landmark (the test accuracy of a fixed ridge classifier on random convolutional features, `advisor datasets landmark NAME`: "
             + _recorded_landmarks() + "),")
    if not isinstance(target, dict) or not target:
        return ["- **Accuracy** is modelled as measured (no landmark in the training rows)."]
    if target.get("combined_with"):
        return ["- **Accuracy** is the lower of two models, quantile by quantile: one of accuracy minus the dataset's",
                "  " + marks,
                "  which carries what was learnt on easy data over to hard data, and one of plain accuracy, which",
                "  never promises more than was measured."]
    cap = target.get("headroom_cap")
    capped = ("" if cap is None else
              f" A prediction never removes more than {100 * float(cap):.0f}% of the landmark's error (1 - landmark),"
              " the most any training trial removed, so easy data is not promised 1.0.")
    return ["- **Accuracy** is modelled as accuracy minus the dataset's",
            "  " + marks,
            "  which carries what was learnt on easy data over to hard data (see `benchmarks/results/surrogate-choices.md` for the",
            "  held-out figures that chose it over plain accuracy and over the share of the landmark's error)." + capped]


def _recorded_landmarks() -> str:
    from advisor.datasets import list_datasets

    return ", ".join(f"{d.name} {d.landmark:.3f}" for d in list_datasets() if d.landmark is not None)


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def _narrow_groups(evaluation: Evaluation, floor: float = 0.7) -> list[str]:
    """A line naming the held-out groups whose band alone covers less than ``floor`` (a pooled
    coverage can hide them), or none."""
    narrow = [f"{f.objective} with {name} held out ({_fmt(g['coverage'], True)})"
              for f in evaluation.figures for name, g in f.by_group.items()
              if g.get("coverage") is not None and g["coverage"] < floor]
    if not narrow:
        return []
    return [f"- Held out alone, these bands cover less than {100 * floor:.0f}% (the pooled figure above hides "
            f"them): {'; '.join(narrow)}. Read their predictions on such a dataset as rougher than the band says."]


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
        *_accuracy_lines(meta),
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
        *([f"- {summary['synthetic']} of the trials are timing runs on random data (`synthetic:HxWxC`, input shapes "
           "none of the real datasets has: `benchmarks/study/collect_timing.py`): they train the time and memory "
           "models only, and every held-out figure below trains on them and scores none of them."]
          if summary.get("synthetic") else []),
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
    grouped = [f for f in evaluation.figures if f.by_group]
    if grouped:
        lines += ["", "Each held-out group alone (a dataset held out is what a user's own dataset meets):", "",
                  "| objective | scheme | held out | rows | Spearman rho | MAPE | MAE | 10-90% coverage |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {f.objective} | {f.scheme} | {name} | {g['n_rows']} | {_fmt(g['spearman'])} | "
                  f"{_fmt(g['mape'], True)} | {_fmt(g['mae'])} | {_fmt(g['coverage'], True)} |"
                  for f in grouped for name, g in f.by_group.items()]
    composed = [f for f in evaluation.figures if f.by_kind and f.scheme == "leave-one-dataset-out"]
    if composed:
        lines += ["", "Where the leave-one-dataset-out error comes from (the same predictions, by kind of run; "
                  "'share' is the kind's part of the summed error):", "",
                  "| objective | runs | rows | MAPE | MAE | share of the error |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {f.objective} | {kind} | {k['n_rows']} | {_fmt(k.get('mape'), True)} | {_fmt(k.get('mae'))} | "
                  f"{100 * k['share']:.0f}% |" for f in composed for kind, k in f.by_kind.items()]
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
    held = getattr(evaluation, "device_holdout", {}) or {}
    if held:
        lines += ["", "## Leave one device out (GPU rows held out)", ""]
        if "time" in held:
            t = held["time"]
            lines.append(
                f"- Time, as `recommend` answers a GPU request until the table holds enough trials of that GPU "
                f"(the device model of `advisor/devices.py` over the run's steps, plus the framework's warm-up): "
                f"median error {100 * t['median_error']:.1f}% "
                f"over {t['rows']} measured GPU trials ({', '.join(t['gpu_models'])}), median predicted / measured "
                f"{t['median_ratio']:.2f}, Spearman rho {t['spearman']:.3f}. The device model's launch costs "
                "were fitted on these very runs (benchmarks/results/gpu-model.md has the out-of-sample check).")
        if "accuracy" in held:
            a = held["accuracy"]
            lines.append(
                f"- Accuracy from the models fitted on the CPU rows alone: MAE {a['mae']:.3f}, 10-90% band "
                f"coverage {100 * a['coverage']:.1f}% over {a['rows']} GPU trials. A config trains to about the "
                "same accuracy on either device, so GPU answers use the CPU trials' accuracy model.")
        lines.append("- The reverse (CPU held out, learnt from the GPU rows) is not reported: the GPU rows are "
                     "too few to train on.")
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
        *_narrow_groups(evaluation),
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
