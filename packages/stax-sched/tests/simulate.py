"""Run a Schedule the way fused kernels execute, with the numpy interpreter (test helper).

Unfused kernels run whole. A fused kernel runs chunk by chunk: chunk o of an
outer-loop-fused kernel is outer iteration o; chunk o of a fused kernel is point o
of its pointwise iteration group (GPU: row o of the reduction's (n, r), pointwise
members taking the matching r elements). Within a chunk the members run in kernel
order, except that a fused kernel is one loop nest: its reductions accumulate
together, so none may read another's result. Computed buffers start as NaN, so a read of a value that another chunk has
not produced yet poisons the result; running the chunks forward and in reverse
catches any dependence that crosses chunks (Prop 7.3: only distance 0 is legal).
"""

import numpy as np
from stax.ir import ExternKernel, Reduction
from stax.ir import dtypes as dt
from stax.ir.index import as_int, pointwise_vars, reduction_vars
from stax.ir.index_printer import evaluate
from stax.ir.interpreter import eval_value, from_storage, run_node, to_storage
from stax.ir.ops import reduction_def


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _compute_chunk(node, start: int, count: int, buffers):
    """(storage positions, values) of pointwise-flat iterations [start, start+count) of `node`."""
    body = node.body
    sizes = [as_int(s) for s in body.ranges]
    flat = np.arange(start, start + count, dtype=np.int64)
    coords = np.unravel_index(flat, sizes) if sizes else ()
    pv = pointwise_vars(len(sizes))
    if isinstance(body, Reduction):
        rs = [as_int(s) for s in body.reduction_ranges]
        nd = 1 + len(rs)
        env = {v: c.reshape((count,) + (1,) * len(rs)) for v, c in zip(pv, coords)}
        for k, (v, s) in enumerate(zip(reduction_vars(len(rs)), rs)):
            shape = [1] * nd
            shape[k + 1] = s
            env[v] = np.arange(s, dtype=np.int64).reshape(shape)
        vals = eval_value(body.value, env, buffers, (count, *rs))
        result = reduction_def(body.reduction_type).numpy(vals.reshape(count, -1), 1)
        dtype = body.dtype
    else:
        env = {v: c for v, c in zip(pv, coords)}
        result = eval_value(body.value, env, buffers, (count,))
        dtype = body.value.dtype
    pos = np.broadcast_to(evaluate(node.write_index(), dict(zip(pv, coords))), (count,))
    return pos, dt.round_to(np.asarray(result), dtype)


def _run_chunk(node, start, count, buffers) -> None:
    pos, values = _compute_chunk(node, start, count, buffers)
    buffers[node.name][pos] = values


def _feeds_reductions(nodes) -> set:
    """Members whose values a reduction of the kernel consumes (directly or through members)."""
    from stax.ir import loads

    inside = {n.name: n for n in nodes}
    feeding: set = set()
    for n in reversed(nodes):
        if isinstance(n.body, Reduction) or n.name in feeding:
            feeding |= {ld.buffer for ld in loads(n.body.value)} & set(inside)
    return feeding


def _run_fused_chunk(nodes, o, per, buffers) -> None:
    """One point of a single loop nest: producers of the reductions, then every reduction
    accumulating at once (none sees another's result), then the remaining members."""
    feeding = _feeds_reductions(nodes)
    for n in nodes:
        if n.name in feeding and not isinstance(n.body, Reduction):
            _run_chunk(n, o * per[n.name], per[n.name], buffers)
    results = [(n, _compute_chunk(n, o * per[n.name], per[n.name], buffers))
               for n in nodes if isinstance(n.body, Reduction)]
    for n, (pos, values) in results:
        buffers[n.name][pos] = values
    for n in nodes:
        if n.name not in feeding and not isinstance(n.body, Reduction):
            _run_chunk(n, o * per[n.name], per[n.name], buffers)


def _chunks(kernel, nodes):
    """(number of chunks, {node name: pointwise iterations per chunk})."""
    groups = dict(zip(kernel.nodes, kernel.node_groups))
    if kernel.kind == "outer_loop_fused":
        outer = _prod(kernel.group[0])
        return outer, {n.name: _prod(groups[n.name][0]) // outer for n in nodes}
    n = _prod(kernel.group[0])
    return n, {m.name: _prod(groups[m.name][0]) // n for m in nodes}


def run_schedule(schedule, inputs, extern_kernels, reverse=False, single_pass=True) -> dict:
    """Buffers after running `schedule`; `single_pass=False` lets a fused kernel finish each
    reduction before the next member starts (codegen with one pass per dependent reduction)."""
    graph = schedule.graph
    buffers = {k: np.asarray(v) for k, v in inputs.items()}
    for node in graph.nodes:
        buffers[node.name] = np.full(node.layout.storage_size(), np.nan, dtype=node.layout.dtype.np)
    for kernel in schedule.kernels:
        nodes = [graph.node(n) for n in kernel.nodes]
        if kernel.kind == "extern":
            (node,) = nodes
            assert isinstance(node, ExternKernel)
            args = [from_storage(buffers[b], graph.buffer_layout(b)) for b in node.inputs]
            buffers[node.name] = to_storage(np.asarray(extern_kernels[node.kernel](*args)), node.layout)
        elif kernel.kind in ("pointwise", "reduction"):
            (node,) = nodes
            buffers[node.name] = run_node(node, buffers)
        else:
            count, per = _chunks(kernel, nodes)
            chunks = range(count - 1, -1, -1) if reverse else range(count)
            for o in chunks:
                if kernel.kind == "fused" and single_pass:
                    _run_fused_chunk(nodes, o, per, buffers)
                    continue
                for node in nodes:
                    _run_chunk(node, o * per[node.name], per[node.name], buffers)
    return buffers
