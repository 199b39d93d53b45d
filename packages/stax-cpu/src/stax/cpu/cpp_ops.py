"""THE op -> C++ table of stax-cpu: one row per entry of stax.ir.OPS and stax.ir.REDUCTIONS.

Each op row gives a scalar template and a vector template (None: the op has no
vector form, so a kernel using it is emitted in the scalar form). Placeholders:
{a} {b} {c} operands, {T} the compute C type, {V} the vector type. Semantics live
in the prelude helpers (stax::...) so every row stays a one-liner.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from stax.ir import OPS, REDUCTIONS
from stax.ir import dtypes as dt
from stax.ir.ops import SCANS


@dataclass(frozen=True)
class CppOp:
    """One op's C++. `scalar` / `vector`: templates (`vector` None: no vector form). The rest is what
    the preludes and the vector body derive from the rows instead of keeping lists of names:
    `helper`, the stax:: helper both templates call; `lanewise`, the vector prelude's lane-by-lane
    fallback for it (STAX_<lanewise>(helper): VMAP1 unary, VMAP2 binary, VMAP2E binary with the
    error flag, VPRED1 predicate); `builtin`, the scalar prelude defines the float/double helper over
    GCC's __builtin_<helper>f / __builtin_<helper>; `compare`, the C operator of a comparison (where()
    selects on the vector comparison's own mask); `bool_args`, how many leading operands may be bool
    (mask) vectors in the vector form; `convert`, a function (src, dst, a) -> C++ used instead of the
    templates (to_dtype's conversion matrix; `exact`: it rounds half types itself)."""

    scalar: str
    vector: str | None = None
    exact: bool = False  # result needs no re-rounding to a half type (it is one of the inputs, or exact)
    helper: str | None = None
    lanewise: str | None = None
    builtin: bool = False
    compare: str | None = None
    bool_args: int = 0
    convert: Callable | None = None
    vector_convert: Callable | None = None


def _u(fn: str, exact: bool = False, builtin: bool = False) -> CppOp:
    """A unary stax:: helper with a lane-wise vector fallback."""
    return CppOp(f"stax::{fn}({{a}})", f"stax::vec::{fn}({{a}})", exact, fn, "VMAP1", builtin)


def _b(fn: str, exact: bool = False) -> CppOp:
    """A binary stax:: helper with a lane-wise vector fallback."""
    return CppOp(f"stax::{fn}({{a}}, {{b}})", f"stax::vec::{fn}({{a}}, {{b}})", exact, fn, "VMAP2")


def _e(fn: str) -> CppOp:
    """A binary stax:: helper that may set the error flag (division family, integer powers)."""
    return CppOp(f"stax::{fn}({{a}}, {{b}}, err)", f"stax::vec::{fn}({{a}}, {{b}}, err)", False, fn, "VMAP2E")


def _pred(fn: str) -> CppOp:
    """A stax:: predicate (bool result) with a lane-wise vector fallback giving bool lanes."""
    return CppOp(f"stax::{fn}({{a}})", f"stax::vec::{fn}({{a}})", False, fn, "VPRED1")


def _cmp(op: str, name: str, bool_args: int = 0) -> CppOp:
    return CppOp(f"{{a}} {op} {{b}}", f"stax::vec::{name}({{a}}, {{b}})", compare=op, bool_args=bool_args)


def _logic(scalar: str, name: str, arity: int) -> CppOp:
    args = ", ".join("{" + x + "}" for x in "ab"[:arity])
    return CppOp(scalar, f"stax::vec::{name}({args})", bool_args=arity)


# Row order is the order of the preludes' generated helper lists (PRELUDE's math, the vector maps).
OP_TABLE: dict[str, CppOp] = {
    "add": CppOp("{a} + {b}", "{a} + {b}"),
    "sub": CppOp("{a} - {b}", "{a} - {b}"),
    "mul": CppOp("{a} * {b}", "{a} * {b}"),
    "truediv": CppOp("{a} / {b}", "{a} / {b}"),
    "floordiv": _e("floordiv"),
    "truncdiv": _e("truncdiv"),
    "remainder": _e("remainder"),
    "fmod": _e("fmod"),
    "pow": _e("pow"),
    "neg": CppOp("-{a}", "-{a}", exact=True),
    "square": CppOp("{a} * {a}", "{a} * {a}"),
    "maximum": _b("maximum", exact=True),
    "minimum": _b("minimum", exact=True),
    "fmax": _b("fmax", exact=True),
    "fmin": _b("fmin", exact=True),
    "atan2": _b("atan2"),
    "hypot": _b("hypot"),
    "copysign": _b("copysign", exact=True),
    "nextafter": _b("nextafter", exact=True),
    "logaddexp": _b("logaddexp"),
    "exp": _u("exp", builtin=True),
    "exp2": _u("exp2", builtin=True),
    "expm1": _u("expm1", builtin=True),
    "log": _u("log", builtin=True),
    "log2": _u("log2", builtin=True),
    "log10": _u("log10", builtin=True),
    "log1p": _u("log1p", builtin=True),
    "sqrt": _u("sqrt", builtin=True),
    "rsqrt": _u("rsqrt"),
    "reciprocal": _u("reciprocal"),
    "sin": _u("sin", builtin=True),
    "cos": _u("cos", builtin=True),
    "tan": _u("tan", builtin=True),
    "asin": _u("asin", builtin=True),
    "acos": _u("acos", builtin=True),
    "atan": _u("atan", builtin=True),
    "sinh": _u("sinh", builtin=True),
    "cosh": _u("cosh", builtin=True),
    "tanh": _u("tanh", builtin=True),
    "asinh": _u("asinh", builtin=True),
    "acosh": _u("acosh", builtin=True),
    "atanh": _u("atanh", builtin=True),
    "erf": _u("erf", builtin=True),
    "erfc": _u("erfc", builtin=True),
    "erfinv": _u("erfinv"),
    "lgamma": _u("lgamma"),
    "sigmoid": _u("sigmoid"),
    "floor": _u("floor", exact=True),
    "ceil": _u("ceil", exact=True),
    "round": _u("round", exact=True),
    "trunc": _u("trunc", exact=True),
    "frac": _u("frac"),
    "abs": _u("abs", exact=True),
    "sign": _u("sign", exact=True),
    "relu": _u("relu", exact=True),
    "eq": _cmp("==", "eq", bool_args=2),
    "ne": _cmp("!=", "ne", bool_args=2),
    "lt": _cmp("<", "lt"),
    "le": _cmp("<=", "le"),
    "gt": _cmp(">", "gt"),
    "ge": _cmp(">=", "ge"),
    "isnan": _pred("isnan"),
    "isinf": _pred("isinf"),
    "isfinite": _pred("isfinite"),
    "signbit": _pred("signbit"),
    "logical_and": _logic("({a} != 0) && ({b} != 0)", "logical_and", 2),
    "logical_or": _logic("({a} != 0) || ({b} != 0)", "logical_or", 2),
    "logical_xor": _logic("({a} != 0) != ({b} != 0)", "logical_xor", 2),
    "logical_not": _logic("{a} == 0", "logical_not", 1),
    "bitwise_and": CppOp("{a} & {b}", "{a} & {b}", bool_args=2),
    "bitwise_or": CppOp("{a} | {b}", "{a} | {b}", bool_args=2),
    "bitwise_xor": CppOp("{a} ^ {b}", "{a} ^ {b}", bool_args=2),
    "bitwise_not": replace(_u("bitwise_not"), bool_args=1),
    "bitwise_left_shift": _b("shift_left"),
    "bitwise_right_shift": _b("shift_right"),
    "where": CppOp("{a} ? {b} : {c}", "stax::vec::where({a}, {b}, {c})", exact=True, bool_args=1),
    "rand": CppOp("stax::rand({a}, {b})", "stax::vec::rand({a}, {b})"),
    "randn": CppOp("stax::randn({a}, {b})", "stax::vec::randn({a}, {b})"),
    # to_dtype is a conversion matrix (`convert`, `vector_convert` below), not a template
    "to_dtype": CppOp("{a}", "{a}", exact=True, bool_args=1, convert=lambda s, d, a: convert(s, d, a),
                      vector_convert=lambda s, d, a: vector_convert(s, d, a)),
}


def helpers(lanewise: str) -> list[str]:
    """The stax:: helpers whose rows ask for the vector prelude's STAX_<lanewise> fallback, in row order."""
    return [row.helper for row in OP_TABLE.values() if row.lanewise == lanewise]


def builtin_helpers() -> list[str]:
    """The unary helpers the scalar prelude defines over GCC math builtins, in row order."""
    return [row.helper for row in OP_TABLE.values() if row.builtin]


def scalar_expr(name: str, args: list[str], arg_dtypes: list, dtype: dt.DType) -> str:
    """C++ of op `name` on the scalar operands `args` (compute values), rounded to a half `dtype`
    unless the row is exact."""
    row = OP_TABLE[name]
    if row.convert is not None:
        expr = row.convert(arg_dtypes[0], dtype, args[0])
    else:
        expr = row.scalar.format(**dict(zip("abc", args)), T=compute_ctype(dtype))
    return round_expr(dtype, expr) if is_half(dtype) and not row.exact else expr


def vector_expr(name: str, args: list[str], arg_dtypes: list, dtype: dt.DType) -> str:
    """C++ of op `name` on the vector operands `args`, rounded to a half `dtype` unless exact."""
    row = OP_TABLE[name]
    if row.vector_convert is not None:
        expr = row.vector_convert(arg_dtypes[0], dtype, args[0])
    else:
        expr = row.vector.format(**dict(zip("abc", args)))
    return f"stax::vec::{'rh' if dtype == dt.float16 else 'rb'}({expr})" if is_half(dtype) and not row.exact else expr


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
    return sorted((set(OPS) - set(OP_TABLE)) | (set(REDUCTIONS) - set(REDUCTION_TABLE))
                  | (set(SCANS) - set(SCAN_TABLE)))


# ---- dtypes: storage C type (pointer element) and compute C type ----
STORAGE_CTYPE: dict[str, str] = {
    "bool": "bool", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
    "int64": "int64_t", "float16": "uint16_t", "bfloat16": "uint16_t", "float32": "float", "float64": "double",
}


# compute dtype -> vector type of the vectorized form (half types compute in float lanes)
VTYPE: dict[str, str] = {
    "float32": "stax::vec::vfloat", "float16": "stax::vec::vfloat", "bfloat16": "stax::vec::vfloat",
    "float64": "stax::vec::vdouble", "int32": "stax::vec::vint32", "int64": "stax::vec::vint64",
    "bool": "stax::vec::vbool",
}


def vtype(d: dt.DType) -> str:
    return VTYPE[d.name]


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


def vector_convert(src: dt.DType, dst: dt.DType, a: str) -> str:
    """to_dtype in the vector form: vector `a` of compute lanes of `src` to lanes of `dst`."""
    if src == dst or (is_half(src) and dst == dt.float32):
        return a
    if dst.is_bool:
        return f"stax::vec::nonzero({a})"
    if src.is_bool:
        expr = f"stax::vec::convert_bool<{vtype(dst)}>({a})"
    elif dst.is_integer and src.is_floating:
        expr = f"stax::vec::float_to_int<{vtype(dst)}>({a})"
    elif vtype(src) == vtype(dst):
        expr = a
    else:
        expr = f"stax::vec::convert<{vtype(dst)}>({a})"
    if dst == dt.float16:
        return f"stax::vec::rh({expr})"  # through float, as c10::Half(double)
    if dst == dt.bfloat16:
        return f"stax::vec::rb({expr})"
    return expr


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
