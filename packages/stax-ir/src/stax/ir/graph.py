"""The Graph interface (frontend -> sched): inputs, buffers in program order, outputs.

Frozen dataclasses with a readable str() and a deterministic content hash (sha256
of the text form), so caches can key on them. Sizes and strides are sympy
expressions: integers, or expressions in the graph's size symbols (`Graph.size_vars`,
dynamic shapes).

Conventions: a Pointwise body's value uses loop variables i0..i{n-1} over `ranges`;
a Reduction's value uses i0.. over `ranges` and r0.. over `reduction_ranges`. A
ComputedBuffer writes element (i0, ...) at `layout.index(i0, ...)`. A Scatter's `init`
uses i0.. over `ranges`; its `value`, `index` and indirect values use r0.. over
`scatter_ranges`.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import sympy

from . import dtypes as dt
from .expr import Value, format_lines
from .index import as_int, contiguous_strides, pointwise_vars, strided_index, sympify
from .ops import SAME, reduction_def, reduction_result_dtype, scan_def, scan_result_dtype
from .sizevars import NO_SIZE_VARS, SizeVar, SizeVars


def _exprs(xs) -> tuple[sympy.Expr, ...]:
    return tuple(sympify(x) for x in xs)


def _fmt(xs) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


class _Hashed:
    def content_hash(self) -> str:
        """sha256 of the text form: deterministic across processes and machines."""
        return hashlib.sha256(str(self).encode()).hexdigest()


@dataclass(frozen=True)
class Layout(_Hashed):
    """Where a buffer's elements live: device, dtype, sizes, strides (elements), offset."""

    device: str
    dtype: dt.DType
    sizes: tuple
    strides: tuple
    offset: sympy.Expr = sympy.Integer(0)

    def __post_init__(self):
        object.__setattr__(self, "sizes", _exprs(self.sizes))
        object.__setattr__(self, "strides", _exprs(self.strides))
        object.__setattr__(self, "offset", sympify(self.offset))
        if len(self.sizes) != len(self.strides):
            raise ValueError(f"layout has {len(self.sizes)} sizes but {len(self.strides)} strides")

    @staticmethod
    def contiguous(sizes, dtype: dt.DType, device: str = "cpu") -> Layout:
        return Layout(device, dtype, tuple(sizes), contiguous_strides(sizes))

    def index(self, vars_=None) -> sympy.Expr:
        """Flat storage position of element `vars_` (default i0, i1, ...)."""
        vars_ = pointwise_vars(len(self.sizes)) if vars_ is None else vars_
        return strided_index(vars_, self.strides, self.offset)

    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= as_int(s)
        return n

    def storage_size(self) -> int:
        """Elements of storage the layout touches: offset + max reachable index + 1."""
        return self._storage_size

    @functools.cached_property
    def _storage_size(self) -> int:
        """Computed once per layout: the scheduler asks for it at every access of every buffer (a symbolic
        layout raises, and keeps raising: nothing is cached then)."""
        if any(as_int(s) == 0 for s in self.sizes):
            return 0
        return as_int(self.offset) + sum((as_int(s) - 1) * as_int(st) for s, st in zip(self.sizes, self.strides)) + 1

    def nbytes(self) -> int:
        return self.storage_size() * self.dtype.itemsize

    def numel_expr(self) -> sympy.Expr:
        """Elements, as an expression in the size symbols (`numel()` is the static-only int)."""
        return sympy.Mul(*self.sizes)

    def storage_size_expr(self) -> sympy.Expr:
        """`storage_size()` as an expression in the size symbols, for layouts whose sizes are >= 1
        (size symbols are): offset + sum((size - 1) * stride) + 1."""
        if all(s.is_Integer for s in (*self.sizes, *self.strides, self.offset)):
            return sympy.Integer(self.storage_size())
        return self.offset + sympy.Add(*((s - 1) * st for s, st in zip(self.sizes, self.strides))) + 1

    def is_contiguous(self) -> bool:
        return self.strides == contiguous_strides(self.sizes) and self.offset == 0

    def __str__(self) -> str:
        off = f", offset={self.offset}" if self.offset != 0 else ""
        return f"{self.device} {self.dtype}{_fmt(self.sizes)} strides={_fmt(self.strides)}{off}"


