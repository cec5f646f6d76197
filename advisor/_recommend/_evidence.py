"""Evidence and extrapolation: the measured trials nearest a choice, and when to distrust the bands.

Each choice carries evidence: the nearest measured trials in standardised feature space. When the
table has no trials on the requested device kind, or none near the dataset's meta-features, the
result says it is an extrapolation, gives the reasons and widens the bands.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from advisor import knowledge
from advisor._recommend._result import Evidence
from advisor._recommend._workload import Target, WorkloadInfo

__all__ = ["EVIDENCE_K", "TrialSpace", "extrapolation", "nearest_dataset", "nearest_trials", "own_evidence", "widen"]

EVIDENCE_K = 3
# How much wider an extrapolated band is: x2 in log space for time and memory, +-0.1 accuracy.
WIDEN_LOG = 2.0
WIDEN_ACCURACY = 0.1


def feature_spread(x: np.ndarray) -> np.ndarray:
    """Each column's standard deviation, 1.0 where it has none. An all-unknown column (no GPU
    trials) has none; so has a column whose rows all hold one value, though its computed spread is
    rounding error (1e-16), not 0: dividing by that turns any other value into a distance of 1e14
    that drowns every other feature, so a spread below 1e-9 counts as none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        std = np.nanstd(x, axis=0)
    return np.where((std > 1e-9) & np.isfinite(std), std, 1.0)


class TrialSpace:
    """Standardised feature space of the table's trials, for nearest-trial evidence."""

    def __init__(self, surrogate: Any, table: knowledge.Table) -> None:
        from advisor.surrogate.features import encode

        self.schema = surrogate.schema
        self.cat = np.array([f.kind == "cat" for f in self.schema.features])
        self.log = np.array([f.log for f in self.schema.features])
        self.x = self._transform(encode(table.columns, self.schema))
        self.std = feature_spread(self.x[:, ~self.cat])

    def _transform(self, x: np.ndarray) -> np.ndarray:
        x = x.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            x[:, self.log] = np.where(x[:, self.log] > 0, np.log10(x[:, self.log]), np.nan)
        return x

    def distances(self, q: np.ndarray) -> np.ndarray:
        """Distance from one encoded query row to every trial."""
        q = self._transform(q[None, :])[0]
        num = (self.x[:, ~self.cat] - q[~self.cat]) / self.std
        num = np.where(np.isnan(num), np.where(np.isnan(self.x[:, ~self.cat]) & np.isnan(q[~self.cat]), 0.0, 1.0), num)
        cat = self.x[:, self.cat]
        qc = q[self.cat]
        mismatch = ~((cat == qc) | (np.isnan(cat) & np.isnan(qc)))
        return np.sqrt(np.sum(num ** 2, axis=1) + mismatch.sum(axis=1))


def nearest_trials(space: TrialSpace, table: knowledge.Table, q: np.ndarray, framework: str,
                   k: int, *, device_kind: str | None = None, dataset: str | None = None) -> tuple[Evidence, ...]:
    """The ``k`` trials of ``table`` nearest the encoded candidate ``q``, as evidence.

    Only comparable trials are cited: completed trials on the same device kind (a GPU request never
    cites CPU trials as evidence of GPU speed: with none, there is no evidence), of ``dataset``
    when the table has any (the caller passes the workload's own dataset, or the measured dataset
    nearest it by meta-features, :func:`nearest_dataset`), else the nearest trials of any.
    """
    d = space.distances(q)
    n = len(d)
    same = np.array([f == framework for f in table["framework"]])
    ok = np.array([s == "ok" for s in table["status"]])
    device = np.array([device_kind is None or kd == device_kind for kd in table["device_kind"]])
    data = np.array([dataset is None or name == dataset for name in table["dataset_name"]])
    if not (ok & device).any():
        return ()
    # Completed trials of the same framework and dataset are the best evidence; fall back step by step.
    for mask in (same & ok & device & data, ok & device & data, same & ok & device, ok & device):
        if mask.any():
            pool = np.flatnonzero(mask)
            break
    else:
        pool = np.arange(n)
    best = pool[np.argsort(d[pool], kind="stable")[:k]]
    return tuple(
        Evidence(
            trial_id=table["trial_id"][i], framework=table["framework"][i], dataset_name=table["dataset_name"][i],
            train_samples=table["train_samples"][i], device_kind=table["device_kind"][i],
            distance=round(float(d[i]), 3), status=table["status"][i], train_time_s=table["train_time_s"][i],
            test_accuracy=table["test_accuracy"][i], peak_memory_mb=table["peak_memory_mb"][i],
            gpu_model=(table["gpu_model"][i] or None) if table["device_kind"][i] == "gpu" else None,
        )
        for i in best
    )


