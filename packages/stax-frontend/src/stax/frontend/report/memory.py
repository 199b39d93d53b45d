"""Memory timelines for the report: Stax's plan replayed step by step, and eager's estimate.

Stax: the MemoryPlan's events replayed over the kernels (alloc/reuse before kernel
`step`, free after it; graph inputs live from the start until their free event), so
the series' maximum is the plan's peak. Eager: the ATen graph run op by op, each
op's outputs allocated when it runs and released after their last user (views keep
their base alive), graph inputs held until their last use like Stax's wrapper does
(it clears its argument list) — an estimate with the same conventions as the plan.
"""

from __future__ import annotations

import operator

import torch


def plan_timeline(schedule) -> list[int]:
    """Bytes of storage live during each kernel step of `schedule` (after its allocations)."""
    graph = schedule.graph
    sizes = {b.name: graph.size_vars.nbytes(b.layout) for b in (*graph.inputs, *graph.nodes)}
    alloc_at: dict[int, list] = {}
    free_at: dict[int, list] = {}
    for e in schedule.memory.events:
        (free_at if e.kind == "free" else alloc_at).setdefault(e.step, []).append(e)
    live = {i.name: sizes[i.name] for i in graph.inputs}  # storage owner -> bytes
    series = []
    for step in range(len(schedule.kernels)):
        for e in alloc_at.get(step, ()):
            if e.kind == "reuse" and e.reuses in live:
                live[e.buffer] = max(live.pop(e.reuses), sizes.get(e.buffer, 0))
            else:
                live[e.buffer] = sizes.get(e.buffer, 0)
        series.append(sum(live.values()))
        for e in free_at.get(step, ()):
            live.pop(e.buffer, None)
    return series


def _nbytes(val) -> int:
    if isinstance(val, torch.Tensor):
        try:
            return int(val.untyped_storage().nbytes())
        except Exception:  # noqa: BLE001 - fake/functional tensors without a storage
            return int(val.numel() * val.element_size())
    return 0


def _is_view(node) -> bool:
    target = node.target
    return bool(getattr(target, "is_view", False)) or target is operator.getitem


def eager_timeline(gm) -> list[int]:
    """Estimated bytes live after each ATen op of `gm` when run eagerly, op by op."""
    nodes = list(gm.graph.nodes)
    storage: dict = {}  # fx node -> storage id(s) it refers to
    size: dict = {}  # storage id -> bytes
    for n in nodes:
        val = n.meta.get("val")
        if n.op in ("placeholder", "get_attr") or (n.op == "call_function" and not _is_view(n)):
            vals = val if isinstance(val, (tuple, list)) else (val,)
            ids = []
            for k, v in enumerate(vals):
                sid = (n.name, k)
                size[sid] = _nbytes(v)
                ids.append(sid)
            storage[n] = ids
        elif n.op == "call_function":  # a view or getitem: aliases its first argument
            base = n.args[0] if n.args else None
            ids = list(storage.get(base, ()))
            if n.target is operator.getitem and len(ids) > 1 and isinstance(n.args[1], int):
                ids = [ids[n.args[1]]]
            storage[n] = ids
    step_of = {n: k for k, n in enumerate(nodes)}
    end = len(nodes)
    last: dict = {}  # storage id -> last step it is needed
    for n in nodes:
        for sid in storage.get(n, ()):
            last[sid] = max(last.get(sid, step_of[n]), step_of[n])
        for a in n.all_input_nodes:
            for sid in storage.get(a, ()):
                last[sid] = max(last.get(sid, 0), end if n.op == "output" else step_of[n])
    first = {}
    for n in nodes:
        for sid in storage.get(n, ()):
            first.setdefault(sid, 0 if n.op in ("placeholder", "get_attr") else step_of[n])
    delta = [0] * (end + 2)  # live bytes by step as a difference array: + at first use, - after last
    for sid, nb in size.items():
        lo, hi = first.get(sid, 0), last.get(sid, -1)
        if lo <= hi:
            delta[lo] += nb
            delta[hi + 1] -= nb
    live, series = 0, []
    for k, n in enumerate(nodes):
        live += delta[k]
        if n.op == "call_function":
            series.append(live)
    return series


def eager_peak(gm) -> int:
    return max(eager_timeline(gm), default=0)