@dataclass(frozen=True)
class InputBuffer(_Hashed):
    """A graph input: its name and the layout the compiled code assumes (checked at call)."""

    name: str
    layout: Layout

    def __str__(self) -> str:
        return f"{self.name}: {self.layout}"


@dataclass(frozen=True)
class Pointwise(_Hashed):
    """One value per point of `ranges`."""

    ranges: tuple
    value: Value

    def __post_init__(self):
        object.__setattr__(self, "ranges", _exprs(self.ranges))

    @property
    def reduction_ranges(self) -> tuple:
        return ()

    def __str__(self) -> str:
        lines, root = format_lines(self.value)
        body = "".join(f"\n    {ln}" for ln in lines)
        return f"Pointwise(ranges={_fmt(self.ranges)}){body}\n    -> {root}"


@dataclass(frozen=True)
class Reduction(_Hashed):
    """Combine `value` over `reduction_ranges` with `reduction_type`, once per point of `ranges`."""

    ranges: tuple
    reduction_ranges: tuple
    reduction_type: str
    value: Value

    def __post_init__(self):
        object.__setattr__(self, "ranges", _exprs(self.ranges))
        object.__setattr__(self, "reduction_ranges", _exprs(self.reduction_ranges))
        reduction_def(self.reduction_type)  # validates the name

    @property
    def dtype(self) -> dt.DType:
        return reduction_result_dtype(self.reduction_type, self.value.dtype)

    def __str__(self) -> str:
        lines, root = format_lines(self.value)
        body = "".join(f"\n    {ln}" for ln in lines)
        return (
            f"Reduction(ranges={_fmt(self.ranges)}, reduction_ranges={_fmt(self.reduction_ranges)}, "
            f"{self.reduction_type}){body}\n    -> {root}"
        )


@dataclass(frozen=True)
class Scan(_Hashed):
    """Inclusive prefix combine of `value` along loop dimension `axis` (cumsum, cummax, ...).

    `value` uses i0.. over `ranges` like a Pointwise; element (i0, ...) is the
    `scan_type` combine of value at every point that agrees with it except that
    i{axis} runs from 0 to its own i{axis}. The scan axis carries a dependence
    (§7.7): it is not a parallel loop; the other dimensions are.

    The running combine carries `value.dtype` (the accumulator, `acc_dtype`). `out_dtype`,
    when given, is the stored type: each prefix is converted to it as `to_dtype` would,
    the accumulator is not (a float32 cumsum accumulating in float64 stores float32 in the
    same kernel, with no float64 buffer). None (or the accumulator's own type): stored as
    accumulated. Not for the index scans (their result is int64).
    """

    ranges: tuple
    axis: int
    scan_type: str
    value: Value
    out_dtype: dt.DType | None = None

    def __post_init__(self):
        object.__setattr__(self, "ranges", _exprs(self.ranges))
        sdef = scan_def(self.scan_type)  # validates the name
        if not 0 <= self.axis < len(self.ranges):
            raise ValueError(f"scan axis {self.axis} out of range for {len(self.ranges)} dimensions")
        if self.out_dtype == self.value.dtype:
            object.__setattr__(self, "out_dtype", None)  # one spelling per body (str, hash)
        if self.out_dtype is not None and sdef.result != SAME:
            raise ValueError(f"scan {self.scan_type!r} stores {sdef.result}: it takes no out_dtype")

    @property
    def acc_dtype(self) -> dt.DType:
        """The type the running combine carries (= value.dtype)."""
        return self.value.dtype

    @property
    def dtype(self) -> dt.DType:
        if self.out_dtype is not None:
            return self.out_dtype
        return scan_result_dtype(self.scan_type, self.value.dtype)

    def __str__(self) -> str:
        lines, root = format_lines(self.value)
        body = "".join(f"\n    {ln}" for ln in lines)
        out = f", out_dtype={self.out_dtype}" if self.out_dtype is not None else ""
        return f"Scan(ranges={_fmt(self.ranges)}, axis={self.axis}, {self.scan_type}{out}){body}\n    -> {root}"


