"""Every op of stax.ir.OPS through its Triton row, against the numpy interpreter.

Under the interpreter the 'portable' column runs: tl.* math is numpy, so ops built
from it match exactly; ops that are helper formulas (expm1, atan, lgamma, erfinv, ...)
are accurate to a few float32 ulp, compared at rtol 1e-5 (lgamma, erfc, erfinv: the
formula's stated error). On the GPU (STAX_TEST_DEVICE=cuda) the libdevice column
runs and is compared with the float64 result within the error model (error_model.py:
CUDA's stated ulp error per function); these tolerances are the interpreter's.
"""

import numpy as np
import pytest
from gpu_testlib import b8, config, f16, f32, f64, i0, i8, i32, i64, inp, pw, run, u8
from stax.gpu.reductions import SCANS as TRITON_SCANS
from stax.gpu.triton_ops import TRITON_OPS, TRITON_REDUCTIONS
from stax.ir import OPS, REDUCTIONS, SCANS, WELFORD_OUTPUTS, Graph, load, op
from stax.ir import dtypes as dt
from stax.ir.ops import BOOL, FLOAT, INT, SAME, WHERE

N = 96
EXACT = dict(rtol=0, atol=0)
ULP = dict(rtol=2e-6, atol=1e-7)  # a few float32 ulp (different but correctly rounded paths)
FORMULA = dict(rtol=1e-5, atol=1e-6)
LOOSE = dict(rtol=2e-5, atol=2e-5)

# op -> input ranges for each operand (float ops), and tolerance class
DOMAIN = {
    "log": [(0.05, 5)], "log2": [(0.05, 5)], "log10": [(0.05, 5)], "sqrt": [(0, 5)], "rsqrt": [(0.05, 5)],
    "log1p": [(-0.9, 5)], "acosh": [(1, 6)], "atanh": [(-0.95, 0.95)], "asin": [(-1, 1)], "acos": [(-1, 1)],
    "erfinv": [(-0.99, 0.99)], "lgamma": [(0.05, 6)], "reciprocal": [(0.5, 3)], "tan": [(-1.2, 1.2)],
    "truediv": [(-3, 3), (0.5, 3)], "floordiv": [(-9, 9), (0.3, 2.5)], "truncdiv": [(-9, 9), (0.3, 2.5)],
    "remainder": [(-9, 9), (-2.5, 2.5)], "fmod": [(-9, 9), (-2.5, 2.5)], "pow": [(0.2, 2), (-2, 2)],
    "exp": [(-5, 5)], "exp2": [(-5, 5)], "expm1": [(-3, 3)], "sinh": [(-4, 4)], "cosh": [(-4, 4)],
}
TOLERANCE = {
    **{k: FORMULA for k in ("expm1", "log1p", "log10", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
                           "tanh", "asinh", "acosh", "atanh", "pow", "logaddexp", "hypot", "sigmoid", "rsqrt")},
    **{k: LOOSE for k in ("lgamma", "erfc", "erfinv", "erf")},
}
INT_DOMAIN = {"floordiv": [(-60, 60), (1, 9)], "truncdiv": [(-60, 60), (1, 9)], "remainder": [(-60, 60), (-9, -1)],
              "fmod": [(-60, 60), (1, 9)], "pow": [(-5, 5), (0, 5)],
              "bitwise_left_shift": [(-30, 30), (-2, 12)], "bitwise_right_shift": [(-100, 100), (-2, 12)]}


def test_tables_cover_the_ir():
    assert set(TRITON_OPS) == set(OPS)
    assert set(TRITON_REDUCTIONS) | set(WELFORD_OUTPUTS) == set(REDUCTIONS)
    assert set(TRITON_SCANS) == set(SCANS)
    for row in TRITON_OPS.values():  # the libdevice column never leaks into the portable one
        assert row.portable is None or "libdevice" not in row.portable


def _graph(name, dtype, arity):
    ins = tuple(inp(f"a{k}", (N,), dtype) for k in range(arity))
    args = [load(f"a{k}", i0, dtype) for k in range(arity)]
    if name == "where":
        ins = (inp("a0", (N,), b8),) + ins[1:]
        args[0] = load("a0", i0, b8)
    return Graph(ins, (pw("buf0", (N,), op(name, *args)),), ("buf0",))


def _ranges(dom):
    return {f"a{k}": r for k, r in enumerate(dom or [])}


FLOAT_OPS = sorted(n for n, d in OPS.items() if d.dtype_rule in (SAME, FLOAT, BOOL, WHERE) and n != "to_dtype")
INT_OPS = sorted(n for n, d in OPS.items() if d.dtype_rule in (SAME, INT, BOOL, WHERE) and d.name not in
                 ("truediv",) and n != "to_dtype" and d.dtype_rule != FLOAT)


@pytest.mark.parametrize("name", [n for n in FLOAT_OPS if OPS[n].dtype_rule != INT])
def test_float32_op(name):
    g = _graph(name, f32, OPS[name].arity)
    run(g, cfg=config(xblock_cap=32), tol=TOLERANCE.get(name, ULP), **_ranges(DOMAIN.get(name)))


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5, -2.5, 0.5, -0.5, 3.0, 1e-30, -7.25, 100.0,
                    -100.0], np.float32)
