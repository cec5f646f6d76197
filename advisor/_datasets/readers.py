"""Readers for the canonical file formats: IDX (MNIST), CIFAR-10 binary and python, and ``.npz``.

Every reader treats its file as hostile. Sizes a header declares are checked against the real
file size before anything is allocated, and every defect (a missing file, a wrong magic number,
a truncated record, a label out of range) raises :class:`~advisor.errors.DatasetFileError` with
one line that names the file, what is wrong and how to fix it. The readers return ``uint8`` NHWC
images and integer labels; standardising and subsetting happen in the loader.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from advisor.errors import DatasetFileError

__all__ = [
    "FIX",
    "file_error",
    "IdxData",
    "read_idx",
    "read_idx_file",
    "CIFAR_RECORD",
    "read_cifar_binary",
    "read_cifar_python",
    "read_npz",
    "npz_info",
]

FIX = "replace it with an intact copy of the dataset (for example `advisor datasets download NAME`)"
_IDX_DTYPES: dict[int, np.dtype[Any]] = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
               0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_MAX_IDX_DIMS = 8
# Deflate cannot expand data by more than about 1032:1, so a gzip file of n bytes holds at most
# ~1032 n bytes; a header that declares more is lying, and is refused before any allocation.
_GZIP_MAX_RATIO = 1100
_CHUNK = 1 << 24
CIFAR_RECORD = 1 + 32 * 32 * 3
_NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


def file_error(path: str | os.PathLike[str], problem: str, fix: str = FIX) -> DatasetFileError:
    """One-line error: ``<file>: <what is wrong>; <how to fix it>.``"""
    return DatasetFileError(" ".join(f"{os.fspath(path)}: {problem}; {fix}.".split()))


def _stat_size(path: Path) -> int:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise file_error(path, "the file does not exist",
                         "check the path, or download the dataset with `advisor datasets download NAME`") from None
    except OSError as exc:
        raise file_error(path, f"cannot be read ({exc.strerror or exc})", "check its permissions") from None
    if not path.is_file():
        raise file_error(path, "is not a regular file", "point at the file itself, not a folder")
    return st.st_size


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise file_error(path, f"cannot be read ({exc.strerror or exc})", "check its permissions") from None


# ---------------------------------------------------------------------------------------- IDX


@dataclass(frozen=True)
class IdxData:
    """An IDX array plus the SHA-256 of its decompressed content (``None`` when not asked for)."""

    array: np.ndarray
    content_sha256: str | None


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (MNIST's format), gzipped or not; the compression is detected by content.

    Returns:
        The array with the declared shape, in native byte order.

    Raises:
        DatasetFileError: When the file is missing, not IDX, truncated or longer than declared.
    """
    return read_idx_file(path).array


def _read_exact(stream: BinaryIO, n: int, digest: Any) -> bytes | None:
    """Read ``n`` bytes in bounded chunks; ``None`` when the stream ends early."""
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(min(_CHUNK, n - got))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
        if digest is not None:
            digest.update(chunk)
    return b"".join(chunks)


def read_idx_file(path: str | os.PathLike[str], *, digest: bool = False) -> IdxData:
    """Like :func:`read_idx`, optionally hashing the decompressed content on the way."""
    path = Path(path)
    size = _stat_size(path)
    hasher = hashlib.sha256() if digest else None
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise file_error(path, f"cannot be read ({exc.strerror or exc})", "check its permissions") from None
    with raw:
        compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw  # type: ignore[assignment]
        try:
            return _parse_idx(path, stream, size, compressed, hasher)
        except DatasetFileError:  # already one line naming the file (it is an OSError too)
            raise
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise file_error(path, f"is not a valid gzip file ({exc})") from None
        except EOFError:
            raise file_error(path, "is truncated: its gzip stream ends before the end-of-stream marker") from None
        except OSError as exc:
            raise file_error(path, f"cannot be read ({exc.strerror or exc})") from None
        finally:
            if compressed:
                stream.close()


