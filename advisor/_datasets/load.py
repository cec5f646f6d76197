"""``load()``: a workload's data, subset, standardised and fingerprinted."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Mapping
from pathlib import Path

import numpy as np

from advisor.errors import DatasetError
from advisor.records import Workload
from advisor._datasets.registry import DatasetInfo, canonical_name, get_info, parse_synthetic
from advisor._datasets.sources import RawData, read_raw
from advisor._datasets.subset import SUBSET_METHOD, standardise, stratified_indices

__all__ = ["LoadedDataset", "load", "SourceReport", "inspect_source"]

_log = logging.getLogger(__name__)
_PREPROCESS = "nhwc-float32-per-channel-standardised-v1"
_SYNTHETIC_METHOD = "normal-images-uniform-labels-v1"
_SYNTHETIC_MAX_BYTES = 16 << 30


@dataclass(frozen=True, eq=False)  # arrays do not compare as one bool
class LoadedDataset:
    """A workload's data, ready to train on.

    Attributes:
        info: Meta-features of the source as read (``train_size``/``test_size`` count what was
            present before subsetting: 30,000 for a 3-of-5-batch CIFAR-10 copy).
        x_train: ``(N, H, W, C)`` float32, standardised per channel with training statistics.
        y_train: ``(N,)`` int64.
        x_test: Test images, standardised with the training statistics.
        y_test: Test labels.
        fingerprint: SHA-256 hex of the source files' content digests plus the subset spec.
        variant: Which copy of the data this is: ``"official"``, a partial or altered copy
            described with its file digests, or ``"synthetic"``.
        notes: Further facts worth recording (partial copies, the digits split...).
    """

    info: DatasetInfo
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    fingerprint: str
    variant: str
    notes: tuple[str, ...] = ()

    @property
    def num_classes(self) -> int:
        return self.info.num_classes

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return self.info.input_shape


def _fingerprint(name: str, digests: object, subset: Mapping[str, object]) -> str:
    spec = {"dataset": name, "files": digests, "subset": subset, "preprocess": _PREPROCESS}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _subset(split: str, labels: np.ndarray, n: int | None, seed: int, stream: int, source: str) -> np.ndarray | None:
    if n is None or n == len(labels):
        return None
    if n > len(labels):
        raise DatasetError(f"The '{split}_samples' parameter of Workload must be at most {len(labels):,} for "
                           f"{source}. Got {n:,} instead.")
    return stratified_indices(labels, n, seed=seed, stream=stream)


def _synthetic(name: str, workload: Workload) -> LoadedDataset:
    h, w, c = parse_synthetic(name)
    info = get_info(name)
    n_train = workload.train_samples or info.train_size
    n_test = workload.test_samples or info.test_size
    if (n_train + n_test) * h * w * c * 4 > _SYNTHETIC_MAX_BYTES:
        raise DatasetError(f"The synthetic dataset {name!r} with {n_train:,} + {n_test:,} samples would need more "
                           f"than {_SYNTHETIC_MAX_BYTES >> 30} GiB; ask for fewer samples or a smaller shape.")
    rng = np.random.default_rng([workload.seed, 7])
    x_train = rng.standard_normal((n_train, h, w, c), dtype=np.float32)
    x_test = rng.standard_normal((n_test, h, w, c), dtype=np.float32)
    y_train = rng.integers(0, info.num_classes, n_train).astype(np.int64)
    y_test = rng.integers(0, info.num_classes, n_test).astype(np.int64)
    subset = {"train": n_train, "test": n_test, "seed": workload.seed, "method": _SYNTHETIC_METHOD}
    return LoadedDataset(
        info=replace(info, train_size=n_train, test_size=n_test), x_train=x_train, y_train=y_train,
        x_test=x_test, y_test=y_test, fingerprint=_fingerprint(name, [], subset), variant="synthetic",
        notes=("random images and labels: timing only, accuracy has no meaning",),
    )


def load(workload: Workload, *, download: bool = True) -> LoadedDataset:
    """Load a workload's dataset, subset it, standardise it and fingerprint it.

    The source is ``workload.data_dir`` when given (a folder with the canonical files, e.g. MNIST's
    IDX ``.gz`` files or CIFAR-10's ``cifar-10-batches-bin``), else the cache, downloading into it
    when ``download`` is true. ``train_samples``/``test_samples`` take deterministic stratified
    subsets drawn with ``workload.seed``. For ``synthetic:HxWxC`` they set how many random samples
    are generated (default 2,000/500).

    Raises:
        UnknownNameError: For an unknown dataset name.
        DatasetFileError: When files are missing or malformed (one line naming the file).
        ChecksumError: When a download does not match its published digest.
        DatasetError: When a subset is larger than the data.
    """
    name = canonical_name(workload.dataset)
    if name.startswith("synthetic:"):
        return _synthetic(name, workload)
    started = time.perf_counter()
    raw: RawData = read_raw(name, data_dir=workload.data_dir, download=download)
    source = f"{name!r} ({raw.variant})"
    train_idx = _subset("train", raw.y_train, workload.train_samples, workload.seed, 0, source)
    test_idx = _subset("test", raw.y_test, workload.test_samples, workload.seed, 1, source)
    x_train = raw.x_train if train_idx is None else raw.x_train[train_idx]
    y_train = raw.y_train if train_idx is None else raw.y_train[train_idx]
    x_test = raw.x_test if test_idx is None else raw.x_test[test_idx]
    y_test = raw.y_test if test_idx is None else raw.y_test[test_idx]
    x_train, x_test = standardise(x_train, x_test)
    # The subset as drawn: asking for all samples is the same data as asking for none.
    subset = {"train": None if train_idx is None else len(train_idx),
              "test": None if test_idx is None else len(test_idx),
              "seed": None if train_idx is None and test_idx is None else workload.seed,
              "method": SUBSET_METHOD}
    fingerprint = _fingerprint(_fingerprint_name(name), list(raw.digests), subset)
    _log.debug("loaded %s in %.2f s (%s)", name, time.perf_counter() - started, raw.variant)
    return LoadedDataset(info=raw.info, x_train=x_train, y_train=np.ascontiguousarray(y_train),
                         x_test=x_test, y_test=np.ascontiguousarray(y_test), fingerprint=fingerprint,
                         variant=raw.variant, notes=raw.notes)


@dataclass(frozen=True)
class SourceReport:
    """What a data folder (or the cache) holds for a dataset, as ``advisor datasets info`` shows it.

    Attributes:
        dataset: Canonical name.
        folder: Where the files are.
        format: ``idx``, ``cifar-10-batches-bin``, ``cifar-10-batches-py``, ``npz`` or ``builtin``.
        files: ``(file name, size in bytes)`` of each file read.
        train_size: Training samples present.
        test_size: Test samples present.
        variant: As in :class:`LoadedDataset`.
        notes: As in :class:`LoadedDataset`.
        fingerprint: The fingerprint a full load (no subset) of these files gets.
    """

    dataset: str
    folder: str
    format: str
    files: tuple[tuple[str, int], ...]
    train_size: int
    test_size: int
    variant: str
    notes: tuple[str, ...]
    fingerprint: str

    def to_dict(self) -> dict[str, object]:
        return {"dataset": self.dataset, "folder": self.folder, "format": self.format,
                "files": [{"name": n, "bytes": b} for n, b in self.files], "train_size": self.train_size,
                "test_size": self.test_size, "variant": self.variant, "notes": list(self.notes),
                "fingerprint": self.fingerprint}


def inspect_source(name: str, *, data_dir: str | None = None, cache_dir: str | None = None) -> SourceReport:
    """Read what ``data_dir`` (or the cache) holds for ``name`` and report it; downloads nothing.

    Raises:
        DatasetError: For ``synthetic:...``, which has no files.
        DatasetFileError: When the files are missing or malformed.
    """
    from advisor._datasets.sources import find_files

    key = canonical_name(name)
    if key.startswith("synthetic:"):
        raise DatasetError(f"The dataset {key!r} is generated on the fly: it has no files to inspect.")
    raw = read_raw(key, data_dir=data_dir, download=False, cache_dir=cache_dir)
    files: tuple[tuple[str, int], ...] = ()
    if key == "digits":
        folder, fmt = "scikit-learn", "builtin"
    elif key.lower().endswith(".npz"):
        path = Path(key).expanduser()
        folder, fmt, files = str(path.parent), "npz", ((path.name, path.stat().st_size),)
    else:
        found = find_files(key, data_dir=data_dir, cache_dir=cache_dir)
        folder, fmt = str(found.folder), found.format
        files = tuple((p.name, p.stat().st_size) for p in found.paths)
    subset = {"train": None, "test": None, "seed": None, "method": SUBSET_METHOD}
    return SourceReport(dataset=key, folder=folder, format=fmt, files=files, train_size=len(raw.y_train),
                        test_size=len(raw.y_test), variant=raw.variant, notes=raw.notes,
                        fingerprint=_fingerprint(_fingerprint_name(key), list(raw.digests), subset))


def _fingerprint_name(key: str) -> str:
    return "npz" if key.lower().endswith(".npz") else key
