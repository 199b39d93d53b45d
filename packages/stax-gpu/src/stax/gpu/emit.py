"""Value DAG -> Triton statements for one kernel: CSE, masks, casts, checks, forwarding.

`Emitter.value(v, node)` walks a body's expression DAG and returns the Triton name
(or literal) holding it. Statements are common-subexpression-eliminated on their
text (Listing 7.2: two reductions share one `libdevice.exp`). Reads of a buffer
produced earlier in the same kernel are forwarded from registers when the read
index is the write index at the same point (Prop 7.2), or the producer's value is
recomputed in place (an 'xr' producer whose loop has ended); a read anywhere else
would race across program instances and is refused.

Scopes: the kernel body, and the body of an r-loop (looped reductions). Values that
do not depend on r are hoisted into the loop's preheader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from stax.ir import Constant, IndexValue, Load, Op, Reduction
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing, pointwise_vars, reduction_vars
from stax.ir.index_printer import parenthesize
from stax.ir.normalize import normalize_index
from stax.ir.value_ranges import indirect_checks_needed

from .config import GpuConfig
from .indexing import axes_of, texpr
from .plan import TILED_FORM, XR, KernelPlan, NodePlan
from .triton_ops import cast, compute_triton_dtype, literal, store_cast, triton_dtype, triton_op

# Python literals are weakly typed in Triton (int8 + 1 stays int8), except against bools.
_LITERAL_SAFE = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8"}


@dataclass(frozen=True)
class V:
    """An emitted value: Triton source (a name or a literal), its stax dtype, its axes."""

    src: str
    dtype: dt.DType
    axes: frozenset = frozenset()
    literal: bool = False


@dataclass
class Scope:
    kind: str  # 'top' or 'loop'
    parent: Scope | None = None
    lines: list = field(default_factory=list)
    pre: list = field(default_factory=list)  # loop preheader (runs once before the loop)
    cse: dict = field(default_factory=dict)
    produced: dict = field(default_factory=dict)  # buffer -> V available in registers

    def lookup(self, table: str, key):
        s = self
        while s is not None:
            hit = getattr(s, table).get(key)
            if hit is not None:
                return hit
            s = s.parent
        return None


class ErrorTable:
    """Module-wide error codes: the kernels set the flag, the wrapper raises the message."""

    def __init__(self):
        self.entries: list[tuple[str, str]] = []
        # messages of checks whose faulting lanes are not poisoned with NaN (integer results):
        # the module must then read its flag in the same call (ErrorFlag sync)
        self.unpoisoned: list[str] = []

    def code(self, exc: str, message: str) -> int:
        if (exc, message) not in self.entries:
            self.entries.append((exc, message))
        return self.entries.index((exc, message)) + 1


class Emitter:
    def __init__(self, plan: KernelPlan, config: GpuConfig, errors: ErrorTable, masks: dict, one_shape: str):
        self.plan = plan
        self.config = config
        self.errors = errors
        self.masks = masks  # axis -> mask name (None: no mask needed on that axis)
        self.one_shape = one_shape  # "[1]" or "[1, 1]": shape of a materialized scalar
        self.scope = Scope("top")
        self.top = self.scope
        self.counter = 0
        self.args: dict[str, str] = {}  # buffer -> pointer argument
        self.uses_err = False
        self.axis_of = {v.name: {v.axis} for v in plan.axis_vars}
        self.evict_last: set = set()  # buffers read again later in the kernel (looped reductions)
        self.evict_first_ok = True  # read-once loads may be marked evict_first (see write_reduction)
        for b in plan.loads:
            self.args[b] = f"in_ptr{len(self.args)}"
        for k, b in enumerate(plan.stores):
            self.args[b] = f"out_ptr{k}"

    # ---- statements and scopes
    def fresh(self, prefix: str = "tmp") -> str:
        name = f"{prefix}{self.counter}"
        self.counter += 1
        return name

    def line(self, text: str) -> None:
        self.scope.lines.append(text)

    def new(self, expr: str, dtype: dt.DType, axes: frozenset, hoist: bool = True) -> V:
        """Assign `expr` to a fresh name unless an equal statement is already visible."""
        target = self.scope
        if hoist and target.kind == "loop" and "r" not in axes:
            target = self.scope.parent
            where = self.scope.pre
        else:
            where = target.lines
        key = (expr, dtype)
        hit = target.lookup("cse", key)
        if hit is not None:
            return hit
        name = self.fresh()
        where.append(f"{name} = {expr}")
        v = V(name, dtype, axes)
        target.cse[key] = v
        return v

    def open_loop(self) -> Scope:
        self.scope = Scope("loop", parent=self.top)
        return self.scope

    def close_loop(self) -> Scope:
        loop, self.scope = self.scope, self.top
        return loop

    def mask(self, axes) -> str | None:
        parts = [self.masks[a] for a in ("y", "x", "r") if a in axes and self.masks.get(a)]
        return " & ".join(parts) if parts else None

    def tensor(self, v: V) -> V:
        """A literal as a typed one-element tensor (for calls that need tensors)."""
        if not v.literal:
            return v
        return self.new(f"tl.full({self.one_shape}, {v.src}, {compute_triton_dtype(v.dtype)})", v.dtype, frozenset())

    # ---- the value DAG
    def value(self, root, p: NodePlan) -> V:
        memo: dict[int, V] = {}
        stack = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            if not ready:
                stack.append((n, True))
                kids = n.args if isinstance(n, Op) else n.children()
                if self.config.operand_order:  # the stack pops the last pushed: push right to left
                    kids = list(reversed(kids))
                stack.extend((c, False) for c in kids if id(c) not in memo)
                continue
            memo[id(n)] = self._node(n, p, memo)
        return memo[id(root)]

    def _node(self, n, p: NodePlan, memo) -> V:
        if isinstance(n, Constant):
            return V(literal(n.value, n.dtype), n.dtype, frozenset(), literal=True)
        if isinstance(n, IndexValue):
            idx = self.plan.simplify(n.index.xreplace(p.subs))
            axes = axes_of(idx, self.axis_of)
            if not axes and idx.is_Integer:
                return V(literal(int(idx), n.dtype), n.dtype, frozenset(), literal=True)
            if not axes:  # a size used as a number (a mean's count): the kernel's size arguments
                return self.new(f"tl.full({self.one_shape}, {texpr(idx)}, {compute_triton_dtype(n.dtype)})",
                                n.dtype, frozenset())
            return self.new(f"({texpr(idx)}).to({compute_triton_dtype(n.dtype)})", n.dtype, axes)
        if isinstance(n, Load):
            return self.load(n, p, memo)
        if isinstance(n, Op):
            return self.op(n, [memo[id(a)] for a in n.args])
        raise TypeError(f"stax-gpu: unknown value node {type(n).__name__}")

    def op(self, n: Op, args: list[V]) -> V:
        axes = frozenset().union(*(a.axes for a in args))
        if n.name == "to_dtype":
            (a,) = args
            if a.literal:
                a = self.tensor(a)
            return self.new(cast(a.src, a.dtype, n.dtype, self.config.math), n.dtype, axes)
        row = triton_op(n.name)
        operand = n.args[1].dtype if n.name == "where" else n.args[0].dtype
        divisor_ok = len(args) > 1 and args[1].literal and args[1].src.strip("()").lstrip("-").isdigit() and int(
            args[1].src.strip("()")) != 0
        template = row.template(operand, self.config.math)
        safe = dt.compute_dtype(operand).name in _LITERAL_SAFE
        # the operands whose type is the result's: a where's condition types nothing (tl.where(c, 0, -1)
        # is int32 whatever c is), so one of its values must be a typed tensor, as some operand of the others
        typing = list(range(1, len(args)) if n.name == "where" else range(len(args)))
        tensors = [k for k in typing if not args[k].literal] or typing[:1]
        consts = all(a.literal for a in args)
        args = [
            a if (a.literal and k in row.literals and (safe or consts) and any(t != k for t in tensors))
            else self.tensor(a)
            for k, a in enumerate(args)
        ]
        if row.int_divisor and operand.is_integer and self.config.bounds_check == "flag" and not divisor_ok:
            args[1] = self.nonzero_divisor(args[1], axes)
        if n.name == "pow" and operand.is_integer and self.config.bounds_check == "flag":
            self.flag(f"{self.tensor(args[1]).src} < 0", axes, "ValueError",
                      "Integers to negative integer powers are not allowed.")
        return self.new(template.format(*(a.src for a in args), bits=operand.itemsize * 8), n.dtype, axes)

    # ---- checks
    def flag(self, bad: str, axes, exc: str, message: str, poisoned: bool = False) -> None:
        code = self.errors.code(exc, message)
        if not poisoned and message not in self.errors.unpoisoned:
            self.errors.unpoisoned.append(message)
        m = self.mask(axes)
        cond = f"({bad}) & {m}" if m else f"{bad}"
        self.uses_err = True
        self.new(f"triton_helpers.flag_error(err_ptr, {cond}, {code})", dt.int32, frozenset(axes))

    def nonzero_divisor(self, b: V, axes) -> V:
        b = self.tensor(b)
        self.flag(f"{b.src} == 0", axes, "ZeroDivisionError", "integer division by zero (ZeroDivisionError)")
        return self.new(f"tl.where({b.src} == 0, 1, {b.src})", b.dtype, b.axes)

    # ---- memory
    def load(self, ld: Load, p: NodePlan, memo) -> V:
        q = self.plan.producer(ld.buffer)
        if q is not None:
            return self.forward(ld, p, q)
        idx = self.plan.simplify(ld.index.xreplace(p.subs))
        value_mask = memo[id(ld.mask)] if ld.mask is not None else None
        needed = indirect_checks_needed(ld, {**self.plan.size_ranges, **_node_ranges(p.node)}) if ld.indirect else ()
        in_range = []  # checked indices: an out-of-range one reads NaN (the flag may raise a call later)
        for (sym, v, bound), need in zip(ld.indirect, needed):
            iv = self.tensor(memo[id(v)])
            if need and self.config.bounds_check == "flag":
                bad = f"({iv.src} < 0) | ({iv.src} >= {_bound(bound)})"
                if value_mask is not None:
                    bad = f"({bad}) & {self.tensor(value_mask).src}"
                msg = f"indirect index out of bounds reading {ld.buffer}: not in [0, {bound})"
                self.flag(bad, iv.axes, "IndexError", msg, poisoned=ld.dtype.is_floating)
                ok = f"({iv.src} >= 0) & ({iv.src} < {_bound(bound)})"
                in_range.append(ok)
                iv = self.new(f"tl.where({ok}, {iv.src}, 0)", iv.dtype, iv.axes)
            self.axis_of[iv.src] = set(iv.axes)
            idx = idx.xreplace({sym: sympy.Symbol(iv.src, integer=True, nonnegative=True)})
        axes = frozenset(axes_of(idx, self.axis_of))
        mask = self.mask(axes)
        if value_mask is not None:
            axes = axes | value_mask.axes
            vm = self.tensor(value_mask).src
            mask = f"{mask} & {vm}" if mask else vm
        ptr = f"{self.args[ld.buffer]} + {parenthesize(texpr(idx))}"
        if not axes_of(idx, self.axis_of):
            ptr = f"{self.args[ld.buffer]} + ({texpr(idx)} + tl.zeros({self.one_shape}, tl.int32))"
        parts = [ptr]
        if mask:
            parts.append(mask)
        if self.plan.form == TILED_FORM and self.config.tile_evict_last:
            parts.append("eviction_policy='evict_last'")  # (Inductor marks a transpose's loads so)
        elif self.plan.form == "reduction" and self.config.eviction_hints:
            again, broadcast = ld.buffer in self.evict_last, "x" not in axes
            if again or (broadcast and self.config.evict_last_broadcast):
                parts.append("eviction_policy='evict_last'")
            elif not broadcast and self.config.evict_first and self.evict_first_ok:
                parts.append("eviction_policy='evict_first'")
        if mask:
            other = literal(ld.other, ld.dtype) if ld.mask is not None else literal(0, ld.dtype)
            parts.append(f"other={other}")
        expr = f"tl.load({', '.join(parts)})"
        if dt.compute_dtype(ld.dtype) != ld.dtype:
            expr += f".to({compute_triton_dtype(ld.dtype)})"
        if in_range and ld.dtype.is_floating:
            keep = " & ".join(f"({c})" for c in in_range)
            if value_mask is not None:  # masked-off lanes keep `other`, whatever their index
                keep = f"({keep}) | ({self.tensor(value_mask).src} == 0)"
            expr = f"tl.where({keep}, {expr}, float('nan'))"
        return self.new(expr, ld.dtype, axes)

    def forward(self, ld: Load, p: NodePlan, q: NodePlan) -> V:
        """The value of buffer q.node at the point p reads, from registers or recomputed."""
        read = self.plan.simplify(ld.index.xreplace(p.subs))
        write = self.plan.simplify(q.node.write_index().xreplace(q.subs))
        if ld.indirect or ld.mask is not None or not self.same_point(read, write):
            raise NotImplementedError(
                f"stax-gpu: kernel {self.plan.name} reads {ld.buffer} (produced in the same kernel) at {read}, "
                f"not where it was written ({write}); the schedule fused an illegal pair (Prop 7.2)"
            )
        v = self.scope.lookup("produced", ld.buffer)
        if v is None:
            if q.role != XR:
                raise NotImplementedError(
                    f"stax-gpu: kernel {self.plan.name} reads {ld.buffer} where its value is not in registers "
                    f"(a reduction's own loop, or a scan's value after its loop ended)"
                )
            v = self.rounded(self.value(q.node.body.value, q), q.node.layout.dtype)
        return v

    def rounded(self, v: V, storage: dt.DType) -> V:
        """What a consumer reading buffer `storage` sees: half types round on the way, and so
        does a value wider than its buffer (a scan accumulating in float64, Scan.out_dtype)."""
        if v.literal or (dt.compute_dtype(storage) == storage and dt.compute_dtype(v.dtype) == storage):
            return v
        return self.new(cast(v.src, v.dtype, storage, self.config.math), storage, v.axes)

    def same_point(self, read, write) -> bool:
        """Do two indices over this kernel's axis digits name the same element at every point?"""
        if sympy.expand(read - write) == 0:
            return True
        flat = {}
        for av in self.plan.axis_vars:
            base = sympy.Symbol(av.base, integer=True, nonnegative=True)
            flat[av.symbol] = (
                FloorDiv(base, av.divisor) if av.modulus is None else ModularIndexing(base, av.divisor, av.modulus)
            )
        order = [(sympy.Symbol(b, integer=True, nonnegative=True), n) for b, n in self._bases()]
        try:
            return normalize_index(read.xreplace(flat), order) == normalize_index(write.xreplace(flat), order)
        except (NotImplementedError, ValueError, TypeError):  # an unprovable match is a mismatch
            return False

    def _extent(self, axis: str) -> int:
        return {"x": self.plan.xnumel, "y": self.plan.ynumel, "r": self.plan.rnumel}[axis]

    def shape(self, axes) -> str:
        """Block shape of a value varying along `axes` (1 along the others)."""
        if self.plan.form == "reduction":
            dims = [("x", "XBLOCK"), ("r", "R0_BLOCK")]
        elif self.plan.form == "pointwise2d":
            dims = [("y", "YBLOCK"), ("x", "XBLOCK")]
        else:
            dims = [("x", "XBLOCK")]
        return "[" + ", ".join(b if a in axes else "1" for a, b in dims) + "]"

    def _bases(self):
        out = []
        if self.plan.form == "pointwise2d":
            out.append(("yindex", self.plan.ynumel))
        out.append(("xindex", self.plan.xnumel))
        if self.plan.form == "reduction":
            out.append(("r0_index", self.plan.rnumel))
        return out

    def store(self, p: NodePlan, v: V) -> None:
        idx = self.plan.simplify(p.node.write_index().xreplace(p.subs))
        axes = axes_of(idx, self.axis_of)
        ptr = f"{self.args[p.node.name]} + {parenthesize(texpr(idx))}"
        if not v.axes <= axes or not axes:
            # e.g. a whole-tensor sum: one output, yet the value is a [XBLOCK, 1] block
            missing = v.axes - axes
            if any(self._extent(a) != 1 for a in missing):
                raise AssertionError(f"stax-gpu: {p.node.name}: value varies along {set(missing)} "
                                     "but its store does not")
            axes = axes | v.axes
            ptr = f"{self.args[p.node.name]} + ({texpr(idx)} + tl.zeros({self.shape(axes)}, tl.int32))"
        v = self.tensor(v)
        val = store_cast(v.src, v.dtype, p.node.layout.dtype, self.config.math)
        m = self.mask(axes)
        self.line(f"tl.store({ptr}, {val}{', ' + m if m else ''})")


def _bound(bound) -> str:
    """An indirect index's bound as a Triton operand (a size expression with symbolic shapes)."""
    b = sympy.sympify(bound)
    return str(int(b)) if b.is_Integer else parenthesize(texpr(b))


def _node_ranges(node) -> dict:
    """Loop variable sizes of a node (for value-range proofs of its indirect indices, beside the size
    symbols' ranges: a symbolic extent is bounded by them)."""
    body = node.body
    out = {v: s for v, s in zip(pointwise_vars(len(body.ranges)), body.ranges)}
    if isinstance(body, Reduction):
        out.update(zip(reduction_vars(len(body.reduction_ranges)), body.reduction_ranges))
    return out


__all__ = ["Emitter", "ErrorTable", "Scope", "V", "triton_dtype"]