def nearest_dataset(table: knowledge.Table, workload: WorkloadInfo) -> tuple[str, float] | None:
    """The measured dataset nearest ``workload`` by meta-features, and how near: input size (log2 of
    the pixels), channels, classes (log2), training samples (half the log2 ratio to the nearest size
    it was measured at) and, where both are known, how hard it is (4x the landmark difference).
    ``None`` when the table holds no completed trial with its shape recorded.

    Without the training samples, a large dataset of small images cited the trials of a small dataset
    nearer in pixels, whose times say nothing of a run over the large one.
    """
    from advisor.surrogate.features import registry_landmark

    h, w, c = workload.input_shape
    mine = workload.landmark if workload.landmark is not None else registry_landmark(workload.dataset)
    seen: dict[str, tuple[Any, ...]] = {}
    sizes: dict[str, set[int]] = {}
    for i, status in enumerate(table["status"]):
        name = table["dataset_name"][i]
        if status != "ok" or not name:
            continue
        if table["train_samples"][i]:
            sizes.setdefault(name, set()).add(int(table["train_samples"][i]))
        if name not in seen and None not in (
                table["input_h"][i], table["input_w"][i], table["input_c"][i], table["num_classes"][i]):
            seen[name] = (table["input_h"][i], table["input_w"][i], table["input_c"][i], table["num_classes"][i])
    best: tuple[str, float] | None = None
    for name, (hh, ww, cc, k) in seen.items():
        if not (hh and ww and k):
            continue
        d = (abs(math.log2(h * w / (hh * ww))) + abs(c - cc) + abs(math.log2(workload.num_classes / k)))
        if workload.train_samples and sizes.get(name):
            d += 0.5 * min(abs(math.log2(workload.train_samples / n)) for n in sizes[name])
        theirs = registry_landmark(name)
        if not (math.isnan(mine) or math.isnan(theirs)):
            d += 4 * abs(mine - theirs)
        if best is None or d < best[1]:
            best = (name, round(d, 3))
    return best


def extrapolation(table: knowledge.Table, workload: WorkloadInfo, target: Target, *, own_runs: int = 0) -> list[str]:
    """Why a recommendation for ``workload`` on ``target`` extrapolates from ``table`` (empty: it does not).

    ``own_runs``: the user's own runs of the dataset (not in ``table``, so the model was not fitted
    on them); they are the evidence cited, not a measured dataset nearby.
    """
    ok = [i for i, s in enumerate(table["status"]) if s == "ok"]
    kinds = {table["device_kind"][i] for i in ok}
    reasons = []
    if target.device_kind not in kinds:
        reasons.append(f"the knowledge base has no measured {target.device_kind.upper()} trials "
                       f"(it holds {', '.join(sorted(kinds)).upper() or 'none'}): every figure is predicted "
                       f"from other hardware")
    elif target.device_kind == "gpu" and target.gpu_model:
        models = {table["gpu_model"][i] for i in ok if table["device_kind"][i] == "gpu"}
        if target.gpu_model not in models:
            reasons.append(f"no measured trials on GPU model {target.gpu_model!r} "
                           f"(measured: {', '.join(sorted(m for m in models if m)) or 'unknown models'})")
    h, w, c = workload.input_shape
    shapes = {(table["input_h"][i], table["input_w"][i], table["input_c"][i], table["num_classes"][i]) for i in ok}

    def near(s: tuple[Any, ...]) -> bool:
        if None in s or not s[0] or not s[1] or not s[3]:
            return False
        return (s[2] == c and abs(math.log2(h * w / (s[0] * s[1]))) <= 1.0
                and abs(math.log2(workload.num_classes / s[3])) <= 1.0)

    if not any(near(s) for s in shapes):
        seen = ", ".join(f"{a}x{b}x{cc}/{k} classes" for a, b, cc, k in sorted(shapes, key=str)[:4]) or "none"
        reasons.append(f"no measured trials on data like {h}x{w}x{c} with {workload.num_classes} classes "
                       f"(measured: {seen})")
    elif workload.dataset not in {table["dataset_name"][i] for i in ok}:
        # Data of a measured kind, but not this dataset: how hard it is (its accuracy level) is
        # predicted from the others, with the held-out error the model card reports.
        near_name = None if own_runs else nearest_dataset(table, workload)
        cited = f"; evidence is cited from {near_name[0]}, the nearest measured dataset by meta-features " \
                f"(distance {near_name[1]:g})" if near_name else ""
        if own_runs:
            cited = (f"; your own {own_runs} runs of it are the evidence cited, and those that answer the question "
                     "are candidates as measured (the model was not fitted on them)" if own_runs > 1 else
                     "; your own run of it is the evidence cited, and if it answers the question it is a candidate "
                     "as measured (the model was not fitted on it)")
        reasons.append(f"no measured trials on {workload.dataset} itself: its accuracy level is predicted "
                       f"from other datasets of its kind (see the model card's leave-one-dataset-out error){cited}")
    sizes = [table["train_samples"][i] for i in ok if table["train_samples"][i]]
    if sizes and not (min(sizes) / 4 <= workload.train_samples <= max(sizes) * 4):
        reasons.append(f"{workload.train_samples} training samples is far outside the measured "
                       f"{min(sizes)}..{max(sizes)}")
    return reasons


def widen(band: Any, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """The lower and upper bounds of ``band`` widened for an extrapolation (``log``: time, memory)."""
    if log:
        return band.mid * (band.lo / band.mid) ** WIDEN_LOG, band.mid * (band.hi / band.mid) ** WIDEN_LOG
    return np.clip(band.lo - WIDEN_ACCURACY, 0, 1), np.clip(band.hi + WIDEN_ACCURACY, 0, 1)


def own_evidence(kb: knowledge.Table, got: Any) -> tuple[Evidence, ...]:
    ids = set(got.trial_ids)
    cols = kb.columns
    return tuple(
        Evidence(trial_id=cols["trial_id"][i], framework=cols["framework"][i], dataset_name=cols["dataset_name"][i],
                 train_samples=cols["train_samples"][i], device_kind=cols["device_kind"][i], distance=0.0,
                 status=cols["status"][i], train_time_s=cols["train_time_s"][i],
                 test_accuracy=cols["test_accuracy"][i], peak_memory_mb=cols["peak_memory_mb"][i],
                 gpu_model=(cols["gpu_model"][i] or None) if cols["device_kind"][i] == "gpu" else None)
        for i in range(len(kb)) if cols["trial_id"][i] in ids
    )[:EVIDENCE_K]
