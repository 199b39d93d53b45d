"""Pass 5 (§7.6 step 5): pick the kernel order with the least estimated peak memory (§7.5).

Four candidate topological orders of the fused graph: the original one; minimum
peak first (among ready nodes, the smallest memory increment); breadth-first by
the execution position of the predecessors; depth-first in increasing size of the
node plus its inputs. Each is scored with one linear scan (Def 7.5); ties keep
the earlier candidate, so the result is never worse than the original order.
"""

from __future__ import annotations

import heapq
import logging

from .ancestors import FusionDag
from .lifetimes import MemoryModel

log = logging.getLogger("stax.sched.memory")


def _min_increment_first(dag: FusionDag, model: MemoryModel, order: list) -> list:
    tpos = {g: k for k, g in enumerate(order)}
    remaining = {b: len(us) for b, us in model.users.items()}
    indeg = {g: len(dag.preds[g]) for g in order}

    def increment(g) -> int:
        grow = sum(model.size(b) for b in model.writes[g])
        shrink = sum(model.size(b) for b in model.reads[g] if remaining[b] == 1 and b not in model.outputs)
        return grow - shrink

    current = {}
    heap = []
    for g in order:
        if indeg[g] == 0:
            current[g] = increment(g)
            heap.append((current[g], tpos[g], g.name, g))
    heapq.heapify(heap)
    out = []
    done = set()
    while heap:
        inc, _, _, g = heapq.heappop(heap)
        if g in done or current.get(g) != inc:
            continue
        done.add(g)
        out.append(g)
        for b in model.reads[g]:
            remaining[b] -= 1
            if remaining[b] == 1:
                for u in model.users[b]:
                    if u not in done and u in current:
                        current[u] = increment(u)
                        heapq.heappush(heap, (current[u], tpos[u], u.name, u))
        for s in dag.succs[g]:
            indeg[s] -= 1
            if indeg[s] == 0:
                current[s] = increment(s)
                heapq.heappush(heap, (current[s], tpos[s], s.name, s))
    return out


def _bfs_by_predecessor_position(dag: FusionDag, order: list) -> list:
    tpos = {g: k for k, g in enumerate(order)}
    indeg = {g: len(dag.preds[g]) for g in order}
    latest = {g: -1 for g in order}
    heap = [(-1, tpos[g], g.name, g) for g in order if indeg[g] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, _, _, g = heapq.heappop(heap)
        k = len(out)
        out.append(g)
        for s in dag.succs[g]:
            latest[s] = max(latest[s], k)
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (latest[s], tpos[s], s.name, s))
    return out


def _dfs_by_size(dag: FusionDag, model: MemoryModel, order: list) -> list:
    tpos = {g: k for k, g in enumerate(order)}
    size = {g: sum(model.size(b) for b in model.writes[g] + model.reads[g]) for g in order}

    def key(g):
        return (size[g], tpos[g])

    out, seen = [], set()
    for root in sorted(order, key=key):
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(sorted(dag.preds[root], key=key)))]
        while stack:
            g, preds = stack[-1]
            nxt = next((p for p in preds if p not in seen), None)
            if nxt is None:
                stack.pop()
                out.append(g)
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(dag.preds[nxt], key=key))))
    return out


def candidate_orders(dag: FusionDag, model: MemoryModel) -> dict[str, list]:
    original = dag.nodes()
    return {
        "original": original,
        "min_peak_first": _min_increment_first(dag, model, original),
        "bfs_predecessor_position": _bfs_by_predecessor_position(dag, original),
        "dfs_size": _dfs_by_size(dag, model, original),
    }


def reorder(dag: FusionDag, model: MemoryModel, enabled: bool = True) -> tuple[list, str]:
    """The least-peak candidate order and its name."""
    if not enabled:
        return dag.nodes(), "original"
    best = None
    for name, order in candidate_orders(dag, model).items():
        peak = model.peak(order)
        log.debug("order %s: peak %d B", name, peak)
        if best is None or peak < best[0]:
            best = (peak, name, order)
    log.debug("chosen order: %s (peak %d B)", best[1], best[0])
    return best[2], best[1]
