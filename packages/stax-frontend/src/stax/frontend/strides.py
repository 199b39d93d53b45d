"""Stride facts about torch layouts: density, overlap, eager's traced strides, view equality."""

from __future__ import annotations

from stax.ir.index import contiguous_strides
from stax.ir.sizevars import provably_equal


def is_dense(sizes, strides, key=None) -> bool:
    """Non-overlapping and dense: some permutation of the dims is contiguous. `key`: a stride's
    value to sort by (symbolic strides: their value at the size hints; the test stays exact)."""
    pairs = [(st, sz) for sz, st in zip(sizes, strides) if sz != 1]
    dims = sorted(pairs) if key is None else sorted(pairs, key=lambda p: (key(p[0]), key(p[1])))
    expected = 1
    for st, sz in dims:
        if st != expected:
            return False
        expected *= sz
    return True


def non_overlapping(sizes, strides) -> bool:
    """No two indices share a memory location: with the dims sorted by stride, each stride
    steps past the whole extent of the smaller ones (torch's own sufficient test)."""
    if any(int(n) == 0 for n in sizes):
        return True
    extent = 0
    for st, n in sorted((abs(int(st)), int(n)) for n, st in zip(sizes, strides) if int(n) != 1):
        if st <= extent:
            return False
        extent += st * (n - 1)
    return True


def meta_strides(val) -> tuple:
    sizes, strides = tuple(val.shape), tuple(val.stride())
    return strides if is_dense(sizes, strides) else tuple(int(s) for s in contiguous_strides(sizes))


def same_view(sizes, strides, sizes2, strides2) -> bool:
    """Equal as views: strides of size-1 dims do not matter; symbolic ones compare as expressions
    (a realized `s*(s - s % 8 + 8)` is the traced `s**2 - s*(s % 8) + 8*s`)."""
    return len(sizes) == len(sizes2) and all(provably_equal(a, b) for a, b in zip(sizes, sizes2)) and all(
        n == 1 or provably_equal(a, b) for n, a, b in zip(sizes, strides, strides2)
    )
