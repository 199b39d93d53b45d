"""Pointwise ATen ops: tables of (stax op, promotion kind) plus a few composed ops.

Every entry goes through `common.pointwise`: torch's promotion, broadcasting, the
computation dtype (float32 for half types), a cast back to the result dtype.
"""

from __future__ import annotations

import math

import torch
from stax.ir import dtypes as dt

from ..dtypes import to_torch
from ..tensor import TensorValue, lazy
from ..views import Unsupported, expand, slice_
from .common import KIND, broadcast_all, operand, out_dtype, pointwise, promote
from .registry import POINTWISE, table

aten = torch.ops.aten
prims = torch.ops.prims

# ATen op -> (stax op, promotion kind): one operand.
UNARY = {
    aten.exp: ("exp", KIND.INT_TO_FLOAT),
    aten.exp2: ("exp2", KIND.INT_TO_FLOAT),
    aten.expm1: ("expm1", KIND.INT_TO_FLOAT),
    aten.log: ("log", KIND.INT_TO_FLOAT),
    aten.log2: ("log2", KIND.INT_TO_FLOAT),
    aten.log10: ("log10", KIND.INT_TO_FLOAT),
    aten.log1p: ("log1p", KIND.INT_TO_FLOAT),
    aten.sqrt: ("sqrt", KIND.INT_TO_FLOAT),
    aten.rsqrt: ("rsqrt", KIND.INT_TO_FLOAT),
    aten.reciprocal: ("reciprocal", KIND.INT_TO_FLOAT),
    aten.sin: ("sin", KIND.INT_TO_FLOAT),
    aten.cos: ("cos", KIND.INT_TO_FLOAT),
    aten.tan: ("tan", KIND.INT_TO_FLOAT),
    aten.asin: ("asin", KIND.INT_TO_FLOAT),
    aten.acos: ("acos", KIND.INT_TO_FLOAT),
    aten.atan: ("atan", KIND.INT_TO_FLOAT),
    aten.sinh: ("sinh", KIND.INT_TO_FLOAT),
    aten.cosh: ("cosh", KIND.INT_TO_FLOAT),
    aten.tanh: ("tanh", KIND.INT_TO_FLOAT),
    aten.asinh: ("asinh", KIND.INT_TO_FLOAT),
    aten.acosh: ("acosh", KIND.INT_TO_FLOAT),
    aten.atanh: ("atanh", KIND.INT_TO_FLOAT),
    aten.erf: ("erf", KIND.INT_TO_FLOAT),
    aten.erfc: ("erfc", KIND.INT_TO_FLOAT),
    aten.special_erfc: ("erfc", KIND.INT_TO_FLOAT),
    aten.erfinv: ("erfinv", KIND.INT_TO_FLOAT),
    aten.lgamma: ("lgamma", KIND.INT_TO_FLOAT),
    aten.sigmoid: ("sigmoid", KIND.INT_TO_FLOAT),
    aten.neg: ("neg", KIND.DEFAULT),
    aten.abs: ("abs", KIND.DEFAULT),
    aten.relu: ("relu", KIND.DEFAULT),
    aten.sign: ("sign", KIND.DEFAULT),
    aten.sgn: ("sign", KIND.DEFAULT),
    aten.bitwise_not: ("bitwise_not", KIND.DEFAULT),
    aten.logical_not: ("logical_not", KIND.ALWAYS_BOOL),
}

# rounding ops are the identity on integers
ROUNDING = {aten.floor: "floor", aten.ceil: "ceil", aten.round: "round", aten.trunc: "trunc"}

# ATen op -> (stax op, promotion kind): two operands (Tensor / Scalar overloads alike).
BINARY = {
    aten.mul: ("mul", KIND.DEFAULT),
    aten.maximum: ("maximum", KIND.DEFAULT),
    aten.minimum: ("minimum", KIND.DEFAULT),
    aten.atan2: ("atan2", KIND.INT_TO_FLOAT),
    aten.logaddexp: ("logaddexp", KIND.INT_TO_FLOAT),
    aten.hypot: ("hypot", KIND.DEFAULT),
    aten.remainder: ("remainder", KIND.DEFAULT),
    aten.fmod: ("fmod", KIND.DEFAULT),
    aten.floor_divide: ("floordiv", KIND.DEFAULT),
    aten.bitwise_and: ("bitwise_and", KIND.DEFAULT),
    aten.bitwise_or: ("bitwise_or", KIND.DEFAULT),
    aten.bitwise_xor: ("bitwise_xor", KIND.DEFAULT),
    aten.logical_and: ("logical_and", KIND.ALWAYS_BOOL),
    aten.logical_or: ("logical_or", KIND.ALWAYS_BOOL),
    aten.logical_xor: ("logical_xor", KIND.ALWAYS_BOOL),
    aten.eq: ("eq", KIND.ALWAYS_BOOL),
    aten.ne: ("ne", KIND.ALWAYS_BOOL),
    aten.lt: ("lt", KIND.ALWAYS_BOOL),
    aten.le: ("le", KIND.ALWAYS_BOOL),
    aten.gt: ("gt", KIND.ALWAYS_BOOL),
    aten.ge: ("ge", KIND.ALWAYS_BOOL),
}


