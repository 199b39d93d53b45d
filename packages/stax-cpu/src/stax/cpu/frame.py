"""The function frame of a generated C++ kernel: naming, signature, pointers and local buffers.

A kernel is one `extern "C"` function taking one pointer per buffer (in_ptrK read-only, out_ptrK
written, as in Listing 7.1), the graph's symbolic sizes (`int64_t s0`, ...: dynamic shapes) and an
error array. `KernelContext` names its pointers and temporaries,
`bind_pointers` decides them, `signature` prints the parameter list, and `local_buffers` turns
intermediates that live inside one outer-loop-fused nest into per-iteration arrays. `Lines` is the
indented text every emitter writes into; `KernelSource` is what a kernel (or region) compiles to.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import sympy
from stax.ir import Graph, Load, walk

from . import cpp_ops as co
from .loops import linear_coeffs, loop_var
from .nests import Nest, dense_extent


class Lines:
    """Indented C++ lines."""

    def __init__(self, depth: int = 0):
        self.out: list[str] = []
        self.depth = depth

    def __call__(self, text: str) -> None:
        self.out.append("    " * self.depth + text)

    @contextmanager
    def block(self, head: str):
        self(head + " {" if head else "{")
        self.depth += 1
        yield
        self.depth -= 1
        self("}")

    def text(self) -> str:
        return "\n".join(self.out)


@dataclass
class KernelContext:
    """Per-kernel naming: buffer pointers, temporaries, and the ids of bounds-checked loads."""

    name: str
    graph: Graph
    in_ptrs: dict = field(default_factory=dict)
    out_ptrs: dict = field(default_factory=dict)
    index_loads: list = field(default_factory=list)
    counter: int = 0
    local: dict = field(default_factory=dict)  # buffer -> LocalBuffer (kernel-local scratch)
    streaming: frozenset = frozenset()  # outputs large enough for non-temporal vector stores
    huge: tuple = ()  # (pointer, bytes) of outputs advised to use transparent huge pages
    prefetch: int = 0  # bytes ahead to prefetch contiguous vector loads of memory buffers (0: none)
    prefetch_row: object = None  # outer loop var: prefetch inputs' next rows instead (prefetch.row_ahead)
    sizes: tuple = ()  # names of the size symbols passed as arguments (a symbolic-shape graph's table)

    def ptr(self, buf: str) -> str:
        if buf in self.local:
            return self.local[buf].name
        return self.out_ptrs.get(buf) or self.in_ptrs[buf]

    def localize(self, buf: str, index):
        """A kernel-local buffer is indexed within the current outer iteration's block."""
        lb = self.local.get(buf)
        return index if lb is None else lb.rebase(index)

    def tmp(self, prefix: str = "tmp") -> str:
        self.counter += 1
        return f"{prefix}{self.counter - 1}"


@dataclass(frozen=True)
class LocalBuffer:
    """An intermediate written and read only inside one outer-loop-fused nest: instead of a
    buffer in memory it is a per-iteration array (a row of softmax's exp) that stays in L1."""

    name: str
    ctype: str
    extent: int
    outer_zero: dict  # outer loop vars -> 0
    base: int  # constant part of the producer's store index

    def rebase(self, index):
        return index.xreplace(self.outer_zero) - self.base


@dataclass(frozen=True)
class KernelSource:
    name: str
    code: str
    params: tuple  # buffer names in argument order (in_ptrs then out_ptrs)
    index_loads: tuple  # load id -> description, for IndexError messages
    vectorized: bool = False  # needs the vector prelude
    local: tuple = ()  # buffers that became kernel-local (the wrapper allocates nothing for them)
    kernels: tuple = ()  # schedule kernels this function runs, in order (a region); () = just `name`
    err_slots: int = 1  # error records [code, a, b, c] in `err`, one per kernel of a region
    size_params: tuple = ()  # size symbols passed after the pointers (int64_t), in this order


