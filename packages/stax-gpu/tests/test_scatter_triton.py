"""Scatter kernels: an init kernel, then an atomic scatter kernel writing into its storage
(scatter.py), against the numpy interpreter. Grids stay tiny (Triton's interpreter)."""

from dataclasses import replace

import numpy as np
import pytest
from gpu_testlib import (
    AOT,
    ON_CUDA,
    TOL,
    as_numpy,
    assert_raised_later,
    async_flag,
    config,
    f16,
    f32,
    f64,
    i0,
    i1,
    i8,
    i32,
    i64,
    inp,
    lay,
    make_inputs,
    r0,
    r1,
)
from stax.gpu import compile_schedule
from stax.gpu.scatter import split_scatters
from stax.ir import ComputedBuffer, Graph, Pointwise, Scatter, const, interpret, load, op, outputs
from stax.ir import dtypes as dt
from stax.ir.index import var
from stax.sched import GpuPolicy, schedule

T0, T1 = var("t", 0), var("t", 1)
pytestmark = pytest.mark.skipif(AOT, reason="runs the modules")


def index_put(n_out, n_src, d, mode, coord=None):
    """out = x; out[coord(idx[r0])] (+)= src[r0]."""
    body = Scatter((n_out,), load("x", i0, d), (n_src,), (coord if coord is not None else T0,),
                   ((T0, load("idx", r0, i64), n_out),), load("src", r0, d), mode)
    ins = (inp("x", (n_out,), d), inp("idx", (n_src,), i64), inp("src", (n_src,), d))
    return Graph(ins, (ComputedBuffer("out", lay((n_out,), d), body),), ("out",))


def run(graph, arrays=None, cfg=None, **ranges):
    """(stax-gpu outputs, interpreter outputs, module)."""
    module = compile_schedule(schedule(graph, GpuPolicy()), config=cfg or config())
    flats, tensors = make_inputs(graph, arrays, **ranges)
    got = [as_numpy(t) for t in module.call(list(tensors))]
    ref = outputs(graph, interpret(graph, flats))
    return got, ref, module


def check(got, ref, d):
    if d.is_floating:  # atomics may add in any order on a GPU: a float tolerance even where the interpreter is exact
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(ref, np.float64), **TOL[d.name])
    else:
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("d", [f32, f64, i32, i64, f16], ids=str)
def test_add_with_duplicates(d):
    """200 points onto 13 elements; the init kernel copies x, the scatter kernel adds atomically."""
    g = index_put(13, 200, d, "add")
    ranges = dict(idx=(0, 13), src=(-3, 3) if d.is_floating else (-50, 50))
    (got,), (ref,), m = run(g, **ranges)
    if d == f16:  # ~15 float16 adds per element, in any order: the recursive-summation bound
        flats, _ = make_inputs(g, **ranges)
        x, idx, src = (np.asarray(flats[k], np.float64) for k in ("x", "idx", "src"))
        exact, mags, adds = x.copy(), np.abs(x), np.zeros_like(x)
        np.add.at(exact, idx.astype(np.int64), src)
        np.add.at(mags, idx.astype(np.int64), np.abs(src))
        np.add.at(adds, idx.astype(np.int64), 1.0)
        bound = adds * 2.0**-11 * mags + 2.0**-11 * np.abs(exact)  # each add's rounding + the last
        err = np.abs(np.asarray(got, np.float64) - exact)
        assert (err <= bound).all(), (err, bound)
        assert np.abs(np.asarray(ref, np.float64) - exact).max() <= bound.max()  # the reference obeys it too
    else:
        check(got, ref, d)
    assert "tl.atomic_add(out_ptr0" in m.source and "def triton_poi_fused_0" in m.source
    assert "out = reinterpret(out_init" in m.source  # the scatter writes into the init buffer's storage


