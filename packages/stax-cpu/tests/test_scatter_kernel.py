"""Scatter kernels (stax.ir Scatter: init pass, then scatter pass), compiled vs the interpreter:
duplicates, every dtype, both modes, parallel atomic adds, threads owning output columns,
non-contiguous outputs, range errors."""

import dataclasses

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, pointwise, run_both
from stax import ir
from stax.cpu import compile_schedule
from stax.ir import dtypes as dt
from stax.sched import schedule as make_schedule

F32 = dt.float32
i0, i1 = ir.pointwise_vars(2)
r0, r1 = ir.reduction_vars(2)
t0, t1 = ir.var("t", 0), ir.var("t", 1)
rng = np.random.default_rng(0)


def index_put_graph(n_out, n_src, d, mode, out_layout=None, coord=None):
    """out = x; out[coord(idx[r0])] (+)= src[r0]."""
    idx = ir.load("idx", r0, dt.int64)
    body = ir.Scatter((n_out,), ir.load("x", i0, d), (n_src,), (coord if coord is not None else t0,),
                      ((t0, idx, n_out),), ir.load("src", r0, d), mode)
    lay = out_layout or ir.Layout.contiguous((n_out,), d)
    ins = [contiguous("x", (n_out,), d), contiguous("idx", (n_src,), dt.int64), contiguous("src", (n_src,), d)]
    return ir.Graph(ins, [ir.ComputedBuffer("out", lay, body)], ["out"])


def values(d, n):
    if d.is_bool:
        return rng.random(n) < 0.3
    if d.is_floating:
        return rng.standard_normal(n) * 4
    info = np.iinfo(d.np)
    return rng.integers(info.min, info.max, n, endpoint=True)  # sums wrap around


DTYPES = [dt.float32, dt.float64, dt.int64, dt.int32, dt.int8, dt.uint8, dt.bool_, dt.float16, dt.bfloat16]


@pytest.mark.parametrize("mode", ["add", "set"])
@pytest.mark.parametrize("d", DTYPES, ids=str)
def test_duplicates_every_dtype(d, mode, cfg):
    """300 points onto 13 elements, serially (small): identical to the interpreter's serial pass,
    including half types (each sum rounded on store) and 'set' (last point wins)."""
    g = index_put_graph(13, 300, d, mode)
    inputs = {"x": values(d, 13), "idx": rng.integers(0, 13, 300), "src": values(d, 300)}
    (ours,), (ref,), mod = run_both(g, inputs, cfg)
    assert_close(ours, ref, d, what=f"{d} {mode}")
    assert "#pragma omp atomic" not in mod.source


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.int32, dt.int64, dt.float16], ids=str)
def test_large_add_parallel_atomics(d, cfg):
    """Enough points for Algorithm 8.1 to split the scatter loop: float32/float64/integer adds run
    in parallel with atomic adds (float sums reordered: a tolerance); half types stay serial."""
    n_out, n_src = 97, 20000
    g = index_put_graph(n_out, n_src, d, "add")
    inputs = {"x": values(d, n_out), "idx": rng.integers(0, n_out, n_src), "src": values(d, n_src)}
    cfg2 = dataclasses.replace(cfg, num_threads=2)
    (ours,), (ref,), mod = run_both(g, inputs, cfg2)
    parallel = d in (dt.float32, dt.float64, dt.int32, dt.int64)
    assert ("#pragma omp atomic" in mod.source) == parallel
    # sums of ~200 values of size ~4: float32 reordering error well below 1e-4 relative to the terms
    tol = {dt.float32: 2e-3, dt.float64: 1e-10}.get(d, 0.0)
    assert_close(ours, ref, d, rtol=tol, atol=tol, what=str(d))


def test_embedding_backward_non_contiguous_out(cfg):
    """gw[ids[r0], r1] += 2 * grad[r0, r1], gw stored column-major; the init pass zeroes it."""
    V, D, N = 40, 12, 90
    value = ir.op("mul", ir.load("grad", D * r0 + r1, F32), ir.const(2.0, F32))
    body = ir.Scatter((V, D), ir.const(0.0, F32), (N, D), (t0, r1), ((t0, ir.load("ids", r0, dt.int64), V),),
                      value, "add")
    lay = ir.Layout("cpu", F32, (V, D), (1, V))
    g = ir.Graph([contiguous("grad", (N, D)), contiguous("ids", (N,), dt.int64)], [ir.ComputedBuffer("gw", lay, body)],
                 ["gw"])
    (ours,), (ref,), _ = run_both(g, {"grad": rng.standard_normal((N, D)), "ids": rng.integers(0, V, N)}, cfg)
    # 1080 points: the threads own ranges of the 12 columns (coordinate 1 is r1), rows in serial order
    assert_close(ours, ref, F32, what="gw")
    assert np.count_nonzero(ref) > 0


