"""Views as index maps, the one source of their math; cat and constant_pad as `where` selects.

Each `*_map` function takes a view's input sizes and (normalised) arguments and returns
(output sizes, index map): the map sends an output index tuple (any expressions) to the
input index tuple it reads. `View` composes them over flat storage and simplifies, so a
chain of views costs nothing at run time; stax.frontend applies the same maps to its
lowering-time tensors. A reshape that strides cannot express becomes FloorDiv/ModularIndexing.

cat and constant_pad cannot be index maps (some outputs read another source or a
constant): they build `where` chains whose every load index is clamped into its source,
because vectorized code evaluates the branch it does not select too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from . import build
from . import dtypes as dt
from .affine import affine_parts
from .expr import Load, Value
from .graph import Layout
from .index import FloorDiv, ModularIndexing, as_int, contiguous_strides, pointwise_vars, strided_index, sympify, var
from .simplify import simplify_index

Loader = Callable[[tuple], Value]
IndexMap = Callable[[tuple], tuple]


def view_vars(n: int) -> tuple[sympy.Symbol, ...]:
    """The variables a View's index is written in: v0, v1, ..."""
    return tuple(var("v", k) for k in range(n))


# ---------------------------------------------------------------- index maps (dims already normalised)


def permute_map(sizes: Sequence, dims: Sequence[int]) -> tuple[tuple, IndexMap]:
    """Output dim j is input dim dims[j]."""
    n = len(sizes)
    if sorted(dims) != list(range(n)):
        raise ValueError(f"permute needs a permutation of {n} dims, got {list(dims)}")
    inv = [0] * n
    for j, d in enumerate(dims):
        inv[d] = j
    return tuple(sizes[d] for d in dims), lambda idx: tuple(idx[inv[k]] for k in range(n))


def expand_map(sizes: Sequence, target: Sequence) -> tuple[tuple, IndexMap]:
    """Broadcast size-1 dims (and new leading dims) to `target`; -1 keeps a size."""
    lead = len(target) - len(sizes)
    if lead < 0:
        raise ValueError(f"cannot expand {len(sizes)} dims to {len(target)}")
    out = list(target[:lead])
    for k, s in enumerate(sizes):
        want = target[lead + k]
        if want == -1:
            want = s
        elif s != 1 and want != s:
            raise ValueError(f"cannot expand size {s} to {want} in dimension {k}")
        out.append(want)
    zero = {k for k, s in enumerate(sizes) if s == 1 and out[lead + k] != 1}
    return tuple(out), lambda idx: tuple(sympy.Integer(0) if k in zero else idx[lead + k] for k in range(len(sizes)))


def squeeze_map(sizes: Sequence, dims) -> tuple[tuple, IndexMap]:
    """Drop the size-1 dims `dims`."""
    keep = [k for k in range(len(sizes)) if k not in dims]

    def m(idx):
        out = [sympy.Integer(0)] * len(sizes)
        for j, k in enumerate(keep):
            out[k] = idx[j]
        return tuple(out)

    return tuple(sizes[k] for k in keep), m


def unsqueeze_map(sizes: Sequence, dim: int) -> tuple[tuple, IndexMap]:
    return tuple(sizes[:dim]) + (1,) + tuple(sizes[dim:]), lambda idx: tuple(idx[:dim]) + tuple(idx[dim + 1:])


def provably_nonnegative_(e, ranges) -> bool:
    from .sizevars import provably_nonnegative

    return provably_nonnegative(e, ranges)


def _provably_equal(a, b) -> bool:
    from .sizevars import provably_equal

    return provably_equal(a, b)


def _is_static(*xs) -> bool:
    return all(x is None or sympify(x).is_Integer for x in xs)


# a bound at least this large is "to the end" (torch's sys.maxsize end): no size reaches it
_TO_END = 2**62


