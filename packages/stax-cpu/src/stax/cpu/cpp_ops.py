"""THE op -> C++ table of stax-cpu: one row per entry of stax.ir.OPS and stax.ir.REDUCTIONS.

Each op row gives a scalar template and a vector template (None: the op has no
vector form, so a kernel using it is emitted in the scalar form). Placeholders:
{a} {b} {c} operands, {T} the compute C type, {V} the vector type. Semantics live
in the prelude helpers (stax::...) so every row stays a one-liner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from stax.ir import OPS, REDUCTIONS
from stax.ir import dtypes as dt
from stax.ir.ops import SCANS


@dataclass(frozen=True)
class CppOp:
    scalar: str
    vector: str | None = None
    exact: bool = False  # result needs no re-rounding to a half type (it is one of the inputs, or exact)


def _u(fn: str, vec: bool = True) -> CppOp:
    return CppOp(f"stax::{fn}({{a}})", f"stax::vec::{fn}({{a}})" if vec else None)


OP_TABLE: dict[str, CppOp] = {
    "add": CppOp("{a} + {b}", "{a} + {b}"),
    "sub": CppOp("{a} - {b}", "{a} - {b}"),
    "mul": CppOp("{a} * {b}", "{a} * {b}"),
    "truediv": CppOp("{a} / {b}", "{a} / {b}"),
    "floordiv": CppOp("stax::floordiv({a}, {b}, err)", "stax::vec::floordiv({a}, {b}, err)"),
    "truncdiv": CppOp("stax::truncdiv({a}, {b}, err)", "stax::vec::truncdiv({a}, {b}, err)"),
    "remainder": CppOp("stax::remainder({a}, {b}, err)", "stax::vec::remainder({a}, {b}, err)"),
    "fmod": CppOp("stax::fmod({a}, {b}, err)", "stax::vec::fmod({a}, {b}, err)"),
    "neg": CppOp("-{a}", "-{a}", exact=True),
    "abs": CppOp("stax::abs({a})", "stax::vec::abs({a})", exact=True),
    "maximum": CppOp("stax::maximum({a}, {b})", "stax::vec::maximum({a}, {b})", exact=True),
    "minimum": CppOp("stax::minimum({a}, {b})", "stax::vec::minimum({a}, {b})", exact=True),
    "square": CppOp("{a} * {a}", "{a} * {a}"),
    "fmax": CppOp("stax::fmax({a}, {b})", "stax::vec::fmax({a}, {b})", exact=True),
    "fmin": CppOp("stax::fmin({a}, {b})", "stax::vec::fmin({a}, {b})", exact=True),
    "sign": CppOp("stax::sign({a})", "stax::vec::sign({a})", exact=True),
    "relu": CppOp("stax::relu({a})", "stax::vec::relu({a})", exact=True),
    "pow": CppOp("stax::pow({a}, {b}, err)", "stax::vec::pow({a}, {b}, err)"),
    "exp": _u("exp"),
    "exp2": _u("exp2"),
    "expm1": _u("expm1"),
    "log": _u("log"),
    "log2": _u("log2"),
    "log10": _u("log10"),
    "log1p": _u("log1p"),
    "logaddexp": CppOp("stax::logaddexp({a}, {b})", "stax::vec::logaddexp({a}, {b})"),
    "sqrt": _u("sqrt"),
    "rsqrt": _u("rsqrt"),
    "reciprocal": _u("reciprocal"),
    "sin": _u("sin"),
    "cos": _u("cos"),
    "tan": _u("tan"),
    "asin": _u("asin"),
    "acos": _u("acos"),
    "atan": _u("atan"),
    "sinh": _u("sinh"),
    "cosh": _u("cosh"),
    "tanh": _u("tanh"),
    "asinh": _u("asinh"),
    "acosh": _u("acosh"),
    "atanh": _u("atanh"),
    "atan2": CppOp("stax::atan2({a}, {b})", "stax::vec::atan2({a}, {b})"),
    "hypot": CppOp("stax::hypot({a}, {b})", "stax::vec::hypot({a}, {b})"),
    "copysign": CppOp("stax::copysign({a}, {b})", "stax::vec::copysign({a}, {b})", exact=True),
    "nextafter": CppOp("stax::nextafter({a}, {b})", "stax::vec::nextafter({a}, {b})", exact=True),
    "erf": _u("erf"),
    "erfc": _u("erfc"),
    "erfinv": _u("erfinv"),
    "frac": _u("frac"),
    "lgamma": _u("lgamma"),
    "sigmoid": _u("sigmoid"),
    "floor": CppOp("stax::floor({a})", "stax::vec::floor({a})", exact=True),
    "ceil": CppOp("stax::ceil({a})", "stax::vec::ceil({a})", exact=True),
    "round": CppOp("stax::round({a})", "stax::vec::round({a})", exact=True),
    "trunc": CppOp("stax::trunc({a})", "stax::vec::trunc({a})", exact=True),
    "eq": CppOp("{a} == {b}", "stax::vec::eq({a}, {b})"),
    "ne": CppOp("{a} != {b}", "stax::vec::ne({a}, {b})"),
    "lt": CppOp("{a} < {b}", "stax::vec::lt({a}, {b})"),
    "le": CppOp("{a} <= {b}", "stax::vec::le({a}, {b})"),
    "gt": CppOp("{a} > {b}", "stax::vec::gt({a}, {b})"),
    "ge": CppOp("{a} >= {b}", "stax::vec::ge({a}, {b})"),
    "isnan": CppOp("stax::isnan({a})", "stax::vec::isnan({a})"),
    "isinf": CppOp("stax::isinf({a})", "stax::vec::isinf({a})"),
    "isfinite": CppOp("stax::isfinite({a})", "stax::vec::isfinite({a})"),
    "signbit": CppOp("stax::signbit({a})", "stax::vec::signbit({a})"),
    "logical_and": CppOp("({a} != 0) && ({b} != 0)", "stax::vec::logical_and({a}, {b})"),
    "logical_or": CppOp("({a} != 0) || ({b} != 0)", "stax::vec::logical_or({a}, {b})"),
    "logical_xor": CppOp("({a} != 0) != ({b} != 0)", "stax::vec::logical_xor({a}, {b})"),
    "logical_not": CppOp("{a} == 0", "stax::vec::logical_not({a})"),
    "bitwise_and": CppOp("{a} & {b}", "{a} & {b}"),
    "bitwise_or": CppOp("{a} | {b}", "{a} | {b}"),
    "bitwise_xor": CppOp("{a} ^ {b}", "{a} ^ {b}"),
    "bitwise_not": CppOp("stax::bitwise_not({a})", "stax::vec::bitwise_not({a})"),
    "bitwise_left_shift": CppOp("stax::shift_left({a}, {b})", "stax::vec::shift_left({a}, {b})"),
    "bitwise_right_shift": CppOp("stax::shift_right({a}, {b})", "stax::vec::shift_right({a}, {b})"),
    "where": CppOp("{a} ? {b} : {c}", "stax::vec::where({a}, {b}, {c})", exact=True),
    "rand": CppOp("stax::rand({a}, {b})", "stax::vec::rand({a}, {b})"),
    "randn": CppOp("stax::randn({a}, {b})", "stax::vec::randn({a}, {b})"),
    # to_dtype is a conversion matrix, see `convert` below; its row only marks it as known.
    "to_dtype": CppOp("{a}", "{a}"),
}


@dataclass(frozen=True)
class CppReduction:
    """Accumulator update `{acc} = combine({acc}, {v})`; arg reductions also track `{idx}`."""

    update: str
    vector_combine: str | None  # lane-wise combine of two vector accumulators
    horizontal: str | None  # name of the vec_reduce_all combiner
    arg: bool = False


REDUCTION_TABLE: dict[str, CppReduction] = {
    "sum": CppReduction("{acc} = {acc} + {v};", "{x} + {y}", "add"),
    "prod": CppReduction("{acc} = {acc} * {v};", "{x} * {y}", "mul"),
    "max": CppReduction("{acc} = stax::maximum({acc}, {v});", "stax::vec::maximum({x}, {y})", "max"),
    "min": CppReduction("{acc} = stax::minimum({acc}, {v});", "stax::vec::minimum({x}, {y})", "min"),
    "argmax": CppReduction(
        "if ({v} > {acc} || ({v} != {v} && {acc} == {acc})) {{ {acc} = {v}; {idx} = {ri}; }}", None, None, True
    ),
    "argmin": CppReduction(
        "if ({v} < {acc} || ({v} != {v} && {acc} == {acc})) {{ {acc} = {v}; {idx} = {ri}; }}", None, None, True
    ),
    "any": CppReduction("{acc} = {acc} || ({v} != 0);", None, None),
    "all": CppReduction("{acc} = {acc} && ({v} != 0);", None, None),
    # the three outputs of one Welford accumulator (stax::Welford), shared when fused
    "welford_mean": CppReduction("{acc}.update({v});", None, None),
    "welford_m2": CppReduction("{acc}.update({v});", None, None),
    "welford_count": CppReduction("{acc}.update({v});", None, None),
}
WELFORD = ("welford_mean", "welford_m2", "welford_count")

# Scans (inclusive, along one axis): the same accumulator update, stored at every step.
SCAN_TABLE: dict[str, CppReduction] = {
    "cumsum": CppReduction("{acc} = {acc} + {v};", None, None),
    "cumprod": CppReduction("{acc} = {acc} * {v};", None, None),
    "cummax": CppReduction("{acc} = stax::maximum({acc}, {v});", None, None),
    "cummin": CppReduction("{acc} = stax::minimum({acc}, {v});", None, None),
    # torch.cummax/cummin indices: ties move to the later element; a NaN sticks
    "cummax_index": CppReduction(
        "if (({v} >= {acc} || {v} != {v}) && !({acc} != {acc} && {v} == {v})) {{ {acc} = {v}; {idx} = {ri}; }}",
        None, None, True),
    "cummin_index": CppReduction(
        "if (({v} <= {acc} || {v} != {v}) && !({acc} != {acc} && {v} == {v})) {{ {acc} = {v}; {idx} = {ri}; }}",
        None, None, True),
    "logcumsumexp": CppReduction("{acc} = stax::logaddexp({acc}, {v});", None, None),
}



def missing_rows() -> list[str]:
    """Ops/reductions of stax.ir without a row here (a test keeps this empty)."""
    return sorted((set(OPS) - set(OP_TABLE)) | (set(REDUCTIONS) - set(REDUCTION_TABLE)) | (set(SCANS) - set(SCAN_TABLE)))


# ---- dtypes: storage C type (pointer element) and compute C type ----
STORAGE_CTYPE: dict[str, str] = {
    "bool": "bool", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
    "int64": "int64_t", "float16": "uint16_t", "bfloat16": "uint16_t", "float32": "float", "float64": "double",
}


def storage_ctype(d: dt.DType) -> str:
    return STORAGE_CTYPE[d.name]


def compute_ctype(d: dt.DType) -> str:
    return STORAGE_CTYPE[dt.compute_dtype(d).name]


def is_half(d: dt.DType) -> bool:
    return d in (dt.float16, dt.bfloat16)


def load_expr(d: dt.DType, ref: str) -> str:
    """Storage element -> compute value."""
    if d == dt.float16:
        return f"stax::h2f({ref})"
    if d == dt.bfloat16:
        return f"stax::b2f({ref})"
    return ref


def store_expr(d: dt.DType, value: str) -> str:
    """Compute value -> storage element (half types round to nearest even here)."""
    if d == dt.float16:
        return f"stax::f2h({value})"
    if d == dt.bfloat16:
        return f"stax::f2b({value})"
    return value


def round_expr(d: dt.DType, value: str) -> str:
    """Re-round a float result to a half dtype, as eager does after every op."""
    if d == dt.float16:
        return f"stax::rh({value})"
    if d == dt.bfloat16:
        return f"stax::rb({value})"
    return value


def convert(src: dt.DType, dst: dt.DType, a: str) -> str:
    """to_dtype: C++ for converting compute value `a` of `src` to compute value of `dst`."""
    if dst == src:
        return a
    if dst.is_bool:
        return f"({a} != 0)"
    if dst.is_integer:
        if src.is_floating:  # truncate toward zero; NaN/out of range as eager on x86
            return f"stax::float_to_int<{dst.ctype}>({a})"
        return f"static_cast<{dst.ctype}>({a})"
    if dst == dt.float16:  # through float, as c10::Half(double) and numpy do
        return f"stax::rh(static_cast<float>({a}))"
    if dst == dt.bfloat16:
        return f"stax::rb(static_cast<float>({a}))"
    return f"static_cast<{dst.ctype}>({a})"


# ---- literals ----
def literal(value, d: dt.DType) -> str:
    """A C++ literal of the compute type for a constant of dtype `d` (rounded to `d` first)."""
    if d.is_bool:
        return "true" if value else "false"
    if d.is_integer:
        v = int(value)  # typed exactly (int64_t is `long`, not `long long`): templates must deduce one type
        text = "(-9223372036854775807LL - 1)" if v == -(2**63) else f"{v}LL"
        return f"{d.ctype}({text})" if v >= 0 else f"{d.ctype}{text}" if text.startswith("(") else f"{d.ctype}({text})"
    f = float(dt.round_to(np.asarray([value], dtype=np.float64), d)[0]) if is_half(d) else float(value)
    single = dt.compute_dtype(d) == dt.float32
    if math.isnan(f):
        return "__builtin_nanf(\"\")" if single else "__builtin_nan(\"\")"
    if math.isinf(f):
        s = "-" if f < 0 else ""
        return f"({s}__builtin_inff())" if single else f"({s}__builtin_inf())"
    if single:
        text = str(np.float32(f))
        if "." not in text and "e" not in text:
            text += ".0"
        return f"{text}f" if not text.startswith("-") else f"({text}f)"
    text = repr(f)
    return text if not text.startswith("-") else f"({text})"


def identity_literal(reduction: str, d: dt.DType) -> str:
    """The accumulator's initial value for `reduction` (or scan) over values of dtype `d`."""
    rdef = REDUCTIONS.get(reduction) or SCANS[reduction]
    return literal(rdef.identity(d), dt.compute_dtype(d) if not is_half(d) else dt.float32)


def accumulator_row(kind: str) -> CppReduction:
    return REDUCTION_TABLE.get(kind) or SCAN_TABLE[kind]