def signature(ctx: KernelContext, roots: dict | None = None, err_name: str = "err") -> str:
    """The C function's parameters: pointers that share storage (an in-place reuse, or a region's
    reuse, roots: buffer -> its storage) are not `__restrict__`."""
    roots = roots or {}
    count: dict = {}
    for b in (*ctx.in_ptrs, *ctx.out_ptrs):
        count[roots.get(b, b)] = count.get(roots.get(b, b), 0) + 1
    params = []
    for b, p in (*ctx.in_ptrs.items(), *ctx.out_ptrs.items()):
        const = "const " if b in ctx.in_ptrs else ""
        restrict = " __restrict__" if count[roots.get(b, b)] == 1 else ""
        params.append(f"{const}{co.storage_ctype(ctx.graph.buffer_layout(b).dtype)}*{restrict} {p}")
    params += [f"const int64_t {s}" for s in ctx.sizes]
    params.append(f"int64_t* __restrict__ {err_name}")
    return f'extern "C" int {ctx.name}({", ".join(params)})'


LOCAL_BYTES = 128 << 10  # largest kernel-local block (per thread, on the stack)


def local_buffers(nests: list[Nest], escaping: set) -> dict:
    """Buffer -> LocalBuffer for the intermediates of outer-loop-fused nests that no other kernel
    reads (`escaping`: buffers read elsewhere) and whose per-iteration block is dense and small. With
    symbolic sizes, only blocks of a constant extent (a symbolic row count, a static row: GPT-2's tokens)."""
    out = {}
    for nest in nests:
        if not nest.outer:
            continue
        outer = [loop_var(k) for k in range(nest.outer)]
        for nl in nest.node_loops():
            name = nl.node.name
            if name in escaping:
                continue
            S = nl.store_index()
            pv = [loop_var(k) for k in range(len(nl.sizes))]
            coeffs = linear_coeffs(S, pv)
            base = S.xreplace({v: sympy.Integer(0) for v in pv})
            if coeffs is None or not base.is_Integer:
                continue
            inner = {v: c for v, c in coeffs.items() if v not in outer}
            extent = dense_extent(inner, dict(zip(pv, nl.sizes)))
            if extent is not None and not isinstance(extent, int):
                extent = int(extent) if getattr(extent, "is_Integer", False) else None  # symbolic: no array
            d = nl.node.layout.dtype
            # one element per outer iteration (a row statistic) stays a buffer, as in Example 7.1
            if extent is None or extent <= 1 or extent * d.itemsize > LOCAL_BYTES:
                continue
            out[name] = LocalBuffer(f"local_{name}", co.storage_ctype(d), max(extent, 1),
                                    {v: sympy.Integer(0) for v in outer}, int(base))
    return out


def bind_pointers(ctx: KernelContext, graph: Graph, written: list, stream_bytes: int | None,
                  huge_bytes: int | None) -> None:
    """The C function's pointers: in_ptrN per buffer read but not written here, out_ptrN per
    written buffer that is not kernel-local; which outputs get streaming stores / huge pages."""
    if stream_bytes is not None:
        ctx.streaming = frozenset(b for b in written
                                  if b not in ctx.local and graph.buffer_layout(b).nbytes() >= stream_bytes)
    for name in written:
        for ld in (n for n in walk(graph.node(name).body.value) if isinstance(n, Load)):
            if ld.buffer not in written and ld.buffer not in ctx.in_ptrs:
                ctx.in_ptrs[ld.buffer] = f"in_ptr{len(ctx.in_ptrs)}"
    ctx.out_ptrs = {b: f"out_ptr{k}" for k, b in enumerate(b for b in written if b not in ctx.local)}
    if huge_bytes is not None:
        ctx.huge = tuple((ctx.out_ptrs[b], graph.buffer_layout(b).nbytes()) for b in ctx.out_ptrs
                         if graph.buffer_layout(b).nbytes() >= huge_bytes)
