"""Pass 1 (§7.6 step 1): one SchedulerNode per graph node, with its dependences (§7.1).

In-place rewrites are handled by renaming, as in SSA construction: if node N
overwrites buffer B, later uses of B are uses of N, and every earlier reader of B
gets ordered before N by a WeakDep, so the dependence graph stays acyclic. The IR
has no mutation node yet; `mutations` ({N: B}) is how a caller declares them.
"""

from __future__ import annotations

from collections.abc import Mapping

from stax.ir import ComputedBuffer, Graph, Scatter, walk

from .deps import MemoryDep, ReadWrites, StarDep, WeakDep, layouts_of, read_writes
from .loops import loop_info
from .nodes import SchedulerNode


def _rename(dep, renames: dict):
    new = renames.get(dep.name)
    if new is None:
        return dep
    if isinstance(dep, MemoryDep):
        return MemoryDep(new, dep.index, dep.nbytes)
    if isinstance(dep, StarDep):
        return StarDep(new, dep.nbytes)
    return dep


def _canonical(canonical: dict, dep):
    """The first-seen object equal to `dep` with the same byte count (which dependence equality ignores;
    a renamed read keeps the byte count of the buffer it was read from)."""
    return canonical.setdefault((dep, getattr(dep, "nbytes", None)), dep)


def create_nodes(graph: Graph, mutations: Mapping[str, str] | None = None) -> list[SchedulerNode]:
    """SchedulerNodes in graph order, named op0, op1, ..."""
    layouts = layouts_of(graph)
    mutations = dict(mutations or {})
    renames: dict[str, str] = {}  # buffer -> its latest version
    readers: dict[str, list[str]] = {}  # buffer version -> buffers of nodes that read it
    # One object per distinct dependence: equal reads of different nodes are then identical, and the
    # set operations of fusion (shared dependences of every candidate pair) stop at the identity test.
    canonical: dict = {}
    out = []
    for k, node in enumerate(graph.nodes):
        computed = isinstance(node, ComputedBuffer) and not isinstance(node.body, Scatter)
        body_nodes = list(walk(node.body.value)) if computed else None
        rw = read_writes(node, layouts, body_nodes, graph.size_vars)
        reads = {_canonical(canonical, _rename(d, renames)) for d in rw.reads}
        target = mutations.get(node.name)
        if target is not None:
            version = renames.get(target, target)
            reads |= {WeakDep(r, node.name) for r in readers.get(version, []) if r != node.name}
            renames[target] = node.name
        for d in reads:
            if not isinstance(d, WeakDep):
                readers.setdefault(d.name, []).append(node.name)
        loops = loop_info(node, body_nodes) if isinstance(node, ComputedBuffer) else None
        writes = frozenset(_canonical(canonical, d) for d in rw.writes)
        out.append(SchedulerNode(f"op{k}", node, k, ReadWrites(frozenset(reads), writes), loops, graph.size_vars))
    return out
