"""The numpy reference interpreter on hand-built graphs, checked against plain numpy."""

import math

import numpy as np
import pytest
import sympy
from irtestlib import run_pointwise
from stax.ir import (
    ComputedBuffer,
    ExternKernel,
    Graph,
    InputBuffer,
    Layout,
    Pointwise,
    Reduction,
    Scan,
    cast,
    const,
    from_storage,
    index_value,
    interpret,
    load,
    op,
    outputs,
    pointwise_vars,
    reduction_vars,
    to_storage,
)
from stax.ir import dtypes as dt
from stax.ir.examples import example_7_1

i0, i1, i2 = pointwise_vars(3)
r0, r1 = reduction_vars(2)
rng = np.random.default_rng(0)


def test_example_7_1():
    """x / x.sum(-1, keepdim=True) on 64x128 float32; float32 sum, exact division."""
    g = example_7_1()
    x = rng.standard_normal((64, 128)).astype(np.float32) + 3
    bufs = interpret(g, {"primals_1": x.reshape(-1)})
    s = x.sum(-1, keepdims=True, dtype=np.float32)
    np.testing.assert_allclose(from_storage(bufs["buf1"], g.buffer_layout("buf1")), s, rtol=1e-6)
    np.testing.assert_array_equal(outputs(g, bufs)[0], x / from_storage(bufs["buf1"], g.buffer_layout("buf1")))


def test_strided_input_and_output_layouts():
    """A transposed input with an offset, written to a column-major output: only layouts differ."""
    a = rng.standard_normal((5, 7)).astype(np.float64)
    in_lay = Layout("cpu", dt.float64, (5, 7), (1, 6), 3)  # x[i, j] at 3 + i + 6 j
    out_lay = Layout("cpu", dt.float64, (5, 7), (1, 5))
    v = op("mul", load("x", in_lay.index(), dt.float64), const(2.0, dt.float64))
    g = Graph((InputBuffer("x", in_lay),), (ComputedBuffer("y", out_lay, Pointwise((5, 7), v)),), ("y",))
    storage = to_storage(a, in_lay)
    assert storage.shape == (in_lay.storage_size(),)
    y = interpret(g, {"x": storage})["y"]
    np.testing.assert_array_equal(y.reshape(7, 5).T, 2 * a)
    np.testing.assert_array_equal(outputs(g, {"y": y})[0], 2 * a)


def test_reduction_over_two_axes_and_keepdim():
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    v = load("x", 20 * r0 + 5 * i1 + r1, dt.float32)
    node = ComputedBuffer("m", Layout.contiguous((1, 4), dt.float32), Reduction((1, 4), (3, 5), "max", v))
    g = Graph((InputBuffer("x", Layout.contiguous((3, 4, 5), dt.float32)),), (node,), ("m",))
    np.testing.assert_array_equal(outputs(g, interpret(g, {"x": a.reshape(-1)}))[0], a.max(axis=(0, 2))[None, :])


@pytest.mark.parametrize("rtype", ["sum", "prod", "max", "min", "argmax", "argmin", "any", "all"])
def test_reductions_match_numpy(rtype):
    a = rng.integers(-3, 4, size=(6, 9)).astype(np.float32)
    a[1, 2] = a[1, 5] = a.max() + 1  # ties: first index wins
    a[4, 3] = np.nan
    ref = {
        "sum": lambda x: x.sum(1), "prod": lambda x: x.prod(1), "max": lambda x: x.max(1), "min": lambda x: x.min(1),
        "argmax": lambda x: x.argmax(1), "argmin": lambda x: x.argmin(1),
        "any": lambda x: (x != 0).any(1), "all": lambda x: (x != 0).all(1),
    }[rtype](a)
    v = load("x", 9 * i0 + r0, dt.float32)
    body = Reduction((6,), (9,), rtype, v)
    node = ComputedBuffer("r", Layout.contiguous((6,), body.dtype), body)
    g = Graph((InputBuffer("x", Layout.contiguous((6, 9), dt.float32)),), (node,), ("r",))
    out = outputs(g, interpret(g, {"x": a.reshape(-1)}))[0]
    np.testing.assert_array_equal(out, ref)
    if rtype in ("argmax", "argmin"):
        assert out[4] == 3  # NaN is the extreme of both, as eager
    if rtype == "argmax":
        assert out[1] == 2


def _reduce(rtype, a, dtype=dt.float32):
    n, m = a.shape
    body = Reduction((n,), (m,), rtype, load("x", m * i0 + r0, dtype))
    node = ComputedBuffer("r", Layout.contiguous((n,), body.dtype), body)
    g = Graph((InputBuffer("x", Layout.contiguous((n, m), dtype)),), (node,), ("r",))
    return outputs(g, interpret(g, {"x": a.reshape(-1)}))[0]


