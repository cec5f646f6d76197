"""Find a dataset's canonical files (a data folder or the cache), read them, and name the variant.

The result is raw: ``uint8`` (or the ``.npz``'s own dtype) NHWC images, int64 labels, the
content digest of every source file, and a ``variant`` that says which copy this is ("official"
when every file matches the published digests, otherwise the format, how much of it is present
and the files' digests).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from advisor.errors import DatasetFileError
from advisor._datasets.cache import lookup_digests, sha256_file, store_digests
from advisor._datasets.download import (SOURCES, VERIFIED_MARKER, dataset_cache_folder,
                                        download_dataset)
from advisor._datasets.readers import (CIFAR_RECORD, file_error, read_cifar_binary, read_cifar_python,
                                       read_idx_file, read_npz)
from advisor._datasets.registry import DatasetInfo, get_info, is_npz_path

__all__ = ["SourceFiles", "RawData", "find_files", "read_raw", "train_images_present", "npz_digest", "npz_variant"]

_IDX_ROLES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
              "t10k-labels-idx1-ubyte")
_CIFAR_TRAIN = 5
_CIFAR_BATCH = 10_000  # images in each canonical CIFAR-10 batch
DIGITS_SPLIT_SEED = 0
DIGITS_TEST = 360


@dataclass(frozen=True)
class SourceFiles:
    """The canonical files found for a dataset.

    Attributes:
        dataset: Registry name.
        folder: Folder the files were found in.
        format: ``idx``, ``cifar-10-batches-bin`` or ``cifar-10-batches-py``.
        train: Training files (IDX: images then labels; CIFAR: the batches present).
        test: Test files, in the same order.
    """

    dataset: str
    folder: Path
    format: str
    train: tuple[Path, ...]
    test: tuple[Path, ...]

    @property
    def paths(self) -> tuple[Path, ...]:
        return self.train + self.test


@dataclass(frozen=True)
class RawData:
    """Images and labels as read, before subsetting and standardisation."""

    info: DatasetInfo
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    digests: tuple[tuple[str, str], ...]  # (file name, content SHA-256), in a fixed order
    variant: str
    notes: tuple[str, ...]
    folder: Path | None = None


def _download_hint(name: str) -> str:
    return (f"download it with `advisor datasets download {name}`, or set data_dir to a folder that holds "
            "the canonical files")


def _candidates(name: str, data_dir: Path | None, cache_dir: str | None) -> list[Path]:
    if data_dir is None:
        return [dataset_cache_folder(name, cache_dir)]
    extra = {"mnist": ["mnist", "MNIST/raw"], "fashion-mnist": ["fashion-mnist", "FashionMNIST/raw"],
             "cifar10": ["cifar-10-batches-bin", "cifar-10-batches-py"]}[name]
    return [data_dir, *(data_dir / e for e in extra)]


def _find_idx(name: str, folder: Path) -> tuple[list[Path], list[Path]]:
    found: list[Path] = []
    missing: list[Path] = []
    for role in _IDX_ROLES:
        options = [folder / f"{role}{ext}" for ext in (".gz", "")]
        options += [folder / f"{role.replace('-idx', '.idx')}{ext}" for ext in (".gz", "")]
        hit = next((p for p in options if p.is_file()), None)
        (found if hit else missing).append(hit or options[0])
    return found, missing


def _find_cifar(folder: Path) -> tuple[str, list[Path], Path] | None:
    for fmt, ext in (("cifar-10-batches-bin", ".bin"), ("cifar-10-batches-py", "")):
        train = [folder / f"data_batch_{i}{ext}" for i in range(1, _CIFAR_TRAIN + 1)]
        train = [p for p in train if p.is_file()]
        test = folder / f"test_batch{ext}"
        if train or test.is_file():
            return fmt, train, test
    return None


def find_files(name: str, *, data_dir: str | os.PathLike[str] | None = None, cache_dir: str | None = None,
               download: bool = False) -> SourceFiles:
    """Locate ``name``'s canonical files in ``data_dir`` (or a known sub-folder), else the cache.

    Raises:
        DatasetFileError: When the files are missing, naming the first missing one.
    """
    folder_arg = Path(data_dir).expanduser() if data_dir is not None else None
    if folder_arg is not None and not folder_arg.is_dir():
        raise file_error(folder_arg, "is not a folder", "give the folder that holds the dataset's files")
    try:
        return _find_files(name, folder_arg, cache_dir)
    except DatasetFileError:
        if folder_arg is not None or not download:
            raise
    download_dataset(name, cache_dir=cache_dir)
    return _find_files(name, folder_arg, cache_dir)


def train_images_present(name: str, data_dir: str | os.PathLike[str]) -> int:
    """How many training images ``name``'s files in ``data_dir`` hold, read from the IDX labels'
    header or the CIFAR-10 batches' sizes (nothing is decoded). A CIFAR-10 folder may hold some of
    its five batches (the copy beside this project holds three).

    Raises:
        DatasetFileError: When the files are missing.
    """
    import gzip

    found = find_files(name, data_dir=data_dir)
    if found.format == "idx":
        labels = found.train[1]
        with (gzip.open(labels, "rb") if labels.suffix == ".gz" else open(labels, "rb")) as f:
            head = f.read(8)
        if len(head) < 8:
            raise file_error(labels, "is too short for an IDX header", _download_hint(name))
        return int.from_bytes(head[4:8], "big")
    if found.format == "cifar-10-batches-bin":
        return sum(p.stat().st_size // CIFAR_RECORD for p in found.train)
    return _CIFAR_BATCH * len(found.train)  # the python version: pickles of the canonical 10,000 images


def _find_files(name: str, folder_arg: Path | None, cache_dir: str | None) -> SourceFiles:
    candidates = _candidates(name, folder_arg, cache_dir)
    if name == "cifar10":
        for folder in candidates:
            hit = _find_cifar(folder)
            if hit is None:
                continue
            fmt, train, test = hit
            if not test.is_file():
                raise file_error(test, "the CIFAR-10 test batch is missing", _download_hint(name))
            if not train:
                raise file_error(folder / (f"data_batch_1{'.bin' if fmt.endswith('bin') else ''}"),
                                 "no CIFAR-10 training batch is present", _download_hint(name))
            return SourceFiles(name, folder, fmt, tuple(train), (test,))
        raise file_error(candidates[0] / "data_batch_1.bin",
                         "no CIFAR-10 batches found (expected data_batch_1..5.bin and test_batch.bin, or the "
                         "python version's data_batch_1..5 and test_batch)", _download_hint(name))
    first_missing, most_found = candidates[0], -1
    for folder in candidates:
        found, missing = _find_idx(name, folder)
        if not missing:
            return SourceFiles(name, folder, "idx", tuple(found[:2]), tuple(found[2:]))
        if len(found) > most_found:  # report the folder that came closest
            first_missing, most_found = missing[0], len(found)
    raise file_error(first_missing, "the file does not exist", _download_hint(name))


def _short(digests: list[str]) -> str:
    return " ".join(d[:8] for d in digests)


def _read_idx_source(files: SourceFiles) -> RawData:
    arrays, digests = [], []
    for path in files.paths:
        known = lookup_digests(path).get("content_sha256")
        data = read_idx_file(path, digest=known is None)
        if known is None:
            known = data.content_sha256
            store_digests(path, {"content_sha256": known or ""})
        arrays.append(data.array)
        digests.append(known or "")
    x_train, y_train, x_test, y_test = arrays
    for (images, labels), (pi, pl) in (((x_train, y_train), files.train), ((x_test, y_test), files.test)):
        if images.ndim != 3 or images.dtype != np.uint8:
            raise file_error(pi, f"holds {images.dtype} data of shape {images.shape}; expected unsigned bytes "
                                 "of shape (N, rows, columns): is this an images file?")
        if labels.ndim != 1 or labels.dtype != np.uint8:
            raise file_error(pl, f"holds data of shape {labels.shape}; expected one label byte per image: "
                                 "is this a labels file?")
        if len(images) != len(labels):
            raise file_error(pl, f"holds {len(labels):,} labels but {pi.name} holds {len(images):,} images",
                             "use the labels file that belongs to those images")
        if len(labels) and int(labels.max()) > 9:
            raise file_error(pl, f"holds label {int(labels.max())}; this dataset's labels are 0-9")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise file_error(files.test[0], f"images are {x_test.shape[1:]} but the training images are "
                                        f"{x_train.shape[1:]}", "use files from the same dataset")
    official = _idx_official(files, digests)
    names = list(_IDX_ROLES)  # by role, so a gzipped and a plain copy of the same bytes fingerprint alike
    variant = "official" if official else f"{files.dataset} IDX files, not the published ones (sha256 {_short(digests)})"
    notes = () if official else (f"{files.folder}: the decompressed files differ from the published "
                                 f"{files.dataset} release; the fingerprint identifies these exact files",)
    info = replace(get_info(files.dataset), input_shape=(*x_train.shape[1:], 1), train_size=len(y_train),
                   test_size=len(y_test))
    return RawData(info, x_train[..., np.newaxis], y_train.astype(np.int64), x_test[..., np.newaxis],
                   y_test.astype(np.int64), tuple(zip(names, digests)), variant, notes, files.folder)


def _idx_official(files: SourceFiles, content: list[str]) -> bool:
    remotes = {r.name.removesuffix(".gz"): r for r in SOURCES[files.dataset]}
    for path, digest in zip(files.paths, content):
        remote = remotes.get(path.name.removesuffix(".gz").replace(".idx", "-idx"))
        if remote is None:
            return False
        if digest in remote.content_sha256:
            continue
        raw = lookup_digests(path).get("sha256")
        if raw is None:
            raw = sha256_file(path)
            store_digests(path, {"sha256": raw})
        if raw not in remote.sha256:
            return False
    return True


#: Known non-official CIFAR-10 copies, by the sha256 of one of their batch files: what the copy is,
#: so that a trial's provenance says it (the fingerprint alone only identifies the bytes).
KNOWN_CIFAR_COPIES = {
    "8da035fc1631e8ce5f25904206b8993b0f3ad02a504c0584d662e806fd76c12b":
        "JPEG-derived pixels (recovered from a public quality-75 JPEG copy, mean absolute difference ~5.8/255)",
}


def amend_variant(variant: str) -> str:
    """A recorded dataset variant with what :data:`KNOWN_CIFAR_COPIES` knows about its files added,
    when the record predates that knowledge (the variant names each batch's short sha256)."""
    if not variant or "(sha256 " not in variant:
        return variant
    shorts = variant.split("(sha256 ", 1)[1].split(")", 1)[0].split()
    for full, what in KNOWN_CIFAR_COPIES.items():
        if what not in variant and any(full.startswith(short) for short in shorts if len(short) >= 8):
            return f"{variant}; {what}"
    return variant


def _read_cifar_source(files: SourceFiles) -> RawData:
    reader = read_cifar_binary if files.format.endswith("bin") else read_cifar_python
    parts, digests = [], []
    for path in files.paths:
        known = lookup_digests(path).get("sha256")
        images, labels, digest = reader(path, digest=known is None)
        if known is None:
            known = digest or ""
            store_digests(path, {"sha256": known})
        parts.append((images, labels))
        digests.append(known)
    n_train = len(files.train)
    x_train = np.concatenate([p[0] for p in parts[:n_train]])
    y_train = np.concatenate([p[1] for p in parts[:n_train]])
    x_test, y_test = parts[-1]
    names = [p.name for p in files.paths]
    official = _cifar_official(files, names, digests)
    notes: tuple[str, ...] = ()
    if official:
        variant = "official"
    else:
        counts = "" if len(y_train) == 10_000 * n_train and len(y_test) == 10_000 else (
            f", {len(y_train):,} train + {len(y_test):,} test records")
        variant = f"{files.format}: {n_train}/{_CIFAR_TRAIN} train batches{counts} (sha256 {_short(digests)})"
        known = next((what for d in digests for prefix, what in KNOWN_CIFAR_COPIES.items() if d.startswith(prefix)),
                     None)
        if known:
            variant += f"; {known}"
        notes = (f"{n_train} of {_CIFAR_TRAIN} training batches present ({', '.join(names[:n_train])}): "
                 f"{len(y_train):,} of 50,000 training images",
                 "not verified against the official archive: the fingerprint identifies these exact files")
        if n_train == _CIFAR_TRAIN:
            notes = notes[1:]
    info = replace(get_info("cifar10"), train_size=len(y_train), test_size=len(y_test))
    return RawData(info, x_train, y_train, x_test, y_test, tuple(zip(names, digests)), variant, notes,
                   files.folder)


def _cifar_official(files: SourceFiles, names: list[str], digests: list[str]) -> bool:
    try:
        marker = json.loads((files.folder / VERIFIED_MARKER).read_text())
        recorded = marker["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return len(files.train) == _CIFAR_TRAIN and all(recorded.get(n) == d for n, d in zip(names, digests))


def _digits_arrays() -> tuple[np.ndarray, np.ndarray, str]:
    """scikit-learn's digits, read from the CSV it ships, without importing scikit-learn (~2 s)."""
    import importlib.metadata
    import importlib.util

    version = importlib.metadata.version("scikit-learn")
    spec = importlib.util.find_spec("sklearn")
    locations = list(spec.submodule_search_locations or []) if spec else []
    csv = Path(locations[0], "datasets", "data", "digits.csv.gz") if locations else None
    if csv is not None and csv.is_file():
        table = np.loadtxt(csv, delimiter=",", dtype=np.float64)
        return table[:, :-1], table[:, -1], version
    from sklearn.datasets import load_digits  # the CSV moved: take the slow, official way

    bunch = load_digits()
    return np.asarray(bunch.data), np.asarray(bunch.target), version


def _read_digits() -> RawData:
    from advisor._datasets.subset import stratified_indices

    data, target, version = _digits_arrays()
    images = data.round().astype(np.uint8).reshape(-1, 8, 8, 1)  # values 0..16
    labels = target.astype(np.int64)
    test = stratified_indices(labels, DIGITS_TEST, seed=DIGITS_SPLIT_SEED)
    train = np.setdiff1d(np.arange(len(labels)), test)
    digest = hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()
    notes = (f"scikit-learn {version} load_digits: {len(labels):,} images split {len(train):,}/{len(test):,}, "
             f"stratified, seed {DIGITS_SPLIT_SEED}",)
    return RawData(get_info("digits"), images[train], labels[train], images[test], labels[test],
                   (("load_digits", digest),), "official", notes)


def npz_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a user's ``.npz``, remembered per file version (:mod:`advisor._datasets.cache`)."""
    digest = lookup_digests(path).get("sha256")
    if digest is None:
        digest = sha256_file(path)
        store_digests(path, {"sha256": digest})
    return digest


def npz_variant(digest: str) -> str:
    """The ``dataset_variant`` a trial on the ``.npz`` with this digest records: which file it read,
    whatever the path it was given by."""
    return f"npz (sha256 {digest[:8]})"


def _read_npz_source(path_text: str) -> RawData:
    path = Path(path_text).expanduser()
    x_train, y_train, x_test, y_test, classes = read_npz(path)
    digest = npz_digest(path)
    info = DatasetInfo(name=path_text, input_shape=tuple(int(d) for d in x_train.shape[1:]),  # type: ignore[arg-type]
                       num_classes=classes, train_size=len(y_train), test_size=len(y_test), synthetic=False,
                       source=str(path.resolve()), description="user arrays from an .npz file")
    return RawData(info, x_train, y_train, x_test, y_test, ((path.name, digest),), npz_variant(digest),
                   (), path.parent)


def read_raw(name: str, *, data_dir: str | os.PathLike[str] | None = None, download: bool = True,
             cache_dir: str | None = None) -> RawData:
    """Read a non-synthetic dataset: ``digits``, ``mnist``, ``fashion-mnist``, ``cifar10`` or ``.npz``.

    Raises:
        DatasetFileError: When files are missing or malformed.
        ChecksumError: When a download does not match its published digest.
    """
    if is_npz_path(name):
        return _read_npz_source(name)
    if name == "digits":
        return _read_digits()
    files = find_files(name, data_dir=data_dir, cache_dir=cache_dir, download=download and data_dir is None)
    return _read_cifar_source(files) if name == "cifar10" else _read_idx_source(files)