@pytest.mark.parametrize("mode", ["add", "set"])
@pytest.mark.parametrize("d", [dt.float32, dt.bfloat16, dt.int8], ids=str)
def test_owned_columns_run_in_parallel_without_atomics(d, mode, cfg):
    """gw[ids[r0], r1] (+)= grad[r0, r1] with many points: coordinate 1 is the loop r1 alone, so each
    thread owns a range of columns and walks every row in order. No atomics, any dtype and mode in
    parallel, and each element sees its points in the serial order: equal to the interpreter bit for
    bit (float sums included, half types rounded per add, 'set' keeping the last row)."""
    V, D, N = 50, 96, 400  # 38400 points onto 4800 elements, ~8 rows each
    body = ir.Scatter((V, D), ir.load("x", D * i0 + i1, d), (N, D), (t0, r1),
                      ((t0, ir.load("ids", r0, dt.int64), V),), ir.load("grad", D * r0 + r1, d), mode)
    g = ir.Graph([contiguous("x", (V, D), d), contiguous("grad", (N, D), d), contiguous("ids", (N,), dt.int64)],
                 [ir.ComputedBuffer("gw", ir.Layout.contiguous((V, D), d), body)], ["gw"])
    vals = {"x": values(d, V * D).reshape(V, D), "grad": values(d, N * D).reshape(N, D),
            "ids": rng.integers(0, V, N)}
    (ours,), (ref,), mod = run_both(g, vals, dataclasses.replace(cfg, num_threads=2))
    assert_close(ours, ref, d, what=f"{d} {mode}")
    assert "each thread owning a range of loop x1" in mod.source and "#pragma omp atomic" not in mod.source


def test_two_index_tensors_and_fused_neighbours(cfg):
    """out[a[r0], b[r0]] = src[r0] + 1 over a computed init (3 * x), then a pointwise consumer:
    the whole schedule (producer kernel, scatter kernel, consumer kernel) against the interpreter."""
    x = contiguous("x", (5, 6))
    ins = [x, contiguous("a", (30,), dt.int64), contiguous("b", (30,), dt.int64), contiguous("src", (30,))]
    init = ir.op("mul", ir.load("x", 6 * i0 + i1, F32), ir.const(3.0, F32))
    pre = pointwise("pre", (30,), ir.op("add", ir.load("src", i0, F32), ir.const(1.0, F32)))
    ind = ((t0, ir.load("a", r0, dt.int64), 5), (t1, ir.load("b", r0, dt.int64), 6))
    sc = ir.ComputedBuffer("sc", ir.Layout.contiguous((5, 6), F32),
                           ir.Scatter((5, 6), init, (30,), (t0, t1), ind, ir.load("pre", r0, F32), "set"))
    post = pointwise("post", (5, 6), ir.op("neg", ir.load("sc", 6 * i0 + i1, F32)))
    g = ir.Graph(ins, [pre, sc, post], ["post"])
    s = make_schedule(g)
    assert [k.kind for k in s.kernels] == ["pointwise", "scatter", "pointwise"]
    vals = {"x": rng.standard_normal((5, 6)), "a": rng.integers(0, 5, 30), "b": rng.integers(0, 6, 30),
            "src": rng.standard_normal(30)}
    (ours,), (ref,), _ = run_both(g, vals, cfg, sched=s)
    assert_close(ours, ref, F32, what="post")


def test_out_of_range_index_raises(cfg):
    g = index_put_graph(4, 3, F32, "add")
    mod = compile_schedule(make_schedule(g), config=cfg)
    x, src = np.zeros(4, np.float32), np.ones(3, np.float32)
    np.testing.assert_array_equal(mod.call([x.copy(), np.array([1, 1, 3]), src.copy()])[0], [0, 2, 0, 1])
    for bad in (4, -1):
        with pytest.raises(IndexError, match=rf"index {bad} is out of bounds .* size 4 .*scatter index t0"):
            mod.call([x.copy(), np.array([1, bad, 3]), src.copy()])


def test_out_of_range_coordinate_raises(cfg):
    """The value t0 < 4 is checked, and so is the coordinate t0 + 2 (not provably < 4)."""
    g = index_put_graph(4, 3, F32, "add", coord=t0 + 2)
    mod = compile_schedule(make_schedule(g), config=cfg)
    x, src = np.zeros(4, np.float32), np.ones(3, np.float32)
    np.testing.assert_array_equal(mod.call([x.copy(), np.array([0, 1, 1]), src.copy()])[0], [0, 0, 1, 2])
    with pytest.raises(IndexError, match=r"index 4 is out of bounds .* size 4 .*scatter coordinate 0"):
        mod.call([x.copy(), np.array([0, 2, 1]), src.copy()])


def test_empty_scatter_and_empty_output(cfg):
    """No scatter points: the output is init. No output elements and no points: nothing runs."""
    g = index_put_graph(5, 0, F32, "add")
    (ours,), (ref,), _ = run_both(g, {"x": np.arange(5.0), "idx": np.zeros(0, np.int64), "src": np.zeros(0)}, cfg)
    assert_close(ours, ref, F32)
    np.testing.assert_array_equal(ours, np.arange(5.0))


def test_provably_in_range_index_is_not_checked(cfg):
    """out[r0 % 4] += src[r0]: the index value r0 % 4 < 4 is proved (stax.ir value ranges), so no
    check_index is emitted; the result still equals the interpreter's."""
    from stax.ir.index import ModularIndexing

    iv = ir.index_value(ModularIndexing(r0, 1, 4))
    body = ir.Scatter((4,), ir.const(0.0, F32), (10,), (t0,), ((t0, iv, 4),), ir.load("src", r0, F32), "add")
    g = ir.Graph([contiguous("src", (10,))], [ir.ComputedBuffer("out", ir.Layout.contiguous((4,), F32), body)], ["out"])
    (ours,), (ref,), mod = run_both(g, {"src": np.arange(10.0)}, cfg)
    assert_close(ours, ref, F32)
    np.testing.assert_array_equal(ref, [0 + 4 + 8, 1 + 5 + 9, 2 + 6, 3 + 7])
    assert "check_index" not in mod.source.split("extern \"C\" int kernel0")[1]
