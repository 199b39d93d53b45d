"""Schedule 'scatter' Kernel -> one C++ function in two passes (stax.ir Scatter).

Pass 1 writes `init` over the output (parallel over its outer loops). Pass 2 walks the
scatter points. Where one output coordinate is an injective function of one scatter loop alone
(an embedding's backward: the column of the weight gradient is the column of the gradient row),
each thread owns a range of that loop and walks every other loop in row-major order: no two
threads write one element, so any mode and dtype runs in parallel without atomics and every
element sees its points in the serial order (the result is the serial one, bit for bit). Else
'add' of float32/float64/integers runs in parallel with `omp atomic` adds (float sums then depend
on the thread interleaving, as any parallel sum); half types and bool add serially, each sum
computed in float (or as `or`) and rounded on store like eager's CPU loop; 'set' runs serially
so the last point in row-major order wins. Indirect index values and coordinates that are not
provably in range go through `stax::check_index` (error code 2, an IndexError in the wrapper), like
indirect loads.
Symbolic sizes (dynamic shapes): loops run to the size arguments, every index is checked (no proof
is attempted over symbolic bounds) and the parallel depth is taken at the size hints.
"""

from __future__ import annotations

import sympy
from stax.ir import Graph, Load, Scatter, walk
from stax.ir.index import as_int, pointwise_vars, reduction_vars
from stax.ir.index_printer import to_c
from stax.ir.value_ranges import bound_index, bounds_check_needed
from stax.sched.schedule import Kernel

from . import cpp_ops as co
from .frame import KernelContext, KernelSource, Lines, signature
from .loops import NodeLoops, c_var, loop_var, parallel_depth
from .scalar_body import ScalarBody
from .split_kept import thread_range


def _loops(node, sizes, vars_) -> NodeLoops:
    """Loops x0.. over the size>1 dims of `sizes`; the body's `vars_` of size-1 dims become 0."""
    keep = [k for k, s in enumerate(sizes) if s != 1]
    rewrite = {v: sympy.Integer(0) for k, v in enumerate(vars_) if sizes[k] == 1}
    rewrite |= {vars_[k]: loop_var(j) for j, k in enumerate(keep)}
    return NodeLoops(node, [sizes[k] for k in keep], 0, [rewrite])


def _open(lines: Lines, nl: NodeLoops, depth: int, threads: int, pragma: str = "", bounds: dict | None = None
          ) -> list:
    """The nest of `nl`, the outer `depth` loops parallel; returns the open blocks to close.
    `bounds`: {loop: (lo, hi)} for loops that run over part of their range (a thread's share)."""
    stack = []
    if depth:
        collapse = f" collapse({depth})" if depth > 1 else ""
        lines(f"#pragma omp parallel for{collapse} num_threads({threads}){pragma}")
    for k, n in enumerate(nl.sizes):
        lo, hi = (bounds or {}).get(k, ("0", to_c(n)))
        cm = lines.block(f"for (int64_t x{k} = {lo}; x{k} < {hi}; x{k} += 1)")
        cm.__enter__()
        stack.append(cm)
    return stack


def _close(stack: list) -> None:
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def _atomic_add(body: Scatter) -> bool:
    """Whether pass 2 may run in parallel: `omp atomic` needs the storage type to be the sum's type."""
    d = body.dtype
    return body.mode == "add" and not co.is_half(d) and not d.is_bool


def owned_loop(body: Scatter, nl: NodeLoops, threads: int) -> int | None:
    """A scatter loop k whose points go to disjoint output elements for disjoint ranges of k: some
    output coordinate is c*x_k + d (c != 0) and reads nothing else. Threads owning ranges of x_k then
    never write one element. The longest such loop with at least `threads` iterations; else None."""
    found = []
    for e in body.index:
        e = sympy.expand(nl.index(e))
        syms = e.free_symbols
        if len(syms) != 1:
            continue
        (x,) = syms
        k = next((k for k in range(len(nl.sizes)) if loop_var(k) == x), None)
        c = e.coeff(x)
        if k is not None and c.is_Integer and c != 0 and sympy.expand(e - c * x).is_Integer:
            n = nl.sizes[k]
            if not isinstance(n, int) or n >= threads:
                found.append((n if isinstance(n, int) else 1 << 62, k))
    return max(found)[1] if found else None


def _size(s):
    """A static size as an int; a symbolic one as it is."""
    s = sympy.sympify(s)
    return int(s) if s.is_Integer else s


def _depth(ctx: KernelContext, nl: NodeLoops, threads: int, min_chunk: int) -> int:
    """Algorithm 8.1's depth (symbolic sizes: at the graph's size hints; any depth is correct)."""
    hint = ctx.graph.size_vars.hint
    return parallel_depth([hint(n) for n in nl.sizes], hint(nl.total()), threads, min_chunk)


def _init_pass(ctx: KernelContext, lines: Lines, node, threads: int, min_chunk: int) -> None:
    body: Scatter = node.body
    sizes = [_size(s) for s in body.ranges]
    nl = _loops(node, sizes, pointwise_vars(len(sizes)))
    if nl.total() == 0:
        return
    lines(f"// {node.name}: scatter pass 1, init over {nl.sizes}")
    stack = _open(lines, nl, _depth(ctx, nl, threads, min_chunk), threads)
    v = ScalarBody(ctx, lines, {}).value(nl, body.init)
    lines(f"{ctx.ptr(node.name)}[{to_c(nl.store_index())}] = {co.store_expr(body.dtype, v)};")
    _close(stack)


