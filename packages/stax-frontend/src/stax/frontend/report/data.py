"""Everything the report shows, as plain JSON-ready data (one dict per compiled graph).

The HTML page, the `why` tool and the benchmark harness all read this dict, so a
saved report (or the debug dump's report.json) answers the same questions as the
live objects. Node names follow stax.sched: graph node k is SchedulerNode `op{k}`;
fused groups in the fusion log are named by joining their members (`op1_op2`).
"""

from __future__ import annotations

import json
import re

from stax.ir import ExternKernel, body_roots, loads

from .memory import eager_timeline, plan_timeline
from .sources import kernel_source, wrapper_lines, wrapper_source

VERSION = 1
_OP = re.compile(r"op\d+")


def group_members(name: str) -> list[str]:
    """'op1_op2' -> ['op1', 'op2'] (a fusion-log group's SchedulerNodes)."""
    return _OP.findall(name)


def _node_kind(node) -> str:
    if isinstance(node, ExternKernel):
        return "fallback" if node.fallback else "extern"
    return type(node.body).__name__.lower()


def _reads(node) -> list[str]:
    if isinstance(node, ExternKernel):
        return list(dict.fromkeys(node.inputs))
    return list(dict.fromkeys(ld.buffer for root in body_roots(node.body) for ld in loads(root)))


def _fmt_val(val) -> str:
    import torch

    if isinstance(val, torch.Tensor):
        dt = str(val.dtype).replace("torch.", "")
        return f"{dt}[{', '.join(str(s) for s in val.shape)}]"
    if isinstance(val, (tuple, list)):
        return "(" + ", ".join(_fmt_val(v) for v in val) + ")"
    return type(val).__name__ if val is not None else ""


def aten_nodes(gm) -> list[dict]:
    out = []
    for n in gm.graph.nodes:
        out.append({
            "name": n.name,
            "op": n.op,
            "target": str(n.target) if n.op != "output" else "output",
            "args": [a.name for a in n.all_input_nodes],
            "users": [u.name for u in n.users],
            "val": _fmt_val(n.meta.get("val")),
        })
    return out


def inlined_into(aten: list[dict], produced: dict[str, list[str]]) -> dict[str, list[str]]:
    """ATen nodes with no buffer of their own -> the buffers whose bodies compute them.

    `produced` maps an ATen node to the buffers it originated; a node without one was
    composed lazily into its users (§6.3) or is a view, so its value lives in the
    first buffers reached through its users.
    """
    users = {n["name"]: n["users"] for n in aten}
    out: dict[str, list[str]] = {}
    for n in aten:
        if n["op"] != "call_function" or n["name"] in produced:
            continue
        found, seen, todo = [], set(), list(users[n["name"]])
        while todo:
            u = todo.pop(0)
            if u in seen:
                continue
            seen.add(u)
            if u in produced:
                found += [b for b in produced[u] if b not in found]
            else:
                todo += users.get(u, [])
        out[n["name"]] = found
    return out


