"""Each natively lowered pointwise op: stax vs eager, zero fallbacks, several dtypes."""

from __future__ import annotations

import pytest
import torch
from conftest import check

SHAPE = (8, 33)  # one shape for the whole file: compiled kernels are cached by content


def make(dtype, shape=SHAPE, low=-3.0, high=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-20, 20, shape, generator=g, dtype=dtype)
    return (torch.rand(shape, generator=g, dtype=torch.float32) * (high - low) + low).to(dtype)


FLOATS = [torch.float32, torch.float16, torch.bfloat16]

# op -> input domain (low, high)
UNARY_FLOAT = {
    torch.exp: (-3, 3),
    torch.expm1: (-3, 3),
    torch.exp2: (-3, 3),
    torch.log: (0.1, 5),
    torch.log2: (0.1, 5),
    torch.log10: (0.1, 5),
    torch.log1p: (-0.5, 5),
    torch.sqrt: (0.0, 5),
    torch.rsqrt: (0.1, 5),
    torch.sigmoid: (-6, 6),
    torch.tanh: (-4, 4),
    torch.sin: (-3, 3),
    torch.cos: (-3, 3),
    torch.atan: (-3, 3),
    torch.erf: (-3, 3),
    torch.erfc: (-3, 3),
    torch.erfinv: (-0.99, 0.99),
    torch.reciprocal: (0.5, 3),
    torch.relu: (-3, 3),
    torch.neg: (-3, 3),
    torch.abs: (-3, 3),
    torch.floor: (-3, 3),
    torch.ceil: (-3, 3),
    torch.trunc: (-3, 3),
    torch.round: (-3, 3),
    torch.sign: (-3, 3),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", list(UNARY_FLOAT), ids=lambda f: f.__name__)
def test_unary_float(op, dtype):
    lo, hi = UNARY_FLOAT[op]
    check(lambda x: op(x), make(dtype, low=lo, high=hi))


@pytest.mark.parametrize("op", [torch.neg, torch.abs, torch.relu, torch.sign], ids=lambda f: f.__name__)
def test_unary_int(op):
    check(lambda x: op(x), make(torch.int64))


@pytest.mark.parametrize("op", [torch.exp, torch.sqrt, torch.sigmoid], ids=lambda f: f.__name__)
def test_unary_int_to_float(op):
    """Integer inputs promote to the default float dtype (INT_TO_FLOAT)."""
    check(lambda x: op(x), make(torch.int64).abs())


BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.5),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_float(name, dtype):
    a, b = make(dtype, seed=1), make(dtype, seed=2)
    if name == "div":
        b = torch.where(b.abs() < 0.25, torch.ones_like(b), b)
    check(BINARY[name], a, b)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum"])
def test_binary_int64(name):
    check(BINARY[name], make(torch.int64, seed=1), make(torch.int64, seed=2))


def test_div_int_promotes_to_float():
    a, b = make(torch.int64, seed=1), make(torch.int64, seed=2)
    b = torch.where(b == 0, torch.ones_like(b), b)
    check(torch.div, a, b)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_div_rounding(mode, dtype):
    a, b = make(dtype, seed=1), make(dtype, seed=2)
    b = torch.where(b == 0, torch.ones_like(b), b)
    check(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)


CMP = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("op", CMP, ids=lambda f: f.__name__)
def test_comparisons(op, dtype):
    a = make(dtype, seed=1)
    b = a.clone()
    b[::2] = make(dtype, seed=2)[::2]
    check(op, a, b)


@pytest.mark.parametrize("op", CMP, ids=lambda f: f.__name__)
def test_comparison_with_scalar(op):
    check(lambda x: op(x, 0.5), make(torch.float32))


def test_where():
    a, b = make(torch.float32, seed=1), make(torch.float32, seed=2)
    check(lambda x, y: torch.where(x > y, x, y * 2), a, b)


def test_where_scalar_branches_and_bool():
    check(lambda c, x: (torch.where(c, x, 0.0), torch.where(c, 1.0, x)), make(torch.bool), make(torch.float32))


@pytest.mark.parametrize(
    "src,dst",
    [
        (torch.float32, torch.float16),
        (torch.float32, torch.bfloat16),
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float32),
        (torch.float32, torch.int64),
        (torch.int64, torch.float32),
        (torch.float32, torch.bool),
        (torch.bool, torch.float32),
        (torch.int64, torch.bool),
    ],
    ids=str,
)
def test_casts(src, dst):
    check(lambda x: x.to(dst), make(src) * (7 if src.is_floating_point else 1))


PROMOTIONS = {
    "f16+f32": (lambda a, b: a + b, torch.float16, torch.float32),
    "i64*f16": (lambda a, b: a * b, torch.int64, torch.float16),
    "bf16-f16": (lambda a, b: a - b, torch.bfloat16, torch.float16),
    "bool+i64": (lambda a, b: a + b, torch.bool, torch.int64),
    "i64<f32": (lambda a, b: a < b, torch.int64, torch.float32),
}


