"""Print sympy index expressions as Triton source.

Triton's integer `//` and `%` truncate toward zero (C semantics) while FloorDiv and
ModularIndexing floor (Python semantics); the two agree on non-negative operands,
which is what loop indices are, so plain operators are emitted when sympy proves
non-negativity and `triton_helpers.floordiv_int` / `remainder` otherwise. The printer is
stax.ir's `IndexPrinter` with those names.
"""

from __future__ import annotations

import sympy
from stax.ir.affine import first_step
from stax.ir.index import sympify
from stax.ir.index_printer import IndexPrinter
from stax.ir.sizevars import SizeVar


class TritonPrinter(IndexPrinter):
    """stax.ir's index printer with Triton's operators and triton_helpers' floor helpers."""

    div = "//"
    floordiv_fn = "triton_helpers.floordiv_int"
    mod_fn = "triton_helpers.remainder"
    min_fn = "tl.minimum"
    max_fn = "tl.maximum"

    def __init__(self):
        super().__init__(index_type=None)  # Triton's integer literals take no suffix

    # The two forms below differ from the C printer's in text only; they keep the Triton source
    # of every kernel (and so Triton's compile cache keys) as they were.
    def product(self, e) -> str:
        """The coefficient leads unparenthesized: `2*x0`, `-2*x0`, `(-x0)`."""
        c, rest = e.as_coeff_Mul()
        factors = [self.atom(f) for f in sympy.Mul.make_args(rest)]
        if c == -1:
            return f"(-{'*'.join(factors)})"
        return "*".join(([str(int(c))] if c != 1 else []) + factors)

    def subtracted(self, t) -> str:
        return self.atom(t)


_PRINTER = TritonPrinter()


def texpr(e) -> str:
    """Triton expression for the integer index `e`."""
    return _PRINTER(e)


def axes_of(e, axis_of: dict) -> frozenset:
    """The program axes ('x', 'y', 'r') an index depends on; unknown symbols count as all, size
    symbols (one value per call: kernel arguments) as none."""
    out = set()
    for s in sympify(e).free_symbols:
        if not isinstance(s, SizeVar):
            out |= axis_of.get(s.name, {"x", "y", "r"})
    return frozenset(out)


def unit_steps(index, xs, rs) -> tuple[bool, bool]:
    """(steps by 1 along some x variable, along some r variable): what neighbouring lanes of a
    program read when they differ in that variable. Digits count (`first_step`): a reduction over
    (n, h*w) chunks of an NCHW tensor reads `802816*(r // 12544) + r % 12544`, contiguous in r."""
    vs = list(xs) + list(rs)
    return (any(first_step(index, v, vs) == 1 for v in xs), any(first_step(index, v, vs) == 1 for v in rs))


def along_x(reads) -> bool:
    """True when more of `reads`, (index, x variables, r variables) triples, walk memory with
    stride 1 along x than along r: a column (outer) reduction, whose programs take many outputs."""
    votes_x = votes_r = 0
    for index, xs, rs in reads:
        on_x, on_r = unit_steps(index, xs, rs)
        votes_x += on_x
        votes_r += on_r
    return votes_x > votes_r