def _parse_idx(path: Path, stream: BinaryIO, size: int, compressed: bool, hasher: Any) -> IdxData:
    magic = _read_exact(stream, 4, hasher)
    if magic is None:
        raise file_error(path, f"is truncated: {size} bytes, too short for an IDX header")
    if magic[0] != 0 or magic[1] != 0 or magic[2] not in _IDX_DTYPES or not 1 <= magic[3] <= _MAX_IDX_DIMS:
        raise file_error(
            path, f"is not an IDX file: its magic number is {magic.hex(' ')}, expected 00 00 08 0N "
            "(unsigned bytes, N dimensions)")
    dtype, ndim = _IDX_DTYPES[magic[2]], magic[3]
    header = _read_exact(stream, 4 * ndim, hasher)
    if header is None:
        raise file_error(path, f"is truncated inside its header ({ndim} dimensions declared)")
    dims = tuple(int.from_bytes(header[4 * i: 4 * i + 4], "big") for i in range(ndim))
    payload = dtype.itemsize
    for d in dims:
        payload *= d
    declared = 4 + 4 * ndim + payload
    shape_text = "x".join(map(str, dims))
    if not compressed and declared != size:
        state = "truncated" if declared > size else "longer than declared"
        raise file_error(path, f"is {state}: its header declares {shape_text} items ({declared:,} bytes) "
                               f"but the file holds {size:,} bytes")
    if compressed and declared > size * _GZIP_MAX_RATIO:
        raise file_error(path, f"declares {shape_text} items ({declared:,} bytes), more than a gzip file "
                               f"of {size:,} bytes can hold: the header is corrupt")
    data = _read_exact(stream, payload, hasher)
    if data is None:
        raise file_error(path, f"is truncated: its header declares {shape_text} items ({declared:,} bytes "
                               "decompressed) but the data ends early")
    if stream.read(1):
        raise file_error(path, f"is longer than declared: data continues after the {shape_text} items "
                               "its header declares")
    # numpy refuses a shape whose nonzero dimensions overflow its index type even when another
    # dimension is 0 (so the payload is empty): say so here rather than let reshape raise.
    extent = dtype.itemsize
    for d in dims:
        extent *= max(d, 1)
    if extent > np.iinfo(np.intp).max:
        raise file_error(path, f"declares {shape_text} items, a shape too large for any array: the header "
                               "is corrupt")
    array = np.frombuffer(data, dtype=dtype).reshape(dims)
    if dtype.byteorder == ">":
        array = array.astype(dtype.newbyteorder("="))
    return IdxData(array, hasher.hexdigest() if hasher is not None else None)


# ------------------------------------------------------------------------------------ CIFAR-10


def _check_cifar_labels(path: Path, labels: np.ndarray) -> None:
    bad = np.flatnonzero((labels < 0) | (labels > 9))
    if bad.size:
        i = int(bad[0])
        raise file_error(path, f"record {i} has label {int(labels[i])}, but CIFAR-10 labels are 0-9 "
                               "(is this a CIFAR-100 file?)")


def _planes_to_nhwc(pixels: np.ndarray) -> np.ndarray:
    # Each record is 1,024 red, then 1,024 green, then 1,024 blue bytes, each plane row-major.
    planes = pixels.reshape(-1, 3, 32 * 32)
    return np.ascontiguousarray(np.swapaxes(planes, 1, 2)).reshape(-1, 32, 32, 3)


