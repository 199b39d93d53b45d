"""Pointwise kernels (1-D blocks and 2-D tiles) against the numpy interpreter."""

import numpy as np
import pytest
from gpu_testlib import (
    bf16,
    config,
    f16,
    f32,
    i0,
    i1,
    i2,
    i32,
    i64,
    inp,
    kernel_src,
    pw,
    run,
)
from stax.gpu import compile_schedule
from stax.gpu.plan import plan_kernels
from stax.gpu.testing import build_schedule
from stax.ir import Graph, IndexValue, const, index_value, load, op
from stax.ir import cast as ir_cast
from stax.ir.index import ModularIndexing

SMALL = dict(xblock_cap=64)


def test_ragged_1d_many_programs():
    """1000 elements in blocks of 64: 16 program instances, the last one masked."""
    g = Graph((inp("x", (1000,)),), (pw("buf0", (1000,), op("sin", op("exp", load("x", i0, f32)))),), ("buf0",))
    m = run(g, cfg=config(**SMALL), tol=dict(rtol=1e-6, atol=1e-7))
    src = kernel_src(m, "triton_poi_fused_0")
    assert "xmask = xindex < xnumel" in src and "tl.load(in_ptr0 + (x0), xmask, other=0.0)" in src


def test_contiguous_dims_collapse_to_one_index():
    """(4, 5, 6) contiguous elementwise: one flat index, no div/mod."""
    g = Graph((inp("x", (4, 5, 6)),), (pw("buf0", (4, 5, 6), op("neg", load("x", 30 * i0 + 6 * i1 + i2, f32))),),
              ("buf0",))
    src = kernel_src(run(g), "triton_poi_fused_0")
    assert "//" not in src and "%" not in src


def test_broadcast_bias_and_strided_input():
    """out[i, j] = x.t()[i, j] * w[j] + b[i]: strided, row- and column-broadcast loads."""
    n, m = 12, 20
    xt = load("x", i0 + n * i1, f32)  # x is (m, n) contiguous; we read its transpose
    y = op("add", op("mul", xt, load("w", i1, f32)), load("b", i0, f32))
    g = Graph((inp("x", (m, n)), inp("w", (m,)), inp("b", (n,))), (pw("buf0", (n, m), y),), ("buf0",))
    run(g, cfg=config(**SMALL, tile_2d=False))


def test_transpose_add_uses_2d_tiles():
    """x + y.t(): the two loads disagree on the contiguous dim, so the kernel tiles (y, x)."""
    n, m = 40, 24
    v = op("add", load("x", m * i0 + i1, f32), load("y", i0 + n * i1, f32))
    g = Graph((inp("x", (n, m)), inp("y", (m, n))), (pw("buf0", (n, m), v),), ("buf0",))
    m_ = run(g, cfg=config(xblock_cap=16))
    src = kernel_src(m_, "triton_poi_fused_0")
    assert "YBLOCK: tl.constexpr" in src and "ymask = yindex < ynumel" in src
    assert plan_kernels(build_schedule(g), config())[0].form == "pointwise2d"


@pytest.mark.parametrize("write_order", [True, False])
def test_permuted_output_is_stored_with_stride_1(write_order):
    """exp(x.t()) into eager's layout for it (strides (1, n)): with write_order the loops follow
    the output's memory order, so the load and the store walk one flat index with stride 1; in
    logical order both would step by n on every lane."""
    n, m = 24, 40
    v = op("exp", load("x", i0 + n * i1, f32))  # x is (m, n) contiguous; the output (n, m) is x's layout
    g = Graph((inp("x", (m, n)),), (pw("buf0", (n, m), v, strides=(1, n)),), ("buf0",))
    src = kernel_src(run(g, cfg=config(**SMALL, write_order=write_order), tol=dict(rtol=1e-6, atol=1e-7)),
                     "triton_poi_fused_0")
    contiguous = "tl.store(out_ptr0 + (x0), tmp1, xmask)" in src and "tl.load(in_ptr0 + (x0)" in src
    assert contiguous == write_order, src


def test_transposed_output_tiles_with_the_store_on_the_inner_axis():
    """x.t() + y into x.t()'s layout: the store (and x's load) run along the tile's inner axis,
    y's load along the outer one; the result matches the reference."""
    n, m = 40, 24
    v = op("add", load("x", i0 + n * i1, f32), load("y", m * i0 + i1, f32))
    g = Graph((inp("x", (m, n)), inp("y", (n, m))), (pw("buf0", (n, m), v, strides=(1, n)),), ("buf0",))
    src = kernel_src(run(g, cfg=config(xblock_cap=16)), "triton_poi_fused_0")
    assert "tl.store(out_ptr0 + (x1 + 40*y0)" in src and "tl.load(in_ptr0 + (x1 + 40*y0)" in src, src
    assert "tl.load(in_ptr1 + (24*x1 + y0)" in src, src