def _scatter_pass(ctx: KernelContext, lines: Lines, node, threads: int, min_chunk: int) -> None:
    body: Scatter = node.body
    d = body.dtype
    sizes = [_size(s) for s in body.ranges]
    ssizes = [_size(s) for s in body.scatter_ranges]
    symbolic = bool(ctx.graph.size_vars)
    rvars = reduction_vars(len(ssizes))
    nl = _loops(node, ssizes, rvars)
    if nl.total() == 0:
        return
    work = _depth(ctx, nl, threads, min_chunk) > 0  # enough points to share (Algorithm 8.1's test)
    owned = owned_loop(body, nl, threads) if work and threads > 1 else None
    depth = 1 if owned is not None else (_depth(ctx, nl, threads, min_chunk) if _atomic_add(body) else 0)
    how = (f"parallel, each thread owning a range of loop x{owned}" if owned is not None else
           "parallel atomic adds" if depth else "serial")
    lines(f"// {node.name}: scatter pass 2 ({body.mode}, {how}) over {nl.sizes}")
    if owned is not None:
        lines(f"#pragma omp parallel num_threads({threads})")
        region = lines.block("")
        region.__enter__()
        t = ctx.tmp("own")
        step = max(1, 64 // body.dtype.itemsize)  # ranges of whole cache lines: no false sharing
        thread_range(lines, t, to_c(nl.sizes[owned]), step)
        stack = [region, *_open(lines, nl, 0, threads, bounds={owned: (f"{t}_lo", f"{t}_hi")})]
    else:
        stack = _open(lines, nl, depth, threads)
    sb = ScalarBody(ctx, lines, {})
    ranges = dict(zip(rvars, ssizes))
    subs = {}
    for sym, v, bound in body.indirect:
        value = sb.value(nl, v)
        t = ctx.tmp()
        if symbolic or bounds_check_needed(v, bound, dict(zip(rvars, ssizes))):
            load_id = len(ctx.index_loads)
            ctx.index_loads.append(f"scatter index {sym} of {node.name}")
            value = f"stax::check_index(static_cast<int64_t>({value}), {to_c(bound)}, err, {load_id})"
        lines(f"const int64_t {t} = {value};")
        subs[sym] = c_var(t)
        if not symbolic:
            ranges[sym] = as_int(bound)
    coords = []
    for k, (e, n) in enumerate(zip(body.index, sizes)):
        c = to_c(nl.index(e).xreplace(subs))
        r = None if symbolic else bound_index(e, ranges)
        if r is not None and r.lo >= 0 and r.hi < n:
            coords.append(nl.index(e).xreplace(subs))
            continue
        load_id = len(ctx.index_loads)
        ctx.index_loads.append(f"scatter coordinate {k} of {node.name}")
        t = ctx.tmp()
        lines(f"const int64_t {t} = stax::check_index(static_cast<int64_t>({c}), {to_c(n)}, err, {load_id});")
        coords.append(c_var(t))
    value = sb.value(nl, body.value)
    ref = f"{ctx.ptr(node.name)}[{to_c(node.layout.index(coords))}]"
    if body.mode == "set":
        lines(f"{ref} = {co.store_expr(d, value)};")
    elif d.is_bool:
        lines(f"{ref} = {ref} || {value};")
    elif co.is_half(d):  # the sum in float, rounded to the half type when stored
        lines(f"{ref} = {co.store_expr(d, f'({co.load_expr(d, ref)} + {value})')};")
    else:
        if depth and owned is None:
            lines("#pragma omp atomic")
        lines(f"{ref} += {value};")
    _close(stack)


def emit_scatter_kernel(kernel: Kernel, graph: Graph, threads: int, min_chunk: int = 512) -> KernelSource:
    """C++ source of a 'scatter' kernel (one Scatter node): init pass, then the scatter pass."""
    (name,) = kernel.nodes
    node = graph.node(name)
    if not isinstance(node.body, Scatter):
        raise TypeError(f"{kernel.name}: scatter kernel over {name}, which is not a Scatter")
    ctx = KernelContext(kernel.name, graph, sizes=tuple(r.symbol.name for r in graph.size_vars.rows))
    for root in node.body.roots():
        for ld in (n for n in walk(root) if isinstance(n, Load)):
            ctx.in_ptrs.setdefault(ld.buffer, f"in_ptr{len(ctx.in_ptrs)}")
    ctx.out_ptrs = {name: "out_ptr0"}
    lines = Lines(1)
    _init_pass(ctx, lines, node, threads, min_chunk)
    _scatter_pass(ctx, lines, node, threads, min_chunk)
    code = f"{signature(ctx)}\n{{\n{lines.text()}\n    return (int)err[0];\n}}\n"
    return KernelSource(kernel.name, code, tuple(ctx.in_ptrs) + (name,), tuple(ctx.index_loads),
                        size_params=ctx.sizes)