def read_cifar_binary(path: str | os.PathLike[str], *, digest: bool = True
                      ) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Read one CIFAR-10 binary batch (``data_batch_N.bin`` or ``test_batch.bin``).

    Returns:
        ``(images, labels, sha256)``: images ``(N, 32, 32, 3)`` uint8, labels ``(N,)`` int64 and
        the SHA-256 of the file (``None`` when ``digest`` is false).

    Raises:
        DatasetFileError: When the file is missing, empty, not whole records, or has a bad label.
    """
    path = Path(path)
    size = _stat_size(path)
    if size == 0 or size % CIFAR_RECORD:
        whole, extra = divmod(size, CIFAR_RECORD)
        raise file_error(path, f"holds {size:,} bytes, which is not a whole number of {CIFAR_RECORD:,}-byte "
                               f"records (1 label + 3,072 pixels): {whole:,} records and {extra:,} stray bytes, "
                               "so it is truncated or not a CIFAR-10 binary batch")
    raw = _read_bytes(path)
    if len(raw) != size:
        raise file_error(path, "changed size while it was being read", "retry once the file is complete")
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, CIFAR_RECORD)
    labels = records[:, 0].astype(np.int64)
    _check_cifar_labels(path, labels)
    return _planes_to_nhwc(records[:, 1:]), labels, hashlib.sha256(raw).hexdigest() if digest else None


def read_cifar_python(path: str | os.PathLike[str], *, digest: bool = True
                      ) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Read one CIFAR-10 python-version batch (``data_batch_N`` / ``test_batch`` pickles).

    The pickle goes through a restricted unpickler that builds only numpy numeric arrays and
    plain builtins; a pickle that names anything else (``os.system``...) is refused.

    Returns:
        ``(images, labels, sha256)`` as :func:`read_cifar_binary`.

    Raises:
        DatasetFileError: When the file is missing, unsafe, malformed or not a CIFAR-10 batch.
    """
    from advisor._datasets.unpickle import UnsafePickleError, restricted_loads

    path = Path(path)
    _stat_size(path)
    raw = _read_bytes(path)
    try:
        batch = restricted_loads(raw)
    except UnsafePickleError as exc:
        raise file_error(path, f"is refused as unsafe: {exc}",
                         "use the genuine cifar-10-python.tar.gz files or the binary version") from None
    except MemoryError:
        raise file_error(path, "is not a CIFAR-10 python batch: it asks for more memory than it holds") from None
    except Exception as exc:  # a malformed pickle stream raises almost anything
        raise file_error(path, f"is not a readable pickle ({type(exc).__name__}: {exc})") from None
    if not isinstance(batch, dict):
        raise file_error(path, f"is not a CIFAR-10 python batch: it holds a {type(batch).__name__}, not a dict")
    batch = {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in batch.items()}
    data, labels = batch.get("data"), batch.get("labels")
    if data is None or labels is None:
        hint = " (this looks like CIFAR-100)" if "fine_labels" in batch else ""
        raise file_error(path, f"is not a CIFAR-10 python batch: it lacks 'data' or 'labels'{hint}")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        shape = getattr(data, "shape", None)
        raise file_error(path, f"is not a CIFAR-10 python batch: 'data' must be a uint8 array of shape "
                               f"(N, 3072), got {type(data).__name__} {shape}")
    try:
        label_array = np.asarray(labels)
    except Exception:
        label_array = np.asarray([])
    if label_array.ndim != 1 or label_array.dtype.kind not in "iu" or len(label_array) != len(data):
        raise file_error(path, f"is not a CIFAR-10 python batch: 'labels' must be {len(data)} integers")
    label_array = label_array.astype(np.int64)
    _check_cifar_labels(path, label_array)
    return _planes_to_nhwc(data), label_array, hashlib.sha256(raw).hexdigest() if digest else None


# ----------------------------------------------------------------------------------------- npz

_NPZ_FIX = ("save it with np.savez(path, x_train=..., y_train=..., x_test=..., y_test=...): images as numbers "
            "(N, H, W), (N, H, W, C), (N, C, H, W) or flat (N, H*W[*3]), labels one class number or name "
            "per image (or a one-hot row)")


def _member_names(members: Any) -> dict[str, str]:
    """Each of the four arrays' name in the archive: as spelt, or in any case (scikit-learn's
    ``X_train`` is the same array)."""
    stored = [m[:-4] for m in members if m.endswith(".npy")]
    names = {}
    for key in _NPZ_KEYS:
        same = [m for m in stored if m == key] or [m for m in stored if m.lower() == key]
        if len(same) == 1:
            names[key] = same[0]
    return names


