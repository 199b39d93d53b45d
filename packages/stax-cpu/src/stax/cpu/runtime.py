"""What the generated wrapper calls at run time: the default numpy allocator, input
guards, kernel error -> Python exception mapping, and extern-result layout fixing.

Buffers are anything with a data pointer; the allocator object hides what they are
(numpy arrays here, torch tensors when the frontend passes its own allocator).
"""

from __future__ import annotations

import ctypes

import numpy as np
from stax.ir import dtypes as dt


# ---- errors raised after a kernel sets its error flag ----
class KernelZeroDivisionError(ZeroDivisionError, RuntimeError):
    """Integer division/modulo by zero inside a kernel (eager raises RuntimeError 'ZeroDivisionError')."""


class NegativeIntegerPowerError(ValueError, RuntimeError):
    """pow on integers with a negative exponent (eager: RuntimeError with the same message)."""


class InputLayoutError(ValueError):
    """An input's sizes/strides differ from the layout the code was compiled for."""


def size_of(allocator, buf, dim: int, ndim: int, name: str) -> int:
    """Size `dim` of input `name` (a symbolic size is read from the first input dim that is exactly it)."""
    sizes = allocator.sizes_strides(buf)[0]
    if len(sizes) != ndim:
        raise InputLayoutError(f"input {name}: expected {ndim} dimensions, got sizes {tuple(sizes)}")
    return int(sizes[dim])


def check_size_range(name: str, value: int, lo, hi, source: str) -> None:
    """The compiled code's assumption on a symbolic size (its range), checked at each call."""
    if not lo <= value <= hi:
        raise InputLayoutError(f"size {name} = {value} (from {source}) is outside the range [{lo}, {hi}] "
                               f"the module was compiled for")


def raise_kernel_error(err, kernel: str, index_loads: tuple) -> None:
    code, a, b, c = int(err[0]), int(err[1]), int(err[2]), int(err[3])
    if code == 1:
        raise KernelZeroDivisionError(f"ZeroDivisionError (integer division or modulo by zero in {kernel})")
    if code == 2:
        what = index_loads[c] if 0 <= c < len(index_loads) else "a buffer"
        raise IndexError(f"index {a} is out of bounds for dimension with size {b} "
                         f"(indirect read of {what} in {kernel})")
    if code == 3:
        raise NegativeIntegerPowerError("Integers to negative integer powers are not allowed.")
    raise RuntimeError(f"{kernel} reported unknown error code {code}")


def new_error_array():
    """Per-call error slots [code, detail, detail, detail], zeroed."""
    return (ctypes.c_int64 * 4)()


def strides_match(sizes, expected, actual) -> bool:
    """Strides of dims with size <= 1 do not affect addressing and are ignored."""
    if any(s == 0 for s in sizes):
        return True
    return all(s <= 1 or e == a for s, e, a in zip(sizes, expected, actual))


def check_input(allocator, buf, sizes: tuple, strides: tuple, dtype: dt.DType, name: str) -> None:
    """Raise InputLayoutError unless `buf` has these sizes, strides (size-1 dims free) and dtype.
    An allocator's optional `matches(buf, sizes, strides, dtype)` answers the common exact case
    in one comparison (this runs for every input on every call)."""
    matches = getattr(allocator, "matches", None)
    if matches is not None and matches(buf, sizes, strides, dtype):
        return
    got_sizes, got_strides = allocator.sizes_strides(buf)
    got_sizes, got_strides = tuple(int(s) for s in got_sizes), tuple(int(s) for s in got_strides)
    if got_sizes != sizes or not strides_match(sizes, strides, got_strides):
        raise InputLayoutError(
            f"input {name}: expected sizes {sizes} and strides {strides}, "
            f"got sizes {got_sizes} and strides {got_strides}"
        )
    dtype_of = getattr(allocator, "dtype_of", None)
    if dtype_of is not None:
        got = dtype_of(buf)
        if got is not None and got != dtype:
            raise InputLayoutError(f"input {name}: expected dtype {dtype}, got {got}")


# ---- the default allocator: numpy arrays; bf16 stored as uint16 bit patterns ----
def storage_numpy_dtype(d: dt.DType) -> np.dtype:
    return np.dtype(np.uint16) if d == dt.bfloat16 else d.np


class _Interface:
    """Keeps `owner` alive while numpy views its memory through __array_interface__."""

    def __init__(self, owner, ptr: int, sizes, byte_strides, npdt: np.dtype):
        self.owner = owner
        self.__array_interface__ = {
            "data": (ptr, False), "shape": tuple(sizes), "strides": tuple(byte_strides),
            "typestr": npdt.str, "version": 3,
        }


