"""Seeded random IR graphs for property tests and benchmarks (no torch).

Graphs over one (R, C) problem size mix what lowering produces: pointwise nodes
over (R, C), the flattened (R*C,) space and rows (R,); row reductions (keepdim or
not) and full reductions; scans; extern calls; row-major and column-major layouts.
Reads use the producer's layout, with same-index, broadcast, flattened-view,
shifted (distance +1), last-column and transposed access patterns, so every
branch of the fusion legality test is exercised.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import sympy
from stax.ir import (
    ComputedBuffer,
    ExternKernel,
    Graph,
    InputBuffer,
    Layout,
    Pointwise,
    Reduction,
    Scan,
    dtypes,
    load,
    op,
)
from stax.ir.index import FloorDiv, ModularIndexing, pointwise_vars, reduction_vars

F32 = dtypes.float32
MAT, ROW, FLAT, SCALAR = "mat", "row", "flat", "scalar"
EXTERN_KERNELS = {"test.neg": lambda a: -a, "test.twice": lambda a: 2 * a}


@dataclass(frozen=True)
class _Buf:
    name: str
    kind: str
    layout: Layout


def _layout(kind: str, R: int, C: int, rng: random.Random, keepdim: bool = False) -> Layout:
    if kind == MAT:
        strides = (C, 1) if rng.random() < 0.75 else (1, R)
        return Layout("cpu", F32, (R, C), strides)
    if kind == ROW:
        return Layout("cpu", F32, (R, 1), (1, 1)) if keepdim else Layout.contiguous((R,), F32)
    if kind == FLAT:
        return Layout.contiguous((R * C,), F32)
    return Layout("cpu", F32, (1,), (1,))


def _at(buf: _Buf, coords) -> sympy.Expr:
    """Flat storage index of logical element `coords` of `buf` (row: (r,), mat: (r, c), ...)."""
    st = buf.layout.strides
    if buf.kind == MAT:
        return st[0] * coords[0] + st[1] * coords[1]
    if buf.kind in (ROW, FLAT):
        return st[0] * coords[0]
    return sympy.Integer(0)


def _access(buf: _Buf, space: str, R: int, C: int, rng: random.Random):
    """An index into `buf` from loop space `space`, or None when no pattern fits."""
    i0, i1 = pointwise_vars(2)
    (r0,) = reduction_vars(1)
    if space == MAT:
        options = {
            MAT: [(i0, i1), (i0, i1), (i0, ModularIndexing(i1 + 1, 1, C))] + ([(i1, i0)] if R == C else []),
            ROW: [(i0,)],
            FLAT: [(C * i0 + i1,)],
            SCALAR: [()],
        }[buf.kind]
    elif space == FLAT:
        options = {
            MAT: [(FloorDiv(i0, C), ModularIndexing(i0, 1, C))],
            ROW: [(FloorDiv(i0, C),)],
            FLAT: [(i0,), (i0,), (ModularIndexing(i0 + 1, 1, R * C),)],
            SCALAR: [()],
        }[buf.kind]
    elif space == ROW:
        options = {MAT: [(i0, C - 1)], ROW: [(i0,), (ModularIndexing(i0 + 1, 1, R),)], FLAT: [(C * i0,)], SCALAR: [()]}[
            buf.kind
        ]
    elif space == "row_reduce":
        options = {MAT: [(i0, r0)], ROW: [(i0,)], FLAT: [(C * i0 + r0,)], SCALAR: [()]}[buf.kind]
    else:  # "all_reduce": r0 over R*C
        options = {
            MAT: [(FloorDiv(r0, C), ModularIndexing(r0, 1, C))],
            FLAT: [(r0,)],
            ROW: [(FloorDiv(r0, C),)],
            SCALAR: [()],
        }[buf.kind]
    return _at(buf, rng.choice(options))


def _value(bufs, space, R, C, rng):
    srcs = rng.sample(bufs, min(len(bufs), rng.choice([1, 1, 2, 2, 3])))
    vals = [load(b.name, _access(b, space, R, C, rng), F32) for b in srcs]
    v = vals[0]
    for w in vals[1:]:
        v = op(rng.choice(["add", "sub", "mul", "maximum"]), v, w)
    if rng.random() < 0.3:
        v = op(rng.choice(["tanh", "neg", "abs"]), v)
    return v


def random_graph(rng: random.Random, n_nodes: int = 8, R: int | None = None, C: int | None = None,
                 extern_prob: float = 0.08, recent: int | None = None) -> Graph:
    """A random graph of about `n_nodes` nodes; `recent` limits reads to the last few buffers (locality)."""
    R = R or rng.choice([2, 3, 4])
    C = C or rng.choice([2, 4, 6])
    inputs = [InputBuffer("primals_1", Layout.contiguous((R, C), F32))]
    bufs = [_Buf("primals_1", MAT, inputs[0].layout)]
    if rng.random() < 0.5:
        inputs.append(InputBuffer("primals_2", Layout.contiguous((R,), F32)))
        bufs.append(_Buf("primals_2", ROW, inputs[1].layout))
    nodes = []
    for k in range(n_nodes):
        name = f"buf{k + 1}"
        pool = bufs[-recent:] if recent else bufs
        roll = rng.random()
        if roll < extern_prob:
            mats = [b for b in pool if b.kind == MAT] or [bufs[0]]
            src = rng.choice(mats)
            layout = Layout.contiguous((R, C), F32)
            nodes.append(ExternKernel(name, layout, rng.choice(sorted(EXTERN_KERNELS)), (src.name,)))
            bufs.append(_Buf(name, MAT, layout))
            continue
        kind = rng.choices([MAT, FLAT, ROW, "row_reduce", "all_reduce", "scan"], [5, 1, 1, 3, 1, 0.5])[0]
        if kind == "scan":
            layout = _layout(MAT, R, C, rng)
            body = Scan((R, C), rng.choice([0, 1]), rng.choice(["cumsum", "cummax"]), _value(pool, MAT, R, C, rng))
            bufs.append(_Buf(name, MAT, layout))
        elif kind in (MAT, FLAT, ROW):
            layout = _layout(kind, R, C, rng)
            ranges = {MAT: (R, C), FLAT: (R * C,), ROW: (R,)}[kind]
            body = Pointwise(ranges, _value(pool, kind, R, C, rng))
            bufs.append(_Buf(name, kind, layout))
        elif kind == "row_reduce":
            keepdim = rng.random() < 0.5
            layout = _layout(ROW, R, C, rng, keepdim)
            value = _value(pool, "row_reduce", R, C, rng)
            body = Reduction(tuple(layout.sizes), (C,), rng.choice(["sum", "max", "min"]), value)
            bufs.append(_Buf(name, ROW, layout))
        else:
            layout = _layout(SCALAR, R, C, rng)
            body = Reduction((1,), (R * C,), rng.choice(["sum", "max"]), _value(pool, "all_reduce", R, C, rng))
            bufs.append(_Buf(name, SCALAR, layout))
        nodes.append(ComputedBuffer(name, layout, body))
    names = [n.name for n in nodes]
    outs = {names[-1]} | {n for n in names if rng.random() < 0.25}
    return Graph(tuple(inputs), tuple(nodes), tuple(sorted(outs, key=names.index)))


def random_inputs(graph: Graph, rng: random.Random) -> dict:
    """Flat float32 storages in [-1, 1] for every graph input."""
    import numpy as np

    gen = np.random.default_rng(rng.randrange(2**32))
    return {i.name: gen.uniform(-1, 1, i.layout.storage_size()).astype(np.float32) for i in graph.inputs}
