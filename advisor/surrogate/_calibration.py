"""Conformal calibration of the 10-90% bands, and the keys that tell a seen workload from a new one.

Boosted quantile models give bands that are too narrow on rows they did not see (out of fold they
covered 61-74% of values instead of 80%). ``fit`` therefore calibrates each band by conformalized
quantile regression (Romano et al., 2019): out-of-fold 10% and 90% predictions over
:data:`CALIBRATION_FOLDS` random folds give each row the score ``max(lo - y, y - hi)`` (in the
model's space), and the band is widened (or narrowed) on both sides by the score's
``ceil((n + 1) * 0.8) / n`` quantile, stored as ``meta["band_offsets"]``. On rows exchangeable
with the training rows this makes the band cover about 80%; a new dataset is not exchangeable,
which is why recommend widens an extrapolation's band further.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from advisor.surrogate._boosters import _train_one
from advisor.surrogate._targets import _INDEX, MIN_ROWS, QUANTILES
from advisor.surrogate.features import FeatureSchema

__all__ = ["CALIBRATION_FOLDS", "WORKLOAD_FEATURES", "workload_keys", "dataset_keys", "seen_workloads", "seen_datasets",
           "conformal_offset", "pair_offset", "pair_groups", "PAIRS_PER_WORKLOAD"]

#: Random pairs of configurations per held-out workload that calibrate a predicted difference.
PAIRS_PER_WORKLOAD = 4000

#: Random folds of the in-fit band calibration (0 disables it).
CALIBRATION_FOLDS = 4
#: The coverage the calibrated 10-90% band aims at.
BAND_COVERAGE = QUANTILES[2] - QUANTILES[0]


#: The features that identify a workload without its name: input shape, classes, landmark and
#: training size (a row's dataset and how much of it trains).
WORKLOAD_FEATURES = ("input_h", "input_w", "input_c", "num_classes", "landmark", "train_samples")


def workload_keys(x: np.ndarray) -> np.ndarray:
    """Each row's workload as a float vector (:data:`WORKLOAD_FEATURES`, rounded; NaN as -1)."""
    cols = x[:, [_INDEX[name] for name in WORKLOAD_FEATURES]]
    return np.round(np.nan_to_num(cols, nan=-1.0), 4)


def dataset_keys(keys: np.ndarray) -> np.ndarray:
    """Workload keys without the training size: which dataset a row is, at any size."""
    return keys[:, :-1]


def seen_datasets(x: np.ndarray, known: Sequence[Sequence[float]]) -> np.ndarray:
    """Whether each row's dataset (at any size) is among ``known`` workloads' datasets."""
    table = {tuple(float(v) for v in k[:-1]) for k in known}
    return np.array([tuple(k) in table for k in dataset_keys(workload_keys(x)).tolist()], dtype=bool)


def seen_workloads(x: np.ndarray, known: Sequence[Sequence[float]]) -> np.ndarray:
    """Whether each row's workload is among ``known`` (the fitted model's ``meta["workloads"]``)."""
    table = {tuple(float(v) for v in k) for k in known}
    return np.array([tuple(k) in table for k in workload_keys(x).tolist()], dtype=bool)


def conformal_offset(y: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, coverage: float = BAND_COVERAGE) -> float:
    """How far to move both edges of ``[lo, hi]`` so that it covers ``coverage`` of ``y`` (split CQR).

    The score of a row is ``max(lo - y, y - hi)`` (negative inside the band); the offset is its
    ``ceil((n + 1) * coverage) / n`` empirical quantile, so a band widened by it covers at least
    ``coverage`` of exchangeable new rows. A negative offset narrows a band that was too wide.
    """
    scores = np.maximum(lo - y, y - hi)
    n = len(scores)
    if n == 0:
        return 0.0
    level = min(1.0, math.ceil((n + 1) * coverage) / n)
    return float(np.quantile(scores, level, method="higher"))


