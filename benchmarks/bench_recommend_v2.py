"""Recommender v2 against the obvious default, on full-size datasets held out of the surrogate.

For each dataset D (at the size of its local copy):

  held out   every row of D is dropped from the shipped knowledge base; a surrogate and its
             portfolio are fitted on the rest (folder under --workdir), so the recommender has
             neither measurements nor training rows of D.
  questions  ``max-time:T`` (best accuracy within T seconds of training), ``target-accuracy:A``
             (fastest to reach A); ``target-accuracy:p95`` asks for the 95th percentile of D's
             measured full-size accuracies in the complete table.
  verified   the pick (rank 1) and the obvious default at its best run length for the same
             question (PyTorch, Adam 1e-3, batch 128, constant rate, the dataset's default model)
             are each run --repeats times for real, one trial at a time on --cores, threads = cores.

Judged per request: does the pick's median meet the asked constraint; does it beat or tie the
obvious default (accuracy at the same time budget; time to the same target).

A dataset of :data:`DERIVED` (``cifar10-gray``: the local CIFAR-10 copy in grayscale, 32x32x1;
``cifar10-16px``: the same copy at 16x16x3, 2x2 blocks averaged; ``cifar10-vehicles``: the same
images in two classes, vehicle or animal; ``fashion-mnist-small``: Fashion-MNIST at 14x14, 12,000
training images; ``mnist-fashion20``: digits and clothes as one 20-class task; ``cifar10-48px``: 10,000
CIFAR-10 images at 48x48; ``cifar10-96px``: 5,000 at 96x96, STL-10's shape; the rest are listed in :data:`DERIVED`) is a workload in no file of the table: it is written as a
user's ``.npz`` under --workdir and asked of
the shipped surrogate itself (nothing to hold out). Its target has to be given as a number. Its
requests are reported apart from the held-out ones.

Every run is appended to benchmarks/results/raw/recommend-v2.jsonl with its request key, so an
interrupted run resumes and ``render`` re-writes benchmarks/results/recommend.md from the log.

Usage:
    python benchmarks/bench_recommend_v2.py run --datasets mnist,fashion-mnist,cifar10,digits \
        --questions max-time:60,max-time:300,target-accuracy:p95 --repeats 3 --cores 0,1
    python benchmarks/bench_recommend_v2.py render
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

from common import RESULTS, SHARED, append_jsonl, command_line, git_rev, machine_line, md_table, median, read_jsonl  # noqa: E402

RAW = RESULTS / "raw" / "recommend-v2.jsonl"
RUNS = RESULTS / "raw" / "recommend-v2.runs.md"  # which invocation wrote which rows of RAW
FINDINGS = RESULTS / "raw" / "recommend-v2.findings.md"  # the reading of the rows, by hand
REPORT = RESULTS / "recommend.md"
DATA_DIRS = {"mnist": "mnist", "fashion-mnist": "fashion-mnist", "cifar10": "cifar-10-batches-bin", "digits": None}


def _gray(images: np.ndarray) -> np.ndarray:
    """RGB uint8 images (N, H, W, 3) as grayscale uint8 (N, H, W, 1), ITU-R 601 luma."""
    luma = images[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    return np.clip(np.rint(luma), 0, 255).astype(np.uint8)[..., None]


def _halved(images: np.ndarray) -> np.ndarray:
    """uint8 images (N, H, W, C) at half the side, each pixel the mean of a 2x2 block."""
    n, h, w, c = images.shape
    blocks = images[:, : h // 2 * 2, : w // 2 * 2].reshape(n, h // 2, 2, w // 2, 2, c).astype(np.float32)
    return np.clip(np.rint(blocks.mean(axis=(2, 4))), 0, 255).astype(np.uint8)


def _vehicles(labels: np.ndarray) -> np.ndarray:
    """CIFAR-10's classes as two: vehicle (airplane, automobile, ship, truck) or animal."""
    return np.isin(labels, (0, 1, 8, 9)).astype(np.int64)


def _upsized(images: np.ndarray, side: int = 48) -> np.ndarray:
    """uint8 images (N, H, W, C) at ``side`` x ``side``, nearest neighbour."""
    rows, cols = np.arange(side) * images.shape[1] // side, np.arange(side) * images.shape[2] // side
    return images[:, rows][:, :, cols]