def _npz_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shapes and dtypes of the four arrays, from the member headers only, with size checks."""
    size = _stat_size(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise file_error(path, f"is not an .npz (zip) file ({exc})", _NPZ_FIX) from None
    headers = {}
    with archive:
        members = {info.filename: info for info in archive.infolist()}
        names = _member_names(members)
        missing = [k for k in _NPZ_KEYS if k not in names]
        if missing:
            raise file_error(path, f"lacks the array(s) {', '.join(missing)}; found "
                                   f"{', '.join(sorted(members)) or 'nothing'}", _NPZ_FIX)
        for key in _NPZ_KEYS:
            info = members[f"{names[key]}.npy"]
            ratio = _GZIP_MAX_RATIO if info.compress_type != zipfile.ZIP_STORED else 1
            if info.file_size > max(info.compress_size, 1) * ratio or info.compress_size > size:
                raise file_error(path, f"member {key} declares {info.file_size:,} bytes, more than it can hold")
            try:
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _fortran, dtype = read_header(member)
            except Exception as exc:
                raise file_error(path, f"member {key} has no valid .npy header ({exc})", _NPZ_FIX) from None
            if dtype.hasobject or dtype.kind not in ("biufUS" if key.startswith("y_") else "biuf"):
                raise file_error(path, f"array {key} has dtype {dtype} (object arrays would need pickle, and "
                                       "images must be numbers; labels may be numbers or strings)", _NPZ_FIX)
            count = dtype.itemsize
            for d in shape:
                count *= d
            if count > info.file_size:
                raise file_error(path, f"array {key} declares shape {shape} ({count:,} bytes) but its "
                                       f"member holds {info.file_size:,} bytes: the file is truncated or corrupt")
            headers[key] = (tuple(shape), dtype)
    return headers


#: Channel counts an image can have (grey, grey and alpha, RGB, RGBA).
_CHANNELS = (1, 2, 3, 4)


def channels_first(shape: tuple[int, ...]) -> bool:
    """Whether a 4-D image array's ``shape`` is PyTorch's ``(N, C, H, W)``, not ``(N, H, W, C)``:
    its second axis is a channel count and its last is not (an RGB image 3 pixels wide is not an
    image anyone trains on, while ``x.numpy()`` of a torch batch is channels-first)."""
    return len(shape) == 4 and shape[1] in _CHANNELS and shape[3] not in _CHANNELS


#: The narrowest image that flat rows are read as (8x8: scikit-learn's digits).
_MIN_FLAT_SIDE = 8


def flat_image_shape(values: int) -> tuple[int, int, int] | None:
    """The ``(H, W, C)`` image that flat rows of ``values`` numbers hold: a square grey image
    (``H * W``, such as MNIST's 784 as saved by OpenML or a CSV) or a square RGB one (``3 * H * W``,
    such as CIFAR-10's 3072); ``None`` for any other length (tabular features are not images)."""
    side = math.isqrt(values)
    if side * side == values and side >= _MIN_FLAT_SIDE:
        return side, side, 1
    side = math.isqrt(values // 3)
    if values % 3 == 0 and 3 * side * side == values and side >= _MIN_FLAT_SIDE:
        return side, side, 3
    return None


def _nhwc(shape: tuple[int, ...]) -> tuple[int, ...]:
    """One sample's ``(H, W, C)`` of a 2-D (flat rows), 3-D or 4-D image array's ``shape``, whatever its
    layout (flat rows of an unknown image shape: ``(values,)``, refused by :func:`_check_npz_shapes`)."""
    if len(shape) == 2:
        return flat_image_shape(shape[1]) or (shape[1],)
    if len(shape) == 3:
        return (*shape[1:], 1)
    return (shape[2], shape[3], shape[1]) if channels_first(shape) else tuple(shape[1:])


def _roughness(images: np.ndarray) -> float:
    """Mean absolute difference of neighbouring pixels (NHWC): small for images read in their
    layout, large for images whose values were put in the wrong places."""
    x = images.astype(np.float32)
    return float(np.abs(np.diff(x, axis=1)).mean() + np.abs(np.diff(x, axis=2)).mean())


def _unflatten(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat rows as NHWC images (:func:`flat_image_shape`); a split that holds images already is
    kept. RGB rows come in two layouts: pixel by pixel (``x.reshape(len(x), -1)`` of NHWC images) or
    plane by plane (CIFAR-10's own rows, and ``x.reshape(len(x), -1)`` of NCHW tensors); the one
    whose neighbouring pixels differ less (read on up to 512 rows of the first flat split) is taken
    for both splits, pixel by pixel when neither is clearly smoother."""
    flat = [x for x in (x_train, x_test) if x.ndim == 2]
    if not flat:
        return x_train, x_test
    h, w, c = flat_image_shape(flat[0].shape[1])  # type: ignore[misc]  # checked by _check_npz_shapes
    sample = flat[0][:512]
    planar = c > 1 and _roughness(sample.reshape(-1, c, h, w).transpose(0, 2, 3, 1)) < 0.8 * _roughness(
        sample.reshape(-1, h, w, c))

    def images(x: np.ndarray) -> np.ndarray:
        if x.ndim != 2:
            return x
        if planar:
            return np.ascontiguousarray(x.reshape(-1, c, h, w).transpose(0, 2, 3, 1))
        return x.reshape(-1, h, w, c)

    return images(x_train), images(x_test)


def _check_npz_shapes(path: Path, headers: dict[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    xs = {k: headers[k][0] for k in ("x_train", "x_test")}
    for key, shape in xs.items():
        if len(shape) not in (2, 3, 4) or 0 in shape:
            raise file_error(path, f"array {key} has shape {shape}; expected (N, H, W), (N, H, W, C) or (N, C, H, W) with "
                                   "no empty axis", _NPZ_FIX)
        if len(shape) == 2 and flat_image_shape(shape[1]) is None:
            raise file_error(path, f"array {key} has flat rows of {shape[1]} values, which are not a square image "
                                   f"(H*W grey or 3*H*W RGB values, at least {_MIN_FLAT_SIDE}x{_MIN_FLAT_SIDE}); "
                                   "advisor trains image classifiers, not models of tabular features", _NPZ_FIX)
    sample = {k: _nhwc(s) for k, s in xs.items()}
    if sample["x_train"] != sample["x_test"]:
        raise file_error(path, f"x_train samples {sample['x_train']} and x_test samples {sample['x_test']} "
                               "differ in shape", _NPZ_FIX)
    for split in ("train", "test"):
        yshape, ydtype = headers[f"y_{split}"]
        # (N,), a Keras-style (N, 1) column, or one-hot rows (N, C) of numbers, checked by _labels
        if not (len(yshape) == 1 or (len(yshape) == 2 and (yshape[1] == 1 or ydtype.kind in "iufb"))) \
                or ydtype.kind not in "iufbUS":
            raise file_error(path, f"labels y_{split} must be a 1-D array of class numbers or names (or one-hot rows), got "
                                   f"shape {yshape} dtype {ydtype}", _NPZ_FIX)
        if yshape[0] != xs[f"x_{split}"][0]:
            raise file_error(path, f"x_{split} has {xs[f'x_{split}'][0]} samples but y_{split} has "
                                   f"{yshape[0]} labels", _NPZ_FIX)


def _load_npz_arrays(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            names = _member_names([f"{m}.npy" for m in npz.files])
            return {k: np.asarray(npz[names[k]]) for k in keys}
    except ValueError as exc:  # numpy's message for object arrays mentions allow_pickle
        raise file_error(path, f"cannot be read without pickle ({exc})", _NPZ_FIX) from None
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise file_error(path, f"is corrupt ({exc})") from None


def _one_hot_classes(path: Path, split: str, y: np.ndarray) -> np.ndarray:
    """``y`` unchanged unless it is ``(N, C)`` with ``C > 1``: then each row's one 1 as its class
    number (one-hot rows), and a one-line error for anything else of that shape (soft or multi-label
    rows: advisor trains single-label classifiers)."""
    if y.ndim != 2 or y.shape[1] < 2:
        return y
    rows = y.astype(np.float64)
    one_hot = np.isin(rows, (0.0, 1.0)).all(axis=1) & (rows.sum(axis=1) == 1)
    if not one_hot.all():
        bad = int(np.flatnonzero(~one_hot)[0])
        raise file_error(path, f"labels y_{split} must be a 1-D array of class numbers or names (or one-hot rows), "
                               f"got shape {y.shape} whose row {bad} is not one-hot (one 1, the rest 0)", _NPZ_FIX)
    return np.argmax(rows, axis=1)


def _labels(path: Path, y_train: np.ndarray, y_test: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The labels as classes ``0..C-1`` (int64, 1-D), and ``C``.

    Labels that are not already ``0..C-1`` (EMNIST letters' 1..26, SVHN's 1..10, a binary task's
    -1/+1, classes with gaps, class names such as ``"cat"``) are renumbered by their sorted values,
    train and test alike, so the model has one output per class that occurs. A Keras-style
    ``(N, 1)`` column is flattened, one-hot rows (``to_categorical``'s ``(N, C)``: one 1 per row,
    the rest 0) become the column of their 1, and floats are accepted where they are whole numbers.
    """
    y_train, y_test = (_one_hot_classes(path, split, y) for split, y in (("train", y_train), ("test", y_test)))
    if y_train.dtype.kind in "US" or y_test.dtype.kind in "US":  # class names: numbered in sorted order
        if not (y_train.dtype.kind in "US" and y_test.dtype.kind in "US"):
            raise file_error(path, f"labels y_train ({y_train.dtype}) and y_test ({y_test.dtype}) must both be "
                                   "class numbers or both class names", _NPZ_FIX)
        names = [y.reshape(-1).astype(str) for y in (y_train, y_test)]
        y_train, y_test = (np.searchsorted(np.unique(np.concatenate(names)), n) for n in names)
    ys = []
    for split, y in (("train", y_train), ("test", y_test)):
        y = y.reshape(-1)
        if y.dtype.kind == "f":
            whole = np.isfinite(y) & (y == np.round(y))
            if not whole.all():
                raise file_error(path, f"labels y_{split} must be a 1-D integer array (class numbers); got "
                                       f"{y.dtype} values such as {y[~whole][0]!r}", _NPZ_FIX)
        ys.append(y.astype(np.int64))
    values = np.unique(np.concatenate(ys))
    if len(values) < 2:
        raise file_error(path, "has a single class; a classification dataset needs at least two",
                         _NPZ_FIX)
    if values[0] == 0 and values[-1] == len(values) - 1:
        return ys[0], ys[1], len(values)
    return np.searchsorted(values, ys[0]), np.searchsorted(values, ys[1]), len(values)


def npz_info(path: Path):  # type: ignore[no-untyped-def]  # -> DatasetInfo (imported lazily: no cycle)
    """Meta-features of a user ``.npz`` without loading its images."""
    from advisor._datasets.registry import DatasetInfo

    headers = _npz_headers(path)
    _check_npz_shapes(path, headers)
    ys = _load_npz_arrays(path, ("y_train", "y_test"))
    xshape = headers["x_train"][0]
    return DatasetInfo(
        name=str(path), input_shape=_nhwc(xshape),  # type: ignore[arg-type]
        num_classes=_labels(path, ys["y_train"], ys["y_test"])[2],
        train_size=xshape[0], test_size=headers["x_test"][0][0], synthetic=False,
        source=str(Path(path).resolve()),
        description="user arrays from an .npz file" + (
            f" (flat rows of {xshape[1]} values read as {'x'.join(map(str, _nhwc(xshape)))} images)"
            if len(xshape) == 2 else ""),
    )


def read_npz(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Read a user ``.npz`` with ``x_train``, ``y_train``, ``x_test``, ``y_test``.

    Loaded with ``allow_pickle=False``; grey ``(N, H, W)`` images get a channel axis,
    channels-first ``(N, C, H, W)`` images (:func:`channels_first`) are transposed to NHWC, and flat
    ``(N, D)`` rows are read as square images (:func:`flat_image_shape`, :func:`_unflatten`).

    Returns:
        ``(x_train, y_train, x_test, y_test, num_classes)``: images NHWC in their stored dtype,
        labels int64 numbered ``0..C-1`` (:func:`_labels`).

    Raises:
        DatasetFileError: For a missing, malformed or object-array file, or bad labels.
    """
    path = Path(path)
    headers = _npz_headers(path)
    _check_npz_shapes(path, headers)
    arrays = _load_npz_arrays(path, _NPZ_KEYS)
    arrays["x_train"], arrays["x_test"] = _unflatten(arrays["x_train"], arrays["x_test"])
    for key in ("x_train", "x_test"):
        x = arrays[key]
        if x.ndim == 3:
            x = x[..., np.newaxis]
        elif channels_first(x.shape):
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            raise file_error(path, f"array {key} holds NaN or infinite values", _NPZ_FIX)
        arrays[key] = x
    y_train, y_test, classes = _labels(path, arrays["y_train"], arrays["y_test"])
    return arrays["x_train"], y_train, arrays["x_test"], y_test, classes