def _unary(name, kind):
    return lambda ctx, node, x: pointwise(ctx, node, [x], lambda b, v: b.op(name, v), kind)


def _binary(name, kind):
    return lambda ctx, node, x, y: pointwise(ctx, node, [x, y], lambda b, u, v: b.op(name, u, v), kind)


def _rounding(name):
    def low(ctx, node, x, decimals=0):
        if decimals:
            raise Unsupported("round with decimals")
        if not x.dtype.is_floating:
            return pointwise(ctx, node, [x], lambda b, v: v)
        return pointwise(ctx, node, [x], lambda b, v: b.op(name, v))

    return low


def _float_pred(name):
    """isnan / isinf: always False on integers."""

    def low(ctx, node, x):
        if not x.dtype.is_floating:
            return pointwise(ctx, node, [x], lambda b, v: b.const(False, dt.bool_), KIND.ALWAYS_BOOL)
        return pointwise(ctx, node, [x], lambda b, v: b.op(name, v), KIND.ALWAYS_BOOL)

    return low


def _scaled(b, v, alpha):
    return v if alpha == 1 else b.op("mul", v, b.const(alpha, v.dtype))


def add(ctx, node, x, y, alpha=1):
    return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("add", u, _scaled(b, v, alpha)))


def sub(ctx, node, x, y, alpha=1):
    return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("sub", u, _scaled(b, v, alpha)))


def rsub(ctx, node, x, y, alpha=1):
    return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("sub", v, _scaled(b, u, alpha)))


def _reciprocal_of(x, y) -> float | None:
    """1/y when a floating tensor is divided by a Python number whose reciprocal is finite in the
    result's dtype: x * (1/y) is within an ulp of x / y (Inductor lowers it the same way) and a
    multiply, where a vector divide costs several (Zen 4: ~5 cycles per 16 floats)."""
    if not isinstance(x, TensorValue) or isinstance(y, bool) or not isinstance(y, (int, float)):
        return None
    comp, _ = promote([x, y])
    if not comp.is_floating or y == 0 or not math.isfinite(y):
        return None
    r = 1.0 / y
    return r if 0 < abs(r) <= torch.finfo(to_torch(comp)).max else None


def div(ctx, node, x, y, rounding_mode=None):
    if rounding_mode is None:
        r = _reciprocal_of(x, y)
        if r is not None:
            return pointwise(ctx, node, [x, r], lambda b, u, v: b.op("mul", u, v))
        return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("truediv", u, v), KIND.INT_TO_FLOAT)
    comp, _ = promote([x, y])
    if rounding_mode == "floor":
        return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("floordiv", u, v))
    if rounding_mode == "trunc":
        if comp.is_floating:
            return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("trunc", b.op("truediv", u, v)))
        return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("truncdiv", u, v))
    raise Unsupported(f"div rounding_mode={rounding_mode!r}")


def pow_(ctx, node, x, y):
    if isinstance(y, (int, float)) and not isinstance(y, bool) and isinstance(x, TensorValue):
        comp, _ = promote([x, y])
        if y == 2:
            return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("mul", u, u))
        if y == 3:
            return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("mul", b.op("mul", u, u), u))
        if y == 1:
            return pointwise(ctx, node, [x, y], lambda b, u, v: u)
        # eager's CPU kernel takes float16 through std::pow, without the root special cases
        roots = comp.is_floating and not (x.dtype == dt.float16 and ctx.tensor_device.type == "cpu")
        if y == 0.5 and roots:
            return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("sqrt", u))
        if y == -1 and comp.is_floating:
            return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("reciprocal", u))
        # eager's kernels (CPU and cuda) take these exponents as rsqrt and 1 / (x * x) too, not pow():
        # pow(-inf, -0.5) is 0, rsqrt(-inf) NaN, and a gradient of pow(x, 0.5) is made of pow(x, -0.5)
        if y == -0.5 and roots:
            return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("rsqrt", u))
        if y == -2 and comp.is_floating:
            return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("reciprocal", b.op("mul", u, u)))
    return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("pow", u, v))


