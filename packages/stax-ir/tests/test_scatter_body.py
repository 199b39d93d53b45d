"""Scatter bodies in the reference interpreter, against plain Python loops written from the rule
out = init; for every scatter point in row-major order: out[coords] += value (add) or = value (set)."""

import numpy as np
import pytest
from stax.ir import (
    ComputedBuffer,
    Graph,
    InputBuffer,
    Layout,
    Load,
    Scatter,
    body_roots,
    cast,
    const,
    from_storage,
    interpret,
    load,
    op,
    outputs,
    pointwise_vars,
    reduction_vars,
    to_storage,
    var,
)
from stax.ir import dtypes as dt

i0, i1 = pointwise_vars(2)
r0, r1 = reduction_vars(2)
t0, t1 = var("t", 0), var("t", 1)
rng = np.random.default_rng(0)


def index_add_graph(n_out, n_src, d: dt.DType, mode="add", out_layout=None, bound=None):
    """out = x; out[idx[r0]] (+)= src[r0] over r0 < n_src (1-D index_put / scatter_add)."""
    idx = load("idx", r0, dt.int64)
    body = Scatter((n_out,), load("x", i0, d), (n_src,), (t0,), ((t0, idx, bound or n_out),), load("src", r0, d), mode)
    lay = out_layout or Layout.contiguous((n_out,), d)
    ins = (
        InputBuffer("x", Layout.contiguous((n_out,), d)),
        InputBuffer("idx", Layout.contiguous((n_src,), dt.int64)),
        InputBuffer("src", Layout.contiguous((n_src,), d)),
    )
    return Graph(ins, (ComputedBuffer("out", lay, body),), ("out",))


def run(g, **arrays):
    feed = {k: to_storage(v, g.buffer_layout(k)) for k, v in arrays.items()}
    return outputs(g, interpret(g, feed))[0]


def loop_reference(x, idx, src, d: dt.DType, mode):
    """The rule, one point at a time; half types: each sum in float32, rounded on store."""
    out = [dt.round_to(np.asarray(v), d)[()] for v in x]
    for j, k in enumerate(idx):
        if mode == "set":
            out[k] = src[j]
        elif d.is_floating:
            out[k] = dt.round_to(np.float32(out[k]) + np.float32(src[j]) if d.itemsize == 2
                                 else np.asarray(out[k] + src[j]), d)[()]
        else:
            out[k] = _wrap(int(out[k]) + int(src[j]), d)
    return np.array(out, dtype=d.np)


def _wrap(v: int, d: dt.DType):
    bits = 8 * d.itemsize
    v &= (1 << bits) - 1
    if d.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return d.np.type(v)


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.int64, dt.int32, dt.int8, dt.uint8])
@pytest.mark.parametrize("mode", ["add", "set"])
def test_duplicates_every_dtype(d, mode):
    """Many points hit the same elements: add accumulates all of them, set keeps the last one."""
    n_out, n_src = 7, 40
    if d.is_floating:
        x = rng.standard_normal(n_out).astype(d.np)
        src = rng.standard_normal(n_src).astype(d.np)
    else:
        info = np.iinfo(d.np)
        x = rng.integers(info.min, info.max, n_out, endpoint=True).astype(d.np)  # sums wrap around
        src = rng.integers(info.min, info.max, n_src, endpoint=True).astype(d.np)
    idx = rng.integers(0, n_out, n_src)
    got = run(index_add_graph(n_out, n_src, d, mode), x=x, idx=idx, src=src)
    want = loop_reference(x, idx, src, d, mode)
    if d.is_floating and mode == "add":
        np.testing.assert_allclose(got, want, rtol=1e-6 if d == dt.float32 else 1e-13)
    else:
        np.testing.assert_array_equal(got, want)


def test_set_last_point_wins():
    """Row-major order of scatter_ranges decides: element 2 gets src[3], element 0 src[4]."""
    idx = np.array([2, 0, 2, 2, 0])
    src = np.arange(5, dtype=np.float32) + 10
    got = run(index_add_graph(4, 5, dt.float32, "set"), x=np.full(4, -1, np.float32), idx=idx, src=src)
    np.testing.assert_array_equal(got, [src[4], -1, src[3], -1])


@pytest.mark.parametrize("d", [dt.float16, dt.bfloat16])
def test_half_rounds_every_store(d):
    """2048 + 1 + 1 + 1 + 1: each sum is rounded to the half type when stored, so with a spacing
    of 2 (fp16) / 16 (bf16) at 2048 every +1 rounds back (half-to-even); float32 accumulation
    would give 2052. Eager's CPU loop does the same."""
    idx = np.zeros(4, dtype=np.int64)
    src = np.ones(4, dtype=np.float32)
    got = run(index_add_graph(2, 4, d), x=np.array([2048, 5], np.float32), idx=idx, src=src)
    np.testing.assert_array_equal(np.asarray(got, np.float32), [2048, 5])


