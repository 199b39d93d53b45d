"""The one op table: name -> arity, dtype rule, numpy semantics.

Each codegen package maps the same names to its own templates (C++, Triton); a new
op is a row here plus a row in each of those tables. numpy functions receive
operands already converted to the compute dtype (half types as float32) and the
interpreter rounds results to the op's dtype, which is how eager CPU behaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import dtypes as dt

# dtype rules: how an op's result dtype follows from its operands.
SAME = "same"  # all operands share one dtype; the result has it
BOOL = "bool"  # result is bool (comparisons, logical ops, isnan)
FLOAT = "float"  # floating operands only; result has their dtype
INT = "int"  # integer/bool operands only; result has their dtype
WHERE = "where"  # (cond, a, b): result is a's dtype (a and b agree)
CAST = "cast"  # result dtype is given explicitly (to_dtype)


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    dtype_rule: str
    numpy: Callable
    doc: str = ""


def _int_div_guard(b):
    if np.any(np.asarray(b) == 0):
        raise ZeroDivisionError("integer division by zero (ZeroDivisionError)")


def _floordiv(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        _int_div_guard(b)
        return np.floor_divide(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor(a / b)


def _truncdiv(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        _int_div_guard(b)
        q = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.trunc(a / b)


def _remainder(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        _int_div_guard(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, b)  # sign of the divisor, as torch.remainder


def _fmod(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        _int_div_guard(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)  # sign of the dividend, as torch.fmod


def _div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def _unary_float(fn):
    def f(a):
        with np.errstate(all="ignore"):
            return fn(a)

    return f


def _scalar_map(fn):
    vec = np.frompyfunc(fn, 1, 1)

    def f(a):
        a = np.asarray(a)
        return vec(a.astype(np.float64)).astype(a.dtype)

    return f


def _safe_lgamma(x):
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def _erf(x):
    return math.erf(x) if not math.isnan(x) else math.nan


def _sigmoid(a):
    with np.errstate(over="ignore"):
        one = a.dtype.type(1)
        return one / (one + np.exp(-a))


def _rsqrt(a):
    with np.errstate(all="ignore"):
        one = a.dtype.type(1)
        return one / np.sqrt(a)


def _relu(a):
    return np.where(a > 0, a, np.where(np.isnan(a), a, a.dtype.type(0))) if a.dtype.kind == "f" else np.maximum(a, 0)


def _sign(a):
    return np.sign(a)


def _pow(a, b):
    with np.errstate(all="ignore"):
        if np.asarray(a).dtype.kind in "iu":
            if np.any(np.asarray(b) < 0):
                raise ValueError("Integers to negative integer powers are not allowed.")
        return np.power(a, b)


def _bitwise(fn):
    return lambda a, b: fn(a, b)


_TABLE = [
    # arithmetic
    OpDef("add", 2, SAME, np.add),
    OpDef("sub", 2, SAME, np.subtract),
    OpDef("mul", 2, SAME, np.multiply),
    OpDef("truediv", 2, FLOAT, _div, "float division (IEEE: x/0 = inf, 0/0 = nan)"),
    OpDef("floordiv", 2, SAME, _floordiv, "floor division; integer /0 is an error"),
    OpDef("truncdiv", 2, SAME, _truncdiv, "C division toward zero; integer /0 is an error"),
    OpDef("remainder", 2, SAME, _remainder, "result has the divisor's sign (torch.remainder)"),
    OpDef("fmod", 2, SAME, _fmod, "result has the dividend's sign (torch.fmod)"),
    OpDef("neg", 1, SAME, np.negative),
    OpDef("abs", 1, SAME, np.abs),
    OpDef("maximum", 2, SAME, np.maximum, "propagates NaN like torch.maximum"),
    OpDef("minimum", 2, SAME, np.minimum, "propagates NaN like torch.minimum"),
    OpDef("sign", 1, SAME, _sign),
    OpDef("relu", 1, SAME, _relu, "max(x, 0); NaN stays NaN"),
    OpDef("pow", 2, SAME, _pow),
    # floating math
    OpDef("exp", 1, FLOAT, _unary_float(np.exp)),
    OpDef("exp2", 1, FLOAT, _unary_float(np.exp2)),
    OpDef("expm1", 1, FLOAT, _unary_float(np.expm1)),
    OpDef("log", 1, FLOAT, _unary_float(np.log)),
    OpDef("log2", 1, FLOAT, _unary_float(np.log2)),
    OpDef("log10", 1, FLOAT, _unary_float(np.log10)),
    OpDef("log1p", 1, FLOAT, _unary_float(np.log1p)),
    OpDef("sqrt", 1, FLOAT, _unary_float(np.sqrt)),
    OpDef("rsqrt", 1, FLOAT, _rsqrt),
    OpDef("reciprocal", 1, FLOAT, _unary_float(lambda a: a.dtype.type(1) / a)),
    OpDef("sin", 1, FLOAT, _unary_float(np.sin)),
    OpDef("cos", 1, FLOAT, _unary_float(np.cos)),
    OpDef("tan", 1, FLOAT, _unary_float(np.tan)),
    OpDef("asin", 1, FLOAT, _unary_float(np.arcsin)),
    OpDef("acos", 1, FLOAT, _unary_float(np.arccos)),
    OpDef("atan", 1, FLOAT, _unary_float(np.arctan)),
    OpDef("sinh", 1, FLOAT, _unary_float(np.sinh)),
    OpDef("cosh", 1, FLOAT, _unary_float(np.cosh)),
    OpDef("tanh", 1, FLOAT, _unary_float(np.tanh)),
    OpDef("asinh", 1, FLOAT, _unary_float(np.arcsinh)),
    OpDef("acosh", 1, FLOAT, _unary_float(np.arccosh)),
    OpDef("atanh", 1, FLOAT, _unary_float(np.arctanh)),
    OpDef("atan2", 2, FLOAT, _unary_float(np.arctan2)),
    OpDef("erf", 1, FLOAT, _scalar_map(_erf)),
    OpDef("lgamma", 1, FLOAT, _scalar_map(_safe_lgamma)),
    OpDef("sigmoid", 1, FLOAT, _sigmoid),
    OpDef("floor", 1, SAME, np.floor),
    OpDef("ceil", 1, SAME, np.ceil),
    OpDef("round", 1, SAME, np.rint, "round half to even, as torch.round"),
    OpDef("trunc", 1, SAME, np.trunc),
    # comparisons and logic
    OpDef("eq", 2, BOOL, np.equal),
    OpDef("ne", 2, BOOL, np.not_equal),
    OpDef("lt", 2, BOOL, np.less),
    OpDef("le", 2, BOOL, np.less_equal),
    OpDef("gt", 2, BOOL, np.greater),
    OpDef("ge", 2, BOOL, np.greater_equal),
    OpDef("isnan", 1, BOOL, np.isnan),
    OpDef("isinf", 1, BOOL, np.isinf),
    OpDef("logical_and", 2, BOOL, np.logical_and),
    OpDef("logical_or", 2, BOOL, np.logical_or),
    OpDef("logical_xor", 2, BOOL, np.logical_xor),
    OpDef("logical_not", 1, BOOL, np.logical_not),
    OpDef("bitwise_and", 2, INT, _bitwise(np.bitwise_and)),
    OpDef("bitwise_or", 2, INT, _bitwise(np.bitwise_or)),
    OpDef("bitwise_xor", 2, INT, _bitwise(np.bitwise_xor)),
    OpDef("bitwise_not", 1, INT, np.invert),
    # selection and conversion
    OpDef("where", 3, WHERE, np.where),
    OpDef("to_dtype", 1, CAST, lambda a: a, "convert; float->int truncates toward zero"),
]

OPS: dict[str, OpDef] = {d.name: d for d in _TABLE}


def op_def(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise ValueError(f"unknown stax op {name!r}") from None


def result_dtype(name: str, arg_dtypes, cast_to: dt.DType | None = None) -> dt.DType:
    """Apply the op's dtype rule, with a clear error when operands break it."""
    d = op_def(name)
    if len(arg_dtypes) != d.arity:
        raise TypeError(f"{name} takes {d.arity} operands, got {len(arg_dtypes)}")
    if d.dtype_rule == CAST:
        if cast_to is None:
            raise TypeError("to_dtype needs a target dtype")
        return cast_to
    if d.dtype_rule == WHERE:
        if not arg_dtypes[0].is_bool:
            raise TypeError(f"where: condition must be bool, got {arg_dtypes[0]}")
        if arg_dtypes[1] != arg_dtypes[2]:
            raise TypeError(f"where: branches differ in dtype: {arg_dtypes[1]} vs {arg_dtypes[2]}")
        return arg_dtypes[1]
    first = arg_dtypes[0]
    if any(a != first for a in arg_dtypes):
        raise TypeError(f"{name}: operands must share one dtype, got {[str(a) for a in arg_dtypes]}")
    if d.dtype_rule == BOOL:
        return dt.bool_
    if d.dtype_rule == FLOAT and not first.is_floating:
        raise TypeError(f"{name} needs floating operands, got {first}")
    if d.dtype_rule == INT and first.is_floating:
        raise TypeError(f"{name} needs integer or bool operands, got {first}")
    return first


