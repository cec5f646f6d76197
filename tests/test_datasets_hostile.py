"""Hostile and malformed dataset files: each gets one DatasetFileError line that names the file.

Includes property-based tests: random, truncated and mutated bytes fed to the IDX and CIFAR-10
readers must give valid arrays or DatasetFileError, never another exception, and never a large
allocation (measured with tracemalloc, which sees numpy's buffers).
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import tempfile
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.datasets import get_info, load, read_cifar_binary, read_cifar_python, read_idx
from advisor.errors import DatasetFileError
from advisor.records import Workload
from test_datasets import cifar_bytes, cifar_pickle, idx_bytes, random_cifar, write_cifar_bin, write_mnist

MAX_ALLOC = 64 << 20  # far below what any declared size in these tests would need


def _one_line_naming(exc: pytest.ExceptionInfo[DatasetFileError], path: Path, *phrases: str) -> str:
    text = str(exc.value)
    assert "\n" not in text
    assert str(path) in text, text
    for phrase in phrases:
        assert phrase in text, text
    return text


# -------------------------------------------------------------------------------- IDX


def test_idx_wrong_magic(tmp_path: Path) -> None:
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(b"\x12\x34\x56\x78" + b"\x00" * 100)
    with pytest.raises(DatasetFileError) as exc:
        read_idx(path)
    _one_line_naming(exc, path, "is not an IDX file", "12 34 56 78")


def test_idx_truncated_plain_and_gz(tmp_path: Path) -> None:
    data = idx_bytes(np.zeros((10, 28, 28), np.uint8))
    plain, packed = tmp_path / "plain", tmp_path / "packed.gz"
    plain.write_bytes(data[:-100])
    with pytest.raises(DatasetFileError) as exc:
        read_idx(plain)
    _one_line_naming(exc, plain, "is truncated", "10x28x28", "7,856 bytes")
    compressed = gzip.compress(data)
    packed.write_bytes(compressed[: len(compressed) // 2])
    with pytest.raises(DatasetFileError) as exc:
        read_idx(packed)
    _one_line_naming(exc, packed, "truncated")


def test_idx_gz_whose_content_is_short(tmp_path: Path) -> None:
    path = tmp_path / "short.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((10, 4, 4), np.uint8))[:-5]))  # complete gzip, short IDX
    with pytest.raises(DatasetFileError) as exc:
        read_idx(path)
    _one_line_naming(exc, path, "is truncated", "data ends early")


def test_idx_longer_than_declared(tmp_path: Path) -> None:
    path = tmp_path / "long"
    path.write_bytes(idx_bytes(np.zeros((2, 3), np.uint8)) + b"extra")
    with pytest.raises(DatasetFileError) as exc:
        read_idx(path)
    _one_line_naming(exc, path, "longer than declared")


@pytest.mark.parametrize("compress", [False, True])
def test_idx_terabyte_declaration_is_refused_before_allocating(tmp_path: Path, compress: bool) -> None:
    header = struct.pack(">BBBBIII", 0, 0, 0x08, 3, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFF)  # ~1.2e24 bytes
    path = tmp_path / ("huge.gz" if compress else "huge")
    body = header + b"\x00" * 4096
    path.write_bytes(gzip.compress(body) if compress else body)
    tracemalloc.start()
    try:
        with pytest.raises(DatasetFileError) as exc:
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_ALLOC
    _one_line_naming(exc, path, "4294967295x4294967295x65535")


def test_idx_not_gzip_but_gzip_magic(tmp_path: Path) -> None:
    path = tmp_path / "fake.gz"
    path.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    with pytest.raises(DatasetFileError) as exc:
        read_idx(path)
    _one_line_naming(exc, path, "gzip")


def test_mnist_label_count_mismatch_names_the_labels_file(tmp_path: Path) -> None:
    folder = write_mnist(tmp_path / "m")
    labels = folder / "train-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(idx_bytes(np.zeros(39, np.uint8))))
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset="mnist", model="mlp", data_dir=str(folder)))
    _one_line_naming(exc, labels, "holds 39 labels but train-images-idx3-ubyte.gz holds 40 images")


def test_mnist_swapped_files_are_caught(tmp_path: Path) -> None:
    folder = write_mnist(tmp_path / "m")
    images, labels = folder / "t10k-images-idx3-ubyte.gz", folder / "t10k-labels-idx1-ubyte.gz"
    data = images.read_bytes()
    images.write_bytes(labels.read_bytes())
    labels.write_bytes(data)
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset="mnist", model="mlp", data_dir=str(folder)))
    _one_line_naming(exc, images, "is this an images file?")


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_mnist_missing_file_in_data_dir(tmp_path: Path, name: str) -> None:
    folder = write_mnist(tmp_path / "m")
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset=name, model="mlp", data_dir=str(folder)))
    _one_line_naming(exc, folder / "t10k-labels-idx1-ubyte.gz", "does not exist", f"advisor datasets download {name}")


def test_fashion_mnist_label_out_of_range_names_the_labels_file(tmp_path: Path) -> None:
    folder = write_mnist(tmp_path / "f")
    labels = folder / "t10k-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(idx_bytes(np.full(20, 10, np.uint8))))  # 20 labels, all out of 0-9
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset="fashion-mnist", model="mlp", data_dir=str(folder)))
    _one_line_naming(exc, labels, "holds label 10; this dataset's labels are 0-9")


def test_data_dir_that_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset="mnist", model="mlp", data_dir=str(tmp_path / "nowhere")))
    _one_line_naming(exc, tmp_path / "nowhere", "is not a folder")


# ------------------------------------------------------------------------------ CIFAR


def test_cifar_binary_partial_record(tmp_path: Path) -> None:
    path = tmp_path / "data_batch_1.bin"
    path.write_bytes(cifar_bytes(*random_cifar(3, seed=0))[:-10])
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_binary(path)
    _one_line_naming(exc, path, "9,209 bytes", "2 records and 3,063 stray bytes")


def test_cifar_binary_empty_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "test_batch.bin"
    path.write_bytes(b"")
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_binary(path)
    _one_line_naming(exc, path, "0 bytes")
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_binary(tmp_path / "absent.bin")
    _one_line_naming(exc, tmp_path / "absent.bin", "does not exist")


def test_cifar_binary_label_out_of_range(tmp_path: Path) -> None:
    planes, labels = random_cifar(4, seed=1)
    labels[2] = 57
    path = tmp_path / "data_batch_1.bin"
    path.write_bytes(cifar_bytes(planes, labels))
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_binary(path)
    _one_line_naming(exc, path, "record 2 has label 57", "CIFAR-100")


def test_cifar_folder_without_test_batch(tmp_path: Path) -> None:
    folder = write_cifar_bin(tmp_path / "c", n_batches=2)
    (folder / "test_batch.bin").unlink()
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset="cifar10", model="mlp", data_dir=str(folder)))
    _one_line_naming(exc, folder / "test_batch.bin", "test batch is missing")


def test_cifar_folder_with_nothing(tmp_path: Path) -> None:
    with pytest.raises(DatasetFileError) as exc:
        load(Workload(dataset="cifar10", model="mlp", data_dir=str(tmp_path)))
    _one_line_naming(exc, tmp_path / "data_batch_1.bin", "no CIFAR-10 batches found")


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": _Exploit(marker), b"labels": [1]}, protocol=2))
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_python(path)
    text = _one_line_naming(exc, path, "refused as unsafe", "system")
    assert "posix.system" in text or "os.system" in text
    assert not marker.exists()
    # Through the loader too: a data_dir holding a poisoned python-version batch.
    (tmp_path / "test_batch").write_bytes(cifar_pickle(*random_cifar(2, seed=0)))
    with pytest.raises(DatasetFileError, match="refused as unsafe"):
        load(Workload(dataset="cifar10", model="mlp", data_dir=str(tmp_path)))
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    b"cbuiltins\neval\n(V1+1\ntR.",                       # a builtin callable
    b"csubprocess\ncheck_output\n(](Vid\neatR.",         # another module entirely
    b"cnumpy\nload\n(Vx\ntR.",                            # a numpy function that is not allowed
    b"cnumpy\nndarray\n((I1000000000000\ntR.",             # calling ndarray directly (a 1 TB array)
    b"cnumpy\ndtype\n(VO\ntR.",                          # an object dtype
])
def test_restricted_unpickler_refuses_everything_else(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "data_batch_1"
    path.write_bytes(payload)
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_python(path)
    _one_line_naming(exc, path)


def test_pickled_array_larger_than_the_file_is_refused(tmp_path: Path) -> None:
    payload = (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n"
               b"J\x00\xca\x9a\x3b\x85U\x01B\x87R.")  # shape (1e9,): refused before numpy allocates it
    path = tmp_path / "data_batch_1"
    path.write_bytes(payload)
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_python(path)
    _one_line_naming(exc, path, "larger than the file")


def test_pickled_byte_array_longer_than_the_file_is_refused(tmp_path: Path) -> None:
    # Protocol 5's BYTEARRAY8 carries an 8-byte length that the stock unpickler allocates first.
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x05\x96" + struct.pack("<Q", 1 << 40) + b"\x00" * 16 + b".")
    tracemalloc.start()
    try:
        with pytest.raises(DatasetFileError) as exc:
            read_cifar_python(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_ALLOC
    _one_line_naming(exc, path, "byte array of 1,099,511,627,776 bytes is larger than the file")


@pytest.mark.parametrize("batch,phrase", [
    ([1, 2, 3], "holds a list, not a dict"),
    ({b"data": np.zeros((2, 3072), np.uint8)}, "lacks 'data' or 'labels'"),
    ({b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [1, 2]}, "CIFAR-100"),
    ({b"data": np.zeros((2, 100), np.uint8), b"labels": [1, 2]}, "shape (N, 3072)"),
    ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1]}, "'labels' must be 2 integers"),
    ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 12]}, "record 1 has label 12"),
])
def test_malformed_python_batches(tmp_path: Path, batch: object, phrase: str) -> None:
    path = tmp_path / "data_batch_3"
    path.write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(DatasetFileError) as exc:
        read_cifar_python(path)
    _one_line_naming(exc, path, phrase)


# -------------------------------------------------------------------------------- npz


def test_npz_object_arrays_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "objects.npz"
    x = np.empty(4, dtype=object)
    x[:] = [np.zeros((2, 2))] * 4
    np.savez(path, x_train=x, y_train=np.arange(4), x_test=x, y_test=np.arange(4))
    for call in (get_info, lambda p: load(Workload(dataset=p, model="mlp"))):
        with pytest.raises(DatasetFileError) as exc:
            call(str(path))
        _one_line_naming(exc, path, "array x_train has dtype object", "pickle")


def test_npz_header_declaring_a_huge_array(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (10**9, 28, 28)})
    member = buffer.getvalue() + b"\x00" * 64
    small = io.BytesIO()
    np.save(small, np.arange(3))
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x_train.npy", member)
        for key in ("y_train", "x_test", "y_test"):
            archive.writestr(f"{key}.npy", small.getvalue())
    tracemalloc.start()
    try:
        with pytest.raises(DatasetFileError) as exc:
            load(Workload(dataset=str(path), model="mlp"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_ALLOC
    _one_line_naming(exc, path, "declares shape (1000000000, 28, 28)")


def test_npz_not_a_zip_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "plain.npz"
    path.write_bytes(b"not a zip at all")
    with pytest.raises(DatasetFileError) as exc:
        get_info(str(path))
    _one_line_naming(exc, path, "is not an .npz (zip) file")
    with pytest.raises(DatasetFileError) as exc:
        get_info(str(tmp_path / "absent.npz"))
    _one_line_naming(exc, tmp_path / "absent.npz", "does not exist")


def test_npz_length_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "mismatch.npz"
    np.savez(path, x_train=np.zeros((5, 3, 3), np.uint8), y_train=np.arange(4), x_test=np.zeros((2, 3, 3)),
             y_test=np.arange(2))
    with pytest.raises(DatasetFileError) as exc:
        get_info(str(path))
    _one_line_naming(exc, path, "x_train has 5 samples but y_train has 4 labels")


# --------------------------------------------------------------------- property-based

_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read_bounded(reader, data: bytes, name: str) -> object:  # type: ignore[no-untyped-def]
    """Run ``reader`` on a file holding ``data``; only arrays or DatasetFileError may come out."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        tracemalloc.start()
        try:
            try:
                result = reader(path)
            except DatasetFileError as exc:
                assert str(path) in str(exc) and "\n" not in str(exc)
                result = None
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < MAX_ALLOC + 8 * len(data), peak
    return result


