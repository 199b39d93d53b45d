"""The Schedule interface (sched -> codegen): kernels in order, memory plan, fusion log.

Frozen dataclasses with readable str() and a deterministic content hash. A codegen
package reads `kernels` in order; each names the graph nodes it runs (in order)
and its loop structure; `memory.events` say where to allocate, free and reuse.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from stax.ir import Graph

# Kernel kinds (loop structure the codegen emits).
POINTWISE = "pointwise"
REDUCTION = "reduction"
FUSED = "fused"  # nodes with one iteration group sharing all loops (e.g. SAME_VARS_REDUCE)
OUTER_LOOP_FUSED = "outer_loop_fused"  # nodes sharing `outer_depth` outer loops (Listing 7.1)
EXTERN = "extern"  # a library call (ExternKernel node)
SCATTER = "scatter"  # one Scatter node: init pass over `group[0]`, then the scatter pass over `group[1]`
KERNEL_KINDS = (POINTWISE, REDUCTION, FUSED, OUTER_LOOP_FUSED, EXTERN, SCATTER)


class _Hashed:
    def content_hash(self) -> str:
        return hashlib.sha256(str(self).encode()).hexdigest()


@dataclass(frozen=True)
class Kernel(_Hashed):
    """One kernel: graph nodes (buffer names) run in order inside one generated function.

    `group` is the iteration group ((pointwise sizes), (reduction sizes)) after
    size-1 dimensions are dropped; `outer_depth` is how many outer loops the nodes
    of an OUTER_LOOP_FUSED kernel share; `node_type` is the book's scheduler-node
    class name (SchedulerNode, FusedSchedulerNode, OuterLoopFusedSchedulerNode,
    ExternKernelSchedulerNode).
    """

    name: str
    kind: str
    nodes: tuple
    group: tuple
    node_type: str = "SchedulerNode"
    outer_depth: int = 0
    node_groups: tuple = ()  # per node (same order as `nodes`): its own iteration group, size-1 dims dropped

    def __post_init__(self):
        if self.kind not in KERNEL_KINDS:
            raise ValueError(f"unknown kernel kind {self.kind!r}")
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "node_groups", tuple(self.node_groups))

    def __str__(self) -> str:
        depth = f" outer_depth={self.outer_depth}" if self.kind == OUTER_LOOP_FUSED else ""
        return f"{self.name}: {self.node_type} {self.kind}{depth} group={self.group} nodes=({', '.join(self.nodes)})"


ALLOC = "alloc"  # before kernel `step`: allocate `buffer`
REUSE = "reuse"  # before kernel `step`: `buffer` takes the storage of `reuses`
FREE = "free"  # after kernel `step`: release `buffer` (inputs too: `del primals_1`)


@dataclass(frozen=True)
class MemoryEvent(_Hashed):
    step: int
    kind: str
    buffer: str
    reuses: str | None = None

    def __str__(self) -> str:
        if self.kind == REUSE:
            return f"[{self.step}] {self.buffer} = {self.reuses}; del {self.reuses}  # reuse"
        if self.kind == FREE:
            return f"[{self.step}] del {self.buffer}"
        return f"[{self.step}] {self.buffer} = empty(...)"


@dataclass(frozen=True)
class MemoryPlan(_Hashed):
    """Allocation events plus the estimated peak (bytes) and the lower bound M* of Def 7.5."""

    events: tuple = ()
    peak_bytes: int = 0
    lower_bound_bytes: int = 0
    arena_bytes: int | None = None  # storage-pool size for inference, when planned
    offsets: tuple = ()  # ((buffer, byte offset in the arena), ...) when the arena is planned

    def __str__(self) -> str:
        head = f"memory plan: peak {self.peak_bytes} B, M* {self.lower_bound_bytes} B"
        if self.arena_bytes is not None:
            head += f", arena {self.arena_bytes} B"
        lines = [head] + ["  " + str(e) for e in self.events]
        lines += [f"  arena[{off}] {name}" for name, off in self.offsets]
        return "\n".join(lines)


@dataclass(frozen=True)
class FusionRecord(_Hashed):
    """One fusion decision: a candidate pair, fused or not, and why."""

    round: int
    a: str
    b: str
    fused: bool
    reason: str
    score: tuple | None = None

    def __str__(self) -> str:
        verdict = "fused" if self.fused else "rejected"
        score = f" score={self.score}" if self.score is not None else ""
        return f"round {self.round}: {self.a} + {self.b}: {verdict} ({self.reason}){score}"


@dataclass(frozen=True)
class Schedule(_Hashed):
    """The scheduler's answer for one Graph."""

    graph: Graph
    kernels: tuple
    memory: MemoryPlan = field(default_factory=MemoryPlan)
    fusion_log: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "kernels", tuple(self.kernels))
        object.__setattr__(self, "fusion_log", tuple(self.fusion_log))

    def __str__(self) -> str:
        out = ["schedule:"]
        out += ["  " + str(k) for k in self.kernels]
        out += ["fusion log:"] + ["  " + str(r) for r in self.fusion_log]
        out += [str(self.memory)]
        return "\n".join(out)