def where(ctx, node, cond, x, y):
    comp, res = promote([x, y])
    shape, (c, bx, by) = broadcast_all([cond, x, y])
    if out_dtype(node) != res:
        raise Unsupported("where: promotion mismatch")
    b = ctx.builder

    def fn(idx):
        return b.op("where", operand(ctx, c, idx, dt.bool_), operand(ctx, bx, idx, res), operand(ctx, by, idx, res))

    return lazy(shape, res, ctx.device, fn)


def masked_fill(ctx, node, x, mask, value):
    res = x.dtype
    shape, (bx, m, v) = broadcast_all([x, mask, value])
    if shape != x.sizes:
        raise Unsupported("masked_fill that broadcasts self")
    b = ctx.builder

    def fn(idx):
        return b.op("where", operand(ctx, m, idx, dt.bool_), operand(ctx, v, idx, res), operand(ctx, bx, idx, res))

    return lazy(shape, res, ctx.device, fn)


def _clamp_compute(lo, hi):
    def compute(b, v, *bounds):
        it = iter(bounds)
        if lo is not None:
            v = b.op("maximum", v, next(it))
        if hi is not None:
            v = b.op("minimum", v, next(it))
        return v

    return compute


def clamp(ctx, node, x, min=None, max=None):
    bounds = [a for a in (min, max) if a is not None]
    return pointwise(ctx, node, [x, *bounds], _clamp_compute(min, max))


def clamp_min(ctx, node, x, min):
    return clamp(ctx, node, x, min=min)


def clamp_max(ctx, node, x, max):
    return clamp(ctx, node, x, max=max)


def to_copy(ctx, node, x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
            memory_format=None):
    ctx.check_device(device)
    want = out_dtype(node)
    b = ctx.builder
    return lazy(x.sizes, want, x.device, lambda idx: b.cast(x.load(idx), want))


def convert_element_type(ctx, node, x, dtype):
    return to_copy(ctx, node, x)


def clone(ctx, node, x, memory_format=None):
    """A fresh tensor (never an alias of `x`): a lazy identity."""
    return lazy(x.sizes, x.dtype, x.device, x.load)


def narrow_copy(ctx, node, x, dim, start, length):
    """A fresh copy of x.narrow(dim, start, length): a lazy read through the slice."""
    n = x.sizes[dim % x.ndim]
    if isinstance(start, int) and start < 0:
        start = start + n
    return clone(ctx, node, slice_(x, dim, start, start + length, ranges=ctx.symbols.value_ranges()))


def copy(ctx, node, dst, src, non_blocking=False):
    s = expand(src, dst.sizes)
    b = ctx.builder
    return lazy(dst.sizes, dst.dtype, dst.device, lambda idx: b.cast(s.load(idx), dst.dtype))


def isfinite(ctx, node, x):
    if not x.dtype.is_floating:
        return pointwise(ctx, node, [x], lambda b, v: b.const(True, dt.bool_), KIND.ALWAYS_BOOL)
    return pointwise(ctx, node, [x], lambda b, v: b.op("isfinite", v), KIND.ALWAYS_BOOL)


def frac(ctx, node, x):
    return pointwise(ctx, node, [x], lambda b, v: b.op("frac", v))


def nan_to_num(ctx, node, x, nan=None, posinf=None, neginf=None):
    if not x.dtype.is_floating:
        return clone(ctx, node, x)
    info = torch.finfo(torch.float16 if x.dtype == dt.float16 else torch.bfloat16 if x.dtype == dt.bfloat16
                       else torch.float64 if x.dtype == dt.float64 else torch.float32)
    nan = 0.0 if nan is None else nan
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf

    def compute(b, v):
        zero = b.const(0.0, v.dtype)
        v = b.op("where", b.op("isnan", v), b.const(nan, v.dtype), v)
        inf = b.op("isinf", v)
        big = b.op("where", b.op("gt", v, zero), b.const(posinf, v.dtype), b.const(neginf, v.dtype))
        return b.op("where", inf, big, v)

    return pointwise(ctx, node, [x], compute)


def lerp(ctx, node, start, end, weight):
    def compute(b, s, e, w):
        return b.op("add", s, b.op("mul", w, b.op("sub", e, s)))

    return pointwise(ctx, node, [start, end, weight], compute)