def test_welford_outputs_give_mean_and_var():
    a = (rng.standard_normal((4, 1000)) * 3 + 1e4).astype(np.float32)  # large mean: naive var cancels
    mean, m2, count = (_reduce(t, a) for t in ("welford_mean", "welford_m2", "welford_count"))
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(mean, a64.mean(1), rtol=1e-7)
    np.testing.assert_allclose(m2 / count, a64.var(1), rtol=1e-5)
    np.testing.assert_allclose(m2 / (count - 1), a64.var(1, ddof=1), rtol=1e-5)
    assert (count == 1000).all()


def test_empty_reductions():
    a = np.zeros((3, 0), dtype=np.float32)
    np.testing.assert_array_equal(_reduce("sum", a), np.zeros(3))
    np.testing.assert_array_equal(_reduce("max", a), np.full(3, -np.inf))
    np.testing.assert_array_equal(_reduce("all", a), np.ones(3, bool))
    assert np.isnan(_reduce("welford_mean", a)).all()
    np.testing.assert_array_equal(_reduce("welford_count", a), np.zeros(3))


def _cum_index_ref(x, better):
    """torch.cummax/cummin indices: the later element wins ties; NaN wins and sticks."""
    out, best, idx = [], None, 0
    for k, v in enumerate(x):
        if k == 0 or math.isnan(v) or (not math.isnan(best) and (better(v, best) or v == best)):
            best, idx = v, k
        out.append(idx)
    return out


@pytest.mark.parametrize("stype", ["cumsum", "cumprod", "cummax", "cummin", "cummax_index", "cummin_index",
                                   "logcumsumexp"])
def test_scans(stype):
    a = rng.integers(-2, 3, size=(3, 8)).astype(np.float32)
    a[2, 4] = np.nan
    a[2, 6] = np.nan
    body = Scan((3, 8), 1, stype, load("x", 8 * i0 + i1, dt.float32))
    g = Graph((InputBuffer("x", Layout.contiguous((3, 8), dt.float32)),),
              (ComputedBuffer("s", Layout.contiguous((3, 8), body.dtype), body),), ("s",))
    out = outputs(g, interpret(g, {"x": a.reshape(-1)}))[0]
    rows = [list(map(float, r)) for r in a]
    if stype == "cumsum":
        ref = [list(np.cumsum(r, dtype=np.float32)) for r in a]
    elif stype == "cumprod":
        ref = [list(np.cumprod(r, dtype=np.float32)) for r in a]
    elif stype in ("cummax", "cummin"):
        f = max if stype == "cummax" else min
        ref = [[r[0]] for r in rows]
        for rr, r in zip(ref, rows):
            for v in r[1:]:
                rr.append(math.nan if (math.isnan(v) or math.isnan(rr[-1])) else f(rr[-1], v))
    elif stype == "logcumsumexp":
        ref = [list(np.log(np.cumsum(np.exp(r.astype(np.float64))))) for r in a]
    else:
        better = (lambda u, v: u > v) if stype == "cummax_index" else (lambda u, v: u < v)
        ref = [_cum_index_ref(r, better) for r in rows]
    np.testing.assert_allclose(out, np.array(ref, dtype=out.dtype), rtol=1e-6, equal_nan=True)


def test_scan_with_an_out_dtype_rounds_each_prefix_not_the_accumulator():
    """cumsum of float32 in a float64 accumulator, stored float32 (Scan.out_dtype): the float64
    prefix sums rounded once, which a float32 running sum (rounded at every step) is not."""
    a = np.full((2, 4096), 0.1, dtype=np.float32)
    a[1] = rng.standard_normal(4096)
    acc = cast(load("x", 4096 * i0 + i1, dt.float32), dt.float64)
    body = Scan((2, 4096), 1, "cumsum", acc, dt.float32)
    g = Graph((InputBuffer("x", Layout.contiguous((2, 4096), dt.float32)),),
              (ComputedBuffer("s", Layout.contiguous((2, 4096), dt.float32), body),), ("s",))
    out = outputs(g, interpret(g, {"x": a.reshape(-1)}))[0]
    ref = np.cumsum(a, 1, dtype=np.float64).astype(np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, ref)
    assert (np.cumsum(a, 1, dtype=np.float32) != ref).any()


def test_scan_along_outer_axis():
    a = rng.standard_normal((5, 3)).astype(np.float64)
    body = Scan((5, 3), 0, "cumsum", load("x", 3 * i0 + i1, dt.float64))
    g = Graph((InputBuffer("x", Layout.contiguous((5, 3), dt.float64)),),
              (ComputedBuffer("s", Layout.contiguous((5, 3), dt.float64), body),), ("s",))
    np.testing.assert_allclose(outputs(g, interpret(g, {"x": a.reshape(-1)}))[0], np.cumsum(a, 0), rtol=1e-12)


