"""Views as index maps against numpy's own views; cat and constant_pad as `where` selects."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import grid_values, run_pointwise
from stax.ir import Layout, Load, Op, load, op, pointwise_vars, walk
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing
from stax.ir.views import View, cat, constant_pad, view_vars

i0, i1, i2 = pointwise_vars(3)


def storage_positions(v: View) -> np.ndarray:
    sizes = tuple(int(s) for s in v.sizes)
    return grid_values(v.index, view_vars(v.ndim), sizes) if sizes else np.asarray(int(v.index))


@st.composite
def view_chain(draw):
    """A base shape and a random chain of view ops, applied to a View and to numpy arange data."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    v, a = View.contiguous(shape), np.arange(int(np.prod(shape))).reshape(shape)
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        n = a.ndim
        kind = draw(st.sampled_from(["permute", "expand", "slice", "select", "unfold", "diagonal", "reshape",
                                     "squeeze", "unsqueeze", "flatten", "as_strided"]))
        if kind == "permute" and n >= 1:
            dims = draw(st.permutations(range(n)))
            v, a = v.permute(dims), a.transpose(dims)
        elif kind == "expand":
            ones = [k for k in range(n) if a.shape[k] == 1]
            sizes = [draw(st.integers(1, 3))] + [draw(st.integers(1, 3)) if k in ones else a.shape[k] for k in range(n)]
            if n + 1 > 4:
                continue
            v, a = v.expand(sizes), np.broadcast_to(a, sizes)
        elif kind == "slice" and n >= 1:
            d = draw(st.integers(0, n - 1))
            start, end = draw(st.integers(-6, 6) | st.none()), draw(st.integers(-6, 6) | st.none())
            step = draw(st.integers(1, 3))
            v, a = v.slice(d, start, end, step), a[(slice(None),) * d + (slice(start, end, step),)]
        elif kind == "select" and n >= 1:
            d = draw(st.integers(0, n - 1))
            if a.shape[d] == 0:
                continue
            idx = draw(st.integers(-a.shape[d], a.shape[d] - 1))
            v, a = v.select(d, idx), a[(slice(None),) * d + (idx,)]
        elif kind == "unfold" and n >= 1 and n < 4:
            d = draw(st.integers(0, n - 1))
            if a.shape[d] == 0:
                continue
            size, step = draw(st.integers(1, a.shape[d])), draw(st.integers(1, 3))
            w = np.lib.stride_tricks.sliding_window_view(a, size, axis=d)
            v, a = v.unfold(d, size, step), w[(slice(None),) * d + (slice(None, None, step),)]
        elif kind == "diagonal" and n >= 2:
            d1, d2 = draw(st.permutations(range(n)))[:2]
            off = draw(st.integers(-3, 3))
            v, a = v.diagonal(off, d1, d2), np.diagonal(a, off, d1, d2)
        elif kind == "reshape" and a.size > 0:
            total, sizes = a.size, []
            while total > 1 and len(sizes) < 3:
                f = draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
                sizes.append(f)
                total //= f
            sizes.append(total)
            if draw(st.booleans()):
                sizes[draw(st.integers(0, len(sizes) - 1))] = -1
            v, a = v.reshape(sizes), a.reshape(sizes)
        elif kind == "squeeze":
            v, a = v.squeeze(), np.squeeze(a)
        elif kind == "unsqueeze" and n < 4:
            d = draw(st.integers(0, n))
            v, a = v.unsqueeze(d), np.expand_dims(a, d)
        elif kind == "flatten" and n >= 1:
            v, a = v.flatten(), a.reshape(-1)
        elif kind == "as_strided":
            base = np.arange(int(np.prod(shape)))
            sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
            strides = draw(st.lists(st.integers(0, 3), min_size=len(sizes), max_size=len(sizes)))
            reach = sum((s - 1) * t for s, t in zip(sizes, strides))
            if reach >= base.size:
                continue
            off = draw(st.integers(0, base.size - 1 - reach))
            v = v.as_strided(sizes, strides, off)
            a = np.lib.stride_tricks.as_strided(base[off:], sizes, [t * base.itemsize for t in strides])
        else:
            continue
        steps.append(kind)
    return v, a, steps


@settings(max_examples=300, deadline=None)
@given(view_chain())
def test_view_chains_match_numpy(case):
    v, a, steps = case
    assert tuple(int(s) for s in v.sizes) == a.shape, steps
    np.testing.assert_array_equal(storage_positions(v), a, err_msg=f"{steps}: {v}")
    st_off = v.strides()
    if st_off is not None and a.size:  # an affine map is a strided layout: same positions
        (strides, offset) = st_off
        want = int(offset) + sum(int(t) * np.arange(int(s)).reshape([-1 if j == k else 1 for j in range(v.ndim)])
                                 for k, (s, t) in enumerate(zip(v.sizes, strides)))
        np.testing.assert_array_equal(np.broadcast_to(want, a.shape), a)