@pytest.mark.parametrize("d", [f32, i64, dt.bfloat16, i8], ids=str)
def test_set_unique_targets(d):
    """'set' through tl.store (any dtype); a permutation, so the result is defined on a GPU too."""
    g = index_put(16, 10, d, "set")
    perm = np.random.default_rng(1).permutation(16)[:10]
    (got,), (ref,), m = run(g, arrays={"idx": perm})
    check(got, ref, d)
    assert "tl.store(out_ptr0" in m.source and "atomic" not in m.source


@pytest.mark.skipif(ON_CUDA, reason="duplicate 'set' races on a GPU (as in eager)")
def test_set_duplicates_last_wins_in_the_interpreter():
    g = index_put(4, 5, f32, "set")
    (got,), (ref,), _ = run(g, arrays={"idx": np.array([2, 0, 2, 2, 0]), "src": np.arange(5.0) + 10})
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got[[0, 2]], [14, 13])


def test_embedding_backward_non_contiguous_out_with_consumer():
    """gw[ids[r0], r1] += 2 * grad[r0, r1] stored column-major, then gw + 1: four kernels
    (producer-free init, scatter, consumer), the consumer reading the scattered buffer."""
    V, D, N = 12, 5, 40
    value = op("mul", load("grad", D * r0 + r1, f32), const(2.0, f32))
    body = Scatter((V, D), const(0.0, f32), (N, D), (T0, r1), ((T0, load("ids", r0, i64), V),), value, "add")
    gw = ComputedBuffer("gw", lay((V, D), f32, (1, V)), body)
    out = ComputedBuffer("out", lay((V, D), f32),
                         Pointwise((V, D), op("add", load("gw", i0 + V * i1, f32), const(1.0, f32))))
    g = Graph((inp("grad", (N, D)), inp("ids", (N,), i64)), (gw, out), ("out", "gw"))
    got, ref, m = run(g, ids=(0, V))
    for a, b in zip(got, ref):
        check(a, b, f32)
    assert np.count_nonzero(ref[1]) > 0


def test_two_index_tensors_and_computed_init():
    """out[a[r0], b[r0]] += src[r0] over init 3 * x."""
    init = op("mul", load("x", 4 * i0 + i1, f32), const(3.0, f32))
    ind = ((T0, load("a", r0, i64), 3), (T1, load("b", r0, i64), 4))
    body = Scatter((3, 4), init, (30,), (T0, T1), ind, load("src", r0, f32), "add")
    ins = (inp("x", (3, 4)), inp("a", (30,), i64), inp("b", (30,), i64), inp("src", (30,)))
    g = Graph(ins, (ComputedBuffer("out", lay((3, 4)), body),), ("out",))
    (got,), (ref,), _ = run(g, a=(0, 3), b=(0, 4))
    check(got, ref, f32)


def test_split_scatters_schedule():
    """The rewrite: init kernel + scatter kernel; out takes out_init's storage (reuse); the
    inputs' frees move after the scatter kernel."""
    s = split_scatters(schedule(index_put(8, 6, f32, "add"), GpuPolicy()))
    assert [(k.kind, k.nodes) for k in s.kernels] == [("pointwise", ("out_init",)), ("scatter", ("out",))]
    ev = [(e.step, e.kind, e.buffer, e.reuses) for e in s.memory.events]
    assert (0, "alloc", "out_init", None) in ev and (1, "reuse", "out", "out_init") in ev
    assert all(step == 1 for step, kind, _, _ in ev if kind == "free")
    node = s.graph.node("out")
    assert node.body.init == load("out_init", i0, f32)
    assert s.graph.node("out_init").body.value == load("x", i0, f32)


@pytest.mark.parametrize("bad", [13, -1])
def test_out_of_range_index_raises(bad):
    g = index_put(13, 6, f32, "add")
    idx = np.array([0, 3, bad, 2, 1, 0])
    with pytest.raises(IndexError, match="scatter index out of bounds writing out"):
        run(g, arrays={"idx": idx}, cfg=config(error_sync=True))


