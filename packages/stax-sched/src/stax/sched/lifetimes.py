"""Lifetimes and peak memory (Def 7.5) for a kernel order.

A buffer lives from the kernel that produces it to the end of its last user;
graph inputs from the start, graph outputs to the end. M* is the largest total
size of the buffers live at one kernel. One linear scan per order, so the
reordering pass can compare candidate orders cheaply.

With symbolic sizes a buffer's bytes are its size at the hints (peak and M* are
estimates), while its storage size stays the expression: buffers share storage only
where those are provably equal (`storage_size` is the expanded, canonical spelling).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from stax.ir import Graph, InputBuffer
from stax.ir.sizevars import canonical_size

from .deps import WeakDep


@dataclass(frozen=True)
class BufferInfo:
    name: str
    nbytes: int  # at the size hints when symbolic
    device: str
    dtype: object
    storage_size: object  # elements: an int, or the canonical expression in size symbols
    is_input: bool
    is_output: bool


class MemoryModel:
    """Buffers, their producers and users among the scheduled (fused) nodes."""

    def __init__(self, graph: Graph, groups):
        outputs = set(graph.outputs)
        sv = graph.size_vars
        self.symbolic = bool(sv)
        self.buffers: dict[str, BufferInfo] = {}
        for b in (*graph.inputs, *graph.nodes):
            lay = b.layout
            if sv:
                storage = canonical_size(lay.storage_size_expr())
                nbytes = sv.hint(storage) * lay.dtype.itemsize
            else:
                storage, nbytes = lay.storage_size(), lay.nbytes()
            self.buffers[b.name] = BufferInfo(
                b.name, nbytes, lay.device, lay.dtype, storage, isinstance(b, InputBuffer), b.name in outputs,
            )
        self.nbytes = {name: info.nbytes for name, info in self.buffers.items()}  # looked up per step per order
        self.inputs = [i.name for i in graph.inputs]
        self.outputs = outputs
        self.writes: dict = {}  # group -> buffers it writes, in node order
        self.reads: dict = {}  # group -> buffers it reads from outside itself
        self.users: dict[str, list] = {}
        for g in groups:
            written = [n.buffer for n in g.snodes]
            self.writes[g] = written
            own = set(written)
            reads = []
            for n in g.snodes:
                for d in n.read_writes.reads:
                    if not isinstance(d, WeakDep) and d.name not in own and d.name not in reads:
                        reads.append(d.name)
            self.reads[g] = reads
            for b in reads:
                self.users.setdefault(b, []).append(g)

    def size(self, name: str) -> int:
        return self.nbytes[name]

    def lifetimes(self, order) -> dict[str, tuple[int, int]]:
        """buffer -> (first step live, last step live) for kernels run in `order`."""
        step = {g: k for k, g in enumerate(order)}
        end = max(len(order) - 1, 0)
        users_of, outputs = self.users, self.outputs
        out = {}
        for name in self.inputs:
            users = users_of.get(name)
            out[name] = (0, end if name in outputs else max(step[u] for u in users) if users else 0)
        for k, g in enumerate(order):
            for name in self.writes[g]:
                users = users_of.get(name)
                out[name] = (k, end if name in outputs else max(step[u] for u in users) if users else k)
        return out

    def occupancy(self, order, life: dict | None = None) -> list[int]:
        """Bytes live during each kernel of `order` (Def 7.5's sum over L(tau)); `life` is
        `lifetimes(order)` when the caller has it already."""
        occ = [0] * (max(len(order), 1) + 1)  # an empty graph still has live inputs
        nbytes = self.nbytes
        for name, (lo, hi) in (self.lifetimes(order) if life is None else life).items():
            b = nbytes[name]
            occ[lo] += b
            occ[hi + 1] -= b
        return list(itertools.accumulate(occ[: len(order)]))

    def peak(self, order) -> int:
        """M* of Def 7.5 for this order."""
        return max(self.occupancy(order), default=sum(self.size(n) for n in self.inputs))