# Reductions: name -> (identity for a dtype, numpy reduce over an axis).
@dataclass(frozen=True)
class ReductionDef:
    name: str
    identity: Callable[[dt.DType], object]
    numpy: Callable  # (array, axis) -> array
    result: str = SAME  # SAME, BOOL or 'int64' (arg reductions)


def _nan_max(a, axis):
    r = np.max(a, axis=axis)
    return r


def _argfirst(fn):
    def f(a, axis):
        return fn(a, axis=axis).astype(np.int64)  # numpy returns the first index on ties, as eager

    return f


def _lowest(d: dt.DType):
    if d.is_floating:
        return -math.inf
    if d.is_bool:
        return False
    return int(np.iinfo(d.np).min)


def _highest(d: dt.DType):
    if d.is_floating:
        return math.inf
    if d.is_bool:
        return True
    return int(np.iinfo(d.np).max)


REDUCTIONS: dict[str, ReductionDef] = {
    r.name: r
    for r in [
        ReductionDef("sum", lambda d: 0, lambda a, axis: np.sum(a, axis=axis, dtype=a.dtype)),
        ReductionDef("prod", lambda d: 1, lambda a, axis: np.prod(a, axis=axis, dtype=a.dtype)),
        ReductionDef("max", _lowest, _nan_max),  # np.max propagates NaN, as torch.amax
        ReductionDef("min", _highest, np.min),
        ReductionDef("argmax", _lowest, _argfirst(np.argmax), "int64"),
        ReductionDef("argmin", _highest, _argfirst(np.argmin), "int64"),
        ReductionDef("any", lambda d: False, np.any, BOOL),
        ReductionDef("all", lambda d: True, np.all, BOOL),
    ]
}


def reduction_def(name: str) -> ReductionDef:
    try:
        return REDUCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown stax reduction {name!r}; known: {sorted(REDUCTIONS)}") from None


def reduction_result_dtype(name: str, value_dtype: dt.DType) -> dt.DType:
    r = reduction_def(name)
    if r.result == BOOL:
        return dt.bool_
    if r.result == "int64":
        return dt.int64
    return value_dtype
