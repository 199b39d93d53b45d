"""Views as index maps, composed without materialization; cat and constant_pad as masked loads.

A `View` says where each element of a view lives in its buffer's flat storage:
element (v0, ..., v{n-1}) of `sizes` is storage position `index`. Every view op
(permute, expand, slice with step, select, unfold, diagonal, as_strided, reshape of
non-contiguous data) substitutes into that expression and simplifies with the new
ranges, so a chain of views costs nothing at run time and needs no copy; a reshape
that strides cannot express becomes FloorDiv/ModularIndexing.

cat and constant_pad cannot be index maps (some outputs read another buffer or a
constant): `cat` and `constant_pad` build `where` values over loads masked to the
region where they are valid, so no load ever reads out of bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy

from . import dtypes as dt
from .affine import affine_parts
from .build import const, index_value, op
from .expr import Load, Op, Value, walk
from .graph import Layout
from .index import FloorDiv, ModularIndexing, as_int, contiguous_strides, pointwise_vars, strided_index, sympify, var
from .simplify import simplify_index
from .value_ranges import provably_true

Loader = Callable[[tuple], Value]


def view_vars(n: int) -> tuple[sympy.Symbol, ...]:
    """The variables a View's index is written in: v0, v1, ..."""
    return tuple(var("v", k) for k in range(n))


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

    # ---- composition: old var k := expression in the new vars, then simplify
    def _reindex(self, new_sizes, old_of_new: Sequence) -> View:
        new_sizes = tuple(sympify(s) for s in new_sizes)
        sub = dict(zip(view_vars(self.ndim), old_of_new))
        ranges = dict(zip(view_vars(len(new_sizes)), new_sizes))
        return View(new_sizes, simplify_index(self.index.xreplace(sub), ranges))

    def permute(self, dims: Sequence[int]) -> View:
        dims = [_norm_dim(d, self.ndim) for d in dims]
        if sorted(dims) != list(range(self.ndim)):
            raise ValueError(f"permute needs a permutation of {self.ndim} dims, got {dims}")
        nv = view_vars(self.ndim)
        old = [None] * self.ndim
        for j, d in enumerate(dims):
            old[d] = nv[j]
        return self._reindex([self.sizes[d] for d in dims], old)

    def transpose(self, d0: int, d1: int) -> View:
        dims = list(range(self.ndim))
        a, b = _norm_dim(d0, self.ndim), _norm_dim(d1, self.ndim)
        dims[a], dims[b] = dims[b], dims[a]
        return self.permute(dims)

    def expand(self, sizes: Sequence) -> View:
        """Broadcast size-1 dims (and new leading dims) to `sizes`; -1 keeps a size."""
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ValueError(f"expand to {len(sizes)} dims from {self.ndim}")
        nv = view_vars(len(sizes))
        new_sizes, old = list(sizes[:lead]), []
        for k, s in enumerate(self.sizes):
            want = sympify(sizes[lead + k])
            if want == -1 or want == s:
                new_sizes.append(s)
                old.append(nv[lead + k])
            elif s == 1:
                new_sizes.append(want)
                old.append(sympy.Integer(0))
            else:
                raise ValueError(f"cannot expand size {s} to {want} in dimension {k}")
        return self._reindex(new_sizes, old)

    def slice(self, dim: int, start=None, end=None, step: int = 1) -> View:
        """x[..., start:end:step, ...] with Python's clamping of out-of-range bounds."""
        dim = _norm_dim(dim, self.ndim)
        n = as_int(self.sizes[dim])
        if step <= 0:
            raise ValueError("slice step must be positive")
        start, end, _ = slice(start, end, step).indices(n)
        length = max(0, -(-(end - start) // step))
        nv = view_vars(self.ndim)
        old = list(nv)
        old[dim] = start + step * nv[dim]
        return self._reindex(self.sizes[:dim] + (length,) + self.sizes[dim + 1 :], old)

    def select(self, dim: int, index: int) -> View:
        dim = _norm_dim(dim, self.ndim)
        n = as_int(self.sizes[dim])
        if not -n <= index < n:
            raise IndexError(f"select index {index} out of range for size {n}")
        nv = view_vars(self.ndim - 1)
        old = list(nv[:dim]) + [sympy.Integer(index % n)] + list(nv[dim:])
        return self._reindex(self.sizes[:dim] + self.sizes[dim + 1 :], old)

    def unfold(self, dim: int, size: int, step: int) -> View:
        """torch.Tensor.unfold: windows of `size` every `step` along `dim`, as a new last dim."""
        dim = _norm_dim(dim, self.ndim)
        n = as_int(self.sizes[dim])
        if size > n or step <= 0:
            raise ValueError(f"unfold size {size} step {step} invalid for size {n}")
        count = (n - size) // step + 1
        nv = view_vars(self.ndim + 1)
        old = list(nv[: self.ndim])
        old[dim] = step * nv[dim] + nv[self.ndim]
        return self._reindex(self.sizes[:dim] + (count,) + self.sizes[dim + 1 :] + (size,), old)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> View:
        a, b = _norm_dim(dim1, self.ndim), _norm_dim(dim2, self.ndim)
        if a == b:
            raise ValueError("diagonal dimensions must differ")
        n1, n2 = as_int(self.sizes[a]), as_int(self.sizes[b])
        length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
        rest = [k for k in range(self.ndim) if k not in (a, b)]
        nv = view_vars(len(rest) + 1)
        t = nv[len(rest)]
        old = [None] * self.ndim
        for j, k in enumerate(rest):
            old[k] = nv[j]
        old[a], old[b] = (t, t + offset) if offset >= 0 else (t - offset, t)
        return self._reindex([self.sizes[k] for k in rest] + [length], old)

    def as_strided(self, sizes, strides, storage_offset=None) -> View:
        """Storage-relative, as torch.as_strided; the offset defaults to this view's own."""
        if storage_offset is None:
            storage_offset = self.index.xreplace({v: 0 for v in view_vars(self.ndim)})
        return View.strided(sizes, strides, storage_offset)

    def reshape(self, sizes: Sequence) -> View:
        """view/reshape without a copy: strides where they exist, FloorDiv/ModularIndexing otherwise."""
        sizes = _infer_sizes(list(sizes), self.numel())
        nv = view_vars(len(sizes))
        old = [sympy.Integer(0)] * self.ndim
        if self.numel() == 0:
            return self._reindex(sizes, old)
        ok = [k for k, s in enumerate(self.sizes) if as_int(s) != 1]
        nk = [k for k, s in enumerate(sizes) if s != 1]
        i = j = 0
        while i < len(ok):
            go, gn = [ok[i]], [nk[j]]
            po, pn = as_int(self.sizes[ok[i]]), sizes[nk[j]]
            i, j = i + 1, j + 1
            while po != pn:
                if po < pn:
                    go.append(ok[i])
                    po *= as_int(self.sizes[ok[i]])
                    i += 1
                else:
                    gn.append(nk[j])
                    pn *= sizes[nk[j]]
                    j += 1
            flat, inner = sympy.Integer(0), 1
            for k in reversed(gn):
                flat += inner * nv[k]
                inner *= sizes[k]
            inner = 1
            for k in reversed(go):
                s = as_int(self.sizes[k])
                old[k] = FloorDiv(flat, inner) if k == go[0] else ModularIndexing(flat, inner, s)
                inner *= s
        return self._reindex(sizes, old)

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
        drop = {k for k in dims if self.sizes[k] == 1}
        return self.reshape([s for k, s in enumerate(self.sizes) if k not in drop])

    def unsqueeze(self, dim: int) -> View:
        dim = _norm_dim(dim, self.ndim + 1)
        return self.reshape(list(self.sizes[:dim]) + [1] + list(self.sizes[dim:]))


def _infer_sizes(sizes: list, numel: int) -> list[int]:
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
    return sizes


# ---------------------------------------------------------------- masked value builders


def with_mask(value: Value, mask: Value, other=0) -> Value:
    """`value` with every load guarded by `mask` (and-ed with its own), sharing preserved.

    Where the mask is false the loads read nothing and yield `other`; the caller
    discards those lanes (with `where`), so `other` only matters for ops that trap
    (integer division by zero): pass a harmless value such as 1 then.
    """
    new: dict[int, Value] = {}
    for n in walk(value):
        if isinstance(n, Load):
            ind = tuple((s, new[id(v)], b) for s, v, b in n.indirect)
            m = mask if n.mask is None else op("logical_and", mask, new[id(n.mask)])
            new[id(n)] = Load(n.buffer, n.index, n.dtype, ind, m, other if n.mask is None else n.other)
        elif isinstance(n, Op):
            new[id(n)] = Op(n.name, tuple(new[id(a)] for a in n.args), n.dtype)
        else:
            new[id(n)] = n
    return new[id(value)]


def _index_cmp(name: str, e, bound) -> Value:
    return op(name, index_value(e, dt.int64), const(int(bound), dt.int64))


def _conj(conds: list[Value]) -> Value | None:
    out = None
    for c in conds:
        out = c if out is None else op("logical_and", out, c)
    return out


def constant_pad(loader: Loader, sizes: Sequence, pads: Sequence, fill, dtype: dt.DType, out_vars=None) -> Value:
    """constant_pad_nd: output dim k has size sizes[k] + lo_k + hi_k (pads = ((lo, hi), ...) per dim,
    negative crops); inside, element reads loader(out - lo), elsewhere `fill`.
    """
    if len(pads) != len(sizes):
        raise ValueError(f"need (lo, hi) pads for each of the {len(sizes)} dims, got {len(pads)}")
    out_sizes = [as_int(s) + lo + hi for s, (lo, hi) in zip(sizes, pads)]
    if any(s < 0 for s in out_sizes):
        raise ValueError(f"padding {pads} makes a negative size from {list(sizes)}")
    out_vars = pointwise_vars(len(sizes)) if out_vars is None else tuple(out_vars)
    ranges = dict(zip(out_vars, out_sizes))
    src = tuple(v - lo for v, (lo, _) in zip(out_vars, pads))
    conds = []
    for e, s in zip(src, sizes):
        for c in (_index_cmp("ge", e, 0), _index_cmp("lt", e, as_int(s))):
            if not provably_true(c, ranges):
                conds.append(c)
    inner = loader(src)
    cond = _conj(conds)
    if cond is None:
        return inner
    return op("where", cond, with_mask(inner, cond), const(fill, dtype))


def cat(parts: Sequence[tuple[int, Loader]], dim: int, sizes: Sequence, out_vars=None) -> Value:
    """torch.cat: `parts` are (size along `dim`, loader) in order; `sizes` is the output shape.

    Part j serves o_j <= i_dim < o_j + n_j and its loads are masked to that range;
    the result is a chain of `where`s (the last part is the fallthrough).
    """
    out_vars = pointwise_vars(len(sizes)) if out_vars is None else tuple(out_vars)
    ranges = dict(zip(out_vars, [as_int(s) for s in sizes]))
    iv = out_vars[dim]
    spans, o = [], 0
    for n, loader in parts:
        if n > 0:
            spans.append((o, n, loader))
        o += n
    if o != as_int(sizes[dim]):
        raise ValueError(f"cat parts total {o} along dim {dim}, output size is {sizes[dim]}")
    if not spans:
        raise ValueError("cat of only empty parts has no elements to load")
    values = []
    for o, n, loader in spans:
        shifted = tuple((v - o) if k == dim else v for k, v in enumerate(out_vars))
        conds = [c for c in (_index_cmp("ge", iv, o), _index_cmp("lt", iv, o + n)) if not provably_true(c, ranges)]
        cond = _conj(conds)
        v = loader(shifted)
        values.append((cond, v if cond is None else with_mask(v, cond)))
    acc = values[-1][1]
    for (o, n, _), (_, v) in zip(reversed(spans[:-1]), reversed(values[:-1])):
        acc = op("where", _index_cmp("lt", iv, o + n), v, acc)
    return acc