def test_out_of_range_coordinate_raises():
    g = index_put(8, 4, f32, "add", coord=T0 + 2)
    (got,), (ref,), _ = run(g, arrays={"idx": np.array([0, 5, 1, 3])})
    check(got, ref, f32)
    with pytest.raises(IndexError, match="scatter coordinate 0 out of bounds"):
        run(g, arrays={"idx": np.array([0, 6, 1, 3])}, cfg=config(error_sync=True))


def test_no_atomic_add_for_int8_is_a_clear_error():
    with pytest.raises(NotImplementedError, match="Triton has no atomic add for int8"):
        compile_schedule(schedule(index_put(8, 4, i8, "add"), GpuPolicy()), config=config())


def test_bfloat16_add():
    """bf16 atomic adds compile for the GPU; Triton's interpreter has none (a clear error)."""
    g = index_put(13, 40, dt.bfloat16, "add")
    if not ON_CUDA:
        with pytest.raises(NotImplementedError, match="interpreter has no atomic add for bfloat16"):
            compile_schedule(schedule(g, GpuPolicy()), config=config())
        return
    (got,), (ref,), _ = run(g, idx=(0, 13))
    check(got, ref, dt.bfloat16)


def test_never_autotuned():
    """A trial launch of an atomic scatter would add twice: one launch config, even where the
    heuristics offer several (a real GPU with autotuning on)."""
    from stax.gpu.emit import ErrorTable
    from stax.gpu.heuristics import candidates
    from stax.gpu.plan import plan_kernels
    from stax.gpu.scatter import plan_with_scatters, scatter_kernel_set

    s = split_scatters(schedule(index_put(1 << 16, 1 << 16, f32, "add"), GpuPolicy()))
    gpu = replace(config(), interpret=False, autotune=True)
    plans, passes = plan_with_scatters(s, gpu, plan_kernels)
    assert list(passes) == [1]
    (ks,), cands = scatter_kernel_set(plans[1], passes[1], gpu, ErrorTable())
    assert len(candidates(plans[1], ks, gpu)) > 1 and len(cands) == 1
    assert ks.name == "triton_sca_fused_1" and ks.args == ("src", "idx", "out")


@pytest.mark.parametrize("bad", [13, -1])
def test_out_of_range_add_poisons_and_is_raised_later(bad):
    """A float 'add' at an out-of-range index adds NaN at the clamped place (index 0): never
    silently wrong, so on cuda its flag is read a call later, as a float gather's is."""
    g = index_put(13, 6, f32, "add")
    module = compile_schedule(schedule(g, GpuPolicy()), config=config())
    flag = async_flag(module)
    idx = np.array([0, 3, bad, 2, 1, 0])
    _, bad_in = make_inputs(g, {"idx": idx})
    _, good_in = make_inputs(g, {"idx": np.where(idx == bad, 4, idx)})
    (out,) = module.call(list(bad_in))
    out = as_numpy(out)
    assert np.isnan(out[0]) and not np.isnan(out[1:]).any()
    assert_raised_later(module, flag, good_in, "scatter index out of bounds writing out")
    (got,), (ref,), _ = run(g, arrays={"idx": np.where(idx == bad, 4, idx)})
    check(got, ref, f32)


@pytest.mark.parametrize("d, mode, asserted", [(f32, "add", False), (f32, "set", True), (i64, "add", True)],
                         ids=str)
def test_only_a_float_add_reads_its_flag_asynchronously(d, mode, asserted):
    """A 'set' may be overwritten by a racing store and an integer holds no NaN: those end each call
    with a device-side assert on the flag; a float 'add' is poisoned. Neither syncs."""
    from stax.gpu.compile import generated_module

    module = compile_schedule(schedule(index_put(13, 6, d, mode), GpuPolicy()), config=config(device="cuda"))
    errors = generated_module(module).ERRORS
    assert errors.asserted == asserted and not errors.sync
