"""View ops as index maps: no copies, ever.

Every view is a map from the new index tuple to the old one. On a `BufferView` the
composed flat index is simplified (stax.ir.simplify_index, §6.8) and, when it is
linear in the new indices, read back as new strides — the result is again a
BufferView (what torch itself would produce). Otherwise (e.g. flattening a transposed buffer) the view is
a `Lazy` whose loads carry FloorDiv / ModularIndexing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
from stax.ir import simplify_index
from stax.ir.affine import affine_coefficients
from stax.ir.index import FloorDiv, ModularIndexing, contiguous_strides, strided_index, sympify, var

from .tensor import BufferView, Lazy, TensorValue, Unsupported, lazy


def _view_vars(n: int):
    return tuple(var("v", k) for k in range(n))


def _linear_strides(expr, vs) -> tuple[list[int], int] | None:
    """(strides, offset) when the flat index is affine in the view variables (stax.ir.affine)."""
    aff = affine_coefficients(sympy.expand(expr), vs)
    return None if aff is None else ([aff[0].get(v, 0) for v in vs], aff[1])


def _unit_strides(sizes, strides) -> list[int]:
    """Strides for size-1 dims (their variable simplifies to 0, so the index says
    nothing): torch's convention, the next dim's stride times its size (1 at the end)."""
    out = list(strides)
    for k in range(len(sizes) - 1, -1, -1):
        if sizes[k] == 1:
            out[k] = out[k + 1] * max(sizes[k + 1], 1) if k + 1 < len(sizes) else 1
    return out


def apply_view(tv: TensorValue, new_sizes: Sequence[int], index_map: Callable) -> TensorValue:
    """The view of `tv` with `new_sizes` whose element idx is tv's element index_map(idx)."""
    new_sizes = tuple(int(s) for s in new_sizes)
    if isinstance(tv, BufferView):
        vs = _view_vars(len(new_sizes))
        old = index_map(vs)
        flat = strided_index(old, tv.layout.strides, tv.layout.offset)
        flat = simplify_index(flat, {v: n for v, n in zip(vs, new_sizes)})
        lin = _linear_strides(flat, vs)
        if lin is not None:
            strides, offset = lin
            return tv.with_layout(new_sizes, _unit_strides(new_sizes, strides), offset)
    return lazy(new_sizes, tv.dtype, tv.device, lambda idx: tv.load(index_map(idx)))


def permute(tv: TensorValue, dims: Sequence[int]) -> TensorValue:
    dims = [d % max(tv.ndim, 1) for d in dims]
    if sorted(dims) != list(range(tv.ndim)):
        raise ValueError(f"permute: {dims} is not a permutation of {tv.ndim} dims")
    inv = [0] * len(dims)
    for new, old in enumerate(dims):
        inv[old] = new
    sizes = [tv.sizes[d] for d in dims]
    return apply_view(tv, sizes, lambda idx: tuple(idx[inv[k]] for k in range(tv.ndim)))


def expand(tv: TensorValue, sizes: Sequence[int]) -> TensorValue:
    """Broadcast `tv` to `sizes` (torch.expand: -1 keeps a dim, new dims are prepended)."""
    sizes = list(sizes)
    lead = len(sizes) - tv.ndim
    if lead < 0:
        raise ValueError(f"expand: cannot expand {tv.sizes} to {sizes}")
    out = []
    for k, s in enumerate(sizes):
        if k >= lead and s == -1:
            s = tv.sizes[k - lead]
        if k >= lead and tv.sizes[k - lead] not in (1, s):
            raise ValueError(f"expand: size {tv.sizes[k - lead]} of dim {k - lead} cannot become {s}")
        out.append(int(s))
    if tuple(out) == tv.sizes:
        return tv

    def m(idx):
        return tuple(
            sympy.Integer(0) if tv.sizes[k] == 1 and out[k + lead] != 1 else idx[k + lead]
            for k in range(tv.ndim)
        )

    return apply_view(tv, out, m)


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for k, d in enumerate(s):
            j = n - len(s) + k
            if d != 1:
                if out[j] not in (1, d):
                    raise ValueError(f"shapes {shapes} do not broadcast")
                out[j] = d
    return tuple(out)


def unsqueeze(tv: TensorValue, dim: int) -> TensorValue:
    dim = dim % (tv.ndim + 1)
    sizes = list(tv.sizes[:dim]) + [1] + list(tv.sizes[dim:])
    return apply_view(tv, sizes, lambda idx: tuple(idx[:dim]) + tuple(idx[dim + 1:]))