def _calibrate(lgb: Any, x: np.ndarray, members: Sequence[tuple[np.ndarray, np.ndarray]], y: np.ndarray,
               schema: FeatureSchema, *, folds: int, seed: int, num_threads: int, num_boost_round: int,
               groups: np.ndarray | None = None, weight: np.ndarray | None = None,
               score_rows: np.ndarray | None = None, trials: np.ndarray | None = None,
               mid_out: np.ndarray | None = None) -> float | None:
    """The conformal offset of the 10-90% band from ``folds`` random out-of-fold fits; None if too few rows.

    With ``groups`` (one key per row), each fold holds out whole groups, so the offset is the one
    a row of an unseen group needs; None when there are fewer than two groups.

    Each member is ``(target, shift)``: boosters fitted on ``target`` whose predictions plus ``shift``
    are in the units of ``y``; with several members the band is their elementwise minimum, as
    :meth:`~advisor.surrogate.model.Surrogate.predict_matrix` combines them.

    Learning-curve rows (:mod:`advisor.surrogate._curves`): ``weight`` weighs the fits, only the
    ``score_rows`` (finished trials) are scored, and ``groups`` should keep a trial's rows together
    (the random folds are drawn over ``trials`` when given).

    ``mid_out`` (as long as ``y``), when given, receives each row's out-of-fold median in the units
    of ``y`` (the first member's; NaN where not predicted), for :func:`pair_offset`.
    """
    if folds < 2 or len(y) < folds * MIN_ROWS:
        return None
    rng = np.random.default_rng(seed + 7919)
    if groups is None and trials is None:
        fold = np.arange(len(y)) % folds
        rng.shuffle(fold)
    elif groups is None:  # random folds over whole trials
        assert trials is not None
        per_trial = np.arange(trials.max() + 1) % folds
        rng.shuffle(per_trial)
        fold = per_trial[trials]
    else:  # whole groups to a fold: round-robin over the groups in a random order
        _, codes = np.unique(groups, return_inverse=True)
        order = rng.permutation(codes.max() + 1)
        if len(order) < 2:
            return None
        fold = (np.argsort(order)[codes] % min(folds, len(order))).astype(int)
        folds = min(folds, len(order))
    lo, hi = np.full(len(y), np.inf), np.full(len(y), np.inf)
    for k in range(folds):
        train, test = fold != k, fold == k
        for target, shift in members:
            edges = [_train_one(lgb, x[train], target[train], schema, alpha=alpha, seed=seed, num_threads=num_threads,
                                num_boost_round=num_boost_round,
                                weight=None if weight is None else weight[train]).predict(x[test], num_threads=num_threads)
                     for alpha in (QUANTILES[0], QUANTILES[2])]
            lo[test] = np.minimum(lo[test], np.minimum(*edges) + shift[test])
            hi[test] = np.minimum(hi[test], np.maximum(*edges) + shift[test])
        if mid_out is not None:
            target, shift = members[0]
            mid_out[test] = _train_one(lgb, x[train], target[train], schema, alpha=QUANTILES[1], seed=seed,
                                       num_threads=num_threads, num_boost_round=num_boost_round,
                                       weight=None if weight is None else weight[train]
                                       ).predict(x[test], num_threads=num_threads) + shift[test]
    scored = np.ones(len(y), dtype=bool) if score_rows is None else score_rows
    return conformal_offset(y[scored], np.minimum(lo, hi)[scored], np.maximum(lo, hi)[scored])


#: What else two rows must share to be compared as a recommendation compares two candidates: the
#: hardware they ran on (device kind, GPU model, calibrated GEMM rate).
_HARDWARE_FEATURES = ("device_kind", "gpu_model", "hw_gflops")


def pair_groups(x: np.ndarray) -> np.ndarray:
    """Each row's comparison group for :func:`pair_offset`: its workload on its hardware."""
    hardware = np.round(np.nan_to_num(x[:, [_INDEX[name] for name in _HARDWARE_FEATURES]], nan=-1.0), 4)
    return np.unique(np.column_stack([workload_keys(x), hardware]), axis=0, return_inverse=True)[1].ravel()


def pair_offset(y: np.ndarray, mid: np.ndarray, workloads: np.ndarray, *, upper_half: bool, seed: int,
                coverage: float = BAND_COVERAGE) -> float | None:
    """The half-width of the 10-90% band of a *difference* of two predicted medians on one workload.

    Two configurations of one new dataset share its level error (the trees do not know how hard the
    data is), so their predicted difference may be surer than two independent bands suggest. From
    out-of-fold medians ``mid`` of rows whose datasets were held out, random pairs within each
    group of ``workloads`` (:func:`pair_groups`: one workload on one hardware) give the error ``(mid_i - mid_j) - (y_i - y_j)``; the half-width is its absolute
    value's ``coverage`` quantile. ``upper_half``: only pairs of rows above their workload's median
    ``y`` (the comparison that matters is between two good configurations, not against a diverged
    run). None with fewer than 50 pairs.
    """
    rng = np.random.default_rng(seed + 104729)
    errors = []
    for w in np.unique(workloads):
        idx = np.flatnonzero((workloads == w) & np.isfinite(mid) & np.isfinite(y))
        if upper_half and len(idx):
            idx = idx[y[idx] >= np.median(y[idx])]
        if len(idx) < 2:
            continue
        i = rng.choice(idx, PAIRS_PER_WORKLOAD)
        j = rng.choice(idx, PAIRS_PER_WORKLOAD)
        keep = i != j
        errors.append(((mid[i] - mid[j]) - (y[i] - y[j]))[keep])
    e = np.abs(np.concatenate(errors)) if errors else np.empty(0)
    if len(e) < 50:
        return None
    return float(np.quantile(e, coverage))
