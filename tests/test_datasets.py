"""advisor.datasets: registry, canonical readers, subsets, standardisation, fingerprints, downloads.

The canonical files are written here, in tmp_path, byte by byte from the format descriptions
(IDX: big-endian header; CIFAR-10 binary: 1 label byte + red, green, blue planes), so the
readers are checked against the formats rather than against their own inverse.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from advisor import datasets
from advisor._datasets import download as download_module
from advisor.datasets import (DatasetInfo, get_info, list_datasets, load, read_cifar_binary,
                              read_cifar_python, read_idx, stratified_indices)
from advisor.errors import (ChecksumError, DatasetError, DatasetFileError, InvalidParameterError,
                            UnknownNameError)
from advisor.records import Workload

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"

# ------------------------------------------------------------------ canonical-file writers


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes: 0, 0, type 0x08, ndim, big-endian dims, data."""
    array = np.asarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.tobytes()


def write_idx(path: Path, array: np.ndarray, *, compress: bool = True) -> Path:
    data = idx_bytes(array)
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


def age(*paths: Path, seconds: float = 3600) -> None:
    """Make files look old, so the digest cache may remember them (fresh files are 'racy')."""
    past = time.time() - seconds
    for p in paths:
        os.utime(p, (past, past))


def mnist_arrays(n_train: int = 40, n_test: int = 20, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x_train = rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8)
    x_test = rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8)
    y_train = np.arange(n_train, dtype=np.uint8) % 10
    y_test = np.arange(n_test, dtype=np.uint8) % 10
    return x_train, y_train, x_test, y_test


