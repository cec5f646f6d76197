"""Which landmark carries accuracy to a dataset the surrogate never saw? Leave one dataset out.

The accuracy model learns ``accuracy - landmark`` (``advisor/surrogate/model.py``), where the
landmark is a fixed cheap classifier's test accuracy on the dataset. This script scores landmark
protocols by what the surrogate does with them, holding each of the four datasets out in turn
(the shipped table, the shipped fitting code, only the registry's landmark values changed):

- ``ridge``: the shipped protocol (``advisor/_datasets/landmark.py``): a ridge classifier on the raw
  standardised pixels of 1,000 training and 300 test images;
- ``conv``: the same ridge classifier on random convolutional features (64 random 3x3 filters,
  ReLU, average-pooled to a 4x4 grid) of 2,000 training and 1,000 test images, seed 0: a
  network's inductive bias with nothing learnt;
- ``conv5``: 128 random 5x5 filters, the same pooling, ridge penalty 100.

Reported per protocol: the landmarks, the held-out accuracy MAE (all rows, and each dataset), the
bias of the best tenth of each held-out dataset's trials (what a recommendation reads), and how much
of the error comes from runs that did not learn (final loss near ln(classes), accuracy under 0.3)
predicted as runs that did, or the reverse.

Usage: python benchmarks/bench_landmark.py [--rounds 150] [--threads 2]
writes benchmarks/results/landmark.md (and raw/landmark.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, SHARED, command_line, git_rev, machine_line, md_table  # noqa: E402

DATASETS = {"digits": None, "mnist": "mnist", "fashion-mnist": "fashion-mnist", "cifar10": "cifar-10-batches-bin"}
PROTOCOLS = {"ridge": None,
             "conv": {"n_train": 2000, "n_test": 1000, "filters": 64, "side": 3, "penalty": 10.0},
             "conv5": {"n_train": 2000, "n_test": 1000, "filters": 128, "side": 5, "penalty": 100.0}}


def _split(name: str, n_train: int, n_test: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    from advisor._datasets.load import load
    from advisor._datasets.registry import get_info
    from advisor.records import Workload

    info = get_info(name)
    folder = DATASETS[name]
    data = load(Workload(dataset=name, model="mlp", data_dir=None if folder is None else str(SHARED / folder), seed=0,
                         train_samples=min(n_train, info.train_size), test_samples=min(n_test, info.test_size)))
    return (data.x_train.astype(np.float32), data.y_train, data.x_test.astype(np.float32), data.y_test,
            info.num_classes)


def _random_conv(x: np.ndarray, filters: np.ndarray, grid: int = 4) -> np.ndarray:
    """ReLU of a 'same' convolution with ``filters`` (k, k, C, F), average-pooled to grid x grid."""
    n, h, w, c = x.shape
    k = filters.shape[0]
    padded = np.pad(x, ((0, 0), (k // 2, k // 2), (k // 2, k // 2), (0, 0)))
    patches = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(1, 2))  # n, h, w, c, k, k
    patches = patches.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, k * k * c)
    flat = filters.reshape(-1, filters.shape[-1])
    out = np.concatenate([patches[i:i + 200_000] @ flat for i in range(0, len(patches), 200_000)])
    out = np.maximum(out.reshape(n, h, w, -1), 0.0)
    rows, cols = np.array_split(np.arange(h), grid), np.array_split(np.arange(w), grid)
    return np.stack([out[:, r][:, :, q].mean(axis=(1, 2)) for r in rows for q in cols], axis=1).reshape(n, -1)


def _ridge_accuracy(f_train: np.ndarray, y_train: np.ndarray, f_test: np.ndarray, y_test: np.ndarray, classes: int,
                    penalty: float) -> float:
    mu, sd = f_train.mean(axis=0), f_train.std(axis=0) + 1e-6
    a = np.hstack([(f_train - mu) / sd, np.ones((len(f_train), 1))]).astype(np.float64)
    b = np.hstack([(f_test - mu) / sd, np.ones((len(f_test), 1))]).astype(np.float64)
    targets = -np.ones((len(a), classes))
    targets[np.arange(len(a)), y_train] = 1.0
    weights = np.linalg.solve(a.T @ a + penalty * np.eye(a.shape[1]), a.T @ targets)
    return float(np.mean((b @ weights).argmax(axis=1) == y_test))


def conv_landmark(name: str, n_train: int, n_test: int, filters: int, side: int, penalty: float) -> float:
    x_train, y_train, x_test, y_test, classes = _split(name, n_train, n_test)
    mu, sd = x_train.mean(axis=(0, 1, 2)), x_train.std(axis=(0, 1, 2)) + 1e-6
    x_train, x_test = (x_train - mu) / sd, (x_test - mu) / sd
    bank = np.random.default_rng(0).standard_normal((side, side, x_train.shape[-1], filters)).astype(np.float32)
    bank -= bank.mean(axis=(0, 1, 2), keepdims=True)
    bank /= np.sqrt((bank ** 2).sum(axis=(0, 1, 2), keepdims=True))
    return _ridge_accuracy(_random_conv(x_train, bank), y_train, _random_conv(x_test, bank), y_test, classes, penalty)


def landmarks(protocol: str) -> dict[str, float]:
    from advisor._datasets.registry import get_info

    spec = PROTOCOLS[protocol]
    if spec is None:  # the shipped protocol's recorded scores
        return {name: float(get_info(name).landmark) for name in DATASETS}
    return {name: round(conv_landmark(name, **spec), 4) for name in DATASETS}


def held_out(marks: dict[str, float], rounds: int, threads: int) -> dict[str, Any]:
    """Leave-one-dataset-out accuracy figures with the registry's landmarks replaced by ``marks``."""
    from advisor import knowledge as kb
    from advisor import surrogate as sg
    from advisor.surrogate import features
    from advisor.surrogate.model import training_columns

    recorded = features.registry_landmark
    features.registry_landmark = lambda name: marks.get(name, recorded(name))  # type: ignore[assignment]
    try:
        cols = kb.read(sg.shipped_table()).columns
        n = len(cols["framework"])
        out: dict[str, Any] = {"by_dataset": {}}
        errors, mismatch = [], []
        for name in DATASETS:
            train = {k: [v[i] for i in range(n) if cols["dataset_name"][i] != name] for k, v in cols.items()}
            test = {k: [v[i] for i in range(n) if cols["dataset_name"][i] == name] for k, v in cols.items()}
            model = sg.fit(train, num_threads=threads, num_boost_round=rounds, objectives=("test_accuracy",))
            picked, y = training_columns(test, "test_accuracy")
            mid = model.predict(picked, num_threads=threads)["test_accuracy"].mid
            err = mid - y
            top = y >= np.percentile(y, 90)
            chance = np.log([float(c) for c in picked["num_classes"]])
            failed = (np.array([float(v or 0.0) for v in picked["final_loss"]]) > 0.9 * chance) & (y < 0.3)
            wrong_side = failed ^ (mid < 0.3)
            errors.append(np.abs(err))
            mismatch.append(np.abs(err) * wrong_side)
            out["by_dataset"][name] = {"rows": int(len(y)), "mae": float(np.abs(err).mean()),
                                       "bias": float(err.mean()), "top_tenth_bias": float(err[top].mean()),
                                       "did_not_learn": float(failed.mean()), "wrong_side": float(wrong_side.mean())}
        every = np.concatenate(errors)
        out["mae"] = float(every.mean())
        out["share_from_wrong_side"] = float(np.concatenate(mismatch).sum() / every.sum())
        return out
    finally:
        features.registry_landmark = recorded  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    t0 = time.time()
    results = {}
    for protocol in PROTOCOLS:
        marks = landmarks(protocol)
        results[protocol] = {"landmarks": marks, **held_out(marks, args.rounds, args.threads)}
        print(protocol, json.dumps({k: results[protocol][k] for k in ("landmarks", "mae")}), file=sys.stderr)
    secs = time.time() - t0
    (RESULTS / "raw").mkdir(parents=True, exist_ok=True)
    (RESULTS / "raw" / "landmark.json").write_text(json.dumps(results, indent=1) + "\n")
    rows = []
    for protocol, r in results.items():
        marks = ", ".join(f"{k} {v:.3f}" for k, v in r["landmarks"].items())
        per = "; ".join(f"{k} {v['mae']:.3f} (best tenth {v['top_tenth_bias']:+.3f})" for k, v in r["by_dataset"].items())
        rows.append([protocol, marks, f"{r['mae']:.3f}", per, f"{100 * r['share_from_wrong_side']:.0f}%"])
    text = "\n".join([
        "# Landmarks for a dataset the surrogate never saw (leave one dataset out)", "",
        f"`{command_line()}` at {git_rev()}, {secs:.0f} s. {machine_line()}", "",
        (__doc__ or "").split("\n\n")[1].replace("\n", " "), "",
        md_table(["protocol", "landmarks", "accuracy MAE held out", "per dataset: MAE (bias of its best tenth of trials)",
                  "error from runs that did not learn, predicted to, or the reverse"], rows), "",
        "Issue 15's target is an MAE of at most 0.06. 'did not learn' is a run whose final loss stayed",
        "near ln(classes) (over 0.9 of it) and whose accuracy is under 0.3; such runs are",
        f"{100 * np.mean([v['did_not_learn'] for v in results['ridge']['by_dataset'].values()]):.0f}% of the held-out",
        "rows (mean over the datasets), and telling them from runs that learn is the share of the",
        "error in the last column; no landmark changes what a held-out dataset's failed runs look like.", ""])
    (RESULTS / "landmark.md").write_text(text)
    print(f"wrote {RESULTS / 'landmark.md'} in {secs:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