def _cifar10_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The local CIFAR-10 copy: its training batches and test batch, labels int64."""
    from advisor._datasets.readers import read_cifar_binary

    folder = SHARED / DATA_DIRS["cifar10"]
    parts = [read_cifar_binary(f)[:2] for f in sorted(folder.glob("data_batch_*.bin"))]
    x_test, y_test, _ = read_cifar_binary(folder / "test_batch.bin")
    return (np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts]).astype(np.int64),
            x_test, np.asarray(y_test, dtype=np.int64))


def _cifar10_derived(path: Path, transform: Any = lambda x: x, relabel: Any = lambda y: y,
                     n_train: int | None = None, n_test: int | None = None,
                     relabel_train: Any = lambda y: y) -> None:
    """The CIFAR-10 copy (its first ``n_train`` training and ``n_test`` test images; all by default),
    ``transform``-ed and ``relabel``-led, as a user's .npz; ``relabel_train`` changes the training
    labels alone (label noise)."""
    x, y, x_test, y_test = _cifar10_arrays()
    np.savez(path, x_train=transform(x[:n_train]), y_train=relabel_train(relabel(y[:n_train])),
             x_test=transform(x_test[:n_test]), y_test=relabel(y_test[:n_test]))


def _idx_pair(name: str, part: str) -> tuple[np.ndarray, np.ndarray]:
    from advisor._datasets.readers import read_idx

    folder = SHARED / DATA_DIRS[name]
    return (read_idx(folder / f"{part}-images-idx3-ubyte.gz")[..., None],
            read_idx(folder / f"{part}-labels-idx1-ubyte.gz").astype(np.int64))


def _mnist_fashion20(path: Path) -> None:
    """MNIST's digits and Fashion-MNIST's clothes as one 20-class task (clothes are classes 10-19),
    shuffled with a fixed seed: 30,000 training images of the 120,000, 10,000 test of the 20,000."""
    rng = np.random.default_rng(0)
    parts = {}
    for part in ("train", "t10k"):
        (xm, ym), (xf, yf) = _idx_pair("mnist", part), _idx_pair("fashion-mnist", part)
        x, y = np.concatenate([xm, xf]), np.concatenate([ym, yf + 10])
        order = rng.permutation(len(x))
        parts[part] = (x[order], y[order])
    np.savez(path, x_train=parts["train"][0][:30000], y_train=parts["train"][1][:30000],
             x_test=parts["t10k"][0][:10000], y_test=parts["t10k"][1][:10000])


def _mnist_pairs(path: Path) -> None:
    """Two MNIST digits side by side as one 100-class task (28x56, classes 00-99): 30,000 training
    pairs drawn from the training set and 10,000 test pairs from the test set, seed 0."""
    rng = np.random.default_rng(0)
    parts = {}
    for part, n in (("train", 30000), ("t10k", 10000)):
        x, y = _idx_pair("mnist", part)
        left, right = rng.integers(len(x), size=n), rng.integers(len(x), size=n)
        parts[part] = np.concatenate([x[left], x[right]], axis=2), y[left] * 10 + y[right]
    np.savez(path, x_train=parts["train"][0], y_train=parts["train"][1], x_test=parts["t10k"][0],
             y_test=parts["t10k"][1])


def _per_class(path: Path, arrays: tuple[np.ndarray, ...], count: Any) -> None:
    """A dataset (x, y, x_test, y_test) keeping the first ``count(k)`` training images of class k, the
    whole test set (balanced, so accuracy weighs every class alike)."""
    x, y, x_test, y_test = arrays
    keep = np.sort(np.concatenate([np.flatnonzero(y == k)[:count(k)] for k in range(10)]))
    np.savez(path, x_train=x[keep], y_train=y[keep], x_test=x_test, y_test=y_test)


def _cifar10_per_class(path: Path, count: Any) -> None:
    """The CIFAR-10 copy, :func:`_per_class`."""
    _per_class(path, _cifar10_arrays(), count)


def _noisy_labels(labels: np.ndarray, rate: float = 0.2, classes: int = 10) -> np.ndarray:
    """Symmetric label noise: a fixed ``rate`` of the labels (seed 0) replaced by another class."""
    rng = np.random.default_rng(0)
    out = labels.copy()
    flip = rng.random(len(labels)) < rate
    out[flip] = (labels[flip] + rng.integers(1, classes, int(flip.sum()))) % classes
    return out


def _rgb32(images: np.ndarray) -> np.ndarray:
    """uint8 images (N, 28, 28, 1) as (N, 32, 32, 3): 2 pixels of black around, the gray copied to
    three channels (CIFAR-10's shape)."""
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2), (0, 0)))
    return np.repeat(padded, 3, axis=3)


def _idx_noisy(path: Path, name: str, rate: float) -> None:
    """An IDX dataset with ``rate`` of its training labels wrong (:func:`_noisy_labels`), the test labels clean."""
    (x, y), (x_test, y_test) = _idx_pair(name, "train"), _idx_pair(name, "t10k")
    np.savez(path, x_train=x, y_train=_noisy_labels(y, rate), x_test=x_test, y_test=y_test)


def _cifar10_classes(path: Path, classes: tuple[int, ...]) -> None:
    """Some CIFAR-10 classes as their own task (:func:`_classes`)."""
    _classes(path, _cifar10_arrays(), classes)


def _idx_classes(path: Path, name: str, classes: tuple[int, ...]) -> None:
    """Some classes of an IDX dataset as their own task (:func:`_classes`)."""
    _classes(path, (*_idx_pair(name, "train"), *_idx_pair(name, "t10k")), classes)


def _classes(path: Path, arrays: tuple[np.ndarray, ...], classes: tuple[int, ...]) -> None:
    """Some classes as their own task (renumbered 0, 1, ... in the order given): every training and
    test image of ``arrays`` (x, y, x_test, y_test) in them."""
    x, y, x_test, y_test = arrays
    lookup = np.full(10, -1, dtype=np.int64)
    lookup[list(classes)] = np.arange(len(classes))
    train, test = np.isin(y, classes), np.isin(y_test, classes)
    np.savez(path, x_train=x[train], y_train=lookup[y[train]], x_test=x_test[test], y_test=lookup[y_test[test]])


