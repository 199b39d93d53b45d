"""Evaluate a stax Graph with pluggable arithmetic (test-only).

stax.ir.interpret fixes one arithmetic: numpy in each op's compute dtype. The GPU
comparison needs two more over the same loop structure: float64 values carrying error
bounds (error_model.py) and a float32 evaluation that deviates the way a GPU does
(gpu_sim.py). This module walks graphs, grids, loads, masks and gathers once; an
`Arith` object supplies the numbers.

A value is a tuple of numpy arrays ("planes": e.g. (value, error bound)); a buffer is a
tuple of flat storage planes laid out by its Layout, exactly as the interpreter's.
"""

from __future__ import annotations

import numpy as np
from stax.ir import Constant, ExternKernel, Graph, IndexValue, Load, Op, Reduction, Scan, from_storage, walk
from stax.ir import dtypes as dt
from stax.ir.index import as_int, pointwise_vars, reduction_vars
from stax.ir.index_printer import evaluate
from stax.ir.interpreter import index_grid
from stax.ir.ops import reduction_def


class Arith:
    """The interface an arithmetic implements (see error_model.BoundArith, gpu_sim.SimArith)."""

    def input(self, flat: np.ndarray, d: dt.DType) -> tuple: ...
    def constant(self, value, d: dt.DType) -> tuple: ...
    def index_value(self, ints: np.ndarray, d: dt.DType) -> tuple: ...
    def op(self, node: Op, args: list) -> tuple: ...
    def reduce(self, body: Reduction, planes: tuple) -> tuple: ...  # planes: (..., R) -> (...)
    def scan(self, body: Scan, planes: tuple) -> tuple: ...  # along body.axis
    def store(self, planes: tuple, computed: dt.DType, storage: dt.DType) -> tuple: ...
    def extern(self, node: ExternKernel, args: list) -> tuple: ...
    def exact_ints(self, planes: tuple, what: str) -> np.ndarray: ...  # masks, gather indices


def _load(n: Load, env: dict, memo: dict, buffers: dict, shape, arith: Arith) -> tuple:
    active = np.ones(shape, dtype=bool)
    if n.mask is not None:
        active = np.broadcast_to(arith.exact_ints(memo[id(n.mask)], "load mask").astype(bool), shape)
    local = dict(env)
    for sym, v, _bound in n.indirect:
        iv = np.broadcast_to(arith.exact_ints(memo[id(v)], "gather index").astype(np.int64), shape)
        local[sym] = np.where(active, iv, 0)
    planes = buffers[n.buffer]
    size = planes[0].shape[0]
    idx = np.broadcast_to(np.asarray(evaluate(n.index, local), dtype=np.int64), shape)
    if np.any(active & ((idx < 0) | (idx >= size))):
        raise IndexError(f"load of {n.buffer} outside its storage (the interpreter raises this too)")
    safe = np.where(active, idx, 0)
    got = tuple(p[safe] if size else np.zeros(shape, p.dtype) for p in planes)
    if n.mask is None:
        return got
    other = arith.constant(n.other, n.dtype)
    return tuple(np.where(active, g, o) for g, o in zip(got, other))


def eval_value(root, env: dict, buffers: dict, shape, arith: Arith) -> tuple:
    """Every plane of `root` at every point of the grid, broadcast to `shape`."""
    memo: dict[int, tuple] = {}
    for n in walk(root):
        if isinstance(n, Constant):
            r = arith.constant(n.value, n.dtype)
        elif isinstance(n, IndexValue):
            r = arith.index_value(np.asarray(evaluate(n.index, env), dtype=np.int64), n.dtype)
        elif isinstance(n, Load):
            r = _load(n, env, memo, buffers, shape, arith)
        elif isinstance(n, Op):
            r = arith.op(n, [memo[id(a)] for a in n.args])
        else:
            raise TypeError(f"unknown value node {type(n).__name__}")
        memo[id(n)] = r
    return tuple(np.broadcast_to(p, shape) for p in memo[id(root)])


def _numel(sizes) -> int:
    return int(np.prod(sizes, dtype=np.int64)) if sizes else 1


def run_node(node, buffers: dict, arith: Arith) -> tuple:
    body = node.body
    sizes = [as_int(s) for s in body.ranges]
    pvars = pointwise_vars(len(sizes))
    if isinstance(body, Reduction):
        rsizes = [as_int(s) for s in body.reduction_ranges]
        shape = tuple(sizes + rsizes)
        vals = eval_value(
            body.value, index_grid(list(pvars) + list(reduction_vars(len(rsizes))), sizes + rsizes), buffers, shape,
            arith,
        )
        if _numel(rsizes) == 0:
            rdef = reduction_def(body.reduction_type)
            ident = (rdef.empty or rdef.identity)(body.value.dtype)
            result = tuple(np.broadcast_to(p, tuple(sizes)) for p in arith.constant(ident, body.dtype))
        else:
            # (0 rows too)
            result = arith.reduce(body, tuple(np.reshape(p, tuple(sizes) + (_numel(rsizes),)) for p in vals))
        computed = body.dtype
    elif isinstance(body, Scan):
        shape = tuple(sizes)
        vals = eval_value(body.value, index_grid(pvars, sizes), buffers, shape, arith)
        result = arith.scan(body, tuple(np.ascontiguousarray(p) for p in vals)) if _numel(sizes) else vals
        computed = body.dtype if body.out_dtype is None else body.acc_dtype  # (rounded by the store)
    else:
        shape = tuple(sizes)
        result = eval_value(body.value, index_grid(pvars, sizes), buffers, shape, arith)
        computed = body.value.dtype
    stored = arith.store(tuple(np.reshape(p, tuple(sizes)) for p in result), computed, node.layout.dtype)
    return _lay_out(stored, node.layout)


def _lay_out(planes: tuple, layout) -> tuple:
    out = []
    for p in planes:
        flat = np.zeros(layout.storage_size(), dtype=p.dtype)
        from_storage(flat, layout)[...] = p
        out.append(flat)
    return tuple(out)


def evaluate_graph(graph: Graph, inputs: dict, arith: Arith) -> dict:
    """Every buffer's storage planes by name (graph inputs included)."""
    buffers = {b.name: arith.input(np.asarray(inputs[b.name]), b.layout.dtype) for b in graph.inputs}
    for node in graph.nodes:
        if isinstance(node, ExternKernel):
            args = [tuple(from_storage(p, graph.buffer_layout(b)) for p in buffers[b]) for b in node.inputs]
            buffers[node.name] = _lay_out(arith.extern(node, args), node.layout)
        else:
            buffers[node.name] = run_node(node, buffers, arith)
    return buffers


def output_planes(graph: Graph, buffers: dict) -> list[tuple]:
    """Each graph output as a tuple of strided arrays (one per plane)."""
    return [tuple(from_storage(p, graph.buffer_layout(o)) for p in buffers[o]) for o in graph.outputs]