def squeeze(tv: TensorValue, dims: Sequence[int] | None = None) -> TensorValue:
    if dims is None:
        dims = [k for k, s in enumerate(tv.sizes) if s == 1]
    dims = {d % max(tv.ndim, 1) for d in dims if tv.ndim and tv.sizes[d % tv.ndim] == 1}
    if not dims:
        return tv
    keep = [k for k in range(tv.ndim) if k not in dims]
    sizes = [tv.sizes[k] for k in keep]

    def m(idx):
        out = [sympy.Integer(0)] * tv.ndim
        for j, k in enumerate(keep):
            out[k] = idx[j]
        return tuple(out)

    return apply_view(tv, sizes, m)


def slice_(tv: TensorValue, dim: int, start, end, step: int = 1) -> TensorValue:
    if step <= 0:
        raise Unsupported("slice step must be positive")
    dim = dim % tv.ndim
    n = tv.sizes[dim]
    start = 0 if start is None else int(start)
    end = n if end is None else int(end)
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    length = (end - start + step - 1) // step
    sizes = list(tv.sizes)
    sizes[dim] = length
    return apply_view(
        tv, sizes, lambda idx: tuple(start + step * i if k == dim else i for k, i in enumerate(idx))
    )


def select(tv: TensorValue, dim: int, index: int) -> TensorValue:
    dim = dim % tv.ndim
    n = tv.sizes[dim]
    index = int(index)
    if not -n <= index < n:
        raise IndexError(f"select: index {index} out of range for dim {dim} of size {n}")
    index %= n
    sizes = tv.sizes[:dim] + tv.sizes[dim + 1:]
    return apply_view(tv, sizes, lambda idx: tuple(idx[:dim]) + (sympy.Integer(index),) + tuple(idx[dim:]))


def infer_size(sizes: Sequence[int], numel: int) -> tuple[int, ...]:
    sizes = [int(s) for s in sizes]
    if -1 in sizes:
        k = sizes.index(-1)
        rest = 1
        for j, s in enumerate(sizes):
            if j != k:
                rest *= s
        sizes[k] = numel // rest if rest else 0
    return tuple(sizes)


def reshape(tv: TensorValue, sizes: Sequence[int]) -> TensorValue:
    """view / reshape / _unsafe_view: through the flat (row-major) index."""
    sizes = infer_size(sizes, tv.numel())
    n = 1
    for s in sizes:
        n *= s
    if n != tv.numel():
        raise ValueError(f"reshape: cannot view {tv.sizes} as {sizes}")
    if sizes == tv.sizes:
        return tv
    if n == 0:  # no elements: any index map will do
        return apply_view(tv, sizes, lambda idx: tuple(sympy.Integer(0) for _ in tv.sizes))
    new_strides = contiguous_strides(sizes)
    old_strides = contiguous_strides(tv.sizes)

    def m(idx):
        flat = strided_index(idx, new_strides)
        out = []
        for k, (s, st) in enumerate(zip(tv.sizes, old_strides)):
            if s == 1:
                out.append(sympy.Integer(0))
            elif k == 0:
                out.append(FloorDiv(flat, st))
            else:
                out.append(ModularIndexing(flat, st, s))
        return tuple(out)

    return apply_view(tv, sizes, m)


def as_strided(tv: BufferView, sizes, strides, offset) -> BufferView:
    """A raw strided view of the storage `tv` reads (callers check the storage matches eager's)."""
    return tv.with_layout(tuple(int(s) for s in sizes), tuple(int(s) for s in strides), sympify(offset))


def diagonal(tv: TensorValue, offset: int = 0, dim1: int = 0, dim2: int = 1) -> TensorValue:
    dim1, dim2 = dim1 % tv.ndim, dim2 % tv.ndim
    if dim1 == dim2:
        raise Unsupported("diagonal needs two different dims")
    n1, n2 = tv.sizes[dim1], tv.sizes[dim2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    keep = [k for k in range(tv.ndim) if k not in (dim1, dim2)]
    sizes = [tv.sizes[k] for k in keep] + [length]

    def m(idx):
        out = [sympy.Integer(0)] * tv.ndim
        for j, k in enumerate(keep):
            out[k] = idx[j]
        d = idx[-1]
        out[dim1] = d + max(-offset, 0)
        out[dim2] = d + max(offset, 0)
        return tuple(out)

    return apply_view(tv, sizes, m)


def unfold(tv: TensorValue, dim: int, size: int, step: int) -> TensorValue:
    """Sliding windows along `dim` (a new last dim of length `size`): still a view."""
    dim = dim % max(tv.ndim, 1)
    n = tv.sizes[dim] if tv.ndim else 1
    if size > n or step <= 0:
        raise Unsupported("unfold: bad window")
    count = (n - size) // step + 1
    sizes = list(tv.sizes)
    if tv.ndim:
        sizes[dim] = count
    sizes.append(size)

    def m(idx):
        out = list(idx[:-1])
        if tv.ndim:
            out[dim] = idx[dim] * step + idx[-1]
        return tuple(out)

    return apply_view(tv, sizes, m)


def is_lazy(tv) -> bool:
    return isinstance(tv, Lazy)