SCATTER_MODES = ("add", "set")


@dataclass(frozen=True)
class Scatter(_Hashed):
    """out = `init` over `ranges`, then out[index] += value (mode 'add') or = value ('set')
    at every point of `scatter_ranges`, visited in row-major order (the last 'set' wins).

    `init` uses i0.. over `ranges`; `value` uses r0.. over `scatter_ranges`. `index` has one
    coordinate expression per output dimension, in r0.. and the symbols that `indirect`
    binds to integer values, ((symbol, value, bound), ...), exactly like `Load.indirect`
    (0 <= value < bound is checked; each coordinate must also fall inside `ranges`).
    Linear in the scattered points (index_put, scatter_add, embedding backward), where a
    dense form would reduce over the whole index space for every output element.
    """

    ranges: tuple
    init: Value
    scatter_ranges: tuple
    index: tuple
    indirect: tuple
    value: Value
    mode: str

    def __post_init__(self):
        object.__setattr__(self, "ranges", _exprs(self.ranges))
        object.__setattr__(self, "scatter_ranges", _exprs(self.scatter_ranges))
        object.__setattr__(self, "index", _exprs(self.index))
        object.__setattr__(self, "indirect", tuple((sympify(s), v, sympify(b)) for s, v, b in self.indirect))
        if self.mode not in SCATTER_MODES:
            raise ValueError(f"scatter mode must be one of {SCATTER_MODES}, got {self.mode!r}")
        if len(self.index) != len(self.ranges):
            raise ValueError(f"scatter index has {len(self.index)} coordinates for {len(self.ranges)} dimensions")
        if self.value.dtype != self.init.dtype:
            raise TypeError(f"scatter value is {self.value.dtype} but init is {self.init.dtype}")
        for s, v, _ in self.indirect:
            if not v.dtype.is_integer:
                raise TypeError(f"scatter indirect {s} is bound to a {v.dtype} value (integer expected)")

    @property
    def dtype(self) -> dt.DType:
        return self.init.dtype

    def roots(self) -> tuple[Value, ...]:
        """Every value DAG of the body: init, value, and the indirect index values."""
        return (self.init, self.value) + tuple(v for _, v, _ in self.indirect)

    def __str__(self) -> str:
        def section(tag, root, prefix):
            lines, name = format_lines(root, prefix)
            return "".join(f"\n    {ln}" for ln in lines) + f"\n    {tag} = {name}"

        ind = "".join(section(f"{s} (< {b})", v, f"{s}_") for s, v, b in self.indirect)
        return (
            f"Scatter(ranges={_fmt(self.ranges)}, scatter_ranges={_fmt(self.scatter_ranges)}, {self.mode})"
            f"{section('init', self.init, 'init')}{ind}{section('value', self.value, 'tmp')}"
            f"\n    -> out[{', '.join(str(e) for e in self.index)}]"
        )


def body_roots(body) -> tuple[Value, ...]:
    """The value DAGs a body evaluates (one for Pointwise/Reduction/Scan; several for Scatter)."""
    return body.roots() if isinstance(body, Scatter) else (body.value,)