def test_half_types_round_after_every_op():
    """bf16/fp16 compute in float32 and round each result, as eager CPU does."""
    a = rng.standard_normal(64).astype(np.float32) * 100
    for d in (dt.float16, dt.bfloat16):
        x = load("x", i0, d)
        v = op("mul", op("add", x, const(1.0 / 3.0, d)), x)
        out = run_pointwise(v, (64,), {"x": (a, d)})
        xs = dt.round_to(a, d).astype(np.float32)
        third = dt.round_to(np.float32(1.0 / 3.0), d).astype(np.float32)
        ref = dt.round_to(dt.round_to(xs + third, d).astype(np.float32) * xs, d)
        np.testing.assert_array_equal(np.asarray(out, dtype=np.float32), np.asarray(ref, dtype=np.float32))


def test_extern_kernel_runs_with_strided_views():
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 2))
    g = Graph(
        (InputBuffer("a", Layout.contiguous((3, 4), dt.float64)),
         InputBuffer("b", Layout("cpu", dt.float64, (4, 2), (1, 4)))),
        (ExternKernel("mm", Layout.contiguous((3, 2), dt.float64), "aten.mm", ("a", "b"), (("alpha", 2.0),)),),
        ("mm",),
    )
    out = interpret(g, {"a": a.reshape(-1), "b": to_storage(b, g.inputs[1].layout)},
                    {"aten.mm": lambda x, y, alpha: alpha * (x @ y)})
    np.testing.assert_allclose(outputs(g, out)[0], 2 * a @ b, rtol=1e-12)
    with pytest.raises(KeyError, match="aten.mm"):
        interpret(g, {"a": a.reshape(-1), "b": to_storage(b, g.inputs[1].layout)})
    with pytest.raises(KeyError, match="missing graph input"):
        interpret(g, {"a": a.reshape(-1)})


def test_integer_division_by_zero_is_an_error():
    x = load("x", i0, dt.int32)
    with pytest.raises(ZeroDivisionError):
        run_pointwise(op("floordiv", x, x), (3,), {"x": (np.array([1, 0, 2]), dt.int32)})


def test_out_of_bounds_direct_load_is_an_error():
    with pytest.raises(IndexError, match="outside"):
        run_pointwise(load("x", i0 - 1, dt.float32), (3,), {"x": (np.ones(3), dt.float32)})


# ---- indirect indexing: gather / index / embedding


def test_embedding_gather():
    w = rng.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([3, 0, 9, 3, 7])
    t = sympy.Symbol("tmp_idx0", integer=True)
    idx = load("ids", i0, dt.int64)
    v = load("w", 4 * t + i1, dt.float32, indirect=((t, idx, 10),))
    out = run_pointwise(v, (5, 4), {"w": (w, dt.float32), "ids": (ids, dt.int64)})
    np.testing.assert_array_equal(out, w[ids])


def test_indirect_bounds_check_reports_the_bad_value():
    t = sympy.Symbol("tmp_idx0", integer=True)
    v = load("w", t, dt.float32, indirect=((t, load("ids", i0, dt.int64), 10),))
    for bad in (10, -1):
        with pytest.raises(IndexError, match=f"value {bad} not in \\[0, 10\\)"):
            run_pointwise(v, (3,), {"w": (np.zeros(10), dt.float32), "ids": (np.array([1, bad, 2]), dt.int64)})


def test_masked_indirect_load_checks_only_active_lanes():
    """Lanes the mask turns off are neither read nor bounds-checked (index_put-style guards)."""
    t = sympy.Symbol("tmp_idx0", integer=True)
    ids = np.array([1, 99, 2, -5])
    idv = load("ids", i0, dt.int64)
    ok = op("logical_and", op("ge", idv, const(0, dt.int64)), op("lt", idv, const(10, dt.int64)))
    v = load("w", t, dt.float32, indirect=((t, idv, 10),), mask=ok, other=-1.0)
    w = np.arange(10, dtype=np.float32)
    out = run_pointwise(v, (4,), {"w": (w, dt.float32), "ids": (ids, dt.int64)})
    np.testing.assert_array_equal(out, [1.0, -1.0, 2.0, -1.0])


def test_index_value_and_where():
    v = op("where", op("lt", index_value(i0), const(2, dt.int64)), index_value(3 * i0, dt.int32), const(-1, dt.int32))
    np.testing.assert_array_equal(run_pointwise(v, (4,), {}), [0, 3, -1, -1])


def test_constant_inf_nan_and_int_overflow_wraps():
    x = load("x", i0, dt.int8)
    out = run_pointwise(op("mul", x, const(3, dt.int8)), (2,), {"x": (np.array([100, -100]), dt.int8)})
    np.testing.assert_array_equal(out, np.array([100 * 3, -300], dtype=np.int64).astype(np.int8))
    y = load("y", i0, dt.float32)
    out = run_pointwise(op("add", y, const(float("inf"), dt.float32)), (2,),
                        {"y": (np.array([1.0, -np.inf]), dt.float32)})
    assert out[0] == np.inf and np.isnan(out[1])