def collect(gm, lowered, schedule, module=None, kind: str = "graph", error: BaseException | None = None,
            ident: str | None = None, times=None) -> dict:
    """The report data of one compiled graph (any of lowered/schedule/module may be None); `times`:
    its phases.GraphTimes so far (the first run comes after the report: it is in the log line)."""
    graph = lowered.graph if lowered is not None else None
    data: dict = {"version": VERSION, "kind": kind, "ident": ident or kind, "error": None}
    if times is not None:
        data["compile_phases"] = {name: round(s, 6) for name, s in times.phases}
    if error is not None:
        data["error"] = f"{type(error).__name__}: {error}"
    data["aten"] = {"code": gm.print_readable(print_output=False), "nodes": aten_nodes(gm)} if gm is not None else {}
    if graph is None:
        return data
    data["ir_before"] = str(graph)
    data["inputs"] = [{"name": i.name, "layout": str(i.layout), "nbytes": graph.size_vars.nbytes(i.layout)}
                      for i in graph.inputs]
    data["outputs"] = list(graph.outputs)
    data["lowering"] = {
        "fallback_ops": dict(lowered.fallback_ops), "extern_ops": dict(lowered.extern_ops),
        "materialized": dict(lowered.materialized),
    }
    kernel_of = {}
    if schedule is not None:
        for k in schedule.kernels:
            for b in k.nodes:
                kernel_of[b] = k.name
    nodes = []
    for idx, node in enumerate(graph.nodes):
        nodes.append({
            "op": f"op{idx}",
            "buffer": node.name,
            "kind": _node_kind(node),
            "text": str(node),
            "layout": str(node.layout),
            "nbytes": graph.size_vars.nbytes(node.layout),
            "origins": list(node.origins),
            "reads": _reads(node),
            "kernel": kernel_of.get(node.name),
            "extern": node.kernel if isinstance(node, ExternKernel) else None,
        })
    data["nodes"] = nodes
    produced: dict[str, list[str]] = {}
    for n in nodes:
        for o in n["origins"]:
            produced.setdefault(o, []).append(n["buffer"])
    data["inlined"] = inlined_into(data["aten"].get("nodes", []), produced) if data["aten"] else {}
    if schedule is None:
        return data
    source = str(getattr(module, "source", "")) if module is not None else ""
    wrapper = wrapper_source(source) if source else None
    by_buffer = {n["buffer"]: n for n in nodes}
    inlined_by_buffer: dict[str, list[str]] = {}
    for a, bufs in data["inlined"].items():
        for b in bufs:
            inlined_by_buffer.setdefault(b, []).append(a)
    kernels = []
    for k in schedule.kernels:
        origins = list(dict.fromkeys(o for b in k.nodes for o in by_buffer[b]["origins"]))
        inl = list(dict.fromkeys(a for b in k.nodes for a in inlined_by_buffer.get(b, [])))
        kernels.append({
            "name": k.name,
            "kind": k.kind,
            "node_type": k.node_type,
            "group": str(k.group),
            "outer_depth": k.outer_depth,
            "nodes": list(k.nodes),
            "ops": [by_buffer[b]["op"] for b in k.nodes],
            "origins": origins,
            "inlined": inl,
            "header": str(k),
            "ir": "\n".join(by_buffer[b]["text"] for b in k.nodes),
            "source": kernel_source(source, k.name) if source and k.kind != "extern" else None,
            "launch": wrapper_lines(wrapper, k.name) if k.kind != "extern" else wrapper_lines(wrapper, k.nodes[0]),
        })
    data["kernels"] = kernels
    data["ir_after"] = "\n\n".join(k["header"] + "\n" + _indent(k["ir"]) for k in kernels)
    data["fusion_log"] = [fusion_record(r, nodes) for r in schedule.fusion_log]
    mem = schedule.memory
    eager = eager_timeline(gm) if gm is not None else []
    data["memory"] = {
        "events": [str(e) for e in mem.events],
        "peak_bytes": int(mem.peak_bytes),
        "lower_bound_bytes": int(mem.lower_bound_bytes),
        "arena_bytes": int(mem.arena_bytes) if mem.arena_bytes is not None else None,
        "timeline": plan_timeline(schedule),
        "eager_timeline": eager,
        "eager_peak_bytes": max(eager) if eager else None,
    }
    data["source"] = source
    data["wrapper"] = wrapper
    return data


def relation(a_buffers, b_buffers, nodes: list[dict]) -> str:
    """'vertical' when one side reads what the other writes (§7.3), else 'horizontal'."""
    reads = {n["buffer"]: set(n["reads"]) for n in nodes}
    a_reads = set().union(*(reads.get(x, set()) for x in a_buffers))
    b_reads = set().union(*(reads.get(x, set()) for x in b_buffers))
    return "vertical" if (b_reads & set(a_buffers)) or (a_reads & set(b_buffers)) else "horizontal"


def fusion_record(r, nodes: list[dict]) -> dict:
    a_buf = [nodes[int(m[2:])]["buffer"] for m in group_members(r.a)]
    b_buf = [nodes[int(m[2:])]["buffer"] for m in group_members(r.b)]
    return {
        "round": r.round, "a": r.a, "b": r.b, "fused": bool(r.fused), "reason": r.reason,
        "score": list(r.score) if r.score is not None else None,
        "a_buffers": a_buf, "b_buffers": b_buf, "relation": relation(a_buf, b_buf, nodes),
    }


def _indent(s: str) -> str:
    return "\n".join("  " + ln for ln in s.splitlines())


def to_json(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=False, default=str)