def write_mnist(folder: Path, arrays: tuple[np.ndarray, ...] | None = None, *, compress: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    x_train, y_train, x_test, y_test = arrays if arrays is not None else mnist_arrays()
    ext = ".gz" if compress else ""
    write_idx(folder / f"train-images-idx3-ubyte{ext}", x_train, compress=compress)
    write_idx(folder / f"train-labels-idx1-ubyte{ext}", y_train, compress=compress)
    write_idx(folder / f"t10k-images-idx3-ubyte{ext}", x_test, compress=compress)
    write_idx(folder / f"t10k-labels-idx1-ubyte{ext}", y_test, compress=compress)
    return folder


def cifar_record(label: int, red: bytes, green: bytes, blue: bytes) -> bytes:
    assert len(red) == len(green) == len(blue) == 1024
    return bytes([label]) + red + green + blue


def random_cifar(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` records as (planes (n, 3, 1024) uint8, labels (n,))."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 3, 1024), dtype=np.uint8), np.arange(n, dtype=np.uint8) % 10


def cifar_bytes(planes: np.ndarray, labels: np.ndarray) -> bytes:
    return b"".join(cifar_record(int(l), p[0].tobytes(), p[1].tobytes(), p[2].tobytes())
                    for p, l in zip(planes, labels))


def write_cifar_bin(folder: Path, n_batches: int = 5, per_batch: int = 20, n_test: int = 10) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, n_batches + 1):
        (folder / f"data_batch_{i}.bin").write_bytes(cifar_bytes(*random_cifar(per_batch, seed=i)))
    (folder / "test_batch.bin").write_bytes(cifar_bytes(*random_cifar(n_test, seed=99)))
    (folder / "batches.meta.txt").write_text("airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n")
    return folder


def cifar_pickle(planes: np.ndarray, labels: np.ndarray, *, protocol: int = 2) -> bytes:
    """A python-version batch as the real ones are: a dict of a (N, 3072) uint8 array and lists."""
    batch = {
        b"batch_label": b"training batch 1 of 5",
        b"labels": [int(l) for l in labels],
        b"data": planes.reshape(len(planes), 3072),
        b"filenames": [f"img_{i}.png".encode() for i in range(len(labels))],
    }
    return pickle.dumps(batch, protocol=protocol)


def write_npz(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


# ---------------------------------------------------------------------------- registry


def test_registry_meta_features_without_loading() -> None:
    names = [i.name for i in list_datasets()]
    assert names[:4] == ["digits", "mnist", "fashion-mnist", "cifar10"]
    assert get_info("digits").input_shape == (8, 8, 1)
    assert (get_info("digits").train_size, get_info("digits").test_size) == (1437, 360)
    assert (get_info("mnist").train_size, get_info("mnist").test_size) == (60_000, 10_000)
    fashion = get_info("fashion-mnist")
    assert (fashion.input_shape, fashion.train_size, fashion.test_size) == ((28, 28, 1), 60_000, 10_000)
    assert fashion.source.startswith("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/")
    assert get_info("Fashion_MNIST").name == get_info("fmnist").name == "fashion-mnist"
    assert get_info("cifar10").input_shape == (32, 32, 3)
    assert (get_info("cifar10").train_size, get_info("cifar10").test_size) == (50_000, 10_000)
    assert get_info("CIFAR-10").name == "cifar10"
    assert all(i.num_classes == 10 for i in list_datasets())


def test_synthetic_info_parses_shape() -> None:
    info = get_info("synthetic:32x16x3")
    assert info.input_shape == (32, 16, 3)
    assert info.synthetic and (info.train_size, info.test_size) == (2000, 500)
    assert not get_info("mnist").synthetic
    with pytest.raises(DatasetError, match="synthetic:HxWxC"):
        get_info("synthetic:28x28")
    with pytest.raises(DatasetError, match="smaller shape"):
        get_info("synthetic:100000x2x1")


def test_unknown_dataset_message_is_one_line() -> None:
    with pytest.raises(UnknownNameError) as exc:
        get_info("imagenet")
    text = str(exc.value)
    assert text.startswith("Unknown dataset 'imagenet': choose one of digits, mnist, fashion-mnist, cifar10")
    assert text.endswith("or give a path to an .npz file.")
    assert "\n" not in text


@pytest.mark.parametrize(("name", "base"), [("mnist", "https://ossci-datasets.s3.amazonaws.com/mnist/"),
                                            ("fashion-mnist", "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/")])
def test_idx_datasets_declare_both_digests_of_their_four_files(name: str, base: str) -> None:
    # The content digest is what accepts a re-gzipped copy (MNIST's mirrors, Debian's packages).
    remotes = download_module.SOURCES[name]
    assert [r.name for r in remotes] == ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    for remote in remotes:
        assert remote.urls[0] == base + remote.name
        assert len(remote.sha256) == len(remote.content_sha256) == 1
        assert all(len(d) == 64 and int(d, 16) >= 0 for d in remote.sha256 | remote.content_sha256)
    assert len({d for r in remotes for d in r.sha256 | r.content_sha256}) == 8


def test_dataset_info_validates() -> None:
    with pytest.raises(InvalidParameterError, match="'input_shape' parameter of DatasetInfo"):
        DatasetInfo(name="x", input_shape=(28, 28), num_classes=10, train_size=1, test_size=1,  # type: ignore[arg-type]
                    synthetic=False, source="", description="")


# ----------------------------------------------------------------------------- readers


def test_idx_reader_decodes_exact_values(tmp_path: Path) -> None:
    images = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
    # Written by hand: magic 0x00000803, then 3, 4, 5 as big-endian uint32.
    raw = struct.pack(">IIII", 0x803, 3, 4, 5) + images.tobytes()
    (tmp_path / "plain-idx3-ubyte").write_bytes(raw)
    (tmp_path / "packed.gz").write_bytes(gzip.compress(raw))
    for name in ("plain-idx3-ubyte", "packed.gz"):
        out = read_idx(tmp_path / name)
        assert out.shape == (3, 4, 5) and out.dtype == np.uint8
        assert out[2, 3, 4] == 59 and out[1, 0, 2] == 22
    labels = struct.pack(">II", 0x801, 4) + bytes([7, 0, 9, 3])
    (tmp_path / "labels").write_bytes(labels)
    assert read_idx(tmp_path / "labels").tolist() == [7, 0, 9, 3]


def test_idx_reader_big_endian_int32(tmp_path: Path) -> None:
    raw = struct.pack(">BBBBI", 0, 0, 0x0C, 1, 2) + struct.pack(">ii", -2, 70000)
    (tmp_path / "ints").write_bytes(raw)
    out = read_idx(tmp_path / "ints")
    assert out.tolist() == [-2, 70000] and out.dtype.isnative


def test_cifar_binary_reader_decodes_planes_and_labels(tmp_path: Path) -> None:
    red, green, blue = bytearray(1024), bytearray(1024), bytearray(1024)
    red[5] = 200            # row 0, column 5
    green[2 * 32 + 3] = 17  # row 2, column 3
    blue[31 * 32 + 31] = 255
    second = bytes(range(256)) * 4
    data = cifar_record(6, bytes(red), bytes(green), bytes(blue)) + cifar_record(9, second, second, second)
    (tmp_path / "data_batch_1.bin").write_bytes(data)
    images, labels, digest = read_cifar_binary(tmp_path / "data_batch_1.bin")
    assert images.shape == (2, 32, 32, 3) and images.dtype == np.uint8
    assert labels.tolist() == [6, 9] and labels.dtype == np.int64
    assert images[0, 0, 5, 0] == 200 and images[0, 0, 5, 1] == 0
    assert images[0, 2, 3, 1] == 17 and images[0, 2, 3, 0] == 0
    assert images[0, 31, 31, 2] == 255
    assert int(images[0].sum()) == 200 + 17 + 255
    assert images[1, 1, 0].tolist() == [32, 32, 32]  # byte 32 of each plane
    assert digest == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar_python_reader_matches_binary(tmp_path: Path, protocol: int) -> None:
    planes, labels = random_cifar(7, seed=3)
    (tmp_path / "data_batch_1").write_bytes(cifar_pickle(planes, labels, protocol=protocol))
    (tmp_path / "data_batch_1.bin").write_bytes(cifar_bytes(planes, labels))
    py_images, py_labels, _ = read_cifar_python(tmp_path / "data_batch_1")
    bin_images, bin_labels, _ = read_cifar_binary(tmp_path / "data_batch_1.bin")
    assert np.array_equal(py_images, bin_images)
    assert py_labels.tolist() == labels.tolist() == bin_labels.tolist()
    assert py_images[4, 1, 2, 2] == planes[4, 2, 1 * 32 + 2]


def test_cifar_python_reader_reads_a_python2_style_pickle(tmp_path: Path) -> None:
    # The real batches were pickled by Python 2: str (not bytes) keys and array data, old numpy
    # module paths, protocol 2. This stream is written opcode by opcode as such a file holds it.
    stream = (
        b"\x80\x02}q\x00(U\x04dataq\x01cnumpy.core.multiarray\n_reconstruct\nq\x02cnumpy\nndarray\nq\x03"
        b"K\x00\x85U\x01b\x87Rq\x04(K\x01K\x01M\x00\x0c\x86cnumpy\ndtype\nq\x05U\x02u1K\x00K\x01\x87Rq\x06"
        b"(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89T\x00\x0c\x00\x00"
        + bytes(range(256)) * 12
        + b"tbU\x06labelsq\x07]q\x08K\x03aU\x0bbatch_labelq\tU\x01xu."
    )
    (tmp_path / "data_batch_1").write_bytes(stream)
    images, labels, _ = read_cifar_python(tmp_path / "data_batch_1")
    assert labels.tolist() == [3]
    assert images.shape == (1, 32, 32, 3)
    assert images[0, 0, 1].tolist() == [1, 1, 1] and images[0, 0, 255 - 224].tolist() == [31, 31, 31]


def test_npz_grey_arrays_get_a_channel_axis(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    path = write_npz(tmp_path / "mine.npz", x_train=rng.integers(0, 255, (30, 6, 5), dtype=np.uint8),
                     y_train=np.arange(30) % 3, x_test=rng.integers(0, 255, (9, 6, 5), dtype=np.uint8),
                     y_test=np.arange(9) % 3)
    info = get_info(str(path))
    assert info.input_shape == (6, 5, 1) and info.num_classes == 3
    assert (info.train_size, info.test_size) == (30, 9)
    data = load(Workload(dataset=str(path), model="mlp"))
    assert data.x_train.shape == (30, 6, 5, 1) and data.x_train.dtype == np.float32
    assert data.y_train.dtype == np.int64 and data.num_classes == 3
    assert data.variant.startswith("npz (sha256 ")


def test_npz_channels_first_images_are_read_as_nhwc(tmp_path: Path) -> None:
    """``x.numpy()`` of a torch batch is (N, C, H, W): read the same images as their NHWC copy."""
    from advisor._datasets.readers import channels_first

    rng = np.random.default_rng(0)
    nhwc = rng.integers(0, 255, (30, 8, 6, 3), dtype=np.uint8)
    test = rng.integers(0, 255, (9, 8, 6, 3), dtype=np.uint8)
    y, y_test = np.arange(30) % 3, np.arange(9) % 3
    plain = write_npz(tmp_path / "nhwc.npz", x_train=nhwc, y_train=y, x_test=test, y_test=y_test)
    first = write_npz(tmp_path / "nchw.npz", x_train=nhwc.transpose(0, 3, 1, 2), y_train=y,
                      x_test=test.transpose(0, 3, 1, 2), y_test=y_test)
    assert get_info(str(first)).input_shape == get_info(str(plain)).input_shape == (8, 6, 3)
    a, b = load(Workload(dataset=str(plain), model="mlp")), load(Workload(dataset=str(first), model="mlp"))
    assert b.x_train.shape == (30, 8, 6, 3) and np.array_equal(a.x_train, b.x_train)
    assert np.array_equal(a.x_test, b.x_test)
    # NHWC stays as it is, whatever its height: only a channel count second and none last is channels-first
    assert not channels_first((5, 3, 32, 3)) and not channels_first((5, 32, 32, 1)) and not channels_first((5, 3, 4))
    assert channels_first((5, 1, 28, 28)) and channels_first((5, 3, 32, 32)) and channels_first((5, 4, 9, 9))
    mixed = write_npz(tmp_path / "mixed.npz", x_train=nhwc.transpose(0, 3, 1, 2), y_train=y, x_test=test,
                      y_test=y_test)
    assert get_info(str(mixed)).input_shape == (8, 6, 3)  # each array read in its own layout


def test_npz_flat_rows_are_read_as_square_images_in_their_layout(tmp_path: Path) -> None:
    """Flat rows as OpenML, a CSV or CIFAR-10's own batches store them: H*W grey values, or 3*H*W RGB
    values pixel by pixel or plane by plane (told apart by which reading gives smooth images);
    tabular rows are refused in one line."""
    from advisor.datasets import read_npz

    rng = np.random.default_rng(0)
    # smooth images: random 4x4 colours blown up to 16x16, so neighbouring pixels mostly agree
    smooth = np.kron(rng.integers(0, 255, (40, 4, 4, 3)), np.ones((1, 4, 4, 1))).astype(np.uint8)
    x, xt = smooth[:30], smooth[30:]
    y, yt = np.arange(30) % 3, np.arange(10) % 3
    for name, flat in {"pixels": lambda a: a.reshape(len(a), -1),
                       "planes": lambda a: a.transpose(0, 3, 1, 2).reshape(len(a), -1)}.items():
        path = write_npz(tmp_path / f"{name}.npz", x_train=flat(x), y_train=y, x_test=flat(xt), y_test=yt)
        got = read_npz(path)
        assert np.array_equal(got[0], x) and np.array_equal(got[2], xt), name
        info = get_info(str(path))
        assert info.input_shape == (16, 16, 3) and "flat rows of 768 values read as 16x16x3" in info.description
    grey = rng.integers(0, 255, (30, 28, 28), dtype=np.uint8)
    path = write_npz(tmp_path / "grey.npz", x_train=grey.reshape(30, 784), y_train=y,
                     x_test=grey[:10].reshape(10, 784), y_test=yt)
    assert np.array_equal(read_npz(path)[0][..., 0], grey) and get_info(str(path)).input_shape == (28, 28, 1)
    tabular = write_npz(tmp_path / "tabular.npz", x_train=rng.random((30, 54)), y_train=y,
                        x_test=rng.random((10, 54)), y_test=yt)
    with pytest.raises(DatasetFileError, match="tabular.npz: array x_train has flat rows of 54 values, which are "
                                               "not a square image"):
        get_info(str(tabular))


def test_npz_float_images_and_label_checks(tmp_path: Path) -> None:
    x = np.linspace(0, 1, 10 * 4 * 4 * 2, dtype=np.float64).reshape(10, 4, 4, 2)
    ok = write_npz(tmp_path / "ok.npz", x_train=x, y_train=np.arange(10) % 2, x_test=x[:4], y_test=np.arange(4) % 2)
    data = load(Workload(dataset=str(ok), model="mlp"))
    assert abs(float(data.x_train[..., 1].mean())) < 1e-5 and abs(float(data.x_train[..., 1].std()) - 1) < 1e-4
    bad = write_npz(tmp_path / "float_labels.npz", x_train=x, y_train=np.zeros(10) + 0.5, x_test=x[:4],
                    y_test=np.arange(4) % 2)
    with pytest.raises(DatasetFileError, match="float_labels.npz: labels y_train must be a 1-D integer array"):
        load(Workload(dataset=str(bad), model="mlp"))
    one = write_npz(tmp_path / "one.npz", x_train=x, y_train=np.full(10, 3), x_test=x[:4], y_test=np.full(4, 3))
    with pytest.raises(DatasetFileError, match="one.npz: has a single class"):
        get_info(str(one))
    missing = write_npz(tmp_path / "missing.npz", x_train=x, y_train=np.arange(10) % 2)
    with pytest.raises(DatasetFileError, match="missing.npz: lacks the array.* x_test, y_test"):
        get_info(str(missing))


def test_npz_labels_as_users_save_them_are_renumbered_to_one_output_per_class(tmp_path: Path) -> None:
    """Keras' (N, 1) label column, EMNIST letters' 1..K, a binary task's -1/+1 and whole-number
    floats all load as classes 0..C-1 with C outputs; scikit-learn's X_train spelling is found."""
    from advisor.datasets import read_npz

    rng = np.random.default_rng(0)
    x, xt = rng.random((12, 6, 6, 1)), rng.random((5, 6, 6, 1))
    y, yt = np.arange(12) % 3, np.arange(5) % 3
    plain = read_npz(write_npz(tmp_path / "plain.npz", x_train=x, y_train=y, x_test=xt, y_test=yt))
    assert plain[4] == 3 and plain[1].tolist() == y.tolist()
    stored = {"column": (y[:, None].astype(np.uint8), yt[:, None].astype(np.uint8)),
              "one_based": (y + 1, yt + 1),
              "signed": (2 * y - 2, 2 * yt - 2),  # -2, 0, 2: gaps too
              "floats": (y.astype(np.float32), yt.astype(np.float32))}
    for name, (ytr, yte) in stored.items():
        path = write_npz(tmp_path / f"{name}.npz", x_train=x, y_train=ytr, x_test=xt, y_test=yte)
        got = read_npz(path)
        assert got[4] == 3 and got[1].tolist() == y.tolist() and got[3].tolist() == yt.tolist(), name
        assert got[1].dtype == np.int64 and got[1].ndim == 1
        assert get_info(str(path)).num_classes == 3
    # a class that occurs only in the test split keeps its own number in both
    rare = read_npz(write_npz(tmp_path / "rare.npz", x_train=x, y_train=y + 1, x_test=xt,
                              y_test=np.array([0, 1, 2, 3, 1])))
    assert rare[4] == 4 and rare[1].tolist() == (y + 1).tolist() and rare[3].tolist() == [0, 1, 2, 3, 1]
    sk = tmp_path / "sk.npz"
    np.savez(sk, X_train=x, y_train=y, X_test=xt, y_test=yt)
    assert read_npz(sk)[0].shape == (12, 6, 6, 1) and get_info(str(sk)).input_shape == (6, 6, 1)
    column2 = write_npz(tmp_path / "two_columns.npz", x_train=x, y_train=np.stack([y, y], 1), x_test=xt, y_test=yt)
    with pytest.raises(DatasetFileError, match=r"labels y_train must be a 1-D array of class numbers or names \(or "
                                               r"one-hot rows\), got shape \(12, 2\) whose row 0 is not one-hot"):
        get_info(str(column2))
    # Keras' to_categorical rows (float32), or one-hot integers, load as the column of their 1
    hot = read_npz(write_npz(tmp_path / "one_hot.npz", x_train=x, y_train=np.eye(3, dtype=np.float32)[y], x_test=xt,
                             y_test=np.eye(3, dtype=np.uint8)[yt]))
    assert hot[4] == 3 and hot[1].tolist() == y.tolist() and hot[3].tolist() == yt.tolist() and hot[1].dtype == np.int64
    assert get_info(str(tmp_path / "one_hot.npz")).num_classes == 3
    soft = np.eye(3)[y] * 0.9 + 0.1 / 3  # label-smoothed rows are not one class each
    with pytest.raises(DatasetFileError, match=r"soft.npz: labels y_train .* row 0 is not one-hot"):
        read_npz(write_npz(tmp_path / "soft.npz", x_train=x, y_train=soft, x_test=xt, y_test=yt))
    # class names, as a CSV or a folder of images gives them, are numbered in sorted order (no pickle needed)
    names = np.array(["cat", "dog", "eel"])
    named = read_npz(write_npz(tmp_path / "named.npz", x_train=x, y_train=names[y], x_test=xt, y_test=names[yt]))
    assert named[4] == 3 and named[1].tolist() == y.tolist() and named[3].tolist() == yt.tolist()
    assert named[1].dtype == np.int64 and get_info(str(tmp_path / "named.npz")).num_classes == 3
    mixed = write_npz(tmp_path / "mixed.npz", x_train=x, y_train=names[y], x_test=xt, y_test=yt)
    with pytest.raises(DatasetFileError, match="both be class numbers or both class names"):
        read_npz(mixed)
    with pytest.raises(DatasetFileError, match="x_train has dtype <U3"):
        get_info(str(write_npz(tmp_path / "text_images.npz", x_train=np.full(x.shape, "abc"), y_train=y,
                               x_test=xt, y_test=yt)))


# ------------------------------------------------------------------ subsets and loading


def test_stratified_indices_quotas_and_determinism() -> None:
    labels = np.array([0] * 50 + [1] * 30 + [2] * 20)
    idx = stratified_indices(labels, 10, seed=1)
    assert np.bincount(labels[idx]).tolist() == [5, 3, 2]
    assert np.array_equal(idx, stratified_indices(labels, 10, seed=1))
    assert not np.array_equal(idx, stratified_indices(labels, 10, seed=2))
    assert np.all(np.diff(idx) > 0)  # sorted, no repeats
    # Largest remainder: 4 of [3, 3, 3] is 1.33 each; the extra place goes to the smallest label.
    assert np.bincount(np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])[stratified_indices(
        np.array([0, 0, 0, 1, 1, 1, 2, 2, 2]), 4, seed=0)]).tolist() == [2, 1, 1]
    assert stratified_indices(labels, 100, seed=5).tolist() == list(range(100))
    with pytest.raises(DatasetError, match=r"integer in \[1, 100\]"):
        stratified_indices(labels, 101, seed=0)


def test_load_subsets_are_deterministic_and_stratified(tmp_path: Path) -> None:
    folder = write_mnist(tmp_path / "mnist", mnist_arrays(n_train=200, n_test=100))
    work = Workload(dataset="mnist", model="mlp", train_samples=50, test_samples=20, data_dir=str(folder), seed=3)
    first, second = load(work), load(work)
    assert np.array_equal(first.x_train, second.x_train) and np.array_equal(first.y_test, second.y_test)
    assert first.fingerprint == second.fingerprint
    assert np.bincount(first.y_train).tolist() == [5] * 10
    assert np.bincount(first.y_test).tolist() == [2] * 10
    other_seed = load(Workload(dataset="mnist", model="mlp", train_samples=50, test_samples=20,
                               data_dir=str(folder), seed=4))
    assert not np.array_equal(other_seed.x_train, first.x_train)
    assert other_seed.fingerprint != first.fingerprint
    with pytest.raises(DatasetError, match="'train_samples' parameter of Workload must be at most 200"):
        load(Workload(dataset="mnist", model="mlp", train_samples=201, data_dir=str(folder)))


def test_load_standardises_with_train_statistics(tmp_path: Path) -> None:
    x_train = np.zeros((4, 28, 28), dtype=np.uint8)
    x_train[:2] = 2  # channel mean 1, std 1
    x_test = np.full((2, 28, 28), 4, dtype=np.uint8)
    arrays = (x_train, np.array([0, 1, 0, 1], np.uint8), x_test, np.array([0, 1], np.uint8))
    data = load(Workload(dataset="mnist", model="mlp", data_dir=str(write_mnist(tmp_path / "m", arrays))))
    assert data.x_train.dtype == np.float32 and data.x_train.shape == (4, 28, 28, 1)
    assert set(np.unique(data.x_train).tolist()) == {-1.0, 1.0}
    assert np.all(data.x_test == 3.0)  # (4 - 1) / 1, with the training statistics
    assert data.y_train.dtype == np.int64


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_mnist_from_data_dir_reads_plain_and_gz_alike(tmp_path: Path, name: str) -> None:
    arrays = mnist_arrays()
    gz = load(Workload(dataset=name, model="mlp", data_dir=str(write_mnist(tmp_path / "gz", arrays))))
    plain = load(Workload(dataset=name, model="mlp",
                          data_dir=str(write_mnist(tmp_path / "plain", arrays, compress=False))))
    assert np.array_equal(gz.x_train, plain.x_train)
    assert gz.y_train.tolist() == arrays[1].tolist()
    # The fingerprint hashes decompressed content, so the same data compressed or not is the same.
    assert gz.fingerprint == plain.fingerprint
    assert gz.variant.startswith(f"{name} IDX files, not the published ones (sha256 ")
    assert gz.info.train_size == 40 and gz.info.test_size == 20


def regzip(source: Path, dest: Path) -> Path:
    """Re-compress ``source``'s IDX files as a repackager does: same content, other gzip bytes."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.gz")):
        (dest / path.name).write_bytes(gzip.compress(gzip.decompress(path.read_bytes()), compresslevel=1, mtime=7))
        assert (dest / path.name).read_bytes() != path.read_bytes()
    return dest


def publish(monkeypatch: pytest.MonkeyPatch, name: str, folder: Path) -> None:
    """Make ``folder``'s IDX files the published release of ``name`` (both digests, as SOURCES declares)."""
    remotes = tuple(
        download_module.RemoteFile(r.name, r.urls, frozenset([hashlib.sha256((folder / r.name).read_bytes()).hexdigest()]),
                                   frozenset([hashlib.sha256(gzip.decompress((folder / r.name).read_bytes())).hexdigest()]))
        for r in download_module.SOURCES[name])
    monkeypatch.setitem(download_module.SOURCES, name, remotes)


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_regzipped_copy_is_official_through_its_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        name: str) -> None:
    published = write_mnist(tmp_path / "published")
    publish(monkeypatch, name, published)
    official = load(Workload(dataset=name, model="mlp", data_dir=str(published)))
    repackaged = load(Workload(dataset=name, model="mlp", data_dir=str(regzip(published, tmp_path / "debian"))))
    assert official.variant == repackaged.variant == "official"
    assert official.fingerprint == repackaged.fingerprint and official.notes == ()
    # Other content under the canonical names (one pixel changed) is read, but never called official.
    x_train, y_train, x_test, y_test = mnist_arrays()
    x_test[0, 0, 0] ^= 1
    other = load(Workload(dataset=name, model="mlp",
                          data_dir=str(write_mnist(tmp_path / "other", (x_train, y_train, x_test, y_test)))))
    assert other.variant.startswith(f"{name} IDX files, not the published ones (sha256 ")
    assert other.fingerprint != official.fingerprint and "differ from the published" in other.notes[0]


def test_fingerprint_follows_content(tmp_path: Path) -> None:
    arrays = mnist_arrays()
    folder = write_mnist(tmp_path / "m", arrays)
    before = load(Workload(dataset="mnist", model="mlp", data_dir=str(folder))).fingerprint
    changed = arrays[0].copy()
    changed[3, 10, 10] ^= 0xFF
    write_idx(folder / "train-images-idx3-ubyte.gz", changed)
    after = load(Workload(dataset="mnist", model="mlp", data_dir=str(folder))).fingerprint
    assert before != after and len(after) == 64
    subset = load(Workload(dataset="mnist", model="mlp", data_dir=str(folder), train_samples=20)).fingerprint
    assert subset not in (before, after)


def test_digest_cache_is_keyed_by_size_and_mtime(tmp_path: Path) -> None:
    folder = write_cifar_bin(tmp_path / "c", n_batches=1)
    batch = folder / "data_batch_1.bin"
    age(*folder.iterdir())
    work = Workload(dataset="cifar10", model="mlp", data_dir=str(folder))
    first = load(work)
    table = json.loads((Path(os.environ["ADVISOR_DATA"]) / "digests.json").read_text())
    assert table[str(batch.resolve())]["sha256"] == hashlib.sha256(batch.read_bytes()).hexdigest()
    # Change a pixel but keep size and mtime: the cached digest is (by design) trusted.
    stat = batch.stat()
    data = bytearray(batch.read_bytes())
    data[100] ^= 0xFF
    batch.write_bytes(bytes(data))
    os.utime(batch, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load(work).fingerprint == first.fingerprint
    # Any real modification moves the mtime, and the file is hashed again.
    age(batch, seconds=60)
    assert load(work).fingerprint != first.fingerprint


def test_cifar_partial_binary_variant_and_notes(tmp_path: Path) -> None:
    folder = write_cifar_bin(tmp_path / "cifar-10-batches-bin", n_batches=3, per_batch=20, n_test=10)
    data = load(Workload(dataset="cifar10", model="mlp", data_dir=str(tmp_path)))  # finds the sub-folder
    assert data.x_train.shape == (60, 32, 32, 3) and data.x_test.shape == (10, 32, 32, 3)
    assert data.variant.startswith("cifar-10-batches-bin: 3/5 train batches, 60 train + 10 test records (sha256 ")
    assert any("3 of 5 training batches" in n for n in data.notes)
    assert data.info.train_size == 60
    digests = [hashlib.sha256((folder / f).read_bytes()).hexdigest()[:8]
               for f in ("data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "test_batch.bin")]
    assert data.variant.endswith("(sha256 " + " ".join(digests) + ")")


def test_cifar_python_version_from_data_dir(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i in (1, 2):
        (folder / f"data_batch_{i}").write_bytes(cifar_pickle(*random_cifar(10, seed=i)))
    (folder / "test_batch").write_bytes(cifar_pickle(*random_cifar(5, seed=9)))
    data = load(Workload(dataset="cifar10", model="mlp", data_dir=str(folder)))
    assert data.x_train.shape == (20, 32, 32, 3)
    assert data.variant.startswith("cifar-10-batches-py: 2/5 train batches")
    assert data.y_train.tolist() == (list(range(10)) * 2)


def test_digits_split_is_fixed_and_stratified() -> None:
    data = load(Workload(dataset="digits", model="mlp"))
    assert data.x_train.shape == (1437, 8, 8, 1) and data.x_test.shape == (360, 8, 8, 1)
    assert np.bincount(data.y_test).min() >= 35 and np.bincount(data.y_test).max() <= 37
    again = load(Workload(dataset="digits", model="mlp", seed=9))
    assert np.array_equal(again.y_test, data.y_test) and again.fingerprint == data.fingerprint
    from sklearn.datasets import load_digits

    target = load_digits().target
    assert sorted(np.concatenate([data.y_train, data.y_test]).tolist()) == sorted(target.tolist())
    subset = load(Workload(dataset="digits", model="mlp", train_samples=100, seed=1))
    assert np.bincount(subset.y_train).tolist() == [10] * 10


def test_synthetic_is_marked_and_sized_by_the_workload() -> None:
    data = load(Workload(dataset="synthetic:8x6x2", model="mlp"))
    assert data.variant == "synthetic" and data.info.synthetic
    assert data.x_train.shape == (2000, 8, 6, 2) and data.x_test.shape == (500, 8, 6, 2)
    assert data.y_train.min() >= 0 and data.y_train.max() <= 9
    big = load(Workload(dataset="synthetic:4x4x1", model="mlp", train_samples=3000, test_samples=10, seed=2))
    assert big.x_train.shape[0] == 3000 and big.info.train_size == 3000
    again = load(Workload(dataset="synthetic:4x4x1", model="mlp", train_samples=3000, test_samples=10, seed=2))
    assert np.array_equal(big.x_train, again.x_train) and big.fingerprint == again.fingerprint
    assert big.fingerprint != load(Workload(dataset="synthetic:4x4x1", model="mlp", seed=2)).fingerprint


def test_missing_cache_without_download_names_the_file() -> None:
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset="mnist", model="mlp"), download=False)
    text = str(exc.value)
    assert "train-images-idx3-ubyte.gz: the file does not exist" in text
    assert "advisor datasets download mnist" in text and "\n" not in text


# ------------------------------------------------------------------------- real files


def test_real_cifar_lossless_subset() -> None:
    folder = SHARED / "cifar-10-lossless-subset"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing: the shared real-data folder is not on this machine")
    images, labels, _ = read_cifar_binary(folder / "data_batch_1.bin")
    assert images.shape == (4000, 32, 32, 3) and labels.shape == (4000,)
    assert labels[0] == 6  # the first training image of CIFAR-10 is a frog
    assert labels.min() == 0 and labels.max() == 9
    test_images, test_labels, _ = read_cifar_binary(folder / "test_batch.bin")
    assert test_images.shape == (1000, 32, 32, 3) and set(test_labels.tolist()) == set(range(10))
    data = load(Workload(dataset="cifar10", model="mlp", data_dir=str(folder), train_samples=500, test_samples=100))
    assert data.x_train.shape == (500, 32, 32, 3) and "1/5 train batches" in data.variant
    assert data.variant != "official"


def test_the_jpeg_derived_cifar_copy_says_so_in_its_variant() -> None:
    folder = SHARED / "cifar-10-batches-bin"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing: the shared real-data folder is not on this machine")
    data = load(Workload(dataset="cifar10", model="mlp", data_dir=str(folder), train_samples=100, test_samples=100),
                download=False)
    assert data.variant.startswith("cifar-10-batches-bin: 3/5 train batches") and "JPEG-derived" in data.variant
    lossless = load(Workload(dataset="cifar10", model="mlp", data_dir=str(SHARED / "cifar-10-lossless-subset"),
                             train_samples=100, test_samples=100), download=False)
    assert "JPEG" not in lossless.variant


def test_real_mnist_from_data_dir() -> None:
    folder = SHARED / "mnist"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing: the shared real-data folder is not on this machine")
    data = load(Workload(dataset="mnist", model="mlp", data_dir=str(folder)))
    assert data.x_train.shape == (60_000, 28, 28, 1) and data.x_test.shape == (10_000, 28, 28, 1)
    assert data.y_train.min() == 0 and data.y_train.max() == 9 and data.y_test.max() == 9
    assert data.y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    # Re-compressed .gz files with the published content: recognised through the content digests.
    assert data.variant == "official"
    assert abs(float(data.x_train.mean())) < 1e-4 and abs(float(data.x_train.std()) - 1) < 1e-3


def test_real_fashion_mnist_from_data_dir_and_a_regzipped_copy(tmp_path: Path) -> None:
    folder = SHARED / "fashion-mnist"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing: the shared real-data folder is not on this machine")
    data = load(Workload(dataset="fashion-mnist", model="mlp", data_dir=str(folder)))
    assert data.x_train.shape == (60_000, 28, 28, 1) and data.x_test.shape == (10_000, 28, 28, 1)
    assert np.bincount(data.y_train).tolist() == [6_000] * 10 and np.bincount(data.y_test).tolist() == [1_000] * 10
    assert data.y_train[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]  # ankle boot, T-shirt, T-shirt, dress...
    assert data.variant == "official"  # the downloads as served: their .gz digests match
    # Debian's dataset-fashion-mnist re-gzips the same bytes: accepted through the content digests.
    repackaged = load(Workload(dataset="fashion-mnist", model="mlp", data_dir=str(regzip(folder, tmp_path / "deb"))))
    assert repackaged.variant == "official" and repackaged.fingerprint == data.fingerprint


# --------------------------------------------------------------------------- downloads


class _Server:
    """A local HTTP server over a folder, with Range support and switchable faults."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[tuple[str, str | None]] = []
        self.ignore_range = False
        self.cut_after: dict[str, int] = {}  # file -> bytes sent before the connection drops (once)
        self.delay_s = 0.0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                name = self.path.lstrip("/")
                server.requests.append((name, self.headers.get("Range")))
                path = server.root / name
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                start = 0
                rng = self.headers.get("Range")
                if rng and not server.ignore_range:
                    start = int(rng.split("=")[1].rstrip("-"))
                    if start >= len(data):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = server.cut_after.pop(name, None)
                if server.delay_s:
                    time.sleep(server.delay_s)
                self.wfile.write(body if cut is None else body[:cut])
                self.wfile.flush()
                if cut is not None:
                    self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def full_gets(self, name: str) -> int:
        return sum(1 for n, r in self.requests if n == name and r is None)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    root = tmp_path / "served"
    root.mkdir()
    srv = _Server(root)
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _payload(n: int = 300_000, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_download_verifies_and_writes_atomically(server: _Server, tmp_path: Path) -> None:
    data = _payload()
    (server.root / "blob.bin").write_bytes(data)
    seen: list[tuple[str, int, int | None]] = []
    dest = datasets.download_file(f"{server.url}/blob.bin", tmp_path / "cache" / "blob.bin",
                                  sha256={hashlib.sha256(data).hexdigest()},
                                  progress=lambda f, d, t: seen.append((f, d, t)))
    assert dest.read_bytes() == data
    assert not (tmp_path / "cache" / "blob.bin.part").exists()
    assert seen[-1] == ("blob.bin", len(data), len(data))
    # A second call finds the verified file and does not fetch again.
    datasets.download_file(f"{server.url}/blob.bin", dest, sha256={hashlib.sha256(data).hexdigest()})
    assert server.full_gets("blob.bin") == 1


def test_download_checksum_mismatch_deletes_and_names_everything(server: _Server, tmp_path: Path) -> None:
    data = _payload()
    (server.root / "blob.bin").write_bytes(data)
    url = f"{server.url}/blob.bin"
    with pytest.raises(ChecksumError) as exc:
        datasets.download_file(url, tmp_path / "blob.bin", sha256={"0" * 64})
    text = str(exc.value)
    assert url in text and "0" * 64 in text and hashlib.sha256(data).hexdigest() in text
    assert not (tmp_path / "blob.bin").exists() and not (tmp_path / "blob.bin.part").exists()


def test_download_accepts_the_decompressed_digest(server: _Server, tmp_path: Path) -> None:
    content = _payload(50_000)
    recompressed = gzip.compress(content, compresslevel=1, mtime=123)
    (server.root / "t.gz").write_bytes(recompressed)
    official_gz = hashlib.sha256(gzip.compress(content, compresslevel=9, mtime=0)).hexdigest()
    assert official_gz != hashlib.sha256(recompressed).hexdigest()
    dest = datasets.download_file(f"{server.url}/t.gz", tmp_path / "t.gz", sha256={official_gz},
                                  content_sha256={hashlib.sha256(content).hexdigest()})
    assert gzip.decompress(dest.read_bytes()) == content


def test_interrupted_download_resumes_with_a_range_request(server: _Server, tmp_path: Path) -> None:
    data = _payload()
    (server.root / "blob.bin").write_bytes(data)
    server.cut_after["blob.bin"] = 100_000
    url, digest = f"{server.url}/blob.bin", {hashlib.sha256(data).hexdigest()}
    with pytest.raises(DatasetError, match="interrupted after 100,000 of 300,000 bytes; run it again to resume"):
        datasets.download_file(url, tmp_path / "blob.bin", sha256=digest)
    assert (tmp_path / "blob.bin.part").stat().st_size == 100_000
    datasets.download_file(url, tmp_path / "blob.bin", sha256=digest)
    assert (tmp_path / "blob.bin").read_bytes() == data
    assert server.requests[-1] == ("blob.bin", "bytes=100000-")


def test_download_restarts_when_the_server_ignores_range(server: _Server, tmp_path: Path) -> None:
    data = _payload()
    (server.root / "blob.bin").write_bytes(data)
    (tmp_path / "blob.bin.part").write_bytes(data[:5000])
    server.ignore_range = True
    datasets.download_file(f"{server.url}/blob.bin", tmp_path / "blob.bin", sha256={hashlib.sha256(data).hexdigest()})
    assert (tmp_path / "blob.bin").read_bytes() == data


def test_bad_partial_file_is_restarted_from_scratch(server: _Server, tmp_path: Path) -> None:
    data = _payload()
    (server.root / "blob.bin").write_bytes(data)
    (tmp_path / "blob.bin.part").write_bytes(b"\x00" * 5000)  # not a prefix of the real file
    datasets.download_file(f"{server.url}/blob.bin", tmp_path / "blob.bin", sha256={hashlib.sha256(data).hexdigest()})
    assert (tmp_path / "blob.bin").read_bytes() == data
    assert [r for _, r in server.requests] == ["bytes=5000-", None]


def test_download_http_error_is_one_line(server: _Server, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"Download of http://127\.0\.0\.1:\d+/absent\.bin failed: HTTP 404"):
        datasets.download_file(f"{server.url}/absent.bin", tmp_path / "absent.bin", sha256={"0" * 64})


def test_concurrent_downloads_fetch_once(server: _Server, tmp_path: Path) -> None:
    data = _payload(200_000)
    (server.root / "blob.bin").write_bytes(data)
    server.delay_s = 1.0  # the first holder keeps the lock while the others start
    code = ("import sys; from advisor.datasets import download_file; "
            "download_file(sys.argv[1], sys.argv[2], sha256={sys.argv[3]})")
    args = [f"{server.url}/blob.bin", str(tmp_path / "shared" / "blob.bin"), hashlib.sha256(data).hexdigest()]
    procs = [subprocess.Popen([sys.executable, "-c", code, *args], stderr=subprocess.PIPE) for _ in range(3)]
    for p in procs:
        _, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr.decode()
    assert (tmp_path / "shared" / "blob.bin").read_bytes() == data
    assert server.full_gets("blob.bin") == 1
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["blob.bin", "blob.bin.lock"]


def _remote_for(path: Path, name: str) -> download_module.RemoteFile:
    return download_module.RemoteFile(name, ("http://invalid.example/" + name,),
                                      frozenset([hashlib.sha256(path.read_bytes()).hexdigest()]))


def test_download_dataset_mnist_then_load_from_cache(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    write_mnist(server.root)
    remotes = tuple(_remote_for(server.root / r.name, r.name) for r in download_module.SOURCES["mnist"])
    monkeypatch.setitem(download_module.SOURCES, "mnist", remotes)
    folder = datasets.download_dataset("mnist", mirror=server.url)
    assert folder == Path(os.environ["ADVISOR_DATA"]) / "mnist"
    data = load(Workload(dataset="mnist", model="mlp"), download=False)
    assert data.x_train.shape == (40, 28, 28, 1) and data.y_test.tolist() == list(range(10)) * 2


@pytest.mark.parametrize(("name", "gz", "content"), [("mnist", "440fcabf", "ba891046"),
                                                     ("fashion-mnist", "3aede38d", "c59f468a")])
def test_download_dataset_with_the_published_digests_rejects_other_files(server: _Server, name: str, gz: str,
                                                                          content: str) -> None:
    write_mnist(server.root)  # not the real dataset: the published digests cannot match
    with pytest.raises(ChecksumError, match=r"Checksum mismatch for http://127.0.0.1:\d+/train-images-idx3-ubyte.gz: "
                                            rf"expected sha256 {gz}.*or gunzipped {content}"):
        datasets.download_dataset(name, mirror=server.url)
    folder = Path(os.environ["ADVISOR_DATA"]) / name
    assert sorted(p.name for p in folder.iterdir()) == ["train-images-idx3-ubyte.gz.lock"]


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_download_dataset_accepts_a_regzipped_mirror(server: _Server, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    publish(monkeypatch, name, write_mnist(tmp_path / "published"))
    regzip(tmp_path / "published", server.root)
    folder = datasets.download_dataset(name, mirror=server.url)
    assert folder == Path(os.environ["ADVISOR_DATA"]) / name
    assert load(Workload(dataset=name, model="mlp"), download=False).variant == "official"


def _cifar_tarball(path: Path, source: Path, extra: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for file in sorted(source.iterdir()):
            tar.add(file, arcname=f"cifar-10-batches-bin/{file.name}")
        for name, data in extra.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_download_cifar10_extracts_safely_and_is_official(server: _Server, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_cifar_bin(tmp_path / "src", n_batches=5, per_batch=4, n_test=3)
    archive = server.root / "cifar-10-binary.tar.gz"
    _cifar_tarball(archive, source, {"../escape.bin": b"x" * 10, "cifar-10-batches-bin/evil.py": b"print()"})
    monkeypatch.setitem(download_module.SOURCES, "cifar10", (_remote_for(archive, archive.name),))
    cache = tmp_path / "cache"
    folder = datasets.download_dataset("cifar10", cache_dir=cache, mirror=server.url)
    assert folder == cache / "cifar10" / "cifar-10-batches-bin"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(
        [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin", "batches.meta.txt"])
    assert not (cache / "escape.bin").exists() and not (cache / "cifar10" / "escape.bin").exists()
    assert not (cache / "cifar10" / archive.name).exists()  # the archive is dropped once extracted
    monkeypatch.setenv("ADVISOR_DATA", str(cache))
    data = load(Workload(dataset="cifar10", model="mlp"), download=False)
    assert data.variant == "official" and data.notes == ()
    assert data.x_train.shape == (20, 32, 32, 3)
    # A later edit of a verified batch is noticed: no longer official, new fingerprint.
    batch = folder / "data_batch_2.bin"
    raw = bytearray(batch.read_bytes())
    raw[5] ^= 1
    batch.write_bytes(bytes(raw))
    edited = load(Workload(dataset="cifar10", model="mlp"), download=False)
    assert edited.variant.startswith("cifar-10-batches-bin: 5/5") and edited.fingerprint != data.fingerprint


def test_standardise_takes_uint8_data_past_two_to_the_64() -> None:
    """The exact integer statistics of uint8 data outgrow 64 bits past about 35 million values a
    channel (all of Fashion-MNIST at 32x32x3 is past it): numpy's sqrt then raised a
    TypeError and every trial on such data failed. Half black and half white: mean 127.5, std 127.5."""
    from advisor.datasets import standardise

    x = np.zeros((34000, 32, 32, 1), dtype=np.uint8)
    x[::2] = 255
    train, test = standardise(x, x[:4])
    assert train.dtype == np.float32 and abs(float(train[0].mean()) - 1.0) < 1e-6  # (255 - 127.5) / 127.5
    assert abs(float(train[1].mean()) + 1.0) < 1e-6
