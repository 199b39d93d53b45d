"""The 2-D tiled kernel form (§8.2), with transposed loads through registers.

Loops `dim` (vectorized) and `tile_dim` walk T x T tiles, so a strided access's cache lines
stay in L1 while the tile uses them. A float load that is strided along `dim` but
contiguous along `tile_dim` (x.t() + y) is not read lane by lane: W rows of W floats are
loaded as vectors along `tile_dim` and transposed in registers (W log2 W two-vector
shuffles, `stax::vec::transpose`), giving the W vectors along `dim` that W consecutive
`tile_dim` iterations need.
"""

from __future__ import annotations

import sympy
from stax.ir import Load, walk
from stax.ir.index_printer import to_c

from .loops import NodeLoops, linear_coeffs, loop_var
from .vec_body import VecBody, VecPlan

# tile edges (elements) with transposed loads: long along the vector loop (the side the other
# operands and the output are contiguous on: one 2-4 KiB run each per tile row), short along the
# transposed side (each of its rows gives one or two cache lines): long thin tiles beat square
# ones. The vector-side edge shrinks until the outer tile loop has 2 units per thread. The
# lane-by-lane form is slower with long tiles, so it keeps 2W.
TRANSPOSED_EDGES = (1024, 512, 256, 128, 64)
TRANSPOSED_SIDE = 32


def transposed_edges(sizes, plan: VecPlan, threads: int) -> tuple[int, int] | None:
    """(edge along the vector loop, edge along the tile loop): whole tiles only (the register
    transpose works on whole W x W blocks), or None."""
    w, v, t = plan.lanes, plan.dim, plan.tile_dim
    side = TRANSPOSED_SIDE if TRANSPOSED_SIDE % w == 0 else w
    if sizes[t] % side:
        return None
    fits = [e for e in TRANSPOSED_EDGES if sizes[v] % e == 0 and e % w == 0]
    if not fits:
        return None
    outer_is_v = v < t  # the outer tile loop is the one the parallel pragma splits
    for e in fits:
        if not outer_is_v or sizes[v] // e >= 2 * threads:
            return e, side
    return fits[-1], side


def transposable_loads(group: list[NodeLoops], plan: VecPlan, threads: int = 1) -> list[tuple[NodeLoops, Load]]:
    """4-byte loads strided along the vector loop and contiguous along the tile loop (or [] when
    `transposed_edges` finds no whole tiles)."""
    head = group[0]
    if transposed_edges(head.sizes, plan, threads) is None:
        return []
    xv, xt = loop_var(plan.dim), loop_var(plan.tile_dim)
    written = {nl.node.name for nl in group}  # preloaded before the block's stores: never their own outputs
    out, seen = [], set()
    for nl in group:
        for n in walk(nl.node.body.value):
            if not isinstance(n, Load) or n.indirect or n.mask is not None or n.dtype.name not in ("float32", "int32"):
                continue
            if n.buffer in written:
                continue
            co = linear_coeffs(nl.index(n.index), [xv, xt])
            if co is None or co.get(xt, 0) != 1 or co.get(xv, 0) in (0, 1) or (nl.node.name, n) in seen:
                continue
            seen.add((nl.node.name, n))
            out.append((nl, n))
    return out