@pytest.mark.parametrize("d", [dt.float16, dt.bfloat16])
def test_half_random_against_loop(d):
    x = rng.standard_normal(5).astype(np.float32) * 50
    src = rng.standard_normal(64).astype(np.float32)
    idx = rng.integers(0, 5, 64)
    got = run(index_add_graph(5, 64, d), x=x, idx=idx, src=src)
    want = loop_reference(dt.round_to(x, d), idx, dt.round_to(src, d), d, "add")
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_embedding_backward_shape_non_contiguous_out():
    """grad_weight[ids[r0], r1] += grad[r0, r1], stored column-major (a transposed layout)."""
    V, D, N = 6, 3, 10
    ids = rng.integers(0, V, N)
    grad = rng.standard_normal((N, D))
    value = load("grad", D * r0 + r1, dt.float64)
    body = Scatter((V, D), const(0.0, dt.float64), (N, D), (t0, r1), ((t0, load("ids", r0, dt.int64), V),), value,
                   "add")
    lay = Layout("cpu", dt.float64, (V, D), (1, V))
    ins = (InputBuffer("ids", Layout.contiguous((N,), dt.int64)),
           InputBuffer("grad", Layout.contiguous((N, D), dt.float64)))
    g = Graph(ins, (ComputedBuffer("gw", lay, body),), ("gw",))
    got = run(g, ids=ids, grad=grad)
    want = np.zeros((V, D))
    for j in range(N):
        want[ids[j]] += grad[j]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    assert from_storage(interpret(g, {"ids": ids, "grad": grad.reshape(-1)})["gw"], lay).strides == (8, 8 * V)


def test_two_indirect_coordinates_and_computed_value():
    """out[a[r0], b[r0]] += 2 * src[r0] (index_put with two index tensors) on top of a computed init."""
    a, b = rng.integers(0, 3, 20), rng.integers(0, 4, 20)
    src = rng.standard_normal(20)
    init = op("mul", load("x", 4 * i0 + i1, dt.float64), const(3.0, dt.float64))
    value = op("mul", load("src", r0, dt.float64), const(2.0, dt.float64))
    ind = ((t0, load("a", r0, dt.int64), 3), (t1, load("b", r0, dt.int64), 4))
    body = Scatter((3, 4), init, (20,), (t0, t1), ind, value, "add")
    x = rng.standard_normal((3, 4))
    ins = tuple(InputBuffer(n, Layout.contiguous(s, d)) for n, s, d in
                [("x", (3, 4), dt.float64), ("a", (20,), dt.int64), ("b", (20,), dt.int64), ("src", (20,), dt.float64)])
    g = Graph(ins, (ComputedBuffer("out", Layout.contiguous((3, 4), dt.float64), body),), ("out",))
    want = 3 * x
    for j in range(20):
        want[a[j], b[j]] += 2 * src[j]
    np.testing.assert_allclose(run(g, x=x, a=a, b=b, src=src), want, rtol=1e-13)


def test_out_of_range_indirect_value_raises():
    g = index_add_graph(4, 3, dt.float32)
    with pytest.raises(IndexError, match="not in \\[0, 4\\)"):
        run(g, x=np.zeros(4, np.float32), idx=np.array([0, 4, 1]), src=np.ones(3, np.float32))
    with pytest.raises(IndexError):
        run(g, x=np.zeros(4, np.float32), idx=np.array([0, -1, 1]), src=np.ones(3, np.float32))


def test_out_of_range_coordinate_raises():
    """The bound checks the value; the coordinate (t0 + 2) must also lie inside the output."""
    body = Scatter((4,), const(0.0, dt.float32), (3,), (t0 + 2,), ((t0, load("idx", r0, dt.int64), 4),),
                   load("src", r0, dt.float32), "add")
    ins = (InputBuffer("idx", Layout.contiguous((3,), dt.int64)),
           InputBuffer("src", Layout.contiguous((3,), dt.float32)))
    g = Graph(ins, (ComputedBuffer("out", Layout.contiguous((4,), dt.float32), body),), ("out",))
    np.testing.assert_array_equal(run(g, idx=np.array([0, 1, 1]), src=np.ones(3, np.float32)), [0, 0, 1, 2])
    with pytest.raises(IndexError, match="coordinate 0 = 4"):
        run(g, idx=np.array([0, 2, 1]), src=np.ones(3, np.float32))


def test_empty_scatter_is_init():
    g = index_add_graph(3, 0, dt.float32)
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(run(g, x=x, idx=np.zeros(0, np.int64), src=np.zeros(0, np.float32)), x)


def test_text_hash_roots_and_validation():
    g1, g2 = index_add_graph(4, 3, dt.float32), index_add_graph(4, 3, dt.float32)
    body = g1.nodes[0].body
    text = str(body)
    assert "Scatter(ranges=[4], scatter_ranges=[3], add)" in text
    assert "t0 (< 4) = t0_0" in text and "-> out[t0]" in text
    assert g1.content_hash() == g2.content_hash()
    assert g1.content_hash() != index_add_graph(4, 3, dt.float32, "set").content_hash()
    assert body.dtype == dt.float32
    assert [type(v) for v in body_roots(body)] == [Load, Load, Load]
    assert body_roots(body)[2].buffer == "idx"
    src = load("src", r0, dt.float32)
    with pytest.raises(ValueError, match="mode"):
        Scatter((4,), const(0.0, dt.float32), (3,), (r0,), (), src, "mul")
    with pytest.raises(ValueError, match="coordinates"):
        Scatter((4, 2), const(0.0, dt.float32), (3,), (r0,), (), src, "add")
    with pytest.raises(TypeError, match="init is float64"):
        Scatter((4,), const(0.0, dt.float64), (3,), (r0,), (), src, "add")
    with pytest.raises(TypeError, match="integer expected"):
        Scatter((4,), const(0.0, dt.float32), (3,), (t0,), ((t0, src, 4),), src, "add")
    with pytest.raises(TypeError, match="layout stores"):
        ComputedBuffer("o", Layout.contiguous((4,), dt.float64), Scatter((4,), const(0.0, dt.float32), (3,), (r0,), (),
                                                                          cast(src, dt.float32), "add"))
