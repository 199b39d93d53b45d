"""Dependences (Def 7.1): what a node reads and writes, found by walking its body.

MemoryDep records the buffer and the normalized index with its ranges (the basis
of fusion decisions); StarDep (the book's "whole dependence") only the buffer, for
extern calls and unanalyzable (indirect) accesses; WeakDep carries no data and
only orders a reader of a buffer before the node that rewrites it in place.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from stax.ir import ComputedBuffer, ExternKernel, Graph, IndexValue, Load, Reduction, Scatter, SizeVars, walk
from stax.ir.index import pointwise_vars, reduction_vars
from stax.ir.normalize import NormalizedIndex, normalize_index
from stax.ir.sizevars import NO_SIZE_VARS, provably_nonnegative

from .once import once


@dataclass(frozen=True)
class MemoryDep:
    """Access of `name` at a normalized index; `nbytes` is what the access moves (at the size hints
    when the sizes are symbolic: an estimate for the score, never for legality)."""

    name: str
    index: NormalizedIndex
    nbytes: int = field(default=0, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # Hashed constantly during fusion: computed once, when made (every dependence is hashed into a
        # set at once; a cached_property would cost more than the hash, it takes a lock in Python 3.11).
        object.__setattr__(self, "_hash", hash((self.name, self.index)))

    def __hash__(self) -> int:
        return self._hash

    def numel(self) -> int:
        return self.index.numel()

    def numel_expr(self):
        """Elements accessed: an int, or an expression in size symbols."""
        return self.index.numel_expr()

    def is_injective(self) -> bool:
        return self._injective

    @once
    def _injective(self) -> bool:
        """True when distinct iterations touch distinct addresses (checked on the affine form)."""
        if not self.index.is_affine:
            return False
        if not self.index.is_static or not all(isinstance(t, int) for _, t in self.index.dims):
            return _injective_symbolic(self.index.dims)
        span = 0
        for size, stride in sorted(self.index.dims, key=lambda d: abs(d[1])):
            if stride == 0 or abs(stride) <= span:
                return False
            span += abs(stride) * (size - 1)
        return True

    def __str__(self) -> str:
        return self._text

    @once
    def _text(self) -> str:
        """Printed once per dependence, the index once per distinct index: fusion orders a consumer's reads
        by their text (an order free of the hash seed), and printing sympy each time was most of its time."""
        return f"MemoryDep('{self.name}', {_index_text(self.index)})"


@functools.lru_cache(maxsize=65536)
def _index_text(index: NormalizedIndex) -> str:
    """`index, {c0: size, ...}` of a MemoryDep's text. Equal (structurally) indices print the same, and
    a graph has few distinct ones: thousands of dependences share a few hundred indices."""
    ranges = ", ".join(f"{v}: {s}" for v, s in index.ranges.items())
    return f"{index.index}, {{{ranges}}}"


def _injective_symbolic(dims) -> bool:
    """Injective for every value of the size symbols: inner to outer, each stride provably positive and
    above the span of the dims inside it (the order of a row-major layout; any other order: False)."""
    span = 0
    for size, stride in reversed(dims):
        if not provably_nonnegative(stride - span - 1):
            return False
        span = span + stride * (size - 1)
    return True


@dataclass(frozen=True)
class StarDep:
    """Whole-buffer dependence: the index is unknown (extern call, indirect load)."""

    name: str
    nbytes: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return f"StarDep('{self.name}')"


@dataclass(frozen=True)
class WeakDep:
    """Ordering only: the node must run after every reader of `name` (in-place rewrite by `mutating`)."""

    name: str
    mutating: str

    def __str__(self) -> str:
        return f"WeakDep('{self.name}', mutating='{self.mutating}')"


Dep = MemoryDep | StarDep | WeakDep


@dataclass(frozen=True)
class ReadWrites:
    """A node's (or fused group's) dependences, with the sets fusion derives from them (each computed on
    first use, once: fusion asks for them at every candidate pair)."""

    reads: frozenset
    writes: frozenset

    def buffer_names(self) -> frozenset[str]:
        """Buffers read or written (WeakDeps carry no data)."""
        return self._names

    @once
    def _names(self) -> frozenset[str]:
        return frozenset({d.name for d in self.reads if not isinstance(d, WeakDep)} | {d.name for d in self.writes})

    @once
    def read_names(self) -> frozenset[str]:
        """Names of every read, WeakDeps included: one set test tells whether a node reads anything
        another writes (most candidate pairs do not)."""
        return frozenset(d.name for d in self.reads)

    @once
    def memory_deps(self) -> frozenset:
        """MemoryDeps among reads and writes (what the fusion score compares)."""
        return frozenset(d for d in self.reads | self.writes if isinstance(d, MemoryDep))

    @staticmethod
    def merge(items) -> ReadWrites:
        """Union of members' reads and writes; reads of buffers written inside are dropped."""
        reads, writes = set(), set()
        for rw in items:
            reads |= rw.reads
            writes |= rw.writes
        written = {d.name for d in writes}
        return ReadWrites(frozenset(d for d in reads if d.name not in written), frozenset(writes))