def transpose_source(lanes: int) -> str:
    """C++ `stax::vec::transpose(VT* r)` for W = lanes: row i <-> column i of a W x W block.
    Stage s swaps, in every 2s x 2s block, the top-right and bottom-left s x s sub-blocks
    (the bit s of the row and column indices): after all stages every bit is swapped."""
    w = lanes
    body = []
    s = 1
    while s < w:
        lo = [c if (c // s) % 2 == 0 else w + c - s for c in range(w)]
        hi = [c + s if (c // s) % 2 == 0 else w + c for c in range(w)]
        for a in range(w):
            if a & s:
                continue
            b = a + s
            body.append(f"    {{ VT a = r[{a}], b = r[{b}]; "
                        f"r[{a}] = __builtin_shufflevector(a, b, {', '.join(map(str, lo))}); "
                        f"r[{b}] = __builtin_shufflevector(a, b, {', '.join(map(str, hi))}); }}")
        s *= 2
    return ("template <class VT> static inline void transpose(VT* r) {\n" + "\n".join(body) + "\n}\n")


def emit_tiled_group(em, lines, group: list[NodeLoops], start: int, plan: VecPlan) -> None:
    """§8.2: loops `dim` and `tile_dim` walk TxT tiles (outer loops in order, so the parallel
    pragma still applies); inside a tile, `tile_dim` then the vectorized `dim` innermost — or,
    with transposed loads, blocks of W along `dim`, then blocks of W along `tile_dim`."""
    head = group[0]
    tloads = transposable_loads(group, plan, em.threads) if em.vector_bytes else []
    edges = {plan.dim: plan.tile, plan.tile_dim: plan.tile}
    if tloads:
        ev, et = transposed_edges(head.sizes, plan, em.threads)
        edges = {plan.dim: ev, plan.tile_dim: et}
    sizes, v, t, edge = head.sizes, plan.dim, plan.tile_dim, plan.tile
    stack: list = []
    for k in range(start, len(sizes)):
        step, name = (edges[k], f"x{k}_t") if k in (v, t) else (1, f"x{k}")
        cm = lines.block(f"for (int64_t {name} = 0; {name} < {sizes[k]}; {name} += {step})")
        cm.__enter__()
        stack.append(cm)
    if tloads:
        _transposed_tile(em, lines, group, plan, tloads, edges)
        em.close_loops(stack, len(stack))
        return

    def end(k):
        return f"x{k}_t + {edge}" if sizes[k] % edge == 0 else f"std_min(x{k}_t + {edge}, {sizes[k]})"

    lines(f"const int64_t x{v}_end = {end(v)};")
    cm = lines.block(f"for (int64_t x{t} = x{t}_t; x{t} < {end(t)}; x{t} += 1)")
    cm.__enter__()
    stack.append(cm)
    w = plan.lanes
    with lines.block(f"for (int64_t x{v} = x{v}_t; x{v} < x{v}_end; x{v} += {w})"):
        def full():
            body = VecBody(em.ctx, lines, {}, plan, em.scalar_body(lines))
            for nl in group:
                body.store(nl, *body.value(nl, nl.node.body.value))

        if not plan.tail:
            full()
        else:
            with lines.block(f"if (x{v} + {w} <= x{v}_end)"):
                full()
            with lines.block("else"):
                lines(f"const int64_t x{v}_tail = x{v};")
                with lines.block(f"for (int64_t x{v} = x{v}_tail; x{v} < x{v}_end; x{v} += 1)"):
                    em.scalar_bodies(lines, group, [])
    em.close_loops(stack, len(stack))


def _transposed_tile(em, lines, group, plan: VecPlan, tloads, edges: dict) -> None:
    v, t, w = plan.dim, plan.tile_dim, plan.lanes
    xv, xt = loop_var(v), loop_var(t)
    i, tb = sympy.Symbol("i", integer=True, nonnegative=True), sympy.Symbol(f"x{t}_b", integer=True, nonnegative=True)
    with lines.block(f"for (int64_t x{v} = x{v}_t; x{v} < x{v}_t + {edges[v]}; x{v} += {w})"):
        with lines.block(f"for (int64_t x{t}_b = x{t}_t; x{t}_b < x{t}_t + {edges[t]}; x{t}_b += {w})"):
            pre = {}
            for nl, n in tloads:
                vt = "stax::vec::vfloat" if n.dtype.name == "float32" else "stax::vec::vint32"
                name = em.ctx.tmp("tr")
                idx = em.ctx.localize(n.buffer, nl.index(n.index)).xreplace({xv: xv + i, xt: tb})
                lines(f"{vt} {name}[{w}];")
                lines(f"for (int64_t i = 0; i < {w}; ++i) {name}[i] = stax::vec::loadu<{vt}>("
                      f"{em.ctx.ptr(n.buffer)} + {to_c(idx)});")
                lines(f"stax::vec::transpose({name});")
                pre[(nl.node.name, n)] = f"{name}[x{t} - x{t}_b]"
            with lines.block(f"for (int64_t x{t} = x{t}_b; x{t} < x{t}_b + {w}; x{t} += 1)"):
                for nl in group:
                    body = VecBody(em.ctx, lines, {}, plan, em.scalar_body(lines),
                                   preloaded={n: name for (node, n), name in pre.items() if node == nl.node.name})
                    body.store(nl, *body.value(nl, nl.node.body.value))