def addcmul(ctx, node, x, t1, t2, value=1):
    return pointwise(ctx, node, [x, t1, t2], lambda b, a, u, v: b.op("add", a, _scaled(b, b.op("mul", u, v), value)))


def addcdiv(ctx, node, x, t1, t2, value=1):
    return pointwise(ctx, node, [x, t1, t2],
                     lambda b, a, u, v: b.op("add", a, _scaled(b, b.op("truediv", u, v), value)))


def signbit(ctx, node, x):
    """True for negative values, -0.0 and negative NaN (std::signbit)."""
    if not x.dtype.is_floating:
        return pointwise(ctx, node, [x], lambda b, v: b.op("lt", v, b.const(0, v.dtype)), KIND.ALWAYS_BOOL)
    return pointwise(ctx, node, [x], lambda b, v: b.op("signbit", v), KIND.ALWAYS_BOOL)


def copysign(ctx, node, x, y):
    return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("copysign", u, v), KIND.INT_TO_FLOAT)


def _nan_ignoring(name):
    """fmax / fmin: like maximum / minimum but a NaN operand loses to a number."""

    def compute(b, u, v):
        if not u.dtype.is_floating:
            return b.op({"fmax": "maximum", "fmin": "minimum"}[name], u, v)
        return b.op(name, u, v)

    return lambda ctx, node, x, y: pointwise(ctx, node, [x, y], compute)


def nextafter(ctx, node, x, y):
    """The next representable value after x towards y: float32 / float64 only (half
    types step in their own format, which the IR op does not)."""
    _, res = promote([x, y])
    if res not in (dt.float32, dt.float64):
        raise Unsupported(f"nextafter on {res}")
    return pointwise(ctx, node, [x, y], lambda b, u, v: b.op("nextafter", u, v))


def _shift(name):
    """<< and >> on integers: shifts < 0 or >= the bit width give 0 (or the sign fill), as eager."""

    def low(ctx, node, x, y):
        comp, _ = promote([x, y])
        if not comp.is_integer:
            raise Unsupported(f"{name} on {comp}")
        return pointwise(ctx, node, [x, y], lambda b, u, v: b.op(name, u, v))

    return low


def angle(ctx, node, x):
    """angle of a real number: pi for negatives, 0 otherwise, NaN stays NaN (eager's rule)."""

    def compute(b, v):
        if not v.dtype.is_floating:
            raise Unsupported("angle of integers")
        pi = b.op("where", b.op("lt", v, b.const(0, v.dtype)), b.const(3.141592653589793, v.dtype), b.const(0, v.dtype))
        return b.op("where", b.op("isnan", v), v, pi)

    return pointwise(ctx, node, [x], compute, KIND.INT_TO_FLOAT)


LOWERINGS = {
    **table(POINTWISE, {op: _unary(*spec) for op, spec in UNARY.items()}),
    **table(POINTWISE, {op: _binary(*spec) for op, spec in BINARY.items()}),
    **table(POINTWISE, {op: _rounding(name) for op, name in ROUNDING.items()}),
    **table(POINTWISE, {
        aten.isnan: _float_pred("isnan"),
        aten.isinf: _float_pred("isinf"),
        aten.isfinite: isfinite,
        aten.add: add,
        aten.sub: sub,
        aten.rsub: rsub,
        aten.div: div,
        aten.true_divide: div,
        aten.pow: pow_,
        aten.where: where,
        aten.masked_fill: masked_fill,
        aten.clamp: clamp,
        aten.clamp_min: clamp_min,
        aten.clamp_max: clamp_max,
        aten._to_copy: to_copy,
        prims.convert_element_type: convert_element_type,
        aten.clone: clone,
        aten.narrow_copy: narrow_copy,
        aten.lift_fresh_copy: clone,
        aten.copy: copy,
        aten.frac: frac,
        aten.nan_to_num: nan_to_num,
        aten.lerp: lerp,
        aten.addcmul: addcmul,
        aten.addcdiv: addcdiv,
        aten.signbit: signbit,
        aten.copysign: copysign,
        aten.fmax: _nan_ignoring("fmax"),
        aten.fmin: _nan_ignoring("fmin"),
        aten.nextafter: nextafter,
        aten.bitwise_left_shift: _shift("bitwise_left_shift"),
        aten.bitwise_right_shift: _shift("bitwise_right_shift"),
        aten.__lshift__: _shift("bitwise_left_shift"),
        aten.__rshift__: _shift("bitwise_right_shift"),
        aten.angle: angle,
    }),
}

