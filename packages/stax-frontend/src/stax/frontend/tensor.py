"""Lowering-time tensors: a strided window into a buffer, or a lazy pointwise value.

A `BufferView` reads buffer storage through (sizes, strides, offset) — every view
op on it stays a view (no copy). A `Lazy` is a function from an index tuple to a
value expression; pointwise ops compose lazies, so a chain of ops becomes one
expression and nothing is written to memory until the cost model (materialize.py),
a reduction, an extern call or a graph output asks for a buffer (§6.3).

The `Builder` hash-conses expression nodes per graph: equal subexpressions are the
same object, so `walk`, printing and codegen see a real DAG.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy
from stax.ir import Constant, IndexValue, Layout, Load, Op, Value
from stax.ir import dtypes as dt
from stax.ir.index import strided_index, sympify
from stax.ir.ops import result_dtype
from stax.ir.sizevars import canonical_size


def as_size(s):
    """A size, stride or offset as lowering handles it: a Python int when static, else the expanded
    sympy expression over size symbols (stax.ir.sizevars.canonical_size: one spelling per value)."""
    if isinstance(s, int):
        return s
    if getattr(s, "is_Integer", False):
        return int(s)
    if not isinstance(s, sympy.Basic):  # a torch.SymInt here would carry torch's own sympy functions
        raise TypeError(f"size {s!r} ({type(s).__name__}) is no int or stax.ir size expression")
    return canonical_size(s)


class Unsupported(NotImplementedError):
    """A lowering cannot handle these arguments; the node falls back to ATen (views.py re-exports it)."""


class Builder:
    """Per-graph interning constructors for value nodes."""

    def __init__(self):
        self._table: dict[Value, Value] = {}

    def intern(self, v: Value) -> Value:
        return self._table.setdefault(v, v)

    def load(self, buffer: str, index, dtype: dt.DType, indirect: tuple = ()) -> Value:
        return self.intern(Load(buffer, sympify(index), dtype, indirect))

    def const(self, value, dtype: dt.DType) -> Value:
        if isinstance(value, sympy.Basic) and not value.is_number:  # a size (symbolic shapes): its value per call
            return self.cast(self.index_value(value, dt.int64), dtype)
        if dtype.is_bool:
            value = bool(value)
        elif dtype.is_integer:
            value = int(value)
        else:
            value = float(value)
        return self.intern(Constant(value, dtype))

    def index_value(self, index, dtype: dt.DType = dt.int64) -> Value:
        return self.intern(IndexValue(sympify(index), dtype))

    def op(self, name: str, *args: Value) -> Value:
        return self.intern(Op(name, tuple(args), result_dtype(name, [a.dtype for a in args])))

    def cast(self, v: Value, dtype: dt.DType) -> Value:
        if v.dtype == dtype:
            return v
        if isinstance(v, Constant):
            return self.const(v.value, dtype)
        return self.intern(Op("to_dtype", (v,), dtype))


class TensorValue:
    """Common interface: `sizes` (ints, or sympy expressions in size symbols: dynamic shapes),
    `dtype` (stax), `device`, `load(idx)`."""

    sizes: tuple
    dtype: dt.DType
    device: str

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def load(self, idx) -> Value:
        raise NotImplementedError


@dataclass(eq=False)
class BufferView(TensorValue):
    """Elements of buffer `buffer` at `layout.index(idx)` (layout may be any strided view)."""

    builder: Builder
    buffer: str
    layout: Layout
    # the buffer's own layout (as allocated); views keep it to know when they are the whole buffer
    base_layout: Layout | None = None

    @property
    def sizes(self) -> tuple:
        return tuple(as_size(s) for s in self.layout.sizes)

    @property
    def strides(self) -> tuple:
        return tuple(as_size(s) for s in self.layout.strides)

    @property
    def offset(self) -> int:
        return as_size(self.layout.offset)

    @property
    def dtype(self) -> dt.DType:
        return self.layout.dtype

    @property
    def device(self) -> str:
        return self.layout.device

    def is_whole_buffer(self) -> bool:
        """True when this view is exactly the buffer as allocated (no view applied)."""
        return self.base_layout is not None and self.layout == self.base_layout

    def load(self, idx) -> Value:
        return self.builder.load(self.buffer, strided_index(idx, self.layout.strides, self.layout.offset), self.dtype)

    def with_layout(self, sizes, strides, offset) -> BufferView:
        lay = Layout(self.device, self.dtype, tuple(sizes), tuple(strides), offset)
        return BufferView(self.builder, self.buffer, lay, self.base_layout)


@dataclass(eq=False)
class OpaqueView(BufferView):
    """A value only library calls may touch: RNG state (uint64, meta-device tensors) that an
    attention kernel returns for its backward. It lives in a zero-size placeholder buffer
    whose runtime value is a carrier (`aten_runtime.carry`) holding the real object; a
    computation or a view of it is unsupported (the op runs as an ATen call instead)."""

    def load(self, idx) -> Value:
        raise Unsupported(f"{self.buffer} is an opaque value (RNG state): only library calls read it")

    def with_layout(self, sizes, strides, offset) -> BufferView:
        return self.load(())


@dataclass(eq=False)
class Lazy(TensorValue):
    """A pointwise value not yet in memory: `fn(idx) -> Value`, memoized per index tuple."""

    sizes: tuple
    dtype: dt.DType
    device: str
    fn: Callable
    _memo: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.sizes = tuple(as_size(s) for s in self.sizes)

    def load(self, idx) -> Value:
        key = tuple(sympify(i) for i in idx)
        v = self._memo.get(key)
        if v is None:
            v = self.fn(key)
            if v.dtype != self.dtype:
                raise AssertionError(f"lazy produced {v.dtype}, declared {self.dtype}")
            self._memo[key] = v
        return v


def lazy(sizes, dtype: dt.DType, device: str, fn: Callable) -> Lazy:
    return Lazy(tuple(sizes), dtype, device, fn)


def zero_index(n: int) -> tuple:
    return tuple(sympy.Integer(0) for _ in range(n))