def test_reshape_of_contiguous_stays_strided_and_of_transposed_gets_digits():
    x = View.contiguous((4, 6))
    v0, v1 = view_vars(2)
    assert x.reshape((2, 2, 6)).strides() == ((12, 6, 1), 0)
    t = x.permute((1, 0)).reshape((24,))
    assert t.strides() is None
    (c,) = view_vars(1)
    assert t.index == 6 * ModularIndexing(c, 1, 4) + FloorDiv(c, 4)
    # a reshape and its inverse cancel back to the plain transpose
    assert t.reshape((6, 4)).index == v0 + 6 * v1


def test_view_ops_errors():
    x = View.contiguous((3, 4))
    with pytest.raises(ValueError, match="invalid for 12 elements"):
        x.reshape((5, -1))
    with pytest.raises(ValueError, match="cannot expand"):
        x.expand((3, 5))
    with pytest.raises(IndexError):
        x.select(0, 3)
    with pytest.raises(ValueError, match="permutation"):
        x.permute((0, 0))


def test_view_load_and_layout():
    x = View.from_layout(Layout("cpu", dt.float32, (3, 4), (1, 3), 2))
    ld = x.transpose(0, 1).load("buf", dt.float32)
    assert ld == Load("buf", 3 * i0 + i1 + 2, dt.float32)
    lay = x.slice(1, 1, None, 2).to_layout("cpu", dt.float32)
    assert (lay.sizes, lay.strides, lay.offset) == ((3, 2), (1, 6), 5)


# ---- cat and constant_pad


def assert_reads_in_bounds(value, out_sizes, numels: dict):
    """Every load (both branches of every `where` run) stays inside its buffer at every output point."""
    for ld in (n for n in walk(value) if isinstance(n, Load)):
        pos = grid_values(ld.index, pointwise_vars(len(out_sizes)), out_sizes)
        assert ((0 <= pos) & (pos < numels[ld.buffer])).all(), (ld.buffer, ld.index)


def test_cat_matches_numpy_and_reads_only_in_bounds():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(100, 108, dtype=np.float32).reshape(2, 4) / 50
    c = np.arange(200, 202, dtype=np.float32).reshape(2, 1)
    parts = [
        (3, lambda ix: load("a", 3 * ix[0] + ix[1], dt.float32)),
        (0, lambda ix: load("nothing", ix[1], dt.float32)),  # empty parts vanish
        (4, lambda ix: op("exp", load("b", 4 * ix[0] + ix[1], dt.float32))),
        (1, lambda ix: load("c", ix[0] + ix[1], dt.float32)),
    ]
    v = cat(parts, 1, (2, 8))
    out = run_pointwise(v, (2, 8), {"a": (a, dt.float32), "b": (b, dt.float32), "c": (c, dt.float32)})
    np.testing.assert_array_equal(out, np.concatenate([a, np.exp(b), c], axis=1))
    assert_reads_in_bounds(v, (2, 8), {"a": 6, "b": 8, "c": 2})
    assert "nothing" not in {ld.buffer for ld in walk(v) if isinstance(ld, Load)}


def test_cat_along_outer_dim():
    a = np.arange(4, dtype=np.int64).reshape(1, 4)
    b = np.arange(10, 18, dtype=np.int64).reshape(2, 4)
    v = cat([(1, lambda ix: load("a", 4 * ix[0] + ix[1], dt.int64)),
             (2, lambda ix: load("b", 4 * ix[0] + ix[1], dt.int64))],
            0, (3, 4))
    out = run_pointwise(v, (3, 4), {"a": (a, dt.int64), "b": (b, dt.int64)})
    np.testing.assert_array_equal(out, np.concatenate([a, b]))


@pytest.mark.parametrize("pads", [((1, 2), (0, 0)), ((0, 0), (3, 1)), ((2, -1), (-1, 2)), ((0, 0), (0, 0))])
def test_constant_pad_matches_numpy(pads):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    v = constant_pad(lambda ix: op("mul", load("x", 4 * ix[0] + ix[1], dt.float32),
                                   load("x", 4 * ix[0] + ix[1], dt.float32)),
                     (3, 4), pads, -1.5, dt.float32)
    out_sizes = tuple(s + lo + hi for s, (lo, hi) in zip((3, 4), pads))
    out = run_pointwise(v, out_sizes, {"x": (x, dt.float32)})
    y = x * x
    y = y[max(0, -pads[0][0]): y.shape[0] - max(0, -pads[0][1]), max(0, -pads[1][0]): y.shape[1] - max(0, -pads[1][1])]
    ref = np.pad(y, [(max(lo, 0), max(hi, 0)) for lo, hi in pads], constant_values=-1.5)
    np.testing.assert_array_equal(out, ref)
    assert_reads_in_bounds(v, out_sizes, {"x": 12})
    # a dimension without padding adds no condition; no padding at all is just the loader
    conds = [n for n in walk(v) if isinstance(n, Op) and n.name in ("lt", "ge")]
    assert len(conds) == 2 * sum(lo != 0 or hi > 0 for lo, hi in pads)


def test_constant_pad_of_an_empty_source_is_all_fill():
    v = constant_pad(lambda ix: load("x", ix[0], dt.float32), (0,), ((2, 1),), 7.0, dt.float32)
    np.testing.assert_array_equal(run_pointwise(v, (3,), {"x": (np.zeros(1), dt.float32)}), [7.0, 7.0, 7.0])
    assert not [n for n in walk(v) if isinstance(n, Load)]
