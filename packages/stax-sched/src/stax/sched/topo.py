"""Pass 2 (§7.6 step 2): topological sort by dependence; drop nodes whose results nobody uses.

Graph nodes are functional (no side effects), so a node is dead when its buffer
is neither a graph output nor read (transitively) by a live node. The sort is
stable: among ready nodes, graph order wins, so a graph already in order keeps it.
"""

from __future__ import annotations

import heapq

from .deps import WeakDep
from .nodes import SchedulerNode


def topological_sort(snodes: list[SchedulerNode], outputs) -> list[SchedulerNode]:
    by_buffer = {n.buffer: n for n in snodes}
    live: set[str] = set()
    stack = [o for o in outputs if o in by_buffer]
    while stack:
        b = stack.pop()
        if b in live:
            continue
        live.add(b)
        stack.extend(
            d.name
            for d in by_buffer[b].read_writes.reads
            if not isinstance(d, WeakDep) and d.name in by_buffer and d.name not in live
        )
    nodes = [n for n in snodes if n.buffer in live]
    indeg = {n.buffer: 0 for n in nodes}
    users: dict[str, list] = {n.buffer: [] for n in nodes}
    for n in nodes:
        for p in {d.name for d in n.read_writes.reads if d.name in indeg}:
            if p == n.buffer:
                raise ValueError(f"{n.buffer} reads itself")
            indeg[n.buffer] += 1
            users[p].append(n)
    ready = [(n.pos, n.buffer, n) for n in nodes if indeg[n.buffer] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, n = heapq.heappop(ready)
        order.append(n)
        for u in users[n.buffer]:
            indeg[u.buffer] -= 1
            if indeg[u.buffer] == 0:
                heapq.heappush(ready, (u.pos, u.buffer, u))
    if len(order) != len(nodes):
        stuck = sorted(b for b, d in indeg.items() if d > 0)
        raise ValueError(f"dependence cycle among buffers {stuck}")
    return order