def _idx_variant(path: Path, name: str, transform: Any, n_train: int | None = None) -> None:
    """An IDX dataset ``transform``-ed (train and test alike), its first ``n_train`` training images
    (all by default) and the whole test set."""
    (x, y), (x_test, y_test) = _idx_pair(name, "train"), _idx_pair(name, "t10k")
    np.savez(path, x_train=transform(x[:n_train]), y_train=y[:n_train], x_test=transform(x_test), y_test=y_test)


def _idx_per_class(path: Path, name: str, count: int) -> None:
    """An IDX dataset keeping the first ``count`` training images of each class (:func:`_per_class`)."""
    _per_class(path, (*_idx_pair(name, "train"), *_idx_pair(name, "t10k")), lambda k: count)


def _rotated(images: np.ndarray) -> np.ndarray:
    """Each image turned by its own angle, uniform over the full circle (seed 0), as the rotated
    MNIST of Larochelle et al. (2007, 'mnist-rot'); corners filled with black."""
    from scipy.ndimage import rotate

    angles = np.random.default_rng(0).uniform(0.0, 360.0, len(images))
    return np.stack([rotate(img, angle, reshape=False, order=1, mode="constant", cval=0)
                     for img, angle in zip(images, angles)]).astype(np.uint8)


def _random_background(images: np.ndarray) -> np.ndarray:
    """Uniform random noise behind each image (seed 0), as Larochelle et al.'s 'mnist-back-rand':
    a pixel keeps the larger of its value and the noise."""
    noise = np.random.default_rng(0).integers(0, 256, images.shape, dtype=np.uint8)
    return np.maximum(images, noise)


def _mnist_on_photos(path: Path, n_train: int = 12000, turn: Any = None) -> None:
    """MNIST digits over grayscale photo patches, as Larochelle et al.'s 'mnist-back-image': each
    digit's background the central 28x28 of a CIFAR-10 image in grayscale (training digits over the
    copy's training photos, test digits over its test photos, in order), a pixel the larger of the two.
    ``turn`` transforms the digits first (:func:`_rotated`: their 'mnist-rot-back-image')."""
    (x, y), (x_test, y_test) = _idx_pair("mnist", "train"), _idx_pair("mnist", "t10k")
    if turn is not None:
        x, x_test = turn(x[:n_train]), turn(x_test)
    photos, _, photos_test, _ = _cifar10_arrays()
    back = lambda p, n: _gray(p[:n, 2:30, 2:30])  # noqa: E731
    np.savez(path, x_train=np.maximum(x[:n_train], back(photos, n_train)), y_train=y[:n_train],
             x_test=np.maximum(x_test, back(photos_test, len(x_test))), y_test=y_test)


