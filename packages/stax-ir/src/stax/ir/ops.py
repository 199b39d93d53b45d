"""The one op table: name -> arity, dtype rule, numpy semantics.

Each codegen package maps the same names to its own templates (C++, Triton); a new
op is a row here plus a row in each of those tables. numpy functions receive
operands already converted to the compute dtype (half types as float32) and the
interpreter rounds results to the op's dtype, which is how eager CPU behaves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import dtypes as dt
from . import numerics as nm
from . import rng

# dtype rules: how an op's result dtype follows from its operands.
SAME = "same"  # all operands share one dtype; the result has it
BOOL = "bool"  # result is bool (comparisons, logical ops, isnan)
FLOAT = "float"  # floating operands only; result has their dtype
INT = "int"  # integer/bool operands only; result has their dtype
WHERE = "where"  # (cond, a, b): result is a's dtype (a and b agree)
CAST = "cast"  # result dtype is given explicitly (to_dtype)
RANDOM = "random"  # (seed, offset) int64 operands; result float32


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    dtype_rule: str
    numpy: Callable
    doc: str = ""
    dtypes: tuple | None = None  # operand dtype names allowed beyond the rule (None: any the rule allows)
    dtype_arg: bool = False  # numpy also gets dtype=<result DType> (half types that round mid-op)


def _quiet(fn):
    """numpy without floating-point warnings: inf/nan results are the point."""

    def f(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    return f


def _sigmoid(a):
    with np.errstate(over="ignore"):
        one = a.dtype.type(1)
        return one / (one + np.exp(-a))


def _rsqrt(a):
    with np.errstate(all="ignore"):
        one = a.dtype.type(1)
        return one / np.sqrt(a)


def _random(fn):
    def f(seed, offset):
        return fn(seed, offset)

    return f


_INTS = ("uint8", "int8", "int16", "int32", "int64")

_TABLE = [
    # arithmetic
    OpDef("add", 2, SAME, np.add),
    OpDef("sub", 2, SAME, np.subtract),
    OpDef("mul", 2, SAME, np.multiply),
    OpDef("truediv", 2, FLOAT, _quiet(np.true_divide), "float division (IEEE: x/0 = inf, 0/0 = nan)"),
    OpDef("floordiv", 2, SAME, nm.floordiv, "floor division; integer /0 is an error"),
    OpDef("truncdiv", 2, SAME, nm.truncdiv, "C division toward zero; integer /0 is an error; half types "
          "round the quotient to their dtype before truncating, as eager", dtype_arg=True),
    OpDef("remainder", 2, SAME, nm.remainder, "result has the divisor's sign (torch.remainder)"),
    OpDef("fmod", 2, SAME, nm.fmod, "result has the dividend's sign (torch.fmod)"),
    OpDef("neg", 1, SAME, np.negative, "integers wrap"),
    OpDef("abs", 1, SAME, np.abs, "abs(INT_MIN) wraps to INT_MIN, as eager"),
    OpDef("square", 1, SAME, lambda a: a * a),
    OpDef("maximum", 2, SAME, np.maximum, "propagates NaN like torch.maximum"),
    OpDef("minimum", 2, SAME, np.minimum, "propagates NaN like torch.minimum"),
    OpDef("fmax", 2, FLOAT, np.fmax, "ignores NaN like torch.fmax"),
    OpDef("fmin", 2, FLOAT, np.fmin, "ignores NaN like torch.fmin"),
    OpDef("sign", 1, SAME, nm.sign, "NaN -> 0, as torch.sign"),
    OpDef("relu", 1, SAME, nm.relu, "x < 0 ? 0 : x; NaN and -0.0 stay"),
    OpDef("pow", 2, SAME, nm.power, "integer ** negative is an error; integers wrap"),
    # floating math
    OpDef("exp", 1, FLOAT, _quiet(np.exp)),
    OpDef("exp2", 1, FLOAT, _quiet(np.exp2)),
    OpDef("expm1", 1, FLOAT, _quiet(np.expm1)),
    OpDef("log", 1, FLOAT, _quiet(np.log)),
    OpDef("log2", 1, FLOAT, _quiet(np.log2)),
    OpDef("log10", 1, FLOAT, _quiet(np.log10)),
    OpDef("log1p", 1, FLOAT, _quiet(np.log1p)),
    OpDef("logaddexp", 2, FLOAT, _quiet(np.logaddexp)),
    OpDef("sqrt", 1, FLOAT, _quiet(np.sqrt)),
    OpDef("rsqrt", 1, FLOAT, _rsqrt),
    OpDef("reciprocal", 1, FLOAT, _quiet(lambda a: a.dtype.type(1) / a)),
    OpDef("sin", 1, FLOAT, _quiet(np.sin)),
    OpDef("cos", 1, FLOAT, _quiet(np.cos)),
    OpDef("tan", 1, FLOAT, _quiet(np.tan)),
    OpDef("asin", 1, FLOAT, _quiet(np.arcsin)),
    OpDef("acos", 1, FLOAT, _quiet(np.arccos)),
    OpDef("atan", 1, FLOAT, _quiet(np.arctan)),
    OpDef("sinh", 1, FLOAT, _quiet(np.sinh)),
    OpDef("cosh", 1, FLOAT, _quiet(np.cosh)),
    OpDef("tanh", 1, FLOAT, _quiet(np.tanh)),
    OpDef("asinh", 1, FLOAT, _quiet(np.arcsinh)),
    OpDef("acosh", 1, FLOAT, _quiet(np.arccosh)),
    OpDef("atanh", 1, FLOAT, _quiet(np.arctanh)),
    OpDef("atan2", 2, FLOAT, _quiet(np.arctan2)),
    OpDef("hypot", 2, FLOAT, _quiet(np.hypot), "hypot(inf, nan) = inf"),
    OpDef("copysign", 2, FLOAT, np.copysign),
    OpDef("nextafter", 2, FLOAT, np.nextafter, "next float32/float64 value (half types: not supported)",
          ("float32", "float64")),
    OpDef("erf", 1, FLOAT, nm.scalar_map(nm.erf_scalar)),
    OpDef("erfc", 1, FLOAT, nm.scalar_map(nm.erfc_scalar)),
    OpDef("erfinv", 1, FLOAT, nm.scalar_map(nm.erfinv_scalar), "erfinv(+-1) = +-inf; |x| > 1 -> nan"),
    OpDef("lgamma", 1, FLOAT, nm.scalar_map(nm.lgamma_scalar), "+inf at the poles 0, -1, -2, ..."),
    OpDef("sigmoid", 1, FLOAT, _sigmoid),
    OpDef("frac", 1, FLOAT, nm.frac, "x - trunc(x)"),
    OpDef("floor", 1, SAME, nm.int_identity(np.floor), "identity on integers"),
    OpDef("ceil", 1, SAME, nm.int_identity(np.ceil), "identity on integers"),
    OpDef("round", 1, SAME, nm.int_identity(np.rint), "round half to even, as torch.round"),
    OpDef("trunc", 1, SAME, nm.int_identity(np.trunc), "identity on integers"),
    # comparisons and logic
    OpDef("eq", 2, BOOL, np.equal),
    OpDef("ne", 2, BOOL, np.not_equal),
    OpDef("lt", 2, BOOL, np.less),
    OpDef("le", 2, BOOL, np.less_equal),
    OpDef("gt", 2, BOOL, np.greater),
    OpDef("ge", 2, BOOL, np.greater_equal),
    OpDef("isnan", 1, BOOL, np.isnan),
    OpDef("isinf", 1, BOOL, np.isinf),
    OpDef("isfinite", 1, BOOL, np.isfinite),
    OpDef("signbit", 1, BOOL, np.signbit, "true for -0.0 and negative NaN"),
    OpDef("logical_and", 2, BOOL, np.logical_and),
    OpDef("logical_or", 2, BOOL, np.logical_or),
    OpDef("logical_xor", 2, BOOL, np.logical_xor),
    OpDef("logical_not", 1, BOOL, np.logical_not),
    OpDef("bitwise_and", 2, INT, np.bitwise_and),
    OpDef("bitwise_or", 2, INT, np.bitwise_or),
    OpDef("bitwise_xor", 2, INT, np.bitwise_xor),
    OpDef("bitwise_not", 1, INT, np.invert),
    OpDef("bitwise_left_shift", 2, INT, nm.shift_left, "shift < 0 or >= bit width gives 0", _INTS),
    OpDef("bitwise_right_shift", 2, INT, nm.shift_right, "arithmetic; shift < 0 or >= width fills with the sign",
          _INTS),
    # selection and conversion
    OpDef("where", 3, WHERE, np.where),
    OpDef("to_dtype", 1, CAST, lambda a: a, "convert; float->int truncates toward zero (dtypes.round_to)"),
    # counter-based random numbers (rng.py): (seed int64, offset int64) -> float32
    OpDef("rand", 2, RANDOM, _random(rng.rand), "uniform [0, 1), Philox4x32-10 as tl.rand"),
    OpDef("randn", 2, RANDOM, _random(rng.randn), "standard normal, Box-Muller as tl.randn"),
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
    if d.dtype_rule == RANDOM:
        if any(a != dt.int64 for a in arg_dtypes):
            raise TypeError(f"{name} takes int64 (seed, offset), got {[str(a) for a in arg_dtypes]}")
        return dt.float32
    if any(a != first for a in arg_dtypes):
        raise TypeError(f"{name}: operands must share one dtype, got {[str(a) for a in arg_dtypes]}")
    if d.dtype_rule == BOOL:
        return dt.bool_
    if d.dtype_rule == FLOAT and not first.is_floating:
        raise TypeError(f"{name} needs floating operands, got {first}")
    if d.dtype_rule == INT and first.is_floating:
        raise TypeError(f"{name} needs integer or bool operands, got {first}")
    if d.dtypes is not None and first.name not in d.dtypes:
        raise TypeError(f"{name} supports {list(d.dtypes)} operands, got {first}")
    return first


# Reductions: name -> (identity for a dtype, numpy reduce over an axis).
@dataclass(frozen=True)
class ReductionDef:
    name: str
    identity: Callable[[dt.DType], object]
    numpy: Callable  # (array, axis) -> array
    result: str = SAME  # SAME, BOOL or 'int64' (arg reductions)
    empty: Callable[[dt.DType], object] | None = None  # result over zero elements; None: identity
    doc: str = ""


def _nan_max(a, axis):
    r = np.max(a, axis=axis)
    return r


def _welford_mean(a, axis):
    return np.mean(a.astype(np.float64), axis=axis).astype(a.dtype)


def _welford_m2(a, axis):
    a64 = a.astype(np.float64)
    d = a64 - np.mean(a64, axis=axis, keepdims=True)
    return np.sum(d * d, axis=axis).astype(a.dtype)


def _welford_count(a, axis):
    return np.full(np.delete(a.shape, axis), a.shape[axis], dtype=a.dtype)


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
        # The three outputs of one Welford reduction (see WELFORD_OUTPUTS).
        ReductionDef("welford_mean", lambda d: 0, _welford_mean, empty=lambda d: math.nan,
                     doc="mean of the values"),
        ReductionDef("welford_m2", lambda d: 0, _welford_m2, doc="sum of squared deviations from the mean"),
        ReductionDef("welford_count", lambda d: 0, _welford_count, doc="number of values (in the value dtype)"),
    ]
}

# One Welford reduction has three outputs: a codegen keeps one (mean, m2, count)
# accumulator for all three buffers that share (value, ranges, reduction_ranges)
# and the scheduler fuses them (SAME_VARS_REDUCE). var = m2 / (count - correction).
WELFORD_OUTPUTS = ("welford_mean", "welford_m2", "welford_count")


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


# Scans: an inclusive prefix combine along one axis (Scan bodies in graph.py).
@dataclass(frozen=True)
class ScanDef:
    name: str
    identity: Callable[[dt.DType], object]
    numpy: Callable  # (array, axis) -> array of the same shape
    result: str = SAME  # SAME or 'int64' (index outputs)
    doc: str = ""


def _cum_index(better):
    """Index of the running extreme: ties and NaN move it to the later element, as torch.cummax."""

    def f(a, axis):
        a = np.moveaxis(np.asarray(a), axis, -1)
        out = np.zeros(a.shape, dtype=np.int64)
        best = a[..., 0].copy()
        idx = np.zeros(a.shape[:-1], dtype=np.int64)
        for k in range(a.shape[-1]):
            x = a[..., k]
            with np.errstate(invalid="ignore"):
                take = better(x, best) | (x == best) | (np.isnan(x) if a.dtype.kind == "f" else False)
            if a.dtype.kind == "f":
                take &= ~(np.isnan(best) & ~np.isnan(x))
            best = np.where(take, x, best)
            idx = np.where(take, k, idx)
            out[..., k] = idx
        return np.moveaxis(out, -1, axis)

    return f


def _accumulate(ufunc):
    def f(a, axis):
        with np.errstate(all="ignore"):
            return ufunc.accumulate(a, axis=axis, dtype=a.dtype)

    return f


SCANS: dict[str, ScanDef] = {
    s.name: s
    for s in [
        ScanDef("cumsum", lambda d: 0, _accumulate(np.add)),
        ScanDef("cumprod", lambda d: 1, _accumulate(np.multiply)),
        ScanDef("cummax", _lowest, _accumulate(np.maximum), doc="NaN propagates"),
        ScanDef("cummin", _highest, _accumulate(np.minimum), doc="NaN propagates"),
        ScanDef("cummax_index", _lowest, _cum_index(np.greater), "int64", "torch.cummax indices: last tie, NaN sticks"),
        ScanDef("cummin_index", _highest, _cum_index(np.less), "int64", "torch.cummin indices: last tie, NaN sticks"),
        ScanDef("logcumsumexp", lambda d: -math.inf, _accumulate(np.logaddexp), doc="floating only"),
    ]
}


def scan_def(name: str) -> ScanDef:
    try:
        return SCANS[name]
    except KeyError:
        raise ValueError(f"unknown stax scan {name!r}; known: {sorted(SCANS)}") from None


def scan_result_dtype(name: str, value_dtype: dt.DType) -> dt.DType:
    return dt.int64 if scan_def(name).result == "int64" else value_dtype
