"""A restricted unpickler for CIFAR-10's python version: numpy arrays and plain builtins only.

CIFAR-10's ``data_batch_N`` files are pickled dicts of a ``uint8`` array and lists of ints and
strings. Plain ``pickle`` would run whatever callable a file names (``os.system``, ...), so this
unpickler resolves only the few globals that numpy's array pickling needs, and each of them is a
checked wrapper: object and structured dtypes are refused (an object array of a declared shape is
allocated before its contents arrive), and an array must fit inside the file it came from.
"""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any

import numpy as np

__all__ = ["UnsafePickleError", "restricted_loads"]

_DTYPE_KINDS = "biuf"  # bool, signed, unsigned, float: nothing that can hold objects


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for something outside the allowed set."""


class _NdarrayToken:
    """Stands in for ``numpy.ndarray`` so that a pickle cannot call the class directly."""


_NDARRAY = _NdarrayToken()


def _safe_dtype(spec: Any, align: Any = False, copy: Any = False) -> np.dtype:
    if isinstance(spec, bytes):
        spec = spec.decode("latin1")
    if not isinstance(spec, str) or len(spec) > 8:
        raise UnsafePickleError(f"dtype {spec!r} is not a plain numeric type")
    dtype = np.dtype(spec)
    if dtype.kind not in _DTYPE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise UnsafePickleError(f"dtype {spec!r} is not a plain numeric type")
    return dtype


def _safe_codecs_encode(text: Any, encoding: Any = "utf-8") -> bytes:
    # Protocol-2 pickles written by Python 3 store bytes as _codecs.encode(str, 'latin1').
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError("_codecs.encode is allowed only as latin1 bytes")
    return text.encode("latin1")


class _Checked:
    """The wrappers need the file size to refuse arrays larger than the file."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def _check(self, shape: Any, dtype: Any) -> tuple[int, ...]:
        if isinstance(shape, int):
            shape = (shape,)
        if not isinstance(shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise UnsafePickleError(f"array shape {shape!r} is not a tuple of sizes")
        if not isinstance(dtype, np.dtype) or dtype.kind not in _DTYPE_KINDS:
            raise UnsafePickleError("array dtype is not a plain numeric type")
        count = 1
        for d in shape:
            count *= d
        if count * dtype.itemsize > self.limit:
            raise UnsafePickleError(f"an array of shape {shape} is larger than the file")
        return shape

    def reconstruct(self, subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
        if subtype is not _NDARRAY:
            raise UnsafePickleError("_reconstruct is allowed only for numpy.ndarray")
        if isinstance(dtype, (bytes, str)):
            dtype = _safe_dtype(dtype)
        return np.ndarray.__new__(np.ndarray, self._check(shape, dtype), dtype)

    def frombuffer(self, buf: Any, dtype: Any, shape: Any, order: Any = "C") -> np.ndarray:
        shape = self._check(shape, dtype)
        if order not in ("C", "F"):
            raise UnsafePickleError(f"array order {order!r} is not C or F")
        return np.frombuffer(bytes(buf), dtype=dtype).reshape(shape, order=order).copy()

    def scalar(self, dtype: Any, data: Any = b"") -> Any:
        self._check((), dtype)
        if isinstance(data, str):
            data = data.encode("latin1")
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            raise UnsafePickleError("numpy scalar data does not match its dtype")
        return np.frombuffer(data, dtype=dtype)[0]


def _check_dtype_state(state: Any) -> None:
    # The state numpy writes for a plain numeric dtype; anything else could rebuild the dtype
    # into a structured or object one behind the wrappers' back.
    if not (isinstance(state, tuple) and len(state) == 8 and state[0] == 3
            and state[1] in ("<", ">", "|", "=") and state[2:5] == (None, None, None)
            and state[5:7] == (-1, -1) and state[7] == 0):
        raise UnsafePickleError("a dtype state is not that of a plain numeric type")


class _RestrictedUnpickler(pickle._Unpickler):  # the Python implementation, so BUILD can be checked
    dispatch = dict(pickle._Unpickler.dispatch)  # type: ignore[attr-defined]
    stack: list[Any]
    append: Any
    read: Any
    readinto: Any

    def __init__(self, raw: bytes) -> None:
        super().__init__(io.BytesIO(raw), encoding="latin1")
        self._checked = checked = _Checked(len(raw))
        self._allowed: dict[tuple[str, str], Any] = {("numpy", "ndarray"): _NDARRAY,
                                                     ("numpy", "dtype"): _safe_dtype,
                                                     ("_codecs", "encode"): _safe_codecs_encode}
        for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            self._allowed[(module, "_reconstruct")] = checked.reconstruct
            self._allowed[(module, "scalar")] = checked.scalar
        for module in ("numpy.core.numeric", "numpy._core.numeric"):
            self._allowed[(module, "_frombuffer")] = checked.frombuffer

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"it asks to load {module}.{name}, which a CIFAR-10 batch never contains"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("it uses persistent ids, which a CIFAR-10 batch never contains")

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, np.dtype):
            _check_dtype_state(state)
        elif isinstance(inst, np.ndarray):
            self._check_array_state(state)
        else:
            raise UnsafePickleError(f"it sets the state of a {type(inst).__name__}, not of an array")
        inst.__setstate__(state)

    dispatch[pickle.BUILD[0]] = load_build  # type: ignore[assignment]

    def load_bytearray8(self) -> None:
        # The stock opcode allocates the declared length before reading: refuse lengths the
        # file cannot hold, or an 8-byte field could ask for terabytes.
        (length,) = struct.unpack("<Q", self.read(8))
        if length > self._checked.limit:
            raise UnsafePickleError(f"a byte array of {length:,} bytes is larger than the file")
        buffer = bytearray(length)
        self.readinto(buffer)
        self.append(buffer)

    dispatch[pickle.BYTEARRAY8[0]] = load_bytearray8  # type: ignore[assignment]

    def _check_array_state(self, state: Any) -> None:
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1
                and isinstance(state[4], (bytes, str))):
            raise UnsafePickleError("an array state is not that of a plain numeric array")
        shape = self._checked._check(state[1], state[2])
        count = 1
        for d in shape:
            count *= d
        if count * state[2].itemsize != len(state[4]):
            raise UnsafePickleError("an array's data does not match its shape")


def restricted_loads(raw: bytes) -> Any:
    """Unpickle ``raw`` allowing only numpy numeric arrays, dicts, lists, bytes, str and numbers.

    Raises:
        UnsafePickleError: When the pickle names any other global.
        Exception: Whatever a malformed stream raises (``UnpicklingError``, ``EOFError``,
            ``ValueError``...); callers turn these into :class:`~advisor.errors.DatasetFileError`.
    """
    return _RestrictedUnpickler(raw).load()