@pytest.mark.parametrize("name", list(PROMOTIONS))
def test_promotion_tensor_tensor(name):
    fn, da, db = PROMOTIONS[name]
    check(fn, make(da, seed=1), make(db, seed=2))


def test_promotion_scalars_and_zero_dim():
    """Python scalars and 0-dim tensors do not promote the category's width (torch rule)."""
    x16 = make(torch.float16)
    xi = make(torch.int64)
    zero_dim = torch.tensor(1.5, dtype=torch.float64)
    check(lambda a, b, s: (a * 2.5, a + s, b * 2.5, b + 1, b + s), x16, xi, zero_dim)


def test_composed_chain_is_one_kernel():
    """Pointwise ops compose into one expression: one kernel, one buffer."""
    x = make(torch.float32, seed=3)
    m = check(lambda a: torch.tanh(torch.sigmoid(a * 2 + 1) - a.exp() / 3).relu(), x)
    assert m.kernels_generated == 1


def test_clamp_and_masked_fill():
    x = make(torch.float32)
    check(lambda a: (a.clamp(-1, 0.5), a.clamp(min=0.2), a.masked_fill(a > 1, -7.0)), x)


def test_nan_and_inf_propagate():
    x = torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 2.0]])
    check(lambda a: (a.relu(), a.exp(), torch.maximum(a, torch.zeros_like(a)), a.isnan(), a.sigmoid()), x)


def test_sign_bits_nan_ignoring_and_hypot():
    a = torch.tensor([[-0.0, 0.0, -2.0, 3.0, float("nan"), 1.0, -float("inf"), 2.5]])
    b = torch.tensor([[1.0, -0.0, float("nan"), -1.0, 2.0, float("nan"), 4.0, -0.0]])
    check(lambda x, y: (torch.signbit(x), torch.copysign(y.nan_to_num(), x.nan_to_num()), torch.fmax(x, y),
                        torch.fmin(x, y), torch.hypot(x.nan_to_num(), y.nan_to_num())), a, b)


def test_ir_ops_without_fallback():
    """Ops stax.ir gained (logaddexp, nextafter, shifts, signbit on NaN, copysign of NaN)
    lower natively; nextafter on half types stays an ATen call (the IR op is fp32/fp64)."""
    a = torch.tensor([[-0.0, 0.0, -2.0, 3.0, float("nan"), 1e-30, -float("inf"), 2.5]])
    b = torch.tensor([[1.0, -0.0, float("nan"), -1.0, -float("nan"), 0.0, 4.0, 2.5]])
    check(lambda x, y: (torch.logaddexp(x, y), torch.nextafter(x, y), torch.nextafter(x.double(), y.double()),
                        torch.signbit(y), torch.copysign(x, y), torch.angle(x), x.narrow_copy(1, 2, 5)), a, b)
    i = make(torch.int64, seed=4)
    s = make(torch.int64, seed=5).abs() * 4 - 8  # shifts < 0 and >= 64 included
    check(lambda x, k: (x << 3, x >> 2, x << k, x >> k, torch.bitwise_left_shift(x.int(), k.int())), i, s)
    m = check(lambda x, y: torch.nextafter(x, y), a.half(), b.half(), fallbacks=1)
    assert dict(m.fallback_ops) == {"nextafter.default": 1}


def test_division_by_a_number_is_a_multiply_by_its_reciprocal():
    """x / 5.66 lowers to x * (1/5.66) (within an ulp of the quotient; Inductor does the same, a
    vector divide costs several multiplies); x / 0, x / inf, integer / integer and a reciprocal
    that overflows keep the division and its IEEE results."""
    import tempfile

    from stax.frontend import config
    from test_reductions import _ir

    x = make(torch.float32)
    x[0, :3] = torch.tensor([0.0, float("inf"), float("nan")])
    i = make(torch.int64)
    cases = [
        (lambda a: a / 5.656854249492381, x, "mul(", "truediv("),
        (lambda a: a / 0.0, x, "truediv(", "mul("),
        (lambda a: a / float("inf"), x, "truediv(", "mul("),
        (lambda a: a / 1e-39, x, "truediv(", "mul("),  # 1/y overflows float32
        (lambda a: a / 3, i, "truediv(", "mul("),
        (lambda a: a / 0.3, make(torch.bfloat16), "mul(", "truediv("),
    ]
    for fn, arg, present, absent in cases:
        torch._dynamo.reset()
        with config.patch(debug=True, debug_dir=tempfile.mkdtemp(prefix="stax-fe-test-")) as cfg:
            check(fn, arg)
        ir = _ir(cfg.debug_dir)
        assert present in ir and absent not in ir, ir
