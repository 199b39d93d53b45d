"""Element types shared by every Stax package, with PyTorch's promotion lattice.

A dtype is data (name, width, kind, C type) so codegen packages map it by table
rather than by if-chains. numpy has no bfloat16: the reference interpreter keeps
bf16 values in float32 arrays rounded to bf16 after every op (see `round_to`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    """One element type: `kind` is 'b' (bool), 'u'/'i' (unsigned/signed int) or 'f' (float)."""

    name: str
    itemsize: int
    kind: str
    ctype: str
    numpy_name: str  # storage dtype of the reference interpreter

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"stax.ir.{self.name}"

    @property
    def is_floating(self) -> bool:
        return self.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("i", "u")

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def is_signed(self) -> bool:
        return self.kind in ("i", "f")

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.numpy_name)


bool_ = DType("bool", 1, "b", "bool", "bool")
uint8 = DType("uint8", 1, "u", "uint8_t", "uint8")
int8 = DType("int8", 1, "i", "int8_t", "int8")
int16 = DType("int16", 2, "i", "int16_t", "int16")
int32 = DType("int32", 4, "i", "int32_t", "int32")
int64 = DType("int64", 8, "i", "int64_t", "int64")
float16 = DType("float16", 2, "f", "half", "float16")
bfloat16 = DType("bfloat16", 2, "f", "bfloat16", "float32")
float32 = DType("float32", 4, "f", "float", "float32")
float64 = DType("float64", 8, "f", "double", "float64")

ALL_DTYPES: tuple[DType, ...] = (
    bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64
)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES}


def dtype(name: str) -> DType:
    """Look a dtype up by name ('float32', 'bool', ...), with a clear error."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown stax dtype {name!r}; expected one of {sorted(BY_NAME)}") from None


# The category order PyTorch promotes along: bool < integer < floating.
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}
_INT_ORDER = (uint8, int8, int16, int32, int64)


def promote_types(a: DType, b: DType) -> DType:
    """torch.promote_types for the dtypes Stax knows."""
    if a == b:
        return a
    ca, cb = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if ca != cb:
        return a if ca > cb else b
    if a.is_floating:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize > b.itemsize else b
    # both integers
    if uint8 in (a, b):
        other = b if a == uint8 else a
        return int16 if other == int8 else other
    return a if _INT_ORDER.index(a) > _INT_ORDER.index(b) else b


def compute_dtype(d: DType) -> DType:
    """The dtype arithmetic runs in: half types compute in float32, as eager does on CPU."""
    return float32 if d in (float16, bfloat16) else d


def round_to(values: np.ndarray, d: DType) -> np.ndarray:
    """Convert `values` to storage for `d`, rounding as PyTorch does (bf16: round-half-even)."""
    if d == bfloat16:
        with np.errstate(over="ignore"):
            f = np.asarray(values, dtype=np.float32)
        bits = f.view(np.uint32).astype(np.uint64)
        nan = np.isnan(f)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        out = rounded.astype(np.uint32).view(np.float32)
        return np.where(nan, np.float32(np.nan), out).astype(np.float32)
    if d == bool_:
        return np.asarray(values).astype(bool)
    if d == float16 and np.asarray(values).dtype not in (np.float16, np.float32):
        with np.errstate(over="ignore"):
            values = np.asarray(values).astype(np.float32)  # eager converts through float (double rounding)
    if d.is_integer and np.asarray(values).dtype.kind == "f":
        # truncation toward zero; NaN/out-of-range as eager on x86 (see float_to_int)
        return float_to_int(values, d)
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(d.np)


def float_to_int(values, d) -> np.ndarray:
    """float -> integer cast as eager on x86: truncate toward zero; out-of-range and NaN

    give INT_MIN of the conversion width (int64 for int64/uint8, int32 for the
    other integer types), then wrap to the target width.
    """
    f = np.asarray(values, dtype=np.float64)
    t = np.trunc(f)
    if d.name in ("int64", "uint8"):
        lo, hi, bad = -(2.0**63), 2.0**63, np.iinfo(np.int64).min
    else:
        lo, hi, bad = -(2.0**31), 2.0**31, np.iinfo(np.int32).min
    with np.errstate(invalid="ignore"):
        ok = (t >= lo) & (t < hi)
    wide = np.where(ok, np.where(ok, t, 0).astype(np.int64), np.int64(bad))
    return wide.astype(d.np)
