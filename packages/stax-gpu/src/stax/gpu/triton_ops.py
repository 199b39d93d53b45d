"""The op table of the Triton backend: stax.ir op name -> Triton template, plus reductions.

One row per entry of `stax.ir.OPS` (a test checks the two tables agree). Templates use
{0}, {1}, {2} for operand names and {bits} for the operand's bit width. A row has a template for floating operands under
libdevice math (the GPU default), an optional `portable` override used when libdevice
is unavailable (TRITON_INTERPRET=1), and templates for integer and bool operands.
Half types are computed in float32, so 'float' covers float16/bfloat16/float32/float64.
`to_dtype` is special: its template depends on source and target dtypes (see `cast`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from stax.ir import dtypes as dt

# Triton spelling of each stax dtype (storage); compute happens in compute_dtype(d).
TRITON_DTYPES = {
    "bool": "tl.int1",
    "uint8": "tl.uint8",
    "int8": "tl.int8",
    "int16": "tl.int16",
    "int32": "tl.int32",
    "int64": "tl.int64",
    "float16": "tl.float16",
    "bfloat16": "tl.bfloat16",
    "float32": "tl.float32",
    "float64": "tl.float64",
}


def triton_dtype(d: dt.DType) -> str:
    return TRITON_DTYPES[d.name]


def compute_triton_dtype(d: dt.DType) -> str:
    return TRITON_DTYPES[dt.compute_dtype(d).name]


@dataclass(frozen=True)
class TritonOp:
    """Templates for one op. `literals`: operand positions that may be Python literals
    (plain operators accept them when another operand is a tensor); `int_divisor`:
    operand 1 is an integer divisor that must be checked for zero."""

    name: str
    float: str | None
    portable: str | None = None
    int: str | None = None
    bool: str | None = None
    literals: tuple = ()
    int_divisor: bool = False

    def template(self, operand: dt.DType, math_mode: str) -> str:
        if operand.is_floating:
            t = self.portable if (math_mode == "portable" and self.portable) else self.float
        elif operand.is_bool:
            t = self.bool if self.bool is not None else self.int
        else:
            t = self.int
        if t is None:
            raise NotImplementedError(f"stax-gpu: op {self.name!r} has no Triton template for {operand} operands")
        return t


def _op(name, float_, portable=None, int_=None, bool_=None, literals=(), int_divisor=False, same_int=False):
    return TritonOp(name, float_, portable, float_ if same_int and int_ is None else int_, bool_, literals, int_divisor)


BIN = (0, 1)
_LD = "libdevice"

_ROWS = [
    # arithmetic
    _op("add", "{0} + {1}", bool_="{0} | {1}", literals=BIN, same_int=True),
    _op("sub", "{0} - {1}", literals=BIN, same_int=True),
    _op("mul", "{0} * {1}", bool_="{0} & {1}", literals=BIN, same_int=True),
    _op("truediv", "triton_helpers.div_rn({0}, {1})"),
    # float fmod must be exact: libdevice.fmod on the GPU (a % b may lower to x - trunc(x/y)*y),
    # numpy's fmod under the interpreter; floordiv and remainder are built on it
    _op("floordiv", f"triton_helpers.floordiv_fmod({{0}}, {{1}}, {_LD}.fmod({{0}}, {{1}}))",
        "triton_helpers.floordiv_fmod({0}, {1}, {0} % {1})", int_="triton_helpers.floordiv_int({0}, {1})",
        int_divisor=True),
    _op("truncdiv", f"{_LD}.trunc(triton_helpers.div_rn({{0}}, {{1}}))",
        "triton_helpers.trunc(triton_helpers.div_rn({0}, {1}))", int_="{0} // {1}", int_divisor=True),
    _op("remainder", f"triton_helpers.remainder_fmod({{0}}, {{1}}, {_LD}.fmod({{0}}, {{1}}))",
        "triton_helpers.remainder_fmod({0}, {1}, {0} % {1})", int_="triton_helpers.remainder({0}, {1})",
        int_divisor=True),
    _op("fmod", f"{_LD}.fmod({{0}}, {{1}})", "{0} % {1}", int_="{0} % {1}", int_divisor=True),
    _op("neg", "-{0}", same_int=True),
    _op("abs", "tl.abs({0})", same_int=True, bool_="{0}"),
    _op("square", "{0} * {0}", same_int=True, bool_="{0}"),
    _op("maximum", "triton_helpers.maximum({0}, {1})", same_int=True, bool_="{0} | {1}"),
    _op("minimum", "triton_helpers.minimum({0}, {1})", same_int=True, bool_="{0} & {1}"),
    _op("fmax", "triton_helpers.fmax({0}, {1})"),
    _op("fmin", "triton_helpers.fmin({0}, {1})"),
    _op("sign", "triton_helpers.sign({0})", same_int=True, bool_="{0}"),
    _op("relu", "triton_helpers.relu({0})", same_int=True, bool_="{0}"),
    _op("pow", f"{_LD}.pow({{0}}, {{1}})", "triton_helpers.pow_portable({0}, {1})",
        int_="triton_helpers.ipow({0}, {1})"),
    # floating math: libdevice on the GPU, tl.* or a helper formula under the interpreter
    _op("exp", f"{_LD}.exp({{0}})", "tl.exp({0})"),
    _op("exp2", f"{_LD}.exp2({{0}})", "tl.exp2({0})"),
    _op("expm1", f"{_LD}.expm1({{0}})", "triton_helpers.expm1({0})"),
    _op("log", f"{_LD}.log({{0}})", "tl.log({0})"),
    _op("log2", f"{_LD}.log2({{0}})", "tl.log2({0})"),
    _op("log10", f"{_LD}.log10({{0}})", "triton_helpers.log10({0})"),
    _op("log1p", f"{_LD}.log1p({{0}})", "triton_helpers.log1p({0})"),
    _op("logaddexp", "triton_helpers.logaddexp_ld({0}, {1})", "triton_helpers.logaddexp_portable({0}, {1})"),
    _op("sqrt", f"{_LD}.sqrt({{0}})", "triton_helpers.sqrt_rn({0})"),
    _op("rsqrt", f"{_LD}.rsqrt({{0}})", "tl.rsqrt({0})"),
    _op("reciprocal", "triton_helpers.reciprocal({0})"),
    _op("sin", f"{_LD}.sin({{0}})", "tl.sin({0})"),
    _op("cos", f"{_LD}.cos({{0}})", "tl.cos({0})"),
    _op("tan", f"{_LD}.tan({{0}})", "triton_helpers.tan({0})"),
    _op("asin", f"{_LD}.asin({{0}})", "triton_helpers.asin({0})"),
    _op("acos", f"{_LD}.acos({{0}})", "triton_helpers.acos({0})"),
    _op("atan", f"{_LD}.atan({{0}})", "triton_helpers.atan({0})"),
    _op("sinh", f"{_LD}.sinh({{0}})", "triton_helpers.sinh({0})"),
    _op("cosh", f"{_LD}.cosh({{0}})", "triton_helpers.cosh({0})"),
    _op("tanh", f"{_LD}.tanh({{0}})", "triton_helpers.tanh({0})"),
    _op("asinh", f"{_LD}.asinh({{0}})", "triton_helpers.asinh({0})"),
    _op("acosh", f"{_LD}.acosh({{0}})", "triton_helpers.acosh({0})"),
    _op("atanh", f"{_LD}.atanh({{0}})", "triton_helpers.atanh({0})"),
    _op("atan2", f"{_LD}.atan2({{0}}, {{1}})", "triton_helpers.atan2({0}, {1})"),
    _op("hypot", f"{_LD}.hypot({{0}}, {{1}})", "triton_helpers.hypot({0}, {1})"),
    _op("copysign", f"{_LD}.copysign({{0}}, {{1}})", "triton_helpers.copysign({0}, {1})"),
    _op("nextafter", f"{_LD}.nextafter({{0}}, {{1}})", "triton_helpers.nextafter({0}, {1})"),
    _op("erf", f"{_LD}.erf({{0}})", "tl.erf({0})"),
    _op("erfc", f"{_LD}.erfc({{0}})", "triton_helpers.erfc({0})"),
    _op("erfinv", f"{_LD}.erfinv({{0}})", "triton_helpers.erfinv({0})"),
    _op("lgamma", f"{_LD}.lgamma({{0}})", "triton_helpers.lgamma({0})"),
    _op("sigmoid", f"triton_helpers.reciprocal(1.0 + {_LD}.exp(-{{0}}))",
        "triton_helpers.reciprocal(1.0 + tl.exp(-{0}))"),
    _op("frac", f"{{0}} - {_LD}.trunc({{0}})", "{0} - triton_helpers.trunc({0})"),
    _op("floor", f"{_LD}.floor({{0}})", "tl.floor({0})", int_="{0}"),
    _op("ceil", f"{_LD}.ceil({{0}})", "tl.ceil({0})", int_="{0}"),
    _op("round", f"{_LD}.nearbyint({{0}})", "triton_helpers.round_half_even({0})", int_="{0}"),
    _op("trunc", f"{_LD}.trunc({{0}})", "triton_helpers.trunc({0})", int_="{0}"),
    # comparisons and logic
    _op("eq", "{0} == {1}", literals=BIN, same_int=True),
    _op("ne", "{0} != {1}", literals=BIN, same_int=True),
    _op("lt", "{0} < {1}", literals=BIN, same_int=True),
    _op("le", "{0} <= {1}", literals=BIN, same_int=True),
    _op("gt", "{0} > {1}", literals=BIN, same_int=True),
    _op("ge", "{0} >= {1}", literals=BIN, same_int=True),
    _op("isnan", "{0} != {0}", same_int=True),
    _op("isinf", "tl.abs({0}) == float('inf')", int_="{0} != {0}"),
    _op("isfinite", "tl.abs({0}) < float('inf')", int_="{0} == {0}"),
    _op("signbit", "triton_helpers.signbit({0})", int_="{0} < 0", bool_="{0} != {0}"),
    _op("logical_and", "({0} != 0) & ({1} != 0)", same_int=True),
    _op("logical_or", "({0} != 0) | ({1} != 0)", same_int=True),
    _op("logical_xor", "({0} != 0) ^ ({1} != 0)", same_int=True),
    _op("logical_not", "{0} == 0", same_int=True),
    _op("bitwise_and", None, int_="{0} & {1}", literals=BIN),
    _op("bitwise_or", None, int_="{0} | {1}", literals=BIN),
    _op("bitwise_xor", None, int_="{0} ^ {1}", literals=BIN),
    _op("bitwise_not", None, int_="~{0}", bool_="{0} == 0"),
    _op("bitwise_left_shift", None, int_="triton_helpers.shift_left({0}, {1}, {bits})"),
    _op("bitwise_right_shift", None, int_="triton_helpers.shift_right({0}, {1}, {bits})"),
    # selection and conversion
    _op("where", "tl.where({0}, {1}, {2})", same_int=True, literals=(1, 2)),
    _op("to_dtype", None),  # emitted by `cast`: depends on source and target dtype
    # counter-based RNG: tl.rand / tl.randn are bit-compatible with stax.ir.rng (Philox4x32-10)
    _op("rand", None, int_="tl.rand({0}, {1})"),
    _op("randn", None, int_="tl.randn({0}, {1})"),
]

TRITON_OPS: dict[str, TritonOp] = {r.name: r for r in _ROWS}


def triton_op(name: str) -> TritonOp:
    try:
        return TRITON_OPS[name]
    except KeyError:
        raise NotImplementedError(f"stax-gpu: no Triton template for op {name!r}") from None


def cast(src: str, source: dt.DType, target: dt.DType, math_mode: str) -> str:
    """Triton expression converting `src` (held in compute_dtype(source)) to `target`,
    held in compute_dtype(target): half targets round, then stay in float32."""
    if target.is_bool:
        return f"{src} != 0"
    tgt = dt.compute_dtype(target)
    if target == dt.bfloat16:
        inner = src if dt.compute_dtype(source) == dt.float32 else f"{src}.to(tl.float32)"
        if math_mode == "portable":
            return f"triton_helpers.round_to_bf16({inner})"
        return f"{inner}.to(tl.bfloat16).to(tl.float32)"
    if target == dt.float16:
        return f"{src}.to(tl.float16).to(tl.float32)"
    if dt.compute_dtype(source) == tgt:
        return src
    return f"{src}.to({triton_dtype(tgt)})"


def store_cast(src: str, computed: dt.DType, storage: dt.DType, math_mode: str) -> str:
    """Convert a computed value to the storage dtype of a buffer."""
    if storage == dt.bfloat16 and math_mode == "portable":  # (from float64: through float32, as to_dtype)
        inner = src if dt.compute_dtype(computed) == dt.float32 else f"{src}.to(tl.float32)"
        return f"triton_helpers.round_to_bf16({inner}).to(tl.bfloat16)"
    if storage.is_bool and not computed.is_bool:
        return f"{src} != 0"
    if dt.compute_dtype(storage) == storage and dt.compute_dtype(computed) == storage:
        return src
    return f"{src}.to({triton_dtype(storage)})"


# ---- reductions ----


def lowest(d: dt.DType) -> str:
    """Triton literal of the lowest value of `d` (max's identity)."""
    if d.is_floating:
        return 'float("-inf")'
    if d.is_bool:
        return "False"
    return str(int(np.iinfo(d.np).min))


def highest(d: dt.DType) -> str:
    """Triton literal of the highest value of `d` (min's identity)."""
    if d.is_floating:
        return 'float("inf")'
    if d.is_bool:
        return "True"
    return str(int(np.iinfo(d.np).max))


@dataclass(frozen=True)
class TritonReduction:
    """`reduce` combines a [XBLOCK, R0_BLOCK] block along axis 1 ({0}: values, {1}:
    indices for arg reductions); `combine` merges an accumulator with a new block
    lane by lane in looped reductions; `identity(dtype)` fills masked lanes."""

    name: str
    reduce: str
    combine: str
    identity: object
    arg: bool = False


TRITON_REDUCTIONS: dict[str, TritonReduction] = {
    r.name: r
    for r in [
        TritonReduction("sum", "tl.sum({0}, 1)", "{0} + {1}", lambda d: "False" if d.is_bool else "0"),
        TritonReduction("prod", "triton_helpers.prod({0}, 1)", "{0} * {1}", lambda d: "True" if d.is_bool else "1"),
        TritonReduction("max", "triton_helpers.max2({0}, 1)", "triton_helpers.maximum({0}, {1})", lowest),
        TritonReduction("min", "triton_helpers.min2({0}, 1)", "triton_helpers.minimum({0}, {1})", highest),
        TritonReduction("argmax", "triton_helpers.argmax2({0}, {1}, 1)",
                        "triton_helpers.argmax_combine({0}, {1}, {2}, {3})", lowest, arg=True),
        TritonReduction("argmin", "triton_helpers.argmin2({0}, {1}, 1)",
                        "triton_helpers.argmin_combine({0}, {1}, {2}, {3})", highest, arg=True),
        TritonReduction("any", "triton_helpers.any_({0}, 1)", "{0} | {1}", lambda d: "False"),
        TritonReduction("all", "triton_helpers.all_({0}, 1)", "{0} & {1}", lambda d: "True"),
    ]
}

# bool sum/prod are logical or/and (numpy with dtype=bool), so they reduce as any/all
_BOOL_ALIASES = {"sum": "any", "prod": "all"}


def triton_reduction(name: str, value: dt.DType) -> TritonReduction:
    if value.is_bool and name in _BOOL_ALIASES:
        name = _BOOL_ALIASES[name]
    try:
        return TRITON_REDUCTIONS[name]
    except KeyError:
        raise NotImplementedError(f"stax-gpu: no Triton reduction for {name!r}") from None


def literal(value, d: dt.DType) -> str:
    """A Python literal for a constant of dtype d, rounded as the dtype stores it."""
    if d.is_bool:
        return "True" if value else "False"
    if d.is_integer:
        return str(int(value))
    v = float(dt.round_to(np.asarray(value, dtype=np.float64), d).astype(np.float64))
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    return repr(v)
