"""Loop normalization for one node, and the parallel depth of Algorithm 8.1.

`node_loops` turns a ComputedBuffer into the loop nest the C++ runs: size-1 dims
dropped (their variables become 0), then adjacent dims of the same kind merged
when every index of the body is linear in both with stride_outer == stride_inner *
size_inner (a contiguous run becomes one longer loop: better vectors, more
parallel work). Dims before `protect` are never merged: they are the outer loops
an outer-loop-fused kernel shares with its other nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from stax.ir import ComputedBuffer, IndexValue, Load, Reduction, walk
from stax.ir.affine import affine_parts, contiguous
from stax.ir.graph import Scan
from stax.ir.index import contiguous_strides, pointwise_vars, reduction_vars, strided_index, var
from stax.ir.simplify import memory_order
from stax.ir.sizevars import canonical_size as loop_size  # an int, or an expression in size symbols


def loop_var(k: int) -> sympy.Symbol:
    """The C++ loop variable of nest position k (x0, x1, ... as in Listing 7.1)."""
    return var("x", k)


def c_var(name: str) -> sympy.Symbol:
    """A C variable of the generated code (a loop bound, a lane, a checked index) as an index symbol."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def linear_coeffs(e: sympy.Expr, syms) -> dict | None:
    """{sym: integer coefficient} if every term of the expanded `e` mentioning `syms` is c*sym; else None
    (stax.ir.affine.affine_parts)."""
    return affine_parts(sympy.expand(e), syms).linear