class NumpyAllocator:
    """Buffers are numpy arrays; strides in elements; data_ptr is the address of element 0."""

    ALIGN = 64  # bytes: whole cache lines / AVX-512 vectors (streaming stores need it)

    def empty_strided(self, sizes, strides, dtype: dt.DType) -> np.ndarray:
        npdt = storage_numpy_dtype(dtype)
        n = 0 if any(s == 0 for s in sizes) else 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
        raw = np.empty(max(n, 1) * npdt.itemsize + self.ALIGN, dtype=np.uint8)
        skip = -raw.__array_interface__["data"][0] % self.ALIGN
        flat = raw[skip:skip + max(n, 1) * npdt.itemsize].view(npdt)
        return np.lib.stride_tricks.as_strided(flat, tuple(sizes), tuple(st * npdt.itemsize for st in strides))

    @staticmethod
    def data_ptr(buf: np.ndarray) -> int:
        return buf.__array_interface__["data"][0]

    @staticmethod
    def sizes_strides(buf: np.ndarray):
        item = buf.itemsize
        return buf.shape, tuple(s // item for s in buf.strides)

    @staticmethod
    def dtype_of(buf: np.ndarray):
        return _NUMPY_TO_STAX.get(buf.dtype)

    def as_strided(self, buf: np.ndarray, sizes, strides, dtype: dt.DType) -> np.ndarray:
        """A view of `buf`'s memory with another layout/dtype (for `# reuse` of an output)."""
        npdt = storage_numpy_dtype(dtype)
        iface = _Interface(buf, self.data_ptr(buf), sizes, [s * npdt.itemsize for s in strides], npdt)
        return np.asarray(iface)


_NUMPY_TO_STAX = {
    np.dtype(np.bool_): dt.bool_, np.dtype(np.uint8): dt.uint8, np.dtype(np.int8): dt.int8,
    np.dtype(np.int16): dt.int16, np.dtype(np.int32): dt.int32, np.dtype(np.int64): dt.int64,
    np.dtype(np.float16): dt.float16, np.dtype(np.uint16): dt.bfloat16, np.dtype(np.float32): dt.float32,
    np.dtype(np.float64): dt.float64,
}


# ---- bf16 helpers for tests and users of the numpy allocator ----
def bf16_from_float32(values) -> np.ndarray:
    """float values -> bf16 bit patterns (uint16), rounding to nearest even like eager."""
    r = dt.round_to(np.asarray(values, dtype=np.float32), dt.bfloat16)
    bits = (np.ascontiguousarray(r).view(np.uint32) >> 16).astype(np.uint16)
    return np.where(np.isnan(r), np.uint16(0x7FC0), bits).astype(np.uint16)


def bf16_to_float32(bits) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32 values."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


COPY_SOURCE = r"""
extern "C" void stax_copy_strided(char* dst, const char* src, long ndim, const long* sizes,
                                  const long* dst_strides, const long* src_strides, long itemsize) {
    long idx[64] = {0};
    long total = 1;
    for (long d = 0; d < ndim; ++d) total *= sizes[d];
    for (long n = 0; n < total; ++n) {
        long so = 0, dof = 0;
        for (long d = 0; d < ndim; ++d) { so += idx[d] * src_strides[d]; dof += idx[d] * dst_strides[d]; }
        __builtin_memcpy(dst + dof * itemsize, src + so * itemsize, itemsize);
        for (long d = ndim - 1; d >= 0; --d) { if (++idx[d] < sizes[d]) break; idx[d] = 0; }
    }
}
"""


class LayoutFixer:
    """Makes an extern kernel's result have the node's layout: used as is when its strides
    match, else copied into a buffer allocated with the right strides (a small C copy
    routine, built lazily and cached like any kernel)."""

    def __init__(self, allocator, build_copy):
        self.allocator = allocator
        self._build_copy = build_copy
        self._copy = None
        self._matches = getattr(allocator, "matches", None)  # the exact case in one call (every extern result)

    def __call__(self, buf, sizes: tuple, strides: tuple, dtype: dt.DType, name: str, kernel: str):
        if self._matches is not None and self._matches(buf, sizes, strides, dtype):
            return buf
        got_sizes, got_strides = self.allocator.sizes_strides(buf)
        got_sizes, got_strides = tuple(int(s) for s in got_sizes), tuple(int(s) for s in got_strides)
        if got_sizes != sizes:
            raise RuntimeError(f"extern kernel {kernel} returned sizes {got_sizes} for {name}, expected {sizes}")
        if strides_match(sizes, strides, got_strides):
            return buf
        out = self.allocator.empty_strided(sizes, strides, dtype)
        if self._copy is None:
            self._copy = self._build_copy()
        n = len(sizes)
        arr = ctypes.c_long * max(n, 1)
        self._copy(
            ctypes.c_void_p(self.allocator.data_ptr(out)), ctypes.c_void_p(self.allocator.data_ptr(buf)),
            ctypes.c_long(n), arr(*sizes), arr(*strides), arr(*got_strides), ctypes.c_long(dtype.itemsize),
        )
        return out