def _valid_idx() -> bytes:
    return idx_bytes(np.arange(2 * 5 * 4, dtype=np.uint8).reshape(2, 5, 4))


@st.composite
def idx_like(draw: st.DrawFn) -> bytes:
    """Random bytes, or a valid IDX file truncated, extended or with header bytes overwritten."""
    kind = draw(st.sampled_from(["random", "truncated", "mutated", "header"]))
    valid = _valid_idx()
    if kind == "random":
        return draw(st.binary(max_size=300))
    if kind == "truncated":
        return valid[: draw(st.integers(0, len(valid)))]
    if kind == "header":  # plausible magic with arbitrary (possibly gigantic) dimensions
        ndim = draw(st.integers(1, 4))
        dims = draw(st.lists(st.integers(0, 2**32 - 1), min_size=ndim, max_size=ndim))
        return bytes([0, 0, draw(st.sampled_from([8, 9, 11, 12, 13, 14])), ndim]) + b"".join(
            struct.pack(">I", d) for d in dims) + draw(st.binary(max_size=200))
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        data[draw(st.integers(0, 15))] = draw(st.integers(0, 255))
    return bytes(data)


@_SETTINGS
@given(data=idx_like(), compress=st.booleans())
def test_idx_reader_never_misbehaves(data: bytes, compress: bool) -> None:
    raw = gzip.compress(data, mtime=0) if compress else data
    result = _read_bounded(read_idx, raw, "f.gz" if compress else "f")
    if result is not None:
        assert isinstance(result, np.ndarray)
        assert result.size * result.itemsize <= len(data)


