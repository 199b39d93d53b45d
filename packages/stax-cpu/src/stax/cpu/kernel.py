"""Schedule Kernel -> one `extern "C"` C++ function (scalar, vectorized or tiled form).

The function takes one pointer per buffer (in_ptrK read-only, out_ptrK written, as in
Listing 7.1) and an error array; it returns the error code (0: fine). Nests of one
kernel share one OpenMP parallel region with a `#pragma omp for` each; the parallel
depth of each nest comes from Algorithm 8.1. The frame (pointers, signature, local
buffers) is frame.py, the loops emitter.py, the scalar statements scalar_body.py.
"""

from __future__ import annotations

from stax.ir import Graph
from stax.sched.schedule import Kernel

from .emitter import KernelEmitter
from .frame import KernelContext, KernelSource, Lines, bind_pointers, local_buffers, signature
from .nests import plan_nests


def emit_kernel(kernel: Kernel, graph: Graph, threads: int, min_chunk: int = 512, merge: bool = True,
                vector_bytes: int = 0, escaping: set | None = None, tile: bool = True,
                stream_bytes: int | None = None, huge_bytes: int | None = None,
                roots: dict | None = None, nests: list | None = None) -> KernelSource:
    """C++ source of one kernel of the schedule (vectorized where `vector_bytes` allows).

    `escaping`: buffers read outside this kernel (or graph outputs); the others may become
    kernel-local (None: every buffer escapes). `roots`: buffer -> its storage (regions.storage_roots).
    `nests`: the kernel's plan_nests(merge) when the caller has it (the region planner does)."""
    nests = plan_nests(kernel, graph, merge=merge) if nests is None else nests
    ctx = KernelContext(kernel.name, graph, sizes=tuple(r.symbol.name for r in graph.size_vars.rows))
    if escaping is not None:
        ctx.local = local_buffers(nests, escaping)
    bind_pointers(ctx, graph, list(kernel.nodes), stream_bytes, huge_bytes)
    emitter = KernelEmitter(ctx, threads, min_chunk, vector_bytes, tile)
    depths = [emitter.nest_depth(n) for n in nests]
    body = Lines(1)
    for ptr, nbytes in ctx.huge:
        body(f"stax::advise_huge({ptr}, {nbytes});")
    streams = bool(ctx.streaming)  # decided per store; the fence below is cheap when unused
    region = (len(nests) > 1 or streams) and any(d or emitter.splits(n) for n, d in zip(nests, depths))
    if region:
        body(f"#pragma omp parallel num_threads({threads})")
        with body.block(""):
            for nest, d in zip(nests, depths):
                emitter.emit_nest(body, nest, d, in_region=True)
            if streams:
                body("__builtin_ia32_sfence();  // order this thread's streaming stores")
    else:
        for nest, d in zip(nests, depths):
            emitter.emit_nest(body, nest, d, in_region=False)
        if streams:
            body("__builtin_ia32_sfence();")
    head = "".join(f"    {decl}\n" for decl in dict.fromkeys(emitter.prologue))  # before any parallel region
    code = f"{signature(ctx, roots)}\n{{\n{head}{body.text()}\n    return (int)err[0];\n}}\n"
    params = tuple(ctx.in_ptrs) + tuple(ctx.out_ptrs)
    return KernelSource(kernel.name, code, params, tuple(ctx.index_loads), emitter.vectorized,
                        tuple(ctx.local), size_params=ctx.sizes)