@dataclass
class NodeLoops:
    """One node's loop nest: sizes outer->inner, the last `nred` of them reduction loops."""

    node: ComputedBuffer
    sizes: list
    nred: int
    rewrites: list = field(default_factory=list)  # xreplace dicts applied in order to any body index
    _memo: dict = field(default_factory=dict)

    @property
    def npoint(self) -> int:
        return len(self.sizes) - self.nred

    @property
    def is_reduction(self) -> bool:
        """Reductions and scans: an accumulator over the trailing `nred` loops."""
        return isinstance(self.node.body, Reduction | Scan)

    @property
    def is_scan(self) -> bool:
        return isinstance(self.node.body, Scan)

    @property
    def accumulate(self) -> str:
        body = self.node.body
        return body.scan_type if isinstance(body, Scan) else body.reduction_type

    def index(self, e) -> sympy.Expr:
        """An index of the node's body rewritten over the loop variables x0, x1, ..."""
        e = sympy.sympify(e)
        got = self._memo.get(e)
        if got is None:
            got = e
            for rw in self.rewrites:
                got = got.xreplace(rw)
            self._memo[e] = got
        return got

    def store_index(self) -> sympy.Expr:
        return self.index(self.node.write_index())

    def reduction_linear_index(self) -> sympy.Expr:
        """Flat position within the reduction ranges (what argmax/argmin return), or along a scan's axis."""
        body = self.node.body
        if isinstance(body, Scan):
            return self.index(pointwise_vars(len(body.ranges))[body.axis])
        rs = [loop_size(s) for s in body.reduction_ranges]
        return self.index(strided_index(reduction_vars(len(rs)), contiguous_strides(rs)))

    def total(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n


def body_indices(node: ComputedBuffer) -> list[sympy.Expr]:
    """Every index expression the node evaluates: its store, loads, index values (and arg index)."""
    out = [node.write_index()]
    for n in walk(node.body.value):
        if isinstance(n, Load | IndexValue):
            out.append(n.index)
    body = node.body
    if isinstance(body, Scan):
        out.append(pointwise_vars(len(body.ranges))[body.axis])
    if isinstance(body, Reduction) and body.reduction_type in ("argmax", "argmin"):
        rs = [loop_size(s) for s in body.reduction_ranges]
        out.append(strided_index(reduction_vars(len(rs)), contiguous_strides(rs)))
    return out


def _mergeable(exprs, a, b, size_b) -> bool:
    """Loops a (outer) and b are one contiguous loop for every index (stax.ir.affine.contiguous)."""
    used = [e for e in exprs if e.has(a) or e.has(b)]
    return contiguous([affine_parts(sympy.expand(e), (a, b)) for e in used], a, b, size_b)


def _in_write_order(dims: list, write: sympy.Expr, loads: list) -> list:
    """A node's pointwise dims, outer to inner, in the memory order of its output when every load
    agrees with it: eager gives x.t().exp() x.t()'s strides (1, n), and in logical order its load
    and store would both step by n (a 2-D tiled nest); in write order they are one contiguous loop.
    A load strided along the output's inner dim (a real transpose) keeps the logical order: the
    tiled form is tuned for it (tiles.py). Non-affine indices keep the logical order too."""
    syms = [v for v, _, _ in dims]
    order = memory_order(write, syms) if len(syms) > 1 else None
    if order is None or order[-1] == len(syms) - 1:
        return dims
    inner = syms[order[-1]]
    for e in loads:  # contiguous along `inner`, or the same for all of it (a broadcast)
        c = linear_coeffs(e, [inner])  # other dims may sit in clamps (a pooling window's padding)
        if c is None or c.get(inner, 0) not in (0, 1):
            return dims
    return [dims[k] for k in order]


def node_loops(node: ComputedBuffer, protect: int = 0, merge: bool = True) -> NodeLoops:
    body = node.body
    psizes = [loop_size(s) for s in body.ranges]
    if isinstance(body, Scan):  # the scan axis runs last and sequentially, like a reduction loop
        pv = pointwise_vars(len(psizes))
        dims = [(v, s, False) for k, (v, s) in enumerate(zip(pv, psizes)) if k != body.axis]
        dims.append((pv[body.axis], psizes[body.axis], True))
    else:
        rsizes = [loop_size(s) for s in body.reduction_ranges]
        dims = [(v, s, False) for v, s in zip(pointwise_vars(len(psizes)), psizes)]
        dims += [(v, s, True) for v, s in zip(reduction_vars(len(rsizes)), rsizes)]
    # size-1 dims are dropped, but a scan keeps its axis (of size 1 it is still the scan loop:
    # without it the node had no sequential loop and was emitted as broken C++ or scanned along
    # the wrong dim after merging)
    keep = (lambda d: d[1] != 1 or d[2]) if isinstance(body, Scan) else (lambda d: d[1] != 1)
    zero = {v: sympy.Integer(0) for v, s, r in dims if not keep((v, s, r))}
    dims = [d for d in dims if keep(d)]
    if protect == 0 and not isinstance(body, Scan):  # a reduction's pointwise dims too (NHWC pooling)
        loads = [n.index.xreplace(zero) for n in walk(body.value) if isinstance(n, Load) and not n.indirect]
        point = [d for d in dims if not d[2]]
        dims = _in_write_order(point, node.write_index().xreplace(zero), loads) + [d for d in dims if d[2]]
    rewrites = [zero] if zero else []
    exprs = [e.xreplace(zero) for e in body_indices(node)]
    if merge:
        k = len(dims) - 1
        while k > protect:
            (a, sa, ra), (b, sb, rb) = dims[k - 1], dims[k]
            if ra == rb and _mergeable(exprs, a, b, sb):
                m = sympy.Symbol(f"m{len(rewrites)}_{b.name}", integer=True, nonnegative=True)
                rw = {a: sympy.Integer(0), b: m}
                exprs = [e.xreplace(rw) for e in exprs]
                rewrites.append(rw)
                dims[k - 1 : k + 1] = [(m, sa * sb, ra)]
            k -= 1
    rename = {v: loop_var(k) for k, (v, _, _) in enumerate(dims) if v != loop_var(k)}
    if rename:
        rewrites.append(rename)
    nred = sum(1 for d in dims if d[2])
    return NodeLoops(node, [s for _, s, _ in dims], nred, rewrites)


def parallel_depth(ranges, total: int, threads: int, min_chunk: int = 512) -> int:
    """Algorithm 8.1: how many outer loops (of `ranges`, outer->inner) to run in parallel."""
    seq, par, d = total, 1, 0
    for r in ranges:
        if par >= 2 * threads or par == threads:
            break
        if seq / threads < min_chunk:
            break
        d, par, seq = d + 1, par * r, seq / r
    return d