@dataclass(frozen=True)
class ComputedBuffer(_Hashed):
    """A buffer Stax computes itself: `body` evaluated over its ranges, stored through `layout`."""

    name: str
    layout: Layout
    body: Pointwise | Reduction | Scan | Scatter
    origins: tuple = field(default=(), compare=False)  # ATen nodes it came from (provenance)

    def __post_init__(self):
        if tuple(self.body.ranges) != tuple(self.layout.sizes):
            raise ValueError(
                f"{self.name}: body ranges {_fmt(self.body.ranges)} do not match layout sizes {_fmt(self.layout.sizes)}"
            )
        body_dtype = self.body.dtype if isinstance(self.body, (Reduction, Scan, Scatter)) else self.body.value.dtype
        if body_dtype != self.layout.dtype:
            raise TypeError(f"{self.name}: body computes {body_dtype} but layout stores {self.layout.dtype}")

    def write_index(self) -> sympy.Expr:
        return self.layout.index(pointwise_vars(len(self.layout.sizes)))

    def __str__(self) -> str:
        return f"{self.name}: {self.layout} = {self.body}"


@dataclass(frozen=True)
class ExternKernel(_Hashed):
    """A call into a library op the scheduler treats as a whole (StarDep) dependence.

    `kernel` names the callable (e.g. 'aten.mm'); `inputs` are buffer names;
    `constants` are the non-tensor arguments as (name, repr-able value) pairs.
    `fallback` marks ops Stax does not lower (counted and logged), as opposed to
    library kernels it calls on purpose (mm, conv).
    """

    name: str
    layout: Layout
    kernel: str
    inputs: tuple
    constants: tuple = ()
    fallback: bool = False
    origins: tuple = field(default=(), compare=False)

    def __str__(self) -> str:
        kind = "FallbackKernel" if self.fallback else "ExternKernel"
        consts = "".join(f", {k}={v!r}" for k, v in self.constants)
        return f"{self.name}: {self.layout} = {kind} {self.kernel}({', '.join(self.inputs)}{consts})"


Node = ComputedBuffer | ExternKernel


@dataclass(frozen=True)
class Graph(_Hashed):
    """A whole program: inputs, nodes in program order, and output buffer names."""

    inputs: tuple
    nodes: tuple
    outputs: tuple
    size_vars: SizeVars = NO_SIZE_VARS  # the size symbols' table (lo, hi, hint); empty for static shapes

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if self.size_vars:  # (a static graph pays nothing; a stray symbol there fails at its first as_int)
            self._check_size_symbols()
        names = [i.name for i in self.inputs] + [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate buffer names in graph: {names}")
        known = set(names)
        for o in self.outputs:
            if o not in known:
                raise ValueError(f"graph output {o!r} is not a buffer of the graph")

    def _check_size_symbols(self) -> None:
        """Every size symbol a layout uses has a row in `size_vars` (its range is what proofs use)."""
        known = self.size_vars.symbols
        for b in (*self.inputs, *self.nodes):
            lay = b.layout
            for e in (*lay.sizes, *lay.strides, lay.offset):
                if e.is_Integer:
                    continue
                for s in e.free_symbols:
                    if not isinstance(s, SizeVar):
                        raise ValueError(f"{b.name}: layout uses {s}, which is not a size symbol (stax.ir.size_var)")
                    if s not in known:
                        raise ValueError(f"{b.name}: size symbol {s} has no row in the graph's size_vars")

    @functools.cached_property
    def _by_name(self) -> dict:
        """name -> input or node, built once: code generators look buffers up per access (ViT-tiny's
        C++ generation made 24k scans of the node list, 0.24 s)."""
        return {b.name: b for b in (*self.inputs, *self.nodes)}

    def buffer_layout(self, name: str) -> Layout:
        b = self._by_name.get(name)
        if b is None:
            raise KeyError(name)
        return b.layout

    def node(self, name: str) -> Node:
        n = self._by_name.get(name)
        if n is None or isinstance(n, InputBuffer):
            raise KeyError(name)
        return n

    def __str__(self) -> str:
        out = ["graph("]
        out += [f"  size {r}" for r in self.size_vars.rows]
        out += [f"  input {i}" for i in self.inputs]
        for n in self.nodes:
            out += ["  " + ln for ln in str(n).splitlines()]
        out.append(f"  return ({', '.join(self.outputs)})")
        out.append(")")
        return "\n".join(out)
