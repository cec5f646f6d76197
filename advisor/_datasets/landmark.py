"""A dataset's landmark: how well the simplest classifier does on it, as a measure of difficulty.

The surrogate predicts accuracy relative to this score, so what it learnt on easy datasets
(digits, MNIST) transfers to a hard one (CIFAR-10) instead of promising it the same accuracy.

The protocol is fixed, so scores compare across datasets: a closed-form ridge classifier (one
column of +1/-1 targets per class, L2 penalty :data:`RIDGE_PENALTY`, a bias term) on the
standardised pixels of a stratified subset of :data:`LANDMARK_TRAIN` training and
:data:`LANDMARK_TEST` test images drawn with seed 0 by :func:`advisor.datasets.load`; the score is
its test accuracy. It costs one linear solve in the number of pixels (under 2 s for CIFAR-10).

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

__all__ = ["LANDMARK_TRAIN", "LANDMARK_TEST", "RIDGE_PENALTY", "landmark_subset", "landmark_score", "file_landmark"]

LANDMARK_TRAIN = 1_000
LANDMARK_TEST = 300
RIDGE_PENALTY = 10.0


def landmark_subset(info: DatasetInfo) -> tuple[int, int]:
    """The training and test samples the landmark uses: the fixed sizes, or all a smaller dataset has."""
    return min(LANDMARK_TRAIN, info.train_size), min(LANDMARK_TEST, info.test_size)


def landmark_score(dataset: str, *, data_dir: str | None = None, download: bool = False) -> float:
    """The landmark score of a dataset (ridge-classifier test accuracy, see the module docstring).

    Smaller datasets use all they have. Raises what :func:`advisor.datasets.load` raises for
    missing or malformed files.
    """
    from advisor._datasets.load import load

    info = get_info(dataset)
    n_train, n_test = landmark_subset(info)
    workload = Workload(dataset=dataset, model="mlp", data_dir=data_dir, seed=0, train_samples=n_train,
                        test_samples=n_test)
    data = load(workload, download=download)
    x_train = data.x_train.reshape(len(data.x_train), -1).astype(np.float64)
    x_test = data.x_test.reshape(len(data.x_test), -1).astype(np.float64)
    classes = info.num_classes
    targets = -np.ones((len(x_train), classes))
    targets[np.arange(len(x_train)), data.y_train] = 1.0
    a = np.hstack([x_train, np.ones((len(x_train), 1))])
    # the dual form when there are more pixels than images: (A A^T + lambda I) alpha = T, W = A^T alpha
    if a.shape[1] > a.shape[0]:
        alpha = np.linalg.solve(a @ a.T + RIDGE_PENALTY * np.eye(a.shape[0]), targets)
        weights = a.T @ alpha
    else:
        weights = np.linalg.solve(a.T @ a + RIDGE_PENALTY * np.eye(a.shape[1]), a.T @ targets)
    scores = np.hstack([x_test, np.ones((len(x_test), 1))]) @ weights
    return float(np.mean(scores.argmax(axis=1) == data.y_test))


_MEMO: dict[str, float] = {}
#: Part of every cached score's key: a change of protocol is a new score.
_PROTOCOL = f"ridge {RIDGE_PENALTY:g} on {LANDMARK_TRAIN}/{LANDMARK_TEST} images, seed 0"


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
