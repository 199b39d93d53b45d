"""The numpy reference interpreter: the meaning of a Graph, against which every backend is checked.

Buffers are flat storage arrays (element `k` of a layout lives at
`layout.index(k)`); half types compute in float32 and are rounded after every op,
as eager PyTorch does on CPU. Slow by design: clarity over speed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from . import dtypes as dt
from .bind import bind_graph
from .expr import Constant, IndexValue, Load, Op, Value, walk
from .graph import ComputedBuffer, ExternKernel, Graph, Layout, Reduction, Scan, Scatter
from .index import as_int, pointwise_vars, reduction_vars
from .index_printer import evaluate
from .ops import op_def, reduction_def, scan_def


def to_storage(array: np.ndarray, layout: Layout) -> np.ndarray:
    """Flat storage holding `array` laid out as `layout` (unused positions zero)."""
    flat = np.zeros(layout.storage_size(), dtype=layout.dtype.np)
    view = from_storage(flat, layout)
    view[...] = dt.round_to(np.asarray(array), layout.dtype)
    return flat


def from_storage(flat: np.ndarray, layout: Layout) -> np.ndarray:
    """The strided view of `flat` that `layout` describes (shares memory)."""
    item = flat.dtype.itemsize
    base = flat[as_int(layout.offset):]
    sizes = tuple(as_int(s) for s in layout.sizes)
    strides = tuple(as_int(s) * item for s in layout.strides)
    return np.lib.stride_tricks.as_strided(base, sizes, strides, writeable=True)


def index_grid(vars_, sizes, dtype=np.int64) -> dict:
    """{var_k: arange(size_k)} shaped to broadcast over the grid `sizes` (axis k), for evaluating indices.

    Open (not materialized) like np.ogrid: an expression over a few of the vars
    costs only the points of those vars.
    """
    n = len(sizes)
    env = {}
    for k, (v, s) in enumerate(zip(vars_, sizes)):
        shape = [1] * n
        shape[k] = int(s)
        env[v] = np.arange(int(s), dtype=dtype).reshape(shape)
    return env


def _compute(a: np.ndarray, d: dt.DType) -> np.ndarray:
    return np.asarray(a).astype(dt.compute_dtype(d).np, copy=False)


def eval_value(root: Value, env: dict, buffers: Mapping[str, np.ndarray], shape) -> np.ndarray:
    """Evaluate `root` at every point of the grid `env`; results have the compute dtype."""
    memo: dict[int, np.ndarray] = {}
    for n in walk(root):
        if isinstance(n, Constant):
            r = np.asarray(dt.round_to(np.asarray(n.value), n.dtype))
            r = _compute(r, n.dtype)
        elif isinstance(n, IndexValue):
            r = _compute(np.asarray(evaluate(n.index, env)), n.dtype)
        elif isinstance(n, Load):
            r = _load(n, env, memo, buffers, shape)
        elif isinstance(n, Op):
            args = [memo[id(a)] for a in n.args]
            if n.name == "to_dtype":
                r = _compute(dt.round_to(args[0], n.dtype), n.dtype)
            else:
                d = op_def(n.name)
                with np.errstate(all="ignore"):
                    r = d.numpy(*args, dtype=n.dtype) if d.dtype_arg else d.numpy(*args)
                r = _compute(dt.round_to(r, n.dtype), n.dtype)
        else:
            raise TypeError(f"unknown value node {type(n).__name__}")
        memo[id(n)] = r
    return np.broadcast_to(memo[id(root)], shape)


def _load(n: Load, env: dict, memo: dict, buffers, shape) -> np.ndarray:
    """Read `n` at every grid point; masked-off points read nothing and yield `other`."""
    active = np.ones(shape, dtype=bool)
    if n.mask is not None:
        active = np.broadcast_to(memo[id(n.mask)].astype(bool), shape)
    local = dict(env)
    for sym, v, bound in n.indirect:
        iv = np.broadcast_to(memo[id(v)].astype(np.int64), shape)
        bad = active & ((iv < 0) | (iv >= as_int(bound)))
        if np.any(bad):
            raise IndexError(
                f"indirect index out of bounds reading {n.buffer}: value {int(iv[bad].flat[0])} not in [0, {bound})"
            )
        local[sym] = np.where(active, iv, 0)
    storage = buffers[n.buffer]
    idx = np.broadcast_to(np.asarray(evaluate(n.index, local), dtype=np.int64), shape)
    bad = active & ((idx < 0) | (idx >= storage.shape[0]))
    if np.any(bad):
        raise IndexError(
            f"load of {n.buffer} at storage index {int(idx[bad].flat[0])} outside [0, {storage.shape[0]}) "
            f"(index {n.index})"
        )
    r = _compute(storage[np.where(active, idx, 0)] if storage.shape[0] else np.zeros(shape, storage.dtype), n.dtype)
    if n.mask is not None:
        other = _compute(dt.round_to(np.asarray(n.other), n.dtype), n.dtype)
        r = np.where(active, r, other)
    return r


def _numel(sizes) -> int:
    return int(np.prod(sizes, dtype=np.int64)) if sizes else 1


def _scatter_targets(body: Scatter, buffers, env: dict, sizes: list, shape: tuple) -> np.ndarray:
    """Flat (row-major over `ranges`) target of every scatter point, bounds-checked like indirect loads."""
    for sym, v, bound in body.indirect:
        iv = np.broadcast_to(eval_value(v, env, buffers, shape).astype(np.int64), shape)
        bad = (iv < 0) | (iv >= as_int(bound))
        if np.any(bad):
            raise IndexError(f"scatter index out of bounds: value {int(iv[bad].flat[0])} not in [0, {bound})")
        env[sym] = iv
    coords = []
    for d, e in enumerate(body.index):
        c = np.broadcast_to(np.asarray(evaluate(e, env), dtype=np.int64), shape).reshape(-1)
        bad = (c < 0) | (c >= sizes[d])
        if np.any(bad):
            raise IndexError(f"scatter coordinate {d} = {int(c[bad][0])} outside [0, {sizes[d]}) (index {e})")
        coords.append(c)
    return np.ravel_multi_index(coords, sizes) if coords else np.zeros(_numel(shape), dtype=np.int64)


def _scatter_add_rounded(out: np.ndarray, flat: np.ndarray, vals: np.ndarray, d: dt.DType) -> None:
    """out[flat[k]] += vals[k] in order k = 0, 1, ..., each sum rounded to `d` when stored (half
    types): one vectorized pass per occurrence rank, since a rank holds each target at most once."""
    order = np.argsort(flat, kind="stable")
    f = flat[order]
    starts = np.r_[0, np.flatnonzero(f[1:] != f[:-1]) + 1]
    rank = np.arange(len(f)) - np.repeat(starts, np.diff(np.r_[starts, len(f)]))
    for k in range(int(rank.max()) + 1 if len(f) else 0):
        sel = order[rank == k]
        out[flat[sel]] = dt.round_to(out[flat[sel]] + vals[sel], d)


def run_scatter(body: Scatter, buffers: Mapping[str, np.ndarray]) -> np.ndarray:
    """out = init over `ranges`, then a serial pass over `scatter_ranges` in row-major order:
    'add' accumulates (each sum computed in the compute dtype, rounded to the output dtype on
    store, as eager's CPU loop); 'set' stores, the last point hitting an element wins."""
    sizes = [as_int(s) for s in body.ranges]
    out = np.array(eval_value(body.init, index_grid(pointwise_vars(len(sizes)), sizes), buffers, tuple(sizes)))
    out = out.reshape(-1)
    ssizes = [as_int(s) for s in body.scatter_ranges]
    if _numel(ssizes) == 0:
        return out.reshape(sizes)
    shape = tuple(ssizes)
    env = index_grid(reduction_vars(len(ssizes)), ssizes)
    flat = _scatter_targets(body, buffers, env, sizes, shape)
    vals = np.ascontiguousarray(eval_value(body.value, env, buffers, shape)).reshape(-1)
    if body.mode == "set":
        _, first_from_end = np.unique(flat[::-1], return_index=True)
        last = len(flat) - 1 - first_from_end
        out[flat[last]] = vals[last]
    elif body.dtype in (dt.float16, dt.bfloat16):
        _scatter_add_rounded(out, flat, vals, body.dtype)
    else:
        with np.errstate(all="ignore"):
            np.add.at(out, flat, vals)  # unbuffered: duplicates accumulate in order
    return out.reshape(sizes)


def run_node(node: ComputedBuffer, buffers: Mapping[str, np.ndarray]) -> np.ndarray:
    """Compute one buffer's flat storage."""
    body = node.body
    if isinstance(body, Scatter):
        out = np.zeros(node.layout.storage_size(), dtype=node.layout.dtype.np)
        from_storage(out, node.layout)[...] = dt.round_to(run_scatter(body, buffers), body.dtype)
        return out
    sizes = [as_int(s) for s in body.ranges]
    pvars = pointwise_vars(len(sizes))
    if isinstance(body, Reduction):
        rsizes = [as_int(s) for s in body.reduction_ranges]
        shape = tuple(sizes + rsizes)
        env = index_grid(list(pvars) + list(reduction_vars(len(rsizes))), sizes + rsizes)
        vals = eval_value(body.value, env, buffers, shape)
        rdef = reduction_def(body.reduction_type)
        if _numel(rsizes) == 0:
            ident = (rdef.empty or rdef.identity)(body.value.dtype)
            result = np.full(tuple(sizes), ident, dtype=dt.compute_dtype(body.dtype).np)
        else:
            with np.errstate(all="ignore"):
                # explicit reduced length: reshape(-1) is ambiguous when the output is empty
                result = rdef.numpy(vals.reshape(tuple(sizes) + (_numel(rsizes),)), len(sizes))
        dtype = body.dtype
    elif isinstance(body, Scan):
        shape = tuple(sizes)
        vals = eval_value(body.value, index_grid(pvars, sizes), buffers, shape)
        if _numel(sizes) == 0:
            result = np.zeros(shape, dtype=dt.compute_dtype(body.dtype).np)
        else:
            result = scan_def(body.scan_type).numpy(np.ascontiguousarray(vals), body.axis)
        dtype = body.dtype
    else:
        shape = tuple(sizes)
        env = index_grid(pvars, sizes)
        result = eval_value(body.value, env, buffers, shape)
        dtype = body.value.dtype
    out = np.zeros(node.layout.storage_size(), dtype=node.layout.dtype.np)
    from_storage(out, node.layout)[...] = dt.round_to(np.asarray(result).reshape(shape[: len(sizes)]), dtype)
    return out


def interpret(
    graph: Graph,
    inputs: Mapping[str, np.ndarray],
    extern_kernels: Mapping[str, Callable] | None = None,
    sizes: Mapping | None = None,
) -> dict[str, np.ndarray]:
    """Run `graph` on flat input storages; returns every buffer's flat storage by name.

    Extern kernels are called with strided views of their inputs and constants
    as keyword arguments, and must return an array of the node's shape. A graph with
    symbolic sizes needs `sizes` ({symbol or name: int}, inside the graph's ranges): it
    runs as the static graph those sizes make (`stax.ir.bind.bind_graph`).
    """
    if graph.size_vars:
        if sizes is None:
            raise ValueError(f"graph has symbolic sizes ({graph.size_vars}): pass sizes={{name: int}}")
        graph = bind_graph(graph, sizes)
    buffers: dict[str, np.ndarray] = {}
    for inp in graph.inputs:
        if inp.name not in inputs:
            raise KeyError(f"missing graph input {inp.name!r}")
        buffers[inp.name] = np.asarray(inputs[inp.name])
    for node in graph.nodes:
        if isinstance(node, ExternKernel):
            fn = (extern_kernels or {}).get(node.kernel)
            if fn is None:
                raise KeyError(f"no implementation given for extern kernel {node.kernel!r}")
            args = [from_storage(buffers[b], graph.buffer_layout(b)) for b in node.inputs]
            result = fn(*args, **dict(node.constants))
            buffers[node.name] = to_storage(np.asarray(result), node.layout)
        else:
            buffers[node.name] = run_node(node, buffers)
    return buffers


def outputs(graph: Graph, buffers: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The graph's outputs as strided arrays."""
    return [from_storage(buffers[o], graph.buffer_layout(o)) for o in graph.outputs]