@_SETTINGS
@given(prefix=st.integers(0, 400), valid=st.booleans())
def test_truncated_gzip_idx_never_misbehaves(prefix: int, valid: bool) -> None:
    noise = np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8).tobytes()
    raw = gzip.compress(_valid_idx() if valid else noise, mtime=0)
    result = _read_bounded(read_idx, raw[:prefix], "t.gz")
    if result is not None:  # only the whole file reads, even a missing gzip trailer is caught
        assert valid and prefix >= len(raw)
        assert result.shape == (2, 5, 4)


@st.composite
def cifar_like(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["random", "records", "truncated"]))
    if kind == "random":
        return draw(st.binary(max_size=7000))
    records = cifar_bytes(*random_cifar(draw(st.integers(1, 2)), seed=0))
    if kind == "truncated":
        return records[: draw(st.integers(0, len(records)))]
    data = bytearray(records)
    data[0] = draw(st.integers(0, 255))  # any label byte
    return bytes(data)


@_SETTINGS
@given(data=cifar_like())
def test_cifar_binary_reader_never_misbehaves(data: bytes) -> None:
    result = _read_bounded(lambda p: read_cifar_binary(p), data, "data_batch_1.bin")
    if result is not None:
        images, labels, _ = result  # type: ignore[misc]
        assert images.shape == (len(data) // 3073, 32, 32, 3)
        assert labels.min() >= 0 and labels.max() <= 9


@st.composite
def pickle_like(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["random", "truncated", "mutated"]))
    valid = cifar_pickle(*random_cifar(1, seed=0), protocol=draw(st.sampled_from([2, 4, 5])))
    if kind == "random":
        return draw(st.binary(max_size=500))
    if kind == "truncated":
        return valid[: draw(st.integers(0, len(valid)))]
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 6))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@_SETTINGS
@given(data=pickle_like())
def test_cifar_python_reader_never_misbehaves(data: bytes) -> None:
    result = _read_bounded(lambda p: read_cifar_python(p), data, "data_batch_1")
    if result is not None:
        images, labels, _ = result  # type: ignore[misc]
        assert images.shape[1:] == (32, 32, 3) and len(images) == len(labels)
