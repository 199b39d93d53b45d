"""How far ahead a vectorized loop prefetches its contiguous loads (`__builtin_prefetch`).

Two users. A localized producer (localize.py) computes into an L1 scratch: nothing else asks the
memory for data while it runs, so it prefetches its inputs a fixed PREFETCH_BYTES ahead.

The later groups of an outer-loop-fused nest (log_softmax's and softmax's exp after the row max)
re-read a row the first group has just pulled into L1, so while they compute (an exp per element)
no load misses and the hardware prefetcher, driven by misses, stops: the next row is only fetched
when the next outer iteration's first group stalls on it, and the nest alternates between waiting
for memory and computing. Those groups, when they call a math helper (`computes_heavily`: exp, log,
tanh, ...; a divide or a multiply-add keeps up with memory without help, and Example 7.1 stays
Listing 7.1), prefetch the *next outer iterations* of the same inputs instead: `row_ahead` is the
outer loop's stride in the load's index, times enough rows to be at least PREFETCH_BYTES ahead.
log_softmax + nll (8192 x 1024 float32, 2 threads, compiled with and without in one process, calls
interleaved with a 256 MiB copy): 2.00 -> 1.81 ms; softmax 3.86 -> 3.61 ms.
"""

from __future__ import annotations

import sympy
from stax.ir import Op, walk

from .cpp_ops import OP_TABLE
from .loops import NodeLoops, linear_coeffs

PREFETCH_BYTES = 4096


def row_ahead(index, row_var: sympy.Symbol, itemsize: int) -> int:
    """Elements ahead of `index` where the next outer iterations (of `row_var`) read, at least
    PREFETCH_BYTES ahead; 0 when the index does not advance with `row_var` by a known positive stride."""
    coeffs = linear_coeffs(index, [row_var])
    stride = coeffs.get(row_var, 0) if coeffs is not None else 0
    if not isinstance(stride, (int, sympy.Integer)) or int(stride) <= 0:
        return 0
    stride = int(stride)
    rows = -(-PREFETCH_BYTES // (stride * itemsize))
    return stride * rows


def computes_heavily(group: list[NodeLoops]) -> bool:
    """Does the group's body call an inexact stax:: math helper (exp, log, erf, pow, ...)?"""
    for nl in group:
        for n in walk(nl.node.body.value):
            row = OP_TABLE.get(n.name) if isinstance(n, Op) else None
            if row is not None and row.helper is not None and not row.exact:
                return True
    return False
