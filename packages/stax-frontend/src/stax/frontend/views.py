"""View ops on lowering-time tensors: the index maps of stax.ir.views, applied; no copies, ever.

The math of each view lives in stax.ir.views; this module normalises torch's arguments
(negative dims, -1 sizes, no-op views), raises `Unsupported` where the op falls back to
ATen, and applies the map. On a `BufferView` the composed flat index is simplified
(stax.ir.simplify_index, §6.8) and, when it is linear in the new indices, read back as
new strides — the result is again a BufferView (what torch itself would produce).
Otherwise (e.g. flattening a transposed buffer) the view is a `Lazy` whose loads carry
FloorDiv / ModularIndexing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
from stax.ir import simplify_index
from stax.ir import views as IV
from stax.ir.affine import affine_coefficients
from stax.ir.index import strided_index, sympify

from .tensor import BufferView, TensorValue, Unsupported, as_size, lazy


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
    new_sizes = tuple(as_size(s) for s in new_sizes)
    if isinstance(tv, BufferView):
        vs = IV.view_vars(len(new_sizes))
        old = index_map(vs)
        flat = strided_index(old, tv.layout.strides, tv.layout.offset)
        flat = simplify_index(flat, {v: n for v, n in zip(vs, new_sizes)})
        lin = _linear_strides(flat, vs)
        if lin is not None:
            strides, offset = lin
            return tv.with_layout(new_sizes, _unit_strides(new_sizes, strides), offset)
    return lazy(new_sizes, tv.dtype, tv.device, lambda idx: tv.load(index_map(idx)))


def permute(tv: TensorValue, dims: Sequence[int]) -> TensorValue:
    return apply_view(tv, *IV.permute_map(tv.sizes, [d % max(tv.ndim, 1) for d in dims]))


def expand(tv: TensorValue, sizes: Sequence[int]) -> TensorValue:
    """Broadcast `tv` to `sizes` (torch.expand: -1 keeps a dim, new dims are prepended)."""
    out, m = IV.expand_map(tv.sizes, [as_size(s) for s in sizes])
    return tv if out == tv.sizes else apply_view(tv, out, m)


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
    return apply_view(tv, *IV.unsqueeze_map(tv.sizes, dim % (tv.ndim + 1)))


def squeeze(tv: TensorValue, dims: Sequence[int] | None = None) -> TensorValue:
    """torch's squeeze: dims that are not size 1 are ignored."""
    if dims is None:
        dims = [k for k, s in enumerate(tv.sizes) if s == 1]
    dims = {d % max(tv.ndim, 1) for d in dims if tv.ndim and tv.sizes[d % tv.ndim] == 1}
    return apply_view(tv, *IV.squeeze_map(tv.sizes, dims)) if dims else tv


def slice_(tv: TensorValue, dim: int, start, end, step: int = 1, ranges=None) -> TensorValue:
    """`ranges`: the size symbols' value ranges (symbolic bounds must provably need no clamping)."""
    if step <= 0:
        raise Unsupported("slice step must be positive")
    start, end = (None if e is None else as_size(e) for e in (start, end))
    try:
        return apply_view(tv, *IV.slice_map(tv.sizes, dim % tv.ndim, start, end, step, ranges=ranges))
    except NotImplementedError as e:  # a symbolic bound stax.ir cannot place: the op runs in ATen
        raise Unsupported(str(e)) from None


def select(tv: TensorValue, dim: int, index: int, ranges=None) -> TensorValue:
    try:
        return apply_view(tv, *IV.select_map(tv.sizes, dim % tv.ndim, int(index), ranges=ranges))
    except NotImplementedError as e:
        raise Unsupported(str(e)) from None


def _symbolic(sizes) -> bool:
    return not all(isinstance(s, int) for s in sizes)


def reshape(tv: TensorValue, sizes: Sequence[int]) -> TensorValue:
    """view / reshape / _unsafe_view: through the flat (row-major) index; with symbolic sizes a
    BufferView whose strides allow it gets torch's strides directly (stax.ir.views.view_strides:
    the flat-index form of a symbolic flatten does not simplify back to strides)."""
    try:
        out, m = IV.reshape_map(tv.sizes, [as_size(s) for s in sizes])
    except ValueError as e:
        raise Unsupported(str(e)) from None
    if out == tv.sizes:
        return tv
    if isinstance(tv, BufferView) and (_symbolic(tv.sizes) or _symbolic(out)):
        strides = IV.view_strides(tv.sizes, tv.strides, out)
        if strides is not None:
            return tv.with_layout(out, _unit_strides(out, strides), tv.offset)
    return apply_view(tv, out, m)


def as_strided(tv: BufferView, sizes, strides, offset) -> BufferView:
    """A raw strided view of the storage `tv` reads (callers check the storage matches eager's)."""
    return tv.with_layout(tuple(as_size(s) for s in sizes), tuple(as_size(s) for s in strides), sympify(offset))


def diagonal(tv: TensorValue, offset: int = 0, dim1: int = 0, dim2: int = 1) -> TensorValue:
    dim1, dim2 = dim1 % tv.ndim, dim2 % tv.ndim
    if dim1 == dim2:
        raise Unsupported("diagonal needs two different dims")
    return apply_view(tv, *IV.diagonal_map(tv.sizes, offset, dim1, dim2))


def unfold(tv: TensorValue, dim: int, size: int, step: int, ranges=None) -> TensorValue:
    """Sliding windows along `dim` (a new last dim of length `size`): still a view."""
    dim = dim % max(tv.ndim, 1)
    n = tv.sizes[dim] if tv.ndim else 1
    if (isinstance(n, int) and size > n) or step <= 0:
        raise Unsupported("unfold: bad window")
    try:
        return apply_view(tv, *IV.unfold_map(tv.sizes, dim, size, step, ranges=ranges))
    except NotImplementedError as e:  # a symbolic size the window may not fit
        raise Unsupported(str(e)) from None