NAN_INF_OPS = ["add", "mul", "maximum", "minimum", "fmax", "fmin", "sign", "relu", "abs", "neg", "isnan", "isinf",
               "isfinite", "signbit", "floor", "ceil", "round", "trunc", "frac", "exp", "log", "sqrt", "copysign",
               "floordiv", "truncdiv", "remainder", "fmod", "truediv", "eq", "lt", "where", "tanh", "sigmoid", "square",
               "nextafter", "hypot"]


@pytest.mark.parametrize("name", NAN_INF_OPS)
def test_special_values(name):
    """NaN, inf, signed zeros and half-way points, every pair of them."""
    arity = OPS[name].arity
    a = np.repeat(SPECIAL, len(SPECIAL))
    b = np.tile(SPECIAL, len(SPECIAL))
    n = a.size
    ins = tuple(inp(f"a{k}", (n,)) for k in range(arity))
    args = [load(f"a{k}", i0, f32) for k in range(arity)]
    arrays = {"a0": a, "a1": b, "a2": a[::-1].copy()}
    if name == "where":
        ins = (inp("a0", (n,), b8),) + ins[1:]
        args[0] = load("a0", i0, b8)
        arrays["a0"] = np.isnan(b)
    g = Graph(ins, (pw("buf0", (n,), op(name, *args)),), ("buf0",))
    run(g, arrays=arrays, tol=TOLERANCE.get(name, ULP))


@pytest.mark.parametrize("name", [n for n in INT_OPS if OPS[n].dtype_rule != FLOAT])
@pytest.mark.parametrize("dtype", [i32, i64, i8])
def test_integer_op(name, dtype):
    dom = INT_DOMAIN.get(name)
    if dtype == i8 and name in ("pow", "bitwise_left_shift"):
        dom = [(-4, 4), (0, 5)] if name == "pow" else [(-4, 4), (-2, 10)]
    run(_graph(name, dtype, OPS[name].arity), cfg=config(xblock_cap=32), tol=EXACT, **_ranges(dom))


@pytest.mark.parametrize("name", ["add", "mul", "maximum", "minimum", "logical_and", "logical_xor", "logical_not",
                                  "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "eq", "ne", "lt", "where",
                                  "abs", "sign", "relu", "signbit"])
def test_bool_op(name):
    run(_graph(name, b8, OPS[name].arity))


@pytest.mark.parametrize("name", ["add", "mul", "remainder", "floordiv", "bitwise_right_shift", "maximum", "sign"])
def test_uint8_op(name):
    dom = {"remainder": [(0, 255), (1, 9)], "floordiv": [(0, 255), (1, 9)], "bitwise_right_shift": [(0, 255), (0, 10)]}
    run(_graph(name, u8, OPS[name].arity), tol=EXACT, **_ranges(dom.get(name, [(0, 120), (0, 120)])))


@pytest.mark.parametrize("name", ["add", "truediv", "exp", "sqrt", "floordiv", "maximum", "tanh", "atan2"])
def test_float64_op(name):
    """float64 computes in float64 (the helper formulas are float32-accurate: not tested here)."""
    tol = TOLERANCE.get(name)
    tol = dict(rtol=1e-6, atol=1e-7) if tol else dict(rtol=1e-14, atol=0)
    run(_graph(name, f64, OPS[name].arity), tol=tol, **_ranges(DOMAIN.get(name)))


@pytest.mark.parametrize("name", ["add", "mul", "exp", "truediv", "maximum", "sigmoid"])
def test_float16_op(name):
    run(_graph(name, f16, OPS[name].arity), **_ranges(DOMAIN.get(name)))


@pytest.mark.parametrize("src,dst", [(f32, i32), (f32, i8), (f32, u8), (f32, b8), (i64, f32), (b8, f32), (i32, i64),
                                     (i64, i8), (f32, f16), (f32, dt.bfloat16), (f16, f32), (f64, f32), (i32, f64)])
def test_casts(src, dst):
    """to_dtype: float -> int truncates toward zero (values kept in range: out of range is UB on GPUs)."""
    from stax.ir import cast as ir_cast

    g = Graph((inp("a0", (N,), src),), (pw("buf0", (N,), ir_cast(load("a0", i0, src), dst)),), ("buf0",))
    lo, hi = (-100, 100) if dst != u8 else (0, 250)
    run(g, tol=EXACT if not dst.is_floating or dst == f32 and not src.is_floating else None, a0=(lo, hi))


@pytest.mark.parametrize("name", ["floordiv", "remainder"])
def test_integer_division_by_zero_raises(name):
    """Integer division by zero: the kernel flags it, the wrapper raises as eager does."""
    g = _graph(name, i32, 2)
    b = np.ones(N, np.int32)
    b[17] = 0
    with pytest.raises(ZeroDivisionError):
        run(g, arrays={"a1": b})


def test_negative_integer_power_raises():
    with pytest.raises(ValueError, match="negative integer powers"):
        run(_graph("pow", i32, 2), arrays={"a1": -np.ones(N, np.int32)})
