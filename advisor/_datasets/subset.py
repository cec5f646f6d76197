"""Deterministic stratified subsets, and per-channel standardisation with training statistics."""

from __future__ import annotations

import math

import numpy as np

from advisor.errors import DatasetError

__all__ = ["SUBSET_METHOD", "stratified_indices", "standardise"]

# Part of every fingerprint: change it whenever the indices a given (labels, n, seed) yields change.
SUBSET_METHOD = "stratified-largest-remainder-v1"
_CHUNK = 4096


def stratified_indices(labels: np.ndarray, n: int, *, seed: int, stream: int = 0) -> np.ndarray:
    """Pick ``n`` of ``len(labels)`` indices with class proportions preserved, deterministically.

    Each class gets ``floor(n * count / total)`` places, and the places left go to the classes
    with the largest remainders (ties to the smaller label). Within a class the samples come in
    the order of one seeded permutation, so the same arguments always give the same indices.

    Args:
        labels: 1-D integer labels.
        n: How many to keep, ``1 <= n <= len(labels)``.
        seed: Seed of the draw.
        stream: Separates independent draws with one seed (for example train 0, test 1).

    Returns:
        Sorted int64 indices into ``labels``.
    """
    labels = np.asarray(labels)
    total = len(labels)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= total:
        raise DatasetError(f"The subset size must be an integer in [1, {total}]. Got {n!r} instead.")
    if n == total:
        return np.arange(total, dtype=np.int64)
    classes, counts = np.unique(labels, return_counts=True)
    quota = (counts * n) // total  # integer arithmetic: exact floors
    left = int(n - quota.sum())
    remainder = counts * n - quota * total  # exact remainders, compared without rounding
    order = sorted(range(len(classes)), key=lambda i: (-int(remainder[i]), int(classes[i])))
    for i in order[:left]:
        quota[i] += 1
    rng = np.random.default_rng([int(seed), int(stream)])
    perm = rng.permutation(total)
    grouped = perm[np.argsort(labels[perm], kind="stable")]  # by class, permutation order within
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    picked = [grouped[s: s + q] for s, q in zip(starts, quota)]
    return np.sort(np.concatenate(picked)).astype(np.int64)


def _uint8_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Exact integer sums: the statistics, hence the data, are identical on every machine.
    channels = x.shape[-1]
    count = x.size // channels
    mean, std = np.empty(channels), np.empty(channels)
    for c in range(channels):
        s1 = s2 = 0
        for i in range(0, len(x), _CHUNK):
            plane = x[i: i + _CHUNK, ..., c]
            s1 += int(plane.sum(dtype=np.uint64))
            s2 += int(np.square(plane, dtype=np.uint32).sum(dtype=np.uint64))
        mean[c] = s1 / count
        # math.sqrt takes the exact integer at any size (numpy's sqrt cannot take one past 2**64,
        # which uint8 data reach at some 35 million values a channel) and rounds it as numpy did below
        std[c] = math.sqrt(max(count * s2 - s1 * s1, 0)) / count
    return mean, std


def _float_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    channels = x.shape[-1]
    total = np.zeros(channels)
    for i in range(0, len(x), _CHUNK):
        total += x[i: i + _CHUNK].reshape(-1, channels).sum(axis=0, dtype=np.float64)
    mean = total / (x.size // channels)
    sq = np.zeros(channels)
    for i in range(0, len(x), _CHUNK):
        sq += np.square(x[i: i + _CHUNK].reshape(-1, channels).astype(np.float64) - mean).sum(axis=0)
    return mean, np.sqrt(sq / (x.size // channels))


def standardise(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardise NHWC images per channel with the training set's mean and standard deviation.

    A channel with zero spread is only centred. Returns float32 arrays.
    """
    mean, std = _uint8_stats(x_train) if x_train.dtype == np.uint8 else _float_stats(x_train)
    std = np.where(std > 0, std, 1.0)
    pixels = int(np.prod(x_train.shape[1:-1]))
    # One row per sample with the per-channel constants tiled along it: numpy's inner loop then
    # runs over a whole sample instead of over the C values of one pixel (3x faster for RGB).
    mean_row = np.tile(mean.astype(np.float32), pixels)
    scale_row = np.tile((1.0 / std).astype(np.float32), pixels)
    out = []
    for x in (x_train, x_test):
        y = np.empty((len(x), mean_row.size), dtype=np.float32)
        np.subtract(x.reshape(len(x), -1), mean_row, out=y, dtype=np.float32)
        y *= scale_row
        out.append(y.reshape(x.shape))
    return out[0], out[1]