@pytest.mark.parametrize("operand_order", [True, False])
def test_loads_issue_in_operand_order(operand_order):
    """x.t() + y: with operand_order the kernel loads x (the first operand) before y, as the
    program reads them; the former emitter issued the last operand's load first."""
    n, m = 40, 24
    v = op("add", load("x", i0 + n * i1, f32), load("y", m * i0 + i1, f32))
    g = Graph((inp("x", (m, n)), inp("y", (n, m))), (pw("buf0", (n, m), v, strides=(1, n)),), ("buf0",))
    src = kernel_src(run(g, cfg=config(xblock_cap=16, operand_order=operand_order)), "triton_poi_fused_0")
    assert (src.index("tl.load(in_ptr0") < src.index("tl.load(in_ptr1")) == operand_order, src


def test_fused_pointwise_chain_keeps_intermediates_in_registers():
    """buf0 = x*2, buf1 = buf0 + 1, buf2 = exp(buf1): one kernel, only buf2 stored."""
    n = 300
    b0 = pw("buf0", (n,), op("mul", load("x", i0, f32), const(2.0, f32)))
    b1 = pw("buf1", (n,), op("add", load("buf0", i0, f32), const(1.0, f32)))
    b2 = pw("buf2", (n,), op("exp", load("buf1", i0, f32)))
    g = Graph((inp("x", (n,)),), (b0, b1, b2), ("buf2",))
    m = run(g, cfg=config(**SMALL), tol=dict(rtol=1e-6, atol=1e-7))
    src = kernel_src(m, "triton_poi_fused_0")
    assert src.count("tl.store(") == 1 and src.count("tl.load(") == 1
    assert "buf0 stays in registers" in m.source and "buf1 stays in registers" in m.source


def test_intermediate_also_an_output_is_stored():
    n = 50
    b0 = pw("buf0", (n,), op("mul", load("x", i0, f32), const(3.0, f32)))
    b1 = pw("buf1", (n,), op("neg", load("buf0", i0, f32)))
    g = Graph((inp("x", (n,)),), (b0, b1), ("buf1", "buf0"))
    src = kernel_src(run(g), "triton_poi_fused_0")
    assert src.count("tl.store(") == 2


def test_fused_read_at_another_point_is_refused():
    """Reading a same-kernel buffer at another point would race across programs (Prop 7.2)."""
    n = 16
    b0 = pw("buf0", (n,), op("mul", load("x", i0, f32), const(3.0, f32)))
    b1 = pw("buf1", (n,), load("buf0", n - 1 - i0, f32))
    g = Graph((inp("x", (n,)),), (b0, b1), ("buf1",))
    with pytest.raises(NotImplementedError, match="illegal pair"):
        compile_schedule(build_schedule(g, [["buf0", "buf1"]]), config=config())
    run(g, groups=[["buf0"], ["buf1"]])  # as two kernels it is fine


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_index_dtype(index_dtype):
    g = Graph((inp("x", (7, 9)),), (pw("buf0", (7, 9), op("abs", load("x", 9 * i0 + i1, f32))),), ("buf0",))
    m = run(g, cfg=config(index_dtype=index_dtype, **SMALL))
    assert ("tl.program_id(0).to(tl.int64)" in m.source) == (index_dtype == "int64")


def test_auto_index_dtype_is_int32_when_sizes_allow():
    g = Graph((inp("x", (7, 9)),), (pw("buf0", (7, 9), op("abs", load("x", 9 * i0 + i1, f32))),), ("buf0",))
    assert plan_kernels(build_schedule(g), config())[0].index_dtype == "int32"
    big = Graph((inp("x", (2**31 + 5,)),), (pw("buf0", (2**31 + 5,), load("x", i0, f32)),), ("buf0",))
    assert plan_kernels(build_schedule(big), config())[0].index_dtype == "int64"


def test_scalar_and_constant_outputs():
    """A 0-d output reading a 0-d input, and a node that is only a constant."""
    g = Graph((inp("x", ()),), (pw("buf0", (), op("mul", load("x", 0, f32), const(4.0, f32))),
                                pw("buf1", (3,), const(2.5, f32))), ("buf0", "buf1"))
    run(g, groups=[["buf0"], ["buf1"]])


