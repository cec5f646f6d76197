"""A dataset's landmark: how well a fixed cheap classifier does on it, as a measure of difficulty.

The surrogate predicts accuracy relative to this score, so what it learnt on easy datasets
(digits, MNIST) transfers to a hard one (CIFAR-10) instead of promising it the same accuracy.

The protocol is fixed, so scores compare across datasets: :data:`CONV_FILTERS` random
:data:`CONV_SIDE` x :data:`CONV_SIDE` convolution filters (seed 0, zero-mean, unit norm) over the
images standardised per channel, ReLU, each map average-pooled to a :data:`CONV_GRID` x
:data:`CONV_GRID` grid; then a closed-form ridge classifier (one column of +1/-1 targets per class,
L2 penalty :data:`RIDGE_PENALTY`, a bias term) on those standardised features, fitted on a
stratified subset of :data:`LANDMARK_TRAIN` training images and scored on :data:`LANDMARK_TEST`
test images drawn with seed 0 by :func:`advisor.datasets.load`. The score is its test accuracy.
Random convolutional features carry a network's inductive bias (local, translation-tolerant
features) with nothing learnt, which a ridge classifier on raw pixels did not: held out of the
surrogate, it predicted accuracy better on the table and on the runs recommend picked
(``benchmarks/results/landmark.md``). It costs a few seconds at 96x96.

Registry datasets carry their measured score (``DatasetInfo.landmark``); a user's ``.npz`` gets
one computed when it is described for a recommendation (:func:`file_landmark`: once per file
version, kept beside the hardware profiles, since reading a large file dominates the cost).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from advisor._datasets.registry import DatasetInfo, get_info
from advisor.records import Workload

__all__ = ["LANDMARK_TRAIN", "LANDMARK_TEST", "RIDGE_PENALTY", "CONV_FILTERS", "CONV_SIDE", "CONV_GRID",
           "landmark_subset", "landmark_score", "random_filters", "random_conv_features", "ridge_accuracy", "file_landmark"]

LANDMARK_TRAIN = 2_000
LANDMARK_TEST = 1_000
RIDGE_PENALTY = 10.0
CONV_FILTERS = 64
CONV_SIDE = 3
CONV_GRID = 4


def landmark_subset(info: DatasetInfo) -> tuple[int, int]:
    """The training and test samples the landmark uses: the fixed sizes, or all a smaller dataset has."""
    return min(LANDMARK_TRAIN, info.train_size), min(LANDMARK_TEST, info.test_size)


def random_filters(channels: int, filters: int = CONV_FILTERS, side: int = CONV_SIDE) -> np.ndarray:
    """The fixed filter bank (side, side, channels, filters): seed 0, each filter zero-mean, unit norm."""
    bank = np.random.default_rng(0).standard_normal((side, side, channels, filters))
    bank -= bank.mean(axis=(0, 1, 2), keepdims=True)
    bank /= np.sqrt((bank ** 2).sum(axis=(0, 1, 2), keepdims=True))
    return bank.astype(np.float32)


def random_conv_features(x: np.ndarray, filters: np.ndarray, grid: int = CONV_GRID, batch: int = 64) -> np.ndarray:
    """ReLU of a 'same' convolution of images ``x`` (N, H, W, C) with ``filters`` (k, k, C, F),
    each map average-pooled to ``grid`` x ``grid``: (N, grid * grid * F), ``batch`` images at a time."""
    n, h, w, c = x.shape
    k = filters.shape[0]
    flat = filters.reshape(-1, filters.shape[-1])
    rows, cols = np.array_split(np.arange(h), grid), np.array_split(np.arange(w), grid)
    parts = []
    for start in range(0, n, batch):
        chunk = x[start:start + batch]
        padded = np.pad(chunk, ((0, 0), (k // 2, k // 2), (k // 2, k // 2), (0, 0)))
        patches = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(1, 2))  # b, h, w, c, k, k
        patches = patches.transpose(0, 1, 2, 4, 5, 3).reshape(len(chunk) * h * w, k * k * c)
        maps = np.maximum((patches @ flat).reshape(len(chunk), h, w, -1), 0.0)
        parts.append(np.stack([maps[:, r][:, :, q].mean(axis=(1, 2)) for r in rows for q in cols], axis=1)
                     .reshape(len(chunk), -1))
    return np.concatenate(parts)


def ridge_accuracy(f_train: np.ndarray, y_train: np.ndarray, f_test: np.ndarray, y_test: np.ndarray,
                   classes: int, penalty: float = RIDGE_PENALTY) -> float:
    """Test accuracy of a closed-form ridge classifier (+1/-1 targets, a bias) on standardised features."""
    mu, sd = f_train.mean(axis=0), f_train.std(axis=0) + 1e-6
    a = np.hstack([(f_train - mu) / sd, np.ones((len(f_train), 1))]).astype(np.float64)
    b = np.hstack([(f_test - mu) / sd, np.ones((len(f_test), 1))]).astype(np.float64)
    targets = -np.ones((len(a), classes))
    targets[np.arange(len(a)), y_train] = 1.0
    if a.shape[1] > a.shape[0]:  # the dual form when there are more features than images
        weights = a.T @ np.linalg.solve(a @ a.T + penalty * np.eye(a.shape[0]), targets)
    else:
        weights = np.linalg.solve(a.T @ a + penalty * np.eye(a.shape[1]), a.T @ targets)
    return float(np.mean((b @ weights).argmax(axis=1) == y_test))


def landmark_score(dataset: str, *, data_dir: str | None = None, download: bool = False) -> float:
    """The landmark score of a dataset (see the module docstring).

    Smaller datasets use all they have. Raises what :func:`advisor.datasets.load` raises for
    missing or malformed files.
    """
    from advisor._datasets.load import load

    info = get_info(dataset)
    n_train, n_test = landmark_subset(info)
    workload = Workload(dataset=dataset, model="mlp", data_dir=data_dir, seed=0, train_samples=n_train,
                        test_samples=n_test)
    data = load(workload, download=download)
    x_train, x_test = data.x_train.astype(np.float32), data.x_test.astype(np.float32)
    if x_train.ndim == 3:  # (N, H, W): one channel
        x_train, x_test = x_train[..., None], x_test[..., None]
    mu, sd = x_train.mean(axis=(0, 1, 2)), x_train.std(axis=(0, 1, 2)) + 1e-6
    x_train, x_test = (x_train - mu) / sd, (x_test - mu) / sd
    bank = random_filters(x_train.shape[-1])
    return ridge_accuracy(random_conv_features(x_train, bank), data.y_train, random_conv_features(x_test, bank),
                          data.y_test, info.num_classes)


_MEMO: dict[str, float] = {}
#: Part of every cached score's key: a change of protocol is a new score.
_PROTOCOL = (f"ridge {RIDGE_PENALTY:g} on {CONV_FILTERS} random {CONV_SIDE}x{CONV_SIDE} conv features pooled "
             f"{CONV_GRID}x{CONV_GRID}, {LANDMARK_TRAIN}/{LANDMARK_TEST} images, seed 0")


def _cache_file() -> Path:
    from advisor.hardware import cache_dir

    return cache_dir().parent / "landmarks.json"


def file_landmark(path: str) -> float:
    """:func:`landmark_score` of a user's ``.npz``, measured once per file version (its resolved
    path, size and modification time) and kept in this process and in ``landmarks.json`` in the
    user data folder (``$ADVISOR_HOME``); an unreadable or unwritable cache is only a slower answer."""
    from advisor._atomic import atomic_write

    try:
        st = os.stat(path)
        key = f"{Path(path).resolve()}|{st.st_size}|{st.st_mtime_ns}|{_PROTOCOL}"
    except OSError:
        return landmark_score(path)  # raises the reader's one-line error
    if key in _MEMO:
        return _MEMO[key]
    cache = _cache_file()
    try:
        stored = json.loads(cache.read_text(encoding="utf-8"))
        stored = stored if isinstance(stored, dict) else {}
    except (OSError, ValueError):
        stored = {}
    score = stored.get(key)
    if not isinstance(score, float):
        score = stored[key] = landmark_score(path)
        try:
            atomic_write(cache, json.dumps(stored, indent=1, sort_keys=True) + "\n")  # creates the folder
        except OSError:
            pass
    _MEMO[key] = score
    return score