#: Workloads in no file of the table, derived from a local copy: name -> writer of its .npz.
DERIVED = {"cifar10-gray": lambda path: _cifar10_derived(path, _gray),
           "cifar10-16px": lambda path: _cifar10_derived(path, _halved),
           "cifar10-vehicles": lambda path: _cifar10_derived(path, relabel=_vehicles),
           # Fashion-MNIST at 14x14 with its first 12,000 training images
           "fashion-mnist-small": lambda path: _idx_variant(path, "fashion-mnist", _halved, 12000),
           "mnist-fashion20": _mnist_fashion20,
           # the first training batch and 5,000 test images at 48x48: 2.25 times the pixels of any trial
           "cifar10-48px": lambda path: _cifar10_derived(path, _upsized, n_train=10000, n_test=5000),
           # STL-10's shape: 5,000 training images at 96x96, 9 times the pixels of any trial
           "cifar10-96px": lambda path: _cifar10_derived(path, lambda x: _upsized(x, 96), n_train=5000, n_test=2000),
           # few images and imbalanced classes (20:1), a balanced test set
           # (as CIFAR-10-LT: class k keeps 3000 * 20^(-k/9) of the copy's 3,000, 2,983 airplanes down to 150 trucks)
           "cifar10-longtail": lambda path: _cifar10_per_class(path, lambda k: int(3000 * 20.0 ** (-k / 9))),
           # web-scraped labels: 20% of the training labels wrong (symmetric noise), the test labels clean
           "cifar10-noisy": lambda path: _cifar10_derived(path, relabel_train=_noisy_labels),
           # few labels: 100 training images a class (1,000 in all), the whole test set
           "cifar10-few": lambda path: _cifar10_per_class(path, lambda k: 100),
           # an easy task: MNIST at 14x14, all of it
           "mnist-14px": lambda path: _idx_variant(path, "mnist", _halved),
           # 100 classes and a wide image: two digits side by side (28x56), 00 to 99
           "mnist-pairs": _mnist_pairs,
           # heavier label noise on another dataset: all of Fashion-MNIST with 40% of its training labels wrong
           "fashion-mnist-noisy": lambda path: _idx_noisy(path, "fashion-mnist", 0.4),
           # an easy task in a hard task's shape (as SVHN, say): all of Fashion-MNIST at 32x32x3
           "fashion-mnist-rgb32": lambda path: _idx_variant(path, "fashion-mnist", _rgb32),
           # a hard binary task (the cats-and-dogs question, at 32x32): CIFAR-10's cats (0) and dogs (1)
           "cifar10-catdog": lambda path: _cifar10_classes(path, (3, 5)),
           # tiny images of a hard task (digits' 8x8, in colour): the CIFAR-10 copy at 8x8x3, 4x4 blocks averaged
           "cifar10-8px": lambda path: _cifar10_derived(path, lambda x: _halved(_halved(x))),
           # added at stop 40, asked before any rule was looked at again: a training crop's size (the
           # copy's central 24x24), three look-alike animal classes (cat, deer, dog: 9,000 training
           # images), Fashion-MNIST's central 20x20 with 20,000 training images, and MNIST in negative
           # (white background, 15,000 training images)
           "cifar10-crop24": lambda path: _cifar10_derived(path, lambda x: x[:, 4:28, 4:28]),
           "cifar10-3class": lambda path: _cifar10_classes(path, (3, 4, 5)),
           "fashion-mnist-crop20": lambda path: _idx_variant(path, "fashion-mnist", lambda x: x[:, 4:24, 4:24], 20000),
           "mnist-inverted": lambda path: _idx_variant(path, "mnist", lambda x: 255 - x, 15000),
           # added at stop 41, the same way: Fashion-MNIST's four look-alike tops (T-shirt, pullover,
           # coat, shirt: 24,000 training images) and all of Fashion-MNIST at 7x7 (4x4 blocks averaged)
           "fashion-mnist-tops": lambda path: _idx_classes(path, "fashion-mnist", (0, 2, 4, 6)),
           "fashion-mnist-7px": lambda path: _idx_variant(path, "fashion-mnist", lambda x: _halved(_halved(x))),
           # the same padded with zeros to 8x8, as recommend's warning on the 7x7 one suggests
           # (the bn_cnn, resnet9 and cifar_quick families need 8 pixels a side)
           "fashion-mnist-7px-pad8": lambda path: _idx_variant(
               path, "fashion-mnist", lambda x: np.pad(_halved(_halved(x)), ((0, 0), (0, 1), (0, 1), (0, 0)))),
           # added at stop 42, the same way: two of Larochelle et al.'s (2007) harder MNIST variants,
           # each with 12,000 training images as theirs and the whole test set transformed alike:
           # digits turned by a random angle, and digits on a random-noise background
           "mnist-rot": lambda path: _idx_variant(path, "mnist", _rotated, 12000),
           "mnist-back-rand": lambda path: _idx_variant(path, "mnist", _random_background, 12000),
           # added later in stop 42, the same way: a third of their variants, digits over photo patches
           # (12,000 training images), and 500 CIFAR-10 images a class (5,000 in all, the whole test set)
           "mnist-back-image": _mnist_on_photos,
           "cifar10-5k": lambda path: _cifar10_per_class(path, lambda k: 500),
           # added at stop 43, the same way: the hardest of Larochelle et al.'s variants (digits turned
           # by a random angle over photo patches, 12,000 training images), CIFAR-10's six animals
           # (bird, cat, deer, dog, frog, horse: 18,000 training images, the look-alike classes) and
           # few labels on an easy task (Fashion-MNIST's first 300 training images a class, 3,000 in all)
           "mnist-rot-back-image": lambda path: _mnist_on_photos(path, turn=_rotated),
           "cifar10-animals": lambda path: _cifar10_classes(path, (2, 3, 4, 5, 6, 7)),
           "fashion-mnist-3k": lambda path: _idx_per_class(path, "fashion-mnist", 300)}


def derived_path(name: str, workdir: Path) -> Path:
    """The .npz of a :data:`DERIVED` workload under ``workdir``, written on first use."""
    path = workdir / f"{name}.npz"
    if not path.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        DERIVED[name](path)
    return path


def heldout_model(dataset: str, workdir: Path, rounds: int) -> tuple[Path, Path]:
    """The shipped table without ``dataset`` and a surrogate plus portfolio fitted on it (cached)."""
    from advisor import knowledge
    from advisor import surrogate as sg
    from advisor._recommend._portfolio import build_portfolio, save_portfolio

    folder = workdir / f"lodo-{dataset}"
    table = folder / "knowledge.csv.gz"
    model_dir = folder / "model"
    if (model_dir / "meta.json").exists() and (model_dir / "portfolio.json").exists():
        return table, model_dir
    folder.mkdir(parents=True, exist_ok=True)
    full = knowledge.read(sg.shipped_table())
    keep = [name != dataset for name in full["dataset_name"]]
    knowledge.write(full.where(keep), table)
    model = sg.fit_file(table, num_boost_round=rounds)
    sg.save(model, model_dir, table_path=table)
    portfolio = build_portfolio(knowledge.read(table), model)
    save_portfolio(model_dir, {"cpu": portfolio}, table_sha256=model.meta["table_sha256"])
    return table, model_dir


def p95_accuracy(dataset: str) -> float:
    from advisor import knowledge
    from advisor import surrogate as sg

    from advisor._recommend._portfolio import MATRIX_STUDY

    t = knowledge.read(sg.shipped_table())
    sizes = [n for d, n, s in zip(t["dataset_name"], t["train_samples"], t["status"]) if d == dataset and s == "ok"]
    full = max(sizes)
    # the table's own trials, not the portfolio matrix's (34 runs under one budget, added after
    # these targets were set)
    acc = [a for d, n, s, a, st in zip(t["dataset_name"], t["train_samples"], t["status"], t["test_accuracy"], t["study"])
           if d == dataset and n == full and s == "ok" and a is not None and st != MATRIX_STUDY]
    return float(np.percentile(acc, 95))