def test_index_values_iota_and_modular_index():
    """arange as a value, and an index through ModularIndexing (a view of a view)."""
    n = 30
    v = op("add", ir_cast(index_value(i0, i64), f32), load("x", ModularIndexing(i0, 1, 10), f32))
    g = Graph((inp("x", (10,)),), (pw("buf0", (n,), v), pw("buf1", (n,), index_value(3 * i0 + 1, i64))),
              ("buf0", "buf1"))
    run(g, groups=[["buf0"], ["buf1"]], cfg=config(**SMALL))


def test_masked_loads_cat():
    """cat([a, b]) along dim 0 as masked loads with `other`."""
    na, nb, m = 5, 3, 4
    in_a = op("lt", IndexValue(i0, i64), const(na, i64))
    in_b = op("logical_not", in_a)
    va = load("a", m * i0 + i1, f32, mask=in_a, other=0.0)
    vb = load("b", m * (i0 - na) + i1, f32, mask=in_b, other=0.0)
    g = Graph((inp("a", (na, m)), inp("b", (nb, m))), (pw("buf0", (na + nb, m), op("where", in_a, va, vb)),), ("buf0",))
    run(g, cfg=config(xblock_cap=8))


@pytest.mark.parametrize("dtype", [f16, bf16])
def test_half_storage_computes_in_float32(dtype):
    """(x * y + 1) for half inputs: loads widen to float32, the store rounds once."""
    n = 200
    v = op("add", op("mul", load("x", i0, dtype), load("y", i0, dtype)), const(1.0, dtype))
    g = Graph((inp("x", (n,), dtype), inp("y", (n,), dtype)), (pw("buf0", (n,), v),), ("buf0",))
    m = run(g, cfg=config(**SMALL))
    assert ".to(tl.float32)" in m.source


def test_explicit_bf16_cast_rounds_to_nearest_even():
    """to_dtype(bf16) rounds half-to-even (the interpreter's own cast truncates)."""
    x = np.array([1.0 + 2**-8 + 2**-9, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -1.0 - 3 * 2**-8, 3.0, np.nan], np.float32)
    v = ir_cast(ir_cast(load("x", i0, f32), bf16), f32)
    g = Graph((inp("x", (6,)),), (pw("buf0", (6,), v),), ("buf0",))
    run(g, arrays={"x": x}, tol=dict(rtol=0, atol=0))


def test_integer_arithmetic_and_dtype_casts():
    n = 64
    a, b = load("a", i0, i32), load("b", i0, i32)
    v1 = op("add", op("mul", a, b), const(7, i32))
    v2 = ir_cast(op("truediv", ir_cast(a, f32), const(3.0, f32)), i64)  # float -> int truncates toward zero
    v3 = ir_cast(a, dtype_u8 := __import__("stax.ir.dtypes", fromlist=["uint8"]).uint8)
    g = Graph((inp("a", (n,), i32), inp("b", (n,), i32)),
              (pw("buf0", (n,), v1), pw("buf1", (n,), v2), pw("buf2", (n,), v3)),
              ("buf0", "buf1", "buf2"))
    assert dtype_u8.name == "uint8"
    run(g, cfg=config(**SMALL))


def test_rand_matches_the_reference_philox_bit_for_bit():
    """tl.rand and stax.ir.rng are the same Philox4x32-10 stream: identical bits."""
    n = 100
    seed = load("seed", 0, i64)
    off = op("add", index_value(i0, i64), const(1000, i64))
    g = Graph((inp("seed", (), i64),), (pw("buf0", (n,), op("rand", seed, off)),), ("buf0",))
    run(g, arrays={"seed": np.array(12345, np.int64)}, tol=dict(rtol=0, atol=0))


def test_randn_matches_the_reference():
    """tl.randn: Box-Muller on the same words; on a GPU tl.log/tl.cos are the approximate
    hardware functions (|error| <= 2^-20 relative to a result of magnitude <= ~5): the error
    model's RANDN budget there; 1e-5 under the interpreter."""
    n = 100
    seed = load("seed", 0, i64)
    off = op("add", index_value(i0, i64), const(77, i64))
    g = Graph((inp("seed", (), i64),), (pw("buf0", (n,), op("randn", seed, off)),), ("buf0",))
    run(g, arrays={"seed": np.array(99, np.int64)}, tol=dict(rtol=1e-5, atol=1e-5))
