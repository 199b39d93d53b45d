"""Unit tests (no compile): the index folds views rely on (stax.ir.simplify_index, §6.8)
and views as index maps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stax.frontend import views as V
from stax.frontend.tensor import BufferView, Builder, Lazy
from stax.ir import Layout, simplify_index
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing, var
from stax.ir.index_printer import evaluate

v0, v1, v2 = var("v", 0), var("v", 1), var("v", 2)


@pytest.mark.parametrize(
    "expr,ranges,expected",
    [
        (128 * FloorDiv(v0, 128) + ModularIndexing(v0, 1, 128), {v0: 8192}, v0),  # R4, then FloorDiv(x, 1)
        (FloorDiv(128 * v0 + 64 * v1 + v2, 128), {v0: 64, v1: 2, v2: 64}, v0),  # R1 + R3
        (ModularIndexing(128 * v0 + 64 * v1 + v2, 1, 128), {v0: 64, v1: 2, v2: 64}, 64 * v1 + v2),  # R2
        (ModularIndexing(FloorDiv(v0, 4), 2, 8), {v0: 1000}, ModularIndexing(v0, 8, 8)),  # R5
    ],
)
def test_simplify_rules(expr, ranges, expected):
    assert simplify_index(expr, ranges) == expected


def test_simplify_preserves_values():
    """Whatever fires, the simplified index equals the original at every point."""
    expr = 48 * FloorDiv(v0, 48) + 8 * ModularIndexing(v0, 8, 6) + ModularIndexing(v0, 1, 8) + 3 * FloorDiv(v1, 5)
    ranges = {v0: 4 * 48, v1: 7}
    simple = simplify_index(expr, ranges)
    grid = np.meshgrid(np.arange(4 * 48), np.arange(7), indexing="ij")
    env = {v0: grid[0], v1: grid[1]}
    assert np.array_equal(np.broadcast_to(evaluate(expr, env), grid[0].shape),
                          np.broadcast_to(evaluate(simple, env), grid[0].shape))
    assert simple.count(FloorDiv) + simple.count(ModularIndexing) < expr.count(FloorDiv) + expr.count(ModularIndexing)


def _buf(sizes, strides, offset=0):
    lay = Layout("cpu", dt.float32, sizes, strides, offset)
    return BufferView(Builder(), "x", lay, lay)


def _torch_view(sizes, strides, offset, fn):
    storage = torch.arange(4096.0)
    return fn(torch.as_strided(storage, sizes, strides, offset))


VIEWS = {
    "permute": lambda t: t.permute(2, 0, 1),
    "slice_step": lambda t: t[:, 1:5:2, ::3],
    "select": lambda t: t.select(1, 3),
    "expand": lambda t: t[:, :1].expand(4, 5, 8),
    "merge": lambda t: t.reshape(4, 48),
    "split": lambda t: t.reshape(4, 2, 3, 8),
    "unsqueeze_squeeze": lambda t: t.unsqueeze(1).squeeze(1).unsqueeze(-1),
    "diagonal": lambda t: t.diagonal(0, 1, 2),
}
APPLY = {
    "permute": lambda x: V.permute(x, (2, 0, 1)),
    "slice_step": lambda x: V.slice_(V.slice_(x, 1, 1, 5, 2), 2, None, None, 3),
    "select": lambda x: V.select(x, 1, 3),
    "expand": lambda x: V.expand(V.slice_(x, 1, 0, 1), (4, 5, 8)),
    "merge": lambda x: V.reshape(x, (4, 48)),
    "split": lambda x: V.reshape(x, (4, 2, 3, 8)),
    "unsqueeze_squeeze": lambda x: V.unsqueeze(V.squeeze(V.unsqueeze(x, 1), [1]), -1),
    "diagonal": lambda x: V.diagonal(x, 0, 1, 2),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_views_of_buffers_stay_strided_and_match_torch(name):
    """On a contiguous buffer every view is again a strided BufferView with torch's strides."""
    x = _buf((4, 6, 8), (48, 8, 1), 5)
    got = APPLY[name](x)
    want = _torch_view((4, 6, 8), (48, 8, 1), 5, VIEWS[name])
    assert isinstance(got, BufferView)
    assert got.sizes == tuple(want.shape)
    if want.numel() > 1:
        assert all(n == 1 or a == b for n, a, b in zip(got.sizes, got.strides, want.stride()))
    assert got.offset == want.storage_offset()


def test_reshape_of_transposed_buffer_is_an_index_map():
    """torch cannot view a transposed tensor flat; Stax reads it through FloorDiv/ModularIndexing."""
    x = V.permute(_buf((6, 8), (8, 1)), (1, 0))
    flat = V.reshape(x, (48,))
    assert isinstance(flat, Lazy)
    idx = flat.load((var("i", 0),)).index
    want = torch.arange(48.0).reshape(6, 8).t().reshape(-1)
    got = [int(evaluate(idx, {var("i", 0): np.int64(k)})) for k in range(48)]
    assert got == want.long().tolist()
