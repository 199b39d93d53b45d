"""Small constructors for value expressions that apply the op table's dtype rules."""

from __future__ import annotations

from . import dtypes as dt
from .expr import Constant, IndexValue, Load, Op, Value
from .ops import result_dtype


def load(buffer: str, index, dtype: dt.DType, indirect: tuple = (), mask: Value | None = None, other=0) -> Load:
    return Load(buffer, index, dtype, indirect, mask, other)


def const(value, dtype: dt.DType) -> Constant:
    if dtype.is_bool:
        value = bool(value)
    elif dtype.is_integer:
        value = int(value)
    else:
        value = float(value)
    return Constant(value, dtype)


def index_value(index, dtype: dt.DType = dt.int64) -> IndexValue:
    return IndexValue(index, dtype)


def op(name: str, *args: Value) -> Op:
    """Op with its dtype inferred from the table (use `cast` for to_dtype)."""
    return Op(name, tuple(args), result_dtype(name, [a.dtype for a in args]))


def cast(value: Value, dtype: dt.DType) -> Value:
    if value.dtype == dtype:
        return value
    if isinstance(value, Constant):
        return const(value.value, dtype)
    return Op("to_dtype", (value,), dtype)