def constraints_for(question: str, dataset: str) -> tuple[Any, str, str]:
    from advisor import recommend as rc

    kind, value = question.split(":")
    if kind == "max-time":
        return rc.Constraints(max_time_s=float(value)), "balanced", f"max-time {float(value):g} s"
    target = p95_accuracy(dataset) if value == "p95" else float(value)
    return rc.Constraints(min_accuracy=round(target, 4)), "fast", f"target-accuracy {target:.4f}"


def run(args: argparse.Namespace) -> None:
    from advisor import recommend as rc
    from advisor.harness import Limits, run_trial
    from advisor.records import Config, Workload

    cores = [int(c) for c in args.cores.split(",")]
    # A run other processes contended is not done: it runs again, and render takes the later run.
    rerun = set(filter(None, args.rerun.split(",")))
    done = {(r["key"], r["arm"], r["repeat"]): _recipe_of(r.get("config")) for r in read_jsonl(RAW)
            if not r.get("contended") and r["arm"] not in rerun}
    workdir = Path(args.workdir)
    for dataset in args.datasets.split(","):
        if dataset in DERIVED:  # in no file of the table: the shipped surrogate, nothing to hold out
            from advisor import surrogate as sg

            asked, table, model_dir = str(derived_path(dataset, workdir)), sg.shipped_table(), sg.shipped_model_dir()
        else:
            asked = dataset
            table, model_dir = heldout_model(dataset, workdir, args.rounds)
        for question in args.questions.split(","):
            constraints, prefer, label = constraints_for(question, dataset)
            if len(cores) > 1:  # a request for more cores is another request (its runs never stand in for one core's)
                label += f" on {len(cores)} cores"
            key = f"{dataset}|{label}"
            try:
                rec = rc.recommend(asked, device_kind="cpu", cores=len(cores), constraints=constraints,
                                   prefer=prefer, table=table, model_dir=model_dir, top=1, seed=args.seed)
            except Exception as exc:  # noqa: BLE001 - recorded: the request could not be answered
                append_jsonl(RAW, {"key": key, "arm": "pick", "repeat": -1, "error": str(exc), "dataset": dataset,
                                   "question": label})
                print(f"{key}: no answer: {exc}", flush=True)
                continue
            arms = {"pick": rec.choices[0], "default": rec.baseline, "default-fill": rec.baseline}
            for arm, choice in arms.items():
                if choice is None:
                    continue
                epochs = int(choice.config["epochs"])
                if arm == "default-fill":
                    # What a user would run: the obvious default for as many epochs as fit the
                    # time asked for, from its own measured epoch time (the default arm's runs).
                    if constraints.max_time_s is None:
                        continue
                    per_epoch = [float(np.mean(r["epoch_times"])) for r in read_jsonl(RAW)
                                 if r.get("key") == key and r.get("arm") == "default" and r.get("epoch_times")]
                    if not per_epoch:
                        continue
                    epochs = max(1, min(60, int(0.95 * constraints.max_time_s // median(per_epoch))))
                    ran = [len(r["epoch_times"]) for r in read_jsonl(RAW)
                           if r.get("key") == key and r.get("arm") == "default" and r.get("epoch_times")]
                    length = median(ran) if choice.config.get("time_budget_s") else int(choice.config["epochs"])
                    if epochs <= length:
                        continue  # the recommender's run length already fills the budget
                same_as_pick = (arm == "default" and choice.model == rec.choices[0].model
                                and {**choice.config, "seed": 0} == {**rec.choices[0].config, "seed": 0})
                for rep in range(args.repeats):
                    # A stored run counts when it ran this very configuration (a pick that changed
                    # since is run again); the filled default's length comes from measured epoch times.
                    if (key, arm, rep) in done and (arm == "default-fill" or done[(key, arm, rep)] is None
                                                    or done[(key, arm, rep)] == _recipe_of(choice.config)):
                        continue
                    if same_as_pick:  # the pick is the default itself: its runs are the default's
                        runs = [r for r in read_jsonl(RAW) if r.get("key") == key and r.get("arm") == "pick"
                                and r.get("repeat") == rep]
                        if runs:
                            append_jsonl(RAW, {**runs[-1], "arm": "default", "reused_from": "pick"})
                            print(f"{key} default #{rep}: the pick itself (its run reused)", flush=True)
                            continue
                    sub = DATA_DIRS.get(dataset)
                    workload = Workload(dataset=asked, model=choice.model, test_samples=None,
                                        data_dir=str(SHARED / sub) if sub else None, seed=rep)
                    # The filled default is the plain default for a fixed number of epochs, as a user would run it.
                    budget = {"time_budget_s": 0.0} if arm == "default-fill" else {}
                    cfg = Config.from_dict({**choice.config, "seed": rep, "threads": len(cores), "epochs": epochs,
                                            **budget})
                    t0 = time.time()
                    result = run_trial(workload, cfg, cores=cores,
                                       limits=Limits(wall_time_s=min(args.max_trial_s or float("inf"),
                                                                     max(600.0, 3 * choice.time_s.hi + 120))))
                    record = {
                        "key": key, "arm": arm, "repeat": rep, "dataset": dataset, "question": label,
                        "constraints": {"max_time_s": constraints.max_time_s, "min_accuracy": constraints.min_accuracy},
                        "framework": choice.framework, "model": choice.model, "source": choice.source,
                        "basis": choice.basis, "p_constraints": choice.p_constraints, "config": cfg.to_dict(),
                        "predicted": {"time_s": [choice.time_s.lo, choice.time_s.mid, choice.time_s.hi],
                                      "accuracy": [choice.accuracy.lo, choice.accuracy.mid, choice.accuracy.hi]},
                        "status": result.status, "train_time_s": result.train_time_s,
                        "test_accuracy": result.test_accuracy, "accuracy_curve": result.accuracy_curve,
                        "epoch_times": result.epoch_times, "contended": result.contended,
                        "wall_s": time.time() - t0, "blas": _blas(result),
                    }
                    append_jsonl(RAW, record)
                    print(f"{key} {arm} #{rep}: {choice.framework} {choice.model} {cfg.epochs} ep -> {result.status} "
                          f"acc={result.test_accuracy} time={result.train_time_s}", flush=True)


def _time_to(run: dict[str, Any], target: float) -> float | None:
    """A verified run's training time until its curve first reached ``target`` (None: never)."""
    from advisor._recommend._baseline import time_to_accuracy

    got = time_to_accuracy(run.get("accuracy_curve"), run.get("epoch_times"), run.get("train_time_s"), target)
    return None if got is None else got[0]


def _recipe_of(config: dict[str, Any] | None) -> str | None:
    """A run's configuration without its seed and threads (what the benchmark sets per run), nor its
    stop at a target accuracy: that only cuts the curve after the target, from which time to it is read."""
    if not config:
        return None
    return json.dumps({k: v for k, v in config.items() if k not in ("seed", "threads", "stop_at_accuracy")},
                      sort_keys=True, default=str)


def _blas(result: Any) -> str:
    pools = getattr(result, "threadpools", None) or []
    return ", ".join(sorted({f"{p.get('internal_api')}:{p.get('architecture')}" for p in pools
                             if isinstance(p, dict)})) or "?"


SEED_DB = RESULTS / "raw" / "study.db"


def _seed_default(dataset: str, pick: list[dict[str, Any]]) -> dict[str, Any]:
    """The best seed-study default on ``dataset`` at full size (study.db), and whether the pick's
    curves reach its accuracy in a third of its time (median over the pick's runs)."""
    none = {"ok": None, "text": "not measured at this size"}
    if not SEED_DB.exists() or not pick:
        return none
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{SEED_DB}"
    best: tuple[float, float, str] | None = None
    for name in optuna.get_all_study_names(storage):
        if not name.startswith("defaults-"):
            continue
        runs = [t.user_attrs.get("advisor.result") or {} for t in
                optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)]
        runs = [r for r in runs if r.get("status") == "ok" and (r.get("workload") or {}).get("dataset") == dataset
                and not r["workload"].get("train_samples") and r.get("test_accuracy") is not None]
        if not runs:
            continue
        acc, time_s = median(r["test_accuracy"] for r in runs), median(r["train_time_s"] for r in runs)
        if best is None or acc > best[0]:
            best = (acc, time_s, name[len("defaults-"):])
    if best is None:
        return none
    acc, time_s, label = best
    reach = [_time_to(r, acc) for r in pick]
    got = median(t for t in reach if t is not None) if all(t is not None for t in reach) else None
    ok = got is not None and got <= time_s / 3
    text = (f"{label}: {acc:.4f} in {time_s:.1f} s; pick reaches it in "
            + (f"{got:.1f} s ({got / time_s:.2f}x)" if got is not None else "never") + (" yes" if ok else " NO"))
    return {"ok": ok, "text": text}


def _length(run: dict[str, Any]) -> str:
    """A run's length: its epochs, or for a run under a time budget the budget and the epochs it ran."""
    budget = run["config"].get("time_budget_s")
    if not budget:
        return f"{run['config']['epochs']} ep"
    ran = len(run.get("epoch_times") or [])
    return f"fills {budget:g} s (<= {run['config']['epochs']} ep; ran {ran})"


def _prose(path: Path) -> list[str]:
    """A hand-kept markdown file's lines, without its leading comment and blank lines."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    while lines and (lines[0].startswith(("<!--", "     ")) or not lines[0].strip()):
        lines.pop(0)
    return lines


def _provenance() -> list[str]:
    """The runs behind RAW, as `run` recorded them (a hand-written paragraph for the older ones)."""
    return _prose(RUNS) or [f"Rendered by `{command_line()}` at {git_rev()}."]


def latest_runs(path: Path = RAW) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The last record of each (request, arm, repeat) in ``path``: a run repeated (contended, or
    its pick changed since) counts once, as it last ran."""
    latest: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in read_jsonl(path):
        latest[(r["key"], r["arm"], r.get("repeat", -1))] = r
    return latest


def render(_: argparse.Namespace) -> None:
    latest = latest_runs()
    records = [r for r in latest.values() if r.get("repeat", -1) >= 0]
    answered = {r["key"] for r in records if r["arm"] == "pick"}
    errors = [r for r in latest.values() if r.get("repeat") == -1 and r["key"] not in answered]
    keys = sorted({r["key"] for r in records})
    rows: list[list[str]] = []
    unseen_rows: list[list[str]] = []
    seed_rows: list[dict[str, Any]] = []
    met_n = beat_n = judged = 0
    neither: set[str] = set()
    for key in keys:
        pick = [r for r in records if r["key"] == key and r["arm"] == "pick"]
        base = [r for r in records if r["key"] == key and r["arm"] == "default"]
        fill = [r for r in records if r["key"] == key and r["arm"] == "default-fill"]
        if not pick:
            continue
        c = pick[0]["constraints"]
        pt, pa = median(r["train_time_s"] for r in pick), median(r["test_accuracy"] for r in pick)
        bt, ba = (median(r["train_time_s"] for r in base), median(r["test_accuracy"] for r in base)) if base else (None, None)
        if c["max_time_s"] is not None:
            met = pt <= c["max_time_s"]
            # Accuracy at the same time budget: the default at the recommender's length, and the
            # default run to fill the budget (what a user would do) when that still fits.
            rivals = [ba] if base else []
            if fill and median(r["train_time_s"] for r in fill) <= c["max_time_s"]:
                rivals.append(median(r["test_accuracy"] for r in fill))
            beats = pa >= max(rivals) - 0.002 if rivals else None
        else:
            met = pa >= c["min_accuracy"]
            target = c["min_accuracy"]
            times_p = [_time_to(r, target) for r in pick]
            times_b = [_time_to(r, target) for r in base]
            tp = median(t for t in times_p if t is not None) if any(t is not None for t in times_p) else float("inf")
            tb = median(t for t in times_b if t is not None) if any(t is not None for t in times_b) else float("inf")
            beats = tp <= tb * 1.05 if base else None
            if base and tp == tb == float("inf"):  # neither reached it: the pick must reach at least as far
                beats = pa >= ba - 0.002
                neither.add(key)
        p = pick[0]
        unseen = p["dataset"] in DERIVED
        if not unseen:
            judged += 1
            met_n += bool(met)
            beat_n += bool(beats)
        fill_text = ""
        if fill:
            ft, fa = median(r["train_time_s"] for r in fill), median(r["test_accuracy"] for r in fill)
            fill_text = (f"; filled to {fill[0]['config']['epochs']} ep: {ft:.1f} s / {fa:.4f} (n={len(fill)})"
                         + ("" if ft <= (c["max_time_s"] or float("inf")) else " (over the time asked)"))
        seed = _seed_default(p["dataset"], [r for r in pick if r.get("accuracy_curve")])
        if not unseen:
            seed_rows.append(seed)
        (unseen_rows if unseen else rows).append([key, f"{p['framework']} {p['model']} {_length(p)} ({p['source']}, {p['basis']})",
                     f"{p['predicted']['time_s'][1]:.0f} s / {p['predicted']['accuracy'][1]:.4f}",
                     f"{pt:.1f} s / {pa:.4f} (n={len(pick)})",
                     (f"{_length(base[0])}: {bt:.1f} s / {ba:.4f} (n={len(base)})" if base else "-") + fill_text,
                     "yes" if met else "NO",
                     ("yes" if beats else ("n/a" if beats is None else "NO")) + (" (neither reached it)" if key in neither else ""),
                     seed["text"]])
    # a request without an answer neither meets its constraint nor beats the default
    judged += sum(e["dataset"] not in DERIVED for e in errors)
    for e in errors:
        (unseen_rows if e["dataset"] in DERIVED else rows).append([e["key"], "no answer", "-", "-", "-", "NO", "NO", "-"])
    seed_judged = [r for r in seed_rows if r["ok"] is not None]
    seed_met = sum(bool(r["ok"]) for r in seed_judged)
    lines = [
        "# Recommender v2 against the obvious default (held-out datasets, verified)",
        "",
        *_provenance(),
        "",
        machine_line(),
        "",
        "Each dataset is held out of the surrogate, its portfolio and its measured evidence (leave-one-dataset-out);",
        "the pick (rank 1) and the obvious default (PyTorch, Adam 1e-3, batch 128, constant rate, the dataset's",
        "default model, at the run length the recommender chose for it under the same question) are each run for",
        "real; figures are medians of the repeats (n). 'beats default': for a time bound, accuracy at least the",
        "default's (0.2 points of slack for seed noise); for an accuracy target, time to reach it (read from the",
        "per-epoch curve) at most 1.05x the default's; where neither reaches it, the pick's final accuracy at",
        "least the default's (0.2 points of slack), marked 'neither reached it'.",
        "",
        md_table(["request", "pick", "predicted time / acc", "measured time / acc", "obvious default measured",
                  "meets constraint", "beats default", "best seed default's accuracy in <= 1/3 of its time"], rows),
        "",
        f"Constraint met in {met_n} of {judged} requests; the obvious default beaten or tied in {beat_n} of {judged}; "
        f"the best seed-study default's accuracy reached in a third of its time in {seed_met} of {len(seed_judged)} "
        f"requests where that default was measured at this size.",
        *([""] + _prose(FINDINGS) if FINDINGS.exists() else []),
        "",
        "Seed-study defaults: each seed framework's stock settings (`advisor/presets.py`) as measured in",
        "`benchmarks/results/study.md` (3 epochs, 1 core, full MNIST; CIFAR-10 only on a 5,000-image subset there,",
        "so not comparable to the 30k runs here). The best of them (highest accuracy) is the bar: the pick's",
        "training time to reach that accuracy, read from its per-epoch curve, must be at most a third of that",
        "default's training time.",
    ]
    if unseen_rows:
        lines += ["", "## A workload in no file of the table", "",
                  "Derived from a local copy and asked of the shipped surrogate as a user's `.npz` (see",
                  "`DERIVED` in the script): `cifar10-gray` is the 30k CIFAR-10 copy in grayscale (32x32x1),",
                  "`cifar10-16px` the same copy at 16x16x3 (2x2 blocks averaged), `cifar10-vehicles` the same",
                  "images in two classes (vehicle or animal), `fashion-mnist-small` Fashion-MNIST at 14x14 with",
                  "12,000 training images, `mnist-fashion20` MNIST's digits and Fashion-MNIST's clothes as one",
                  "20-class task (30,000 training images), `cifar10-48px` 10,000 CIFAR-10 images at 48x48,",
                  "`cifar10-96px` 5,000 at 96x96 (STL-10's shape, 9 times the pixels of any trial),",
                  "`cifar10-longtail` CIFAR-10 long-tailed as CIFAR-10-LT (3,000 airplanes down to 150",
                  "trucks, 10,195 images, ratio 20:1; the test set balanced), `cifar10-noisy` the 30k copy",
                  "with 20% of its training labels replaced by another class (the test labels clean),",
                  "`cifar10-few` 100 training images a class (1,000 in all; the whole test set), `mnist-14px`",
                  "MNIST at 14x14, all of it (an easy task), `mnist-pairs` two MNIST digits side by side as",
                  "one 100-class task (28x56, 30,000 training pairs), `fashion-mnist-noisy` all of",
                  "Fashion-MNIST with 40% of its training labels wrong (the test labels clean),",
                  "`fashion-mnist-rgb32` all of Fashion-MNIST at 32x32x3 (2 pixels of black around, the",
                  "gray in three channels: an easy task in CIFAR-10's shape, as SVHN is),",
                  "`cifar10-catdog` the copy's cats and dogs as one binary task (5,962 training and 2,000",
                  "test images; hard, the two classes look alike), `cifar10-8px` the copy at 8x8x3 (4x4 blocks",
                  "averaged: digits' size, in colour, on a hard task); added at stop 40 and asked before any",
                  "rule was revisited: `cifar10-crop24` the copy's central 24x24 (a training crop's size),",
                  "`cifar10-3class` its cats, deer and dogs as a 3-class task (9,000 training images),",
                  "`fashion-mnist-crop20` Fashion-MNIST's central 20x20 with 20,000 training images and",
                  "`mnist-inverted` MNIST in negative (white background) with 15,000 training images; added",
                  "at stop 41 the same way: `fashion-mnist-tops` Fashion-MNIST's four look-alike tops (T-shirt,",
                  "pullover, coat, shirt: 24,000 training images), `fashion-mnist-7px` all of it at 7x7 (4x4",
                  "blocks averaged) and `fashion-mnist-7px-pad8` the same padded with zeros to 8x8; added at",
                  "stop 42 the same way, two of Larochelle et al.'s (2007) harder MNIST variants with 12,000",
                  "training images as theirs and the whole test set alike: `mnist-rot` digits turned by a",
                  "random angle, `mnist-back-rand` digits on a random-noise background, `mnist-back-image`",
                  "digits over grayscale CIFAR-10 photo patches, and `cifar10-5k` 500 CIFAR-10 images a class:",
                  "shapes, class counts, class balances and label noise no trial has, so",
                  "nothing about them is measured. The same columns as above; the",
                  "seed-study column does not apply. Not counted in the totals above.", "",
                  md_table(["request", "pick", "predicted time / acc", "measured time / acc", "obvious default measured",
                            "meets constraint", "beats default", "-"], unseen_rows)]
    if errors:
        lines += ["", "Requests without an answer: " + "; ".join(f"{e['key']}: {e['error']}" for e in errors)]
    lines += ["", "Read with care: 'obvious default measured' is the default at the run length the recommender chose",
              "for it, and (for a time bound) the default run for as many epochs as its measured epoch time fits in",
              "the time asked ('filled'): what a user without advisor would run. 'beats default' compares with the",
              "better of the two that finished in time. Ties where the pick is the default itself are ties by",
              "construction: no alternative was 80% likely to beat it on a dataset the table does not hold.",
              "", "`--budget 120s` against a 30-trial tuned study given the same time: `budget.md`",
              "(`benchmarks/bench_budget.py`)."]
    REPORT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {REPORT}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--datasets", default="mnist,fashion-mnist,cifar10,digits")
    r.add_argument("--questions", default="max-time:60,max-time:300,target-accuracy:p95")
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--cores", default="0,1")
    r.add_argument("--rounds", type=int, default=150)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--workdir", default="/tmp/advisor-bench-recommend-v2")
    r.add_argument("--rerun", default="", help="arms to run again although stored (e.g. default: timed in the "
                   "same sitting as a pick that changed; render takes the later runs)")
    r.add_argument("--max-trial-s", type=float, default=None,
                   help="cap on one verified run's wall time (a run stopped there counts as not meeting its question)")
    sub.add_parser("render")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        with RUNS.open("a", encoding="utf-8") as f:
            f.write(f"- `{command_line()}` at {git_rev()}\n")
    (run if args.cmd == "run" else render)(args)
    if args.cmd == "run":
        render(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
