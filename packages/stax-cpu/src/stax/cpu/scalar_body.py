"""The scalar body: a node's value DAG as scalar C++ statements, one `const` per value.

Loads read through the kernel's pointers (indirect ones bounds-checked with
`stax::check_index`, masked ones guarded), ops come from cpp_ops.OP_TABLE (half types
re-rounded after every inexact op), and values are shared within one loop scope by a CSE
table. The vectorized form (vec_body) emits its uniform subtrees through `node`.
"""

from __future__ import annotations

from stax.ir import Constant, IndexValue, Load, Op, walk
from stax.ir import dtypes as dt
from stax.ir.index import as_int, sympify
from stax.ir.index_printer import to_c

from . import cpp_ops as co
from .frame import KernelContext, Lines
from .loops import NodeLoops, c_var


def _ctype(d: dt.DType) -> str:
    return co.compute_ctype(d)


class ScalarBody:
    """Emits a node's value DAG as scalar C++ statements; CSE over one loop scope via `cse`."""

    def __init__(self, ctx: KernelContext, lines: Lines, cse: dict):
        self.ctx, self.lines, self.cse = ctx, lines, cse

    def _define(self, key, ctype: str, expr: str) -> str:
        name = self.cse.get(key)
        if name is None:
            name = self.ctx.tmp()
            self.lines(f"const {ctype} {name} = {expr};")
            self.cse[key] = name
        return name

    def value(self, nl: NodeLoops, root) -> str:
        names: dict[int, str] = {}
        for n in walk(root):
            names[id(n)] = self.node(nl, n, names)
        return names[id(root)]

    def _load(self, nl: NodeLoops, n: Load, names) -> str:
        mask = names[id(n.mask)] if n.mask is not None else None
        key = ("L", n.buffer, nl.index(n.index), n.dtype, tuple(names[id(v)] for _, v, _ in n.indirect), mask,
               repr(n.other))
        if key in self.cse:
            return self.cse[key]
        ctype = _ctype(n.dtype)
        out = self.ctx.tmp()
        self.cse[key] = out
        if mask is not None:  # masked-off lanes read nothing (no bounds check) and yield `other`
            self.lines(f"{ctype} {out} = {co.literal(n.other, n.dtype)};")
            cm = self.lines.block(f"if ({mask})")
            cm.__enter__()
        index = self.ctx.localize(n.buffer, nl.index(n.index))
        for sym, v, bound in n.indirect:
            load_id = len(self.ctx.index_loads)
            self.ctx.index_loads.append(f"{n.buffer} (read by {nl.node.name})")
            t = self.ctx.tmp()
            self.lines(
                f"const int64_t {t} = stax::check_index(static_cast<int64_t>({names[id(v)]}), "
                f"{_bound_c(bound)}, err, {load_id});"
            )
            index = index.xreplace({sym: c_var(t)})
        expr = co.load_expr(n.dtype, f"{self.ctx.ptr(n.buffer)}[{to_c(index)}]")
        if mask is not None:
            self.lines(f"{out} = {expr};")
            cm.__exit__(None, None, None)
        else:
            self.lines(f"const {ctype} {out} = {expr};")
        return out

    def node(self, nl: NodeLoops, n, names) -> str:
        """The C++ name (or literal) of value node `n`, its operands named in `names` {id: name}."""
        if isinstance(n, Constant):
            return co.literal(n.value, n.dtype)
        if isinstance(n, IndexValue):
            idx = to_c(nl.index(n.index))
            return self._define(("I", idx, n.dtype), _ctype(n.dtype), f"static_cast<{_ctype(n.dtype)}>({idx})")
        if isinstance(n, Load):
            return self._load(nl, n, names)
        if isinstance(n, Op):
            args = [names[id(a)] for a in n.args]
            expr = co.scalar_expr(n.name, args, [a.dtype for a in n.args], n.dtype)
            return self._define(("O", n.name, tuple(args), n.dtype), _ctype(n.dtype), expr)
        raise TypeError(f"unknown value node {type(n).__name__}")


def _bound_c(bound) -> str:
    """An indirect index's bound as C: the integer, or the size expression (a kernel argument)."""
    b = sympify(bound)
    return str(as_int(b)) if b.is_Integer else to_c(b)
