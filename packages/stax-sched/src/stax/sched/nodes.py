"""Scheduler nodes (§7.1): one per buffer, and the fused nodes greedy fusion builds from them.

A SchedulerNode wraps one graph node with its read/write dependences and iteration
group; FusedSchedulerNode holds nodes sharing one loop nest; OuterLoopFusedSchedulerNode
holds nodes sharing only their first `outer_depth` loops (Listing 7.1). Fused nodes
are flat: fusing a fused node with another lists all the original nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from stax.ir import ExternKernel, Reduction, Scan, Scatter, SizeVars, provably_equal
from stax.ir.sizevars import NO_SIZE_VARS

from .deps import MemoryDep, ReadWrites, StarDep, WeakDep
from .loops import LoopInfo
from .once import once

SCHEDULER_NODE = "SchedulerNode"
EXTERN_NODE = "ExternKernelSchedulerNode"
FUSED_NODE = "FusedSchedulerNode"
OUTER_LOOP_FUSED_NODE = "OuterLoopFusedSchedulerNode"


class SchedulerNode:
    """One graph node (a buffer): dependences, iteration group, position in graph order."""

    node_type = SCHEDULER_NODE

    def __init__(self, name: str, node, pos: int, rw: ReadWrites, loops: LoopInfo | None,
                 size_vars: SizeVars = NO_SIZE_VARS):
        self.name = name  # op0, op1, ... in graph order
        self.node = node
        self.buffer = node.name
        self.sizes = loops.sizes if loops else ((), ())  # ((pointwise), (reduction)), size-1 dims dropped
        self.group = loops.group if loops else ((), ())  # the iteration group (coalesced)
        self.pos = pos
        self.read_writes = rw
        self.loops = loops
        self.is_extern = isinstance(node, ExternKernel)
        self.is_scan = (not self.is_extern) and isinstance(node.body, Scan)
        self.is_scatter = (not self.is_extern) and isinstance(node.body, Scatter)
        self.is_reduction = (not self.is_extern) and isinstance(node.body, (Reduction, Scan))
        if self.is_extern:
            self.node_type = EXTERN_NODE
        self.device = node.layout.device
        self.min_pos = self.max_pos = pos
        self.loop_fusion = None
        self.write_dep = next(iter(rw.writes))
        self.written_buffers = frozenset((self.buffer,))  # what `producer` answers for
        self.dependent_reductions = None  # see can_fuse.dependent_reductions
        # the iteration group at the size hints (= `group` when static): orders log text, decides nothing
        self.group_at_hints = _at_hints(self.group, size_vars) if size_vars else self.group


    @once
    def group_text(self) -> tuple[str, str]:
        """(iteration group at the hints, iteration group) as text, for rejection reasons: printed once
        per node, not once per rejected candidate pair."""
        return str(self.group_at_hints), str(self.group)

    @once
    def loop_view(self) -> LoopView:
        """What CpuPolicy reads of the node; nodes with equal views get equal answers (see LoopView)."""
        return LoopView(self.sizes, self.loops.boundaries if self.loops else frozenset({0}), self.group_text)

    @once
    def writes_injectively(self) -> bool:
        """Prop 7.2's producer side: the write is a MemoryDep at an injective index covering the node's
        pointwise iterations (asked for every consumer read, checked once)."""
        w = self.write_dep
        return isinstance(w, MemoryDep) and w.is_injective() and provably_equal(w.numel_expr(), self.pointwise_numel())

    # No attributes pointing back at self: scheduler nodes must not form reference
    # cycles, or every schedule would stay in memory until a full garbage collection.
    @property
    def snodes(self) -> tuple:
        return (self,)

    def producer(self, buffer: str):
        """The member node writing `buffer`, or None."""
        return self if buffer == self.buffer else None

    def pointwise_numel(self) -> int:
        n = 1
        for s in self.sizes[0]:
            n *= s
        return n

    def reduction_numel(self) -> int:
        n = 1
        for s in self.sizes[1]:
            n *= s
        return n

    def unmet_dependencies(self, produced: set) -> list:
        return sorted((d for d in self.read_writes.reads if d.name in produced), key=_dep_key)

    def met_dependencies(self, produced: set) -> list:
        return sorted((d for d in self.read_writes.reads if d.name not in produced), key=_dep_key)

    def describe(self, produced: set) -> str:
        """The book's dump (Example 7.1): type, writes, unmet/met dependences, iteration group."""
        kind = "ExternKernel" if self.is_extern else "ComputedBuffer"
        lines = [f"{self.name}: {self.node_type}({kind})"]
        lines.append(f"{self.name}.writes = [{', '.join(map(str, sorted(self.read_writes.writes, key=_dep_key)))}]")
        unmet = self.unmet_dependencies(produced)
        met = self.met_dependencies(produced)
        if unmet:
            lines.append(f"{self.name}.unmet_dependencies = [{', '.join(map(str, unmet))}]")
        if met:
            lines.append(f"{self.name}.met_dependencies = [{', '.join(map(str, met))}]")
        if not self.is_extern:
            lines.append(f"{self.name}.group.iteration = {self.group}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"{self.name}"


class LoopView(NamedTuple):
    """A node's loops as the CPU policy sees them: `sizes` ((pointwise), (reduction)), the `boundaries`
    of its merged dimensions (LoopInfo.boundaries) and `group_text` (SchedulerNode.group_text). The policy's
    answer for a node set is a function of their views, so it is remembered per tuple of views: candidate
    pairs of a large graph repeat a few shapes thousands of times."""

    sizes: tuple
    boundaries: frozenset
    group_text: tuple


def _at_hints(sizes, size_vars: SizeVars):
    if isinstance(sizes, tuple):
        return tuple(_at_hints(s, size_vars) for s in sizes)
    return size_vars.hint(sizes)


def _dep_key(d) -> tuple:
    order = {MemoryDep: 0, StarDep: 1, WeakDep: 2}[type(d)]
    return (d.name, order, str(d))


@dataclass(frozen=True)
class LoopFusion:
    """How a set of nodes shares loops: the policy's answer (see policy.py)."""

    node_type: str  # FUSED_NODE or OUTER_LOOP_FUSED_NODE
    reason: str  # SAME_VARS_REDUCE, OUTER_LOOP_FUSION, ... (logged)
    outer_depth: int = 0  # shared outer loops (OUTER_LOOP_FUSED_NODE), in size-1-dropped dims
    group: tuple = ((), ())  # the kernel's iteration group


class FusedGroup:
    """A FusedSchedulerNode or OuterLoopFusedSchedulerNode: members in graph order."""

    is_extern = False
    is_scan = False
    is_scatter = False

    def __init__(self, snodes, rw: ReadWrites, loop_fusion: LoopFusion, dependent_reductions: str | None = None):
        self.snodes = tuple(sorted(snodes, key=lambda n: n.pos))
        self._producers = {n.buffer: n for n in self.snodes}
        self.written_buffers = frozenset(self._producers)  # what `producer` answers for
        self.dependent_reductions = dependent_reductions
        self.name = "_".join(n.name for n in self.snodes)
        self.read_writes = rw
        self.loop_fusion = loop_fusion
        self.node_type = loop_fusion.node_type
        self.is_reduction = any(n.is_reduction for n in self.snodes)
        self.device = self.snodes[0].device
        self.min_pos = min(n.pos for n in self.snodes)
        self.max_pos = max(n.pos for n in self.snodes)

    def producer(self, buffer: str):
        """The member node writing `buffer`, or None."""
        return self._producers.get(buffer)

    def header(self) -> str:
        """`op0_op1: OuterLoopFusedSchedulerNode(SchedulerNode,SchedulerNode)` (§7.4)."""
        return f"{self.name}: {self.node_type}({','.join(n.node_type for n in self.snodes)})"

    def __repr__(self) -> str:
        return self.name


def describe_nodes(snodes) -> str:
    produced = {n.buffer for n in snodes}
    return "\n\n".join(n.describe(produced) for n in snodes)