def loop_ranges(node: ComputedBuffer) -> tuple:
    """((var, size), ...) of the body in loop order: pointwise vars, then reduction vars.

    A Scan's value uses i0.. over its ranges like a Pointwise.
    """
    body = node.body
    red = body.reduction_ranges if isinstance(body, Reduction) else ()
    return _ranges(tuple(body.ranges), tuple(red))


@functools.lru_cache(maxsize=4096)
def _ranges(ranges: tuple, red: tuple) -> tuple:
    return tuple(zip(pointwise_vars(len(ranges)), ranges)) + tuple(zip(reduction_vars(len(red)), red))


def read_writes(node, graph_layouts: dict, body_nodes=None, size_vars: SizeVars = NO_SIZE_VARS) -> ReadWrites:
    """The node's dependences; `graph_layouts` maps buffer name -> Layout (for byte counts, at the hints
    of `size_vars` when sizes are symbolic).

    `body_nodes` is `list(walk(node.body.value))` when the caller already has it.
    """

    def nbytes_of(name, numel=None):
        layout = graph_layouts[name]
        if numel is None:
            return size_vars.nbytes(layout)
        return (numel if isinstance(numel, int) else size_vars.hint(numel)) * layout.dtype.itemsize

    if isinstance(node, ExternKernel):
        reads = frozenset(StarDep(b, nbytes_of(b)) for b in node.inputs)
        return ReadWrites(reads, frozenset({StarDep(node.name, nbytes_of(node.name))}))
    if isinstance(node.body, Scatter):
        return _scatter_read_writes(node, nbytes_of)
    ranges = loop_ranges(node)
    reads = set()
    for n in body_nodes if body_nodes is not None else walk(node.body.value):
        _add_read(reads, n, ranges, nbytes_of)
    widx = normalize_index(write_index(node.layout), ranges)
    writes = frozenset({MemoryDep(node.name, widx, nbytes_of(node.name, widx.numel_expr()))})
    return ReadWrites(frozenset(reads), writes)


def _add_read(reads: set, n, ranges, nbytes_of) -> None:
    if not isinstance(n, Load):
        return
    if n.indirect:
        reads.add(StarDep(n.buffer, nbytes_of(n.buffer)))
        return
    idx = normalize_index(n.index, ranges)
    reads.add(MemoryDep(n.buffer, idx, nbytes_of(n.buffer, idx.numel_expr())))


def _scatter_read_writes(node: ComputedBuffer, nbytes_of) -> ReadWrites:
    """A Scatter reads `init` over its ranges (i0..) and the value and indirect indices over its
    scatter ranges (r0..); where it writes depends on data, so its write is a StarDep."""
    body = node.body
    reads: set = set()
    init_ranges = _ranges(tuple(body.ranges), ())
    for n in walk(body.init):
        _add_read(reads, n, init_ranges, nbytes_of)
    scatter_ranges = _ranges((), tuple(body.scatter_ranges))
    for root in body.roots()[1:]:
        for n in walk(root):
            _add_read(reads, n, scatter_ranges, nbytes_of)
    return ReadWrites(frozenset(reads), frozenset({StarDep(node.name, nbytes_of(node.name))}))


@functools.lru_cache(maxsize=4096)
def write_index(layout) -> object:
    """Where element (i0, ...) of `layout` is stored (ComputedBuffer.write_index, cached per layout)."""
    return layout.index()


def index_exprs(node: ComputedBuffer, body_nodes=None) -> list:
    """Every index expression of the body (loads, index values) plus the write index."""
    out = [write_index(node.layout)]
    for n in body_nodes if body_nodes is not None else walk(node.body.value):
        if isinstance(n, (Load, IndexValue)):
            out.append(n.index)
    return out


def layouts_of(graph: Graph) -> dict:
    return {b.name: b.layout for b in (*graph.inputs, *graph.nodes)}
