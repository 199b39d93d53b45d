"""The value-expression DAG of a loop body: data, not closures.

Every package walks, prints, hashes and interprets the same four node kinds:
Load, Constant, IndexValue, Op. Shared subexpressions are shared objects; the
printer names them (tmpN) so str() stays linear in the DAG size, and hashes are
cached so hashing a DAG never re-walks shared subtrees.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import sympy

from . import dtypes as dt
from .index import sympify


class Value:
    """Base of the expression nodes; subclasses are frozen dataclasses with a `dtype`."""

    __slots__ = ()
    dtype: dt.DType

    def _cached_hash(self, fields) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((type(self).__name__,) + fields)
            object.__setattr__(self, "_hash", h)
        return h

    def children(self) -> tuple[Value, ...]:
        return ()

    def __str__(self) -> str:
        return format_value(self)


@dataclass(frozen=True, eq=True)
class Load(Value):
    """Read `buffer` at flat storage position `index`.

    `indirect` binds symbols used in `index` to integer-valued expressions
    (gather/embedding): ((symbol, value, bound), ...); 0 <= value < bound is checked.
    `mask` (a bool Value, or None) guards the read: where it is false nothing is
    read (no bounds check either) and the load yields `other` (cat, constant_pad).
    """

    buffer: str
    index: sympy.Expr
    dtype: dt.DType
    indirect: tuple = field(default=())
    mask: Value | None = None
    other: object = 0

    def __post_init__(self):
        object.__setattr__(self, "index", sympify(self.index))
        object.__setattr__(self, "indirect", tuple(tuple(t) for t in self.indirect))
        if self.mask is not None and not self.mask.dtype.is_bool:
            raise TypeError(f"load mask must be bool, got {self.mask.dtype}")

    def __hash__(self):
        return self._cached_hash((self.buffer, self.index, self.dtype, self.indirect, self.mask, repr(self.other)))

    def __eq__(self, other):
        return (
            isinstance(other, Load)
            and self.buffer == other.buffer
            and self.dtype == other.dtype
            and self.index == other.index
            and self.indirect == other.indirect
            and self.mask == other.mask
            and repr(self.other) == repr(other.other)
        )

    def children(self):
        ind = tuple(v for _, v, _ in self.indirect)
        return ind + (self.mask,) if self.mask is not None else ind


@dataclass(frozen=True, eq=True)
class Constant(Value):
    """A scalar literal; floats may be inf/nan."""

    value: object
    dtype: dt.DType

    def __hash__(self):
        return self._cached_hash((repr(self.value), self.dtype))

    def __eq__(self, other):
        return (
            isinstance(other, Constant)
            and self.dtype == other.dtype
            and repr(self.value) == repr(other.value)
        )


@dataclass(frozen=True, eq=True)
class IndexValue(Value):
    """An index expression used as a value (arange, masks, iota)."""

    index: sympy.Expr
    dtype: dt.DType

    def __post_init__(self):
        object.__setattr__(self, "index", sympify(self.index))

    def __hash__(self):
        return self._cached_hash((self.index, self.dtype))


@dataclass(frozen=True, eq=True)
class Op(Value):
    """Apply op-table entry `name` to `args`; `dtype` is the result dtype."""

    name: str
    args: tuple
    dtype: dt.DType

    def __hash__(self):
        return self._cached_hash((self.name, self.args, self.dtype))

    def children(self):
        return self.args


def walk(root: Value) -> Iterator[Value]:
    """Every node of the DAG once, operands before users (post-order)."""
    seen: set[int] = set()
    stack: list[tuple[Value, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            yield node
            continue
        stack.append((node, True))
        for c in reversed(node.children()):
            if id(c) not in seen:
                stack.append((c, False))


def loads(root: Value) -> list[Load]:
    return [n for n in walk(root) if isinstance(n, Load)]


def map_indices(root: Value, fn, bounds=None) -> Value:
    """`root` with every Load / IndexValue index replaced by fn(index); masks, indirect
    values and the DAG's sharing are kept (renaming loop variables, splitting a loop).
    `bounds`: also maps the indirect loads' bounds (sizes: binding size symbols)."""
    memo: dict[int, Value] = {}
    for n in walk(root):
        new: Value
        if isinstance(n, Load):
            ind = tuple((s, memo[id(v)], b if bounds is None else bounds(b)) for s, v, b in n.indirect)
            mask = memo[id(n.mask)] if n.mask is not None else None
            new = Load(n.buffer, fn(n.index), n.dtype, ind, mask, n.other)
        elif isinstance(n, IndexValue):
            new = IndexValue(fn(n.index), n.dtype)
        elif isinstance(n, Op):
            new = Op(n.name, tuple(memo[id(a)] for a in n.args), n.dtype)
        elif isinstance(n, Constant):
            new = n
        else:
            raise TypeError(f"map_indices: unknown value node {type(n).__name__}")
        memo[id(n)] = new
    return memo[id(root)]


def _atom(v: Value, names: dict[int, str]) -> str:
    if id(v) in names:
        return names[id(v)]
    if isinstance(v, Constant):
        return f"{v.value!r}:{v.dtype}"
    raise AssertionError("unnamed non-constant")


def format_lines(root: Value, prefix: str = "tmp") -> tuple[list[str], str]:
    """SSA-style lines for the DAG, and the name of the root."""
    names: dict[int, str] = {}
    lines: list[str] = []
    for n in walk(root):
        if isinstance(n, Constant):
            continue
        name = f"{prefix}{len(lines)}"
        if isinstance(n, Load):
            ind = "".join(
                f", {s}={_atom(v, names)}<{b}" for s, v, b in n.indirect
            )
            if n.mask is not None:
                ind += f", mask={_atom(n.mask, names)}, other={n.other!r}"
            rhs = f"load({n.buffer}, {n.index}{ind}) : {n.dtype}"
        elif isinstance(n, IndexValue):
            rhs = f"index({n.index}) : {n.dtype}"
        else:
            assert isinstance(n, Op), n
            args = ", ".join(_atom(a, names) for a in n.args)
            rhs = f"{n.name}({args}) : {n.dtype}"
        names[id(n)] = name
        lines.append(f"{name} = {rhs}")
    return lines, _atom(root, names)


def format_value(root: Value) -> str:
    lines, name = format_lines(root)
    if not lines:
        return name
    return "; ".join(lines) + f"; -> {name}"