def _symbolic_bound(e, n, ranges) -> Any:
    """A slice bound within [0, n] for a symbolic size n (or a symbolic bound): a negative static bound
    counts from the end; the clamping Python applies must be provably a no-op, else NotImplementedError."""
    from .sizevars import provably_nonnegative

    e = sympify(e)
    if e.is_Integer and int(e) >= _TO_END:
        return sympify(n)
    if e.is_Integer and int(e) < 0:
        e = sympify(n) + e
    if not (provably_nonnegative(e, ranges) and provably_nonnegative(sympify(n) - e, ranges)):
        raise NotImplementedError(f"slice bound {e} is not provably within [0, {n}]")
    return e


def slice_map(sizes: Sequence, dim: int, start=None, end=None, step: int = 1, ranges=None) -> tuple[tuple, IndexMap]:
    """x[..., start:end:step, ...] with Python's clamping of out-of-range bounds. Symbolic sizes or
    bounds: the bounds must provably need no clamping under `ranges` (size symbols' value ranges)."""
    if step <= 0:
        raise ValueError("slice step must be positive")
    if not _is_static(sizes[dim], start, end):
        n = sizes[dim]
        start = _symbolic_bound(0 if start is None else start, n, ranges)
        end = _symbolic_bound(n if end is None else end, n, ranges)
        if not provably_nonnegative_(end - start, ranges):
            raise NotImplementedError(f"slice [{start}:{end}] may be empty or reversed")
        out = list(sizes)
        out[dim] = sympy.expand(end - start) if step == 1 else FloorDiv(end - start + step - 1, step)
        return tuple(out), lambda idx: tuple(start + step * i if k == dim else i for k, i in enumerate(idx))
    start, end, _ = slice(start, end, step).indices(as_int(sizes[dim]))
    out = list(sizes)
    out[dim] = max(0, -(-(end - start) // step))
    return tuple(out), lambda idx: tuple(start + step * i if k == dim else i for k, i in enumerate(idx))


def select_map(sizes: Sequence, dim: int, index: int, ranges=None) -> tuple[tuple, IndexMap]:
    if not _is_static(sizes[dim]):  # a symbolic size: the (static) index must provably be in range
        n = sympify(sizes[dim])
        e = n + index if index < 0 else sympify(index)
        if not (provably_nonnegative_(e, ranges) and provably_nonnegative_(n - 1 - e, ranges)):
            raise NotImplementedError(f"select index {index} is not provably in range for size {n}")
        out = tuple(sizes[:dim]) + tuple(sizes[dim + 1:])
        return out, lambda idx: tuple(idx[:dim]) + (e,) + tuple(idx[dim:])
    n = as_int(sizes[dim])
    if not -n <= index < n:
        raise IndexError(f"select index {index} out of range for size {n}")
    index %= n
    out = tuple(sizes[:dim]) + tuple(sizes[dim + 1:])
    return out, lambda idx: tuple(idx[:dim]) + (sympy.Integer(index),) + tuple(idx[dim:])


def _infer_symbolic(sizes: Sequence, numel) -> tuple:
    """infer_sizes for symbolic sizes: the -1 is the exact quotient (a polynomial), the count provably equal."""
    from .sizevars import provably_equal

    sizes = [sympify(s) for s in sizes]
    if sum(1 for s in sizes if s == -1) > 1:
        raise ValueError("only one dimension can be inferred (-1)")
    known = sympy.Integer(1)
    for s in sizes:
        if s != -1:
            known *= s
    if any(s == -1 for s in sizes):
        q = sympy.expand(sympy.cancel(sympify(numel) / known))
        num, den = sympy.fraction(sympy.together(q))
        if den != 1 or (q.free_symbols and any(not c.is_Integer for c in sympy.Poly(q, *q.free_symbols).coeffs())) \
                or (not q.free_symbols and not q.is_Integer):
            raise ValueError(f"shape {sizes}: {numel} / {known} is not provably an integer")
        sizes[[k for k, s in enumerate(sizes) if s == -1][0]] = q
    elif not provably_equal(known, numel):
        raise ValueError(f"shape {sizes} is invalid for {numel} elements")
    return tuple(int(s) if s.is_Integer else s for s in sizes)


def infer_sizes(sizes: Sequence, numel: int) -> tuple[int, ...]:
    """`sizes` with its one -1 (if any) inferred; ValueError unless they hold `numel` elements."""
    if not _is_static(numel, *sizes):
        return _infer_symbolic(sizes, numel)
    sizes = [as_int(s) for s in sizes]
    if sizes.count(-1) > 1:
        raise ValueError("only one dimension can be inferred (-1)")
    known = 1
    for s in sizes:
        if s != -1:
            known *= s
    if -1 in sizes:
        if known == 0 or numel % known:
            raise ValueError(f"shape {sizes} is invalid for {numel} elements")
        sizes[sizes.index(-1)] = numel // known
    elif known != numel:
        raise ValueError(f"shape {sizes} is invalid for {numel} elements")
    return tuple(sizes)


def reshape_map(sizes: Sequence, new_sizes: Sequence) -> tuple[tuple, IndexMap]:
    """view/reshape through the row-major flat index: input digit k is FloorDiv/ModularIndexing of it
    (simplifying with the output's ranges turns what strides can express back into strides)."""
    sizes = tuple(as_int(s) if _is_static(s) else sympify(s) for s in sizes)
    numel = 1
    for s in sizes:
        numel *= s
    new_sizes = infer_sizes(new_sizes, numel)
    if _is_static(numel) and numel == 0:  # no elements: any index map will do
        return new_sizes, lambda idx: tuple(sympy.Integer(0) for _ in sizes)
    new_strides, old_strides = contiguous_strides(new_sizes), contiguous_strides(sizes)

    def m(idx):
        flat = strided_index(idx, new_strides)
        out = []
        for k, (s, st) in enumerate(zip(sizes, old_strides)):
            if s == 1:
                out.append(sympy.Integer(0))
            elif k == 0:
                out.append(FloorDiv(flat, st))
            else:
                out.append(ModularIndexing(flat, st, s))
        return tuple(out)

    return new_sizes, m


def view_strides(sizes: Sequence, strides: Sequence, new_sizes: Sequence) -> tuple | None:
    """The strides of `new_sizes` viewing a tensor of (sizes, strides) without a copy, or None when it
    cannot (torch's computeStride): runs of old dims contiguous with each other split or merge freely.
    Works on symbolic sizes (every test is `provably_equal`: an unprovable one answers None)."""
    from .sizevars import provably_equal

    new_strides: list = [0] * len(new_sizes)
    if not sizes:
        return tuple(1 for _ in new_sizes)
    view_d = len(new_sizes) - 1
    chunk = sympify(strides[-1])
    tensor_numel = view_numel = sympy.Integer(1)
    for d in range(len(sizes) - 1, -1, -1):
        tensor_numel = tensor_numel * sizes[d]
        if d == 0 or (not provably_equal(sizes[d - 1], 1)
                      and not provably_equal(strides[d - 1], tensor_numel * chunk)):
            while view_d >= 0 and (not provably_equal(view_numel, tensor_numel)
                                   or provably_equal(new_sizes[view_d], 1)):
                new_strides[view_d] = sympy.expand(view_numel * chunk)
                view_numel = view_numel * new_sizes[view_d]
                view_d -= 1
                if not provably_equal(view_numel, tensor_numel) and _is_static(view_numel, tensor_numel) \
                        and int(view_numel) > int(tensor_numel):
                    return None
            if not provably_equal(view_numel, tensor_numel):
                return None
            if d > 0:
                chunk = sympify(strides[d - 1])
                tensor_numel = view_numel = sympy.Integer(1)
    if view_d != -1:
        return None
    return tuple(int(x) if sympify(x).is_Integer else x for x in new_strides)


def diagonal_map(sizes: Sequence, offset: int, dim1: int, dim2: int) -> tuple[tuple, IndexMap]:
    """The (dim1, dim2) diagonal at `offset` (above the main one when positive), as a new last dim."""
    if dim1 == dim2:
        raise ValueError("diagonal dimensions must differ")
    n1, n2 = as_int(sizes[dim1]), as_int(sizes[dim2])
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    keep = [k for k in range(len(sizes)) if k not in (dim1, dim2)]

    def m(idx):
        out = [sympy.Integer(0)] * len(sizes)
        for j, k in enumerate(keep):
            out[k] = idx[j]
        out[dim1] = idx[-1] + max(-offset, 0)
        out[dim2] = idx[-1] + max(offset, 0)
        return tuple(out)

    return tuple(sizes[k] for k in keep) + (length,), m


def unfold_map(sizes: Sequence, dim: int, size: int, step: int, ranges=None) -> tuple[tuple, IndexMap]:
    """torch.Tensor.unfold: windows of `size` every `step` along `dim`, as a new last dim (0-d: one window)."""
    ndim = len(sizes)
    n = (as_int(sizes[dim]) if _is_static(sizes[dim]) else sympify(sizes[dim])) if ndim else 1
    if not isinstance(n, int):  # a symbolic size: the window must provably fit
        if step <= 0 or not provably_nonnegative_(n - size, ranges):
            raise NotImplementedError(f"unfold size {size} step {step} may not fit size {n}")
    elif size > n or step <= 0:
        raise ValueError(f"unfold size {size} step {step} invalid for size {n}")
    out = list(sizes)
    if ndim:
        out[dim] = (n - size) // step + 1 if isinstance(n, int) else FloorDiv(n - size, step) + 1

    def m(idx):
        old = list(idx[:-1])
        if ndim:
            old[dim] = idx[dim] * step + idx[-1]
        return tuple(old)

    return tuple(out) + (size,), m


# ---------------------------------------------------------------- View: the maps composed over flat storage


def _norm_dim(d: int, n: int) -> int:
    if not -n <= d < max(n, 1):
        raise IndexError(f"dimension {d} out of range for a {n}-d view")
    return d % n if n else 0


@dataclass(frozen=True)
class View:
    """Element (v0, ...) of `sizes` lives at flat storage position `index` (sympy in v0..)."""

    sizes: tuple
    index: sympy.Expr

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(sympify(s) for s in self.sizes))
        object.__setattr__(self, "index", sympify(self.index))

    # ---- construction
    @staticmethod
    def strided(sizes, strides, offset=0) -> View:
        return View(tuple(sizes), strided_index(view_vars(len(sizes)), strides, offset))

    @staticmethod
    def contiguous(sizes, offset=0) -> View:
        return View.strided(sizes, contiguous_strides(sizes), offset)

    @staticmethod
    def from_layout(layout: Layout) -> View:
        return View.strided(layout.sizes, layout.strides, layout.offset)

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= as_int(s)
        return n

    def __str__(self) -> str:
        return f"View([{', '.join(str(s) for s in self.sizes)}] -> {self.index})"

    # ---- use
    def index_at(self, vars_) -> sympy.Expr:
        """The storage index of element `vars_` (expressions, e.g. loop variables)."""
        vars_ = tuple(sympify(v) for v in vars_)
        if len(vars_) != self.ndim:
            raise ValueError(f"view has {self.ndim} dimensions, got {len(vars_)} indices")
        return self.index.xreplace(dict(zip(view_vars(self.ndim), vars_)))

    def load(self, buffer: str, dtype: dt.DType, vars_=None, mask: Value | None = None, other=0) -> Load:
        vars_ = pointwise_vars(self.ndim) if vars_ is None else vars_
        return Load(buffer, self.index_at(vars_), dtype, (), mask, other)

    def strides(self) -> tuple[tuple, sympy.Expr] | None:
        """(strides, offset) when the map is affine (a plain strided view), else None."""
        vs = view_vars(self.ndim)
        aff = affine_parts(self.index, vs).linear
        if aff is None:
            return None
        offset = self.index.xreplace({v: 0 for v in vs})
        return tuple(sympy.Integer(aff.get(v, 0)) for v in vs), offset

    def to_layout(self, device: str, dtype: dt.DType) -> Layout | None:
        st = self.strides()
        return None if st is None else Layout(device, dtype, self.sizes, st[0], st[1])

    # ---- composition: substitute the map into the index, then simplify with the new ranges
    def _apply(self, new_sizes, index_map: IndexMap) -> View:
        new_sizes = tuple(sympify(s) for s in new_sizes)
        nv = view_vars(len(new_sizes))
        sub = {v: sympify(e) for v, e in zip(view_vars(self.ndim), index_map(nv))}
        return View(new_sizes, simplify_index(self.index.xreplace(sub), dict(zip(nv, new_sizes))))

    def permute(self, dims: Sequence[int]) -> View:
        return self._apply(*permute_map(self.sizes, [_norm_dim(d, self.ndim) for d in dims]))

    def transpose(self, d0: int, d1: int) -> View:
        dims = list(range(self.ndim))
        a, b = _norm_dim(d0, self.ndim), _norm_dim(d1, self.ndim)
        dims[a], dims[b] = dims[b], dims[a]
        return self.permute(dims)

    def expand(self, sizes: Sequence) -> View:
        return self._apply(*expand_map(self.sizes, [sympify(s) for s in sizes]))

    def slice(self, dim: int, start=None, end=None, step: int = 1) -> View:
        return self._apply(*slice_map(self.sizes, _norm_dim(dim, self.ndim), start, end, step))

    def select(self, dim: int, index: int) -> View:
        return self._apply(*select_map(self.sizes, _norm_dim(dim, self.ndim), index))

    def unfold(self, dim: int, size: int, step: int) -> View:
        return self._apply(*unfold_map(self.sizes, _norm_dim(dim, self.ndim), size, step))

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> View:
        return self._apply(*diagonal_map(self.sizes, offset, _norm_dim(dim1, self.ndim), _norm_dim(dim2, self.ndim)))

    def as_strided(self, sizes, strides, storage_offset=None) -> View:
        """Storage-relative, as torch.as_strided; the offset defaults to this view's own."""
        if storage_offset is None:
            storage_offset = self.index.xreplace({v: 0 for v in view_vars(self.ndim)})
        return View.strided(sizes, strides, storage_offset)

    def reshape(self, sizes: Sequence) -> View:
        return self._apply(*reshape_map(self.sizes, sizes))

    view = reshape

    def flatten(self, start: int = 0, end: int = -1) -> View:
        if self.ndim == 0:
            return self.reshape([1])
        a, b = _norm_dim(start, self.ndim), _norm_dim(end, self.ndim)
        mid = 1
        for s in self.sizes[a : b + 1]:
            mid *= as_int(s)
        return self.reshape(list(self.sizes[:a]) + [mid] + list(self.sizes[b + 1 :]))

    def squeeze(self, dim: int | None = None) -> View:
        dims = range(self.ndim) if dim is None else [_norm_dim(dim, self.ndim)]
        return self._apply(*squeeze_map(self.sizes, {k for k in dims if self.sizes[k] == 1}))

    def unsqueeze(self, dim: int) -> View:
        return self._apply(*unsqueeze_map(self.sizes, _norm_dim(dim, self.ndim + 1)))


# ---------------------------------------------------------------- cat and constant_pad
# `nodes` builds the value nodes: stax.ir.build, or anything with its op / const / index_value
# (stax.frontend passes its hash-consing Builder).


def _clamp(e, n: int):
    return sympy.Max(0, sympy.Min(n - 1, e))


def cat(parts: Sequence[tuple[int, Loader]], dim: int, sizes: Sequence, out_vars=None, nodes: Any = build) -> Value:
    """torch.cat: `parts` are (size along `dim`, loader) in order; `sizes` is the output shape.

    Part j serves o_j <= i_dim < o_j + n_j: `where(i_dim < o_j + n_j, part j, later parts)`,
    the last part the fallthrough, each part's index clamped into its range. Empty parts are never read.
    """
    out_vars = pointwise_vars(len(sizes)) if out_vars is None else tuple(out_vars)
    spans, o = [], 0
    for n, loader in parts:
        spans.append((o, n, loader))
        o += n
    if not spans:
        raise ValueError("cat needs at least one part")
    if _is_static(o, sizes[dim]) and o != as_int(sizes[dim]) or not _is_static(o, sizes[dim]) and not \
            _provably_equal(o, sizes[dim]):
        raise ValueError(f"cat parts total {o} along dim {dim}, output size is {sizes[dim]}")
    # (a symbolic part is a positive size: never empty)
    spans = [s for s in spans if not _is_static(s[1]) or s[1] > 0] or spans[:1]  # all empty: any part will do
    i = out_vars[dim]
    value = None
    for o, n, loader in reversed(spans):
        local = list(out_vars)
        local[dim] = _clamp(i - o, n) if len(spans) > 1 else i - o
        v = loader(tuple(local))
        if value is None:
            value = v
        else:
            end = nodes.const(o + n, dt.int64) if _is_static(o + n) else nodes.index_value(o + n)
            value = nodes.op("where", nodes.op("lt", nodes.index_value(i), end), v, value)
    assert value is not None  # spans is not empty
    return value


def constant_pad(loader: Loader, sizes: Sequence, pads: Sequence, fill, dtype: dt.DType, out_vars=None,
                 nodes: Any = build) -> Value:
    """constant_pad_nd: output dim k has size sizes[k] + lo_k + hi_k (pads = ((lo, hi), ...) per dim,
    negative crops); inside, element reads loader(out - lo) (clamped into range), elsewhere `fill`.
    A dim with lo == 0 and hi <= 0 adds no condition; an empty source is all `fill` (nothing to read).
    """
    if len(pads) != len(sizes):
        raise ValueError(f"need (lo, hi) pads for each of the {len(sizes)} dims, got {len(pads)}")
    sizes = [as_int(s) if _is_static(s) else sympify(s) for s in sizes]
    if any(s + lo + hi < 0 for s, (lo, hi) in zip(sizes, pads) if _is_static(s)):
        raise ValueError(f"padding {list(pads)} makes a negative size from {sizes}")
    if any(not provably_nonnegative_(s + lo + hi, None) for s, (lo, hi) in zip(sizes, pads) if not _is_static(s)):
        raise NotImplementedError(f"padding {list(pads)} may make a negative size from {sizes}")
    if 0 in sizes:
        return nodes.const(fill, dtype)
    out_vars = pointwise_vars(len(sizes)) if out_vars is None else tuple(out_vars)
    cond, src = None, []
    for i, (lo, hi), n in zip(out_vars, pads, sizes):
        lo, hi = sympify(lo), sympify(hi)  # (symbolic pads: sdpa's bias padded to a multiple of 8 on cuda)
        if lo == 0 and provably_nonnegative_(-hi, None):
            src.append(i)
            continue
        src.append(_clamp(i - lo, n))
        iv = nodes.index_value(i)
        start, end = (nodes.const(int(e), dt.int64) if _is_static(e) else nodes.index_value(e) for e in (lo, lo + n))
        c = nodes.op("logical_and", nodes.op("ge", iv, start), nodes.op("lt", iv, end))
        cond = c if cond is None else nodes.op("logical_and", cond, c)
    v = loader(tuple(src))
    return v if cond is None else nodes.op("where", cond, v, nodes.const(fill, dtype))
