"""Neural-network ops Stax keeps whole: gelu, vector norms, 2-d pooling (fwd + bwd).

Pooling windows are reductions over (kh, kw) with clamped loads and a validity
mask for padding; the backward passes gather from the output windows that can
contain each input position (a small reduction), so no scatter is needed.
"""

from __future__ import annotations

import math

import sympy
import torch
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing, pointwise_vars, reduction_vars
from stax.ir.sizevars import provably_nonnegative

from ..tensor import lazy
from ..views import Unsupported
from .common import KIND, out_dtype, pointwise
from .indexing import scatter_store
from .reductions import reduce
from .registry import POINTWISE, REDUCTION, table

aten = torch.ops.aten


def gelu(ctx, node, x, approximate="none"):
    def exact(b, v):
        c = lambda z: b.const(z, v.dtype)  # noqa: E731
        inner = b.op("add", c(1.0), b.op("erf", b.op("mul", v, c(math.sqrt(0.5)))))
        return b.op("mul", b.op("mul", v, c(0.5)), inner)

    def tanh(b, v):
        c = lambda z: b.const(z, v.dtype)  # noqa: E731
        cube = b.op("mul", b.op("mul", v, v), v)
        inner = b.op("mul", c(math.sqrt(2.0 / math.pi)), b.op("add", v, b.op("mul", c(0.044715), cube)))
        return b.op("mul", b.op("mul", c(0.5), v), b.op("add", c(1.0), b.op("tanh", inner)))

    if approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate={approximate!r}")
    return pointwise(ctx, node, [x], exact if approximate == "none" else tanh, KIND.DEFAULT)


def vector_norm(ctx, node, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    want = out_dtype(node)
    if not want.is_floating:
        raise Unsupported("norm of non-floating type")
    acc = dt.compute_dtype(want)
    b = ctx.builder
    absval = lambda b, v, idx: b.op("abs", b.cast(v, acc))  # noqa: E731
    if ord == math.inf or ord == -math.inf:
        r = reduce(ctx, x, dim, keepdim, "max" if ord > 0 else "min", acc, absval)
        post = None
    elif ord == 0:
        r = reduce(ctx, x, dim, keepdim, "sum", acc,
                   lambda b, v, idx: b.cast(b.op("ne", b.cast(v, acc), b.const(0, acc)), acc))
        post = None
    elif ord == 1:
        r = reduce(ctx, x, dim, keepdim, "sum", acc, absval)
        post = None
    elif ord == 2:
        r = reduce(ctx, x, dim, keepdim, "sum", acc, lambda b, v, idx: b.op("mul", b.cast(v, acc), b.cast(v, acc)))
        post = lambda v: b.op("sqrt", v)  # noqa: E731
    else:
        p = float(ord)
        r = reduce(ctx, x, dim, keepdim, "sum", acc,
                   lambda b, v, idx: b.op("pow", b.op("abs", b.cast(v, acc)), b.const(p, acc)))
        post = lambda v: b.op("pow", v, b.const(1.0 / p, acc))  # noqa: E731

    def fn(idx):
        v = r.load(idx)
        return b.cast(post(v) if post else v, want)

    return lazy(r.sizes, want, r.device, fn)


# ---- pooling ---------------------------------------------------------------------------


def _pair(v, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    if isinstance(v, int):
        return (v, v)
    return tuple(v) if len(v) == 2 else (v[0], v[0])


def _params(kernel, stride, padding, dilation=1):
    k = _pair(kernel)
    return k, _pair(stride, k), _pair(padding, (0, 0)), _pair(dilation, (1, 1))


def _lowest(d: dt.DType):
    return -math.inf if d.is_floating else int(torch.iinfo(torch.int64).min) if d == dt.int64 else -(2**31)


def _may_exceed(last, n, ranges) -> bool:
    """The last window element may lie past the input (`last >= n`): unless provably not, the window
    is masked (symbolic sizes: a proof from the size ranges; an extra mask is always correct)."""
    if isinstance(last, int) and isinstance(n, int):
        return last >= n
    return not provably_nonnegative(n - 1 - last, ranges)


def _window_value(ctx, x, out_sizes, k, s, p, d, fill):
    """Value at window element (r0, r1) of output (.., oh, ow), `fill` outside the input."""
    b = ctx.builder
    nd = x.ndim
    ivars = pointwise_vars(nd)
    r0, r1 = reduction_vars(2)
    H, W = x.sizes[-2], x.sizes[-1]
    ih = ivars[-2] * s[0] - p[0] + r0 * d[0]
    iw = ivars[-1] * s[1] - p[1] + r1 * d[1]
    src = tuple(ivars[:-2]) + (sympy.Max(0, sympy.Min(H - 1, ih)), sympy.Max(0, sympy.Min(W - 1, iw)))
    v = x.load(src)
    conds = []
    ranges = ctx.symbols.value_ranges()
    if p[0] or _may_exceed((out_sizes[-2] - 1) * s[0] + (k[0] - 1) * d[0] - p[0], H, ranges):
        ihv = b.index_value(ih)
        conds += [b.op("ge", ihv, b.const(0, dt.int64)), b.op("lt", ihv, b.const(H, dt.int64))]
    if p[1] or _may_exceed((out_sizes[-1] - 1) * s[1] + (k[1] - 1) * d[1] - p[1], W, ranges):
        iwv = b.index_value(iw)
        conds += [b.op("ge", iwv, b.const(0, dt.int64)), b.op("lt", iwv, b.const(W, dt.int64))]
    if conds:
        c = conds[0]
        for e in conds[1:]:
            c = b.op("logical_and", c, e)
        v = b.op("where", c, v, b.const(fill, v.dtype))
    return v, ivars, (r0, r1)


def max_pool2d_with_indices(ctx, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    k, s, p, d = _params(kernel_size, stride, padding, dilation)
    out_sizes = ctx.symbols.meta_sizes(node.meta["val"][0])
    v, ivars, _ = _window_value(ctx, x, out_sizes, k, s, p, d, _lowest(x.dtype))
    order = ctx.strides_in_order_of(x, out_sizes)  # NHWC in, NHWC out (eager's rule too)
    values = ctx.reduction_buffer(out_sizes, k, "max", v, order)
    arg = ctx.reduction_buffer(out_sizes, k, "argmax", v, order)
    b = ctx.builder
    W = x.sizes[-1]
    # eager's pooling takes the window's *last* NaN (`val > max || isnan(val)`), argmax its first:
    # the last NaN's window position, -1 without one, overrides the argmax
    r0, r1 = reduction_vars(2)
    last_nan = ctx.reduction_buffer(out_sizes, k, "max", b.op(
        "where", b.op("isnan", v), b.index_value(r0 * k[1] + r1), b.const(-1, dt.int64)), order) \
        if x.dtype.is_floating else None

    def index_fn(idx):
        r = arg.load(idx)
        if last_nan is not None:
            n = last_nan.load(idx)
            r = b.op("where", b.op("ge", n, b.const(0, dt.int64)), n, b.cast(r, dt.int64))
        kw = b.const(k[1], dt.int64)
        ih = b.op("add", b.index_value(idx[-2] * s[0] - p[0]),
                  b.op("mul", b.op("floordiv", r, kw), b.const(d[0], dt.int64)))
        iw = b.op("add", b.index_value(idx[-1] * s[1] - p[1]),
                  b.op("mul", b.op("remainder", r, kw), b.const(d[1], dt.int64)))
        return b.op("add", b.op("mul", ih, b.const(W, dt.int64)), iw)

    return values, lazy(out_sizes, dt.int64, x.device, index_fn)


def _candidates(n_window: int, step: int) -> int:
    return -(-n_window // step)


def _scatters_pool_grad(ctx, node, x) -> bool:
    """The scatter form of max-pool backward: CPU, static sizes, an NCHW (contiguous) result. There
    each (n, c) plane is one thread's (scatter.py: no atomics, the serial order), and the gather
    form's window loops (2 x 2 candidates per input element, clamped indices, an int64 index load
    each) stay scalar: 40.8 of 67 ms of ResNet-18's generated NCHW training kernels."""
    val = node.meta.get("val")
    return (ctx.device == "cpu" and isinstance(val, torch.Tensor) and val.dim() == 4 and val.is_contiguous()
            and all(isinstance(n, int) for n in x.sizes))


def _max_pool2d_backward_scatter(ctx, node, grad, x, indices):
    """Zeros, then grad_input[n, c, i // W, i % W] += grad[n, c, oh, ow] at i = indices[n, c, oh, ow]:
    one pass over the pooled outputs."""
    b = ctx.builder
    H, W = x.sizes[-2], x.sizes[-1]
    zeros = lazy(x.sizes, grad.dtype, x.device, lambda idx: b.const(0, grad.dtype))

    def coords(rvars):
        t = ctx.new_indirect_symbol()
        at = b.cast(indices.load(rvars), dt.int64)
        return tuple(rvars[:-2]) + (FloorDiv(t, W), ModularIndexing(t, 1, W)), ((t, at, H * W),)

    return scatter_store(ctx, node, zeros, grad.sizes, coords, grad.load, "add", opmath=True)  # (grad's dtype)


def max_pool2d_backward(ctx, node, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    if _scatters_pool_grad(ctx, node, x):
        return _max_pool2d_backward_scatter(ctx, node, grad, x, indices)
    k, s, p, d = _params(kernel_size, stride, padding, dilation)
    OH, OW = grad.sizes[-2], grad.sizes[-1]
    W = x.sizes[-1]
    ch, cw = _candidates((k[0] - 1) * d[0] + 1, s[0]), _candidates((k[1] - 1) * d[1] + 1, s[1])
    acc = dt.compute_dtype(grad.dtype)
    b = ctx.builder
    ivars = pointwise_vars(x.ndim)
    r0, r1 = reduction_vars(2)
    oh = FloorDiv(ivars[-2] + p[0], s[0]) - r0
    ow = FloorDiv(ivars[-1] + p[1], s[1]) - r1
    src = tuple(ivars[:-2]) + (sympy.Max(0, sympy.Min(OH - 1, oh)), sympy.Max(0, sympy.Min(OW - 1, ow)))
    ohv, owv = b.index_value(oh), b.index_value(ow)
    zero = b.const(0, dt.int64)
    cond = b.op("logical_and", b.op("ge", ohv, zero), b.op("lt", ohv, b.const(OH, dt.int64)))
    cond = b.op("logical_and", cond, b.op("logical_and", b.op("ge", owv, zero), b.op("lt", owv, b.const(OW, dt.int64))))
    here = b.index_value(ivars[-2] * W + ivars[-1])
    cond = b.op("logical_and", cond, b.op("eq", b.cast(indices.load(src), dt.int64), here))
    v = b.op("where", cond, b.cast(grad.load(src), acc), b.const(0, acc))
    r = ctx.reduction_buffer(x.sizes, (ch, cw), "sum", v, ctx.strides_in_order_of(grad, x.sizes))
    want = out_dtype(node)
    return lazy(x.sizes, want, x.device, lambda idx: b.cast(r.load(idx), want))


def _avg_divisor(b, oh, ow, k, s, p, H, W, count_include_pad, divisor_override):
    if divisor_override:
        return b.const(divisor_override, dt.int64)
    hs, ws = oh * s[0] - p[0], ow * s[1] - p[1]
    he, we = sympy.Min(hs + k[0], H + p[0]), sympy.Min(ws + k[1], W + p[1])
    if not count_include_pad:
        hs, ws, he, we = sympy.Max(hs, 0), sympy.Max(ws, 0), sympy.Min(he, H), sympy.Min(we, W)
    return b.index_value((he - hs) * (we - ws))


def avg_pool2d(ctx, node, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    k, s, p, d = _params(kernel_size, stride, padding)
    out_sizes = ctx.symbols.meta_sizes(node.meta["val"])
    acc = dt.compute_dtype(x.dtype)
    v, ivars, _ = _window_value(ctx, x, out_sizes, k, s, p, d, 0)
    total = ctx.reduction_buffer(out_sizes, k, "sum", ctx.builder.cast(v, acc), ctx.strides_in_order_of(x, out_sizes))
    b = ctx.builder
    H, W = x.sizes[-2], x.sizes[-1]

    def fn(idx):
        div = _avg_divisor(b, idx[-2], idx[-1], k, s, p, H, W, count_include_pad, divisor_override)
        return b.cast(b.op("truediv", total.load(idx), b.cast(div, acc)), x.dtype)

    return lazy(out_sizes, x.dtype, x.device, fn)


def avg_pool2d_backward(ctx, node, grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    k, s, p, d = _params(kernel_size, stride, padding)
    OH, OW = grad.sizes[-2], grad.sizes[-1]
    H, W = x.sizes[-2], x.sizes[-1]
    acc = dt.compute_dtype(grad.dtype)
    b = ctx.builder
    ivars = pointwise_vars(x.ndim)
    r0, r1 = reduction_vars(2)
    oh = FloorDiv(ivars[-2] + p[0], s[0]) - r0
    ow = FloorDiv(ivars[-1] + p[1], s[1]) - r1
    coh, cow = sympy.Max(0, sympy.Min(OH - 1, oh)), sympy.Max(0, sympy.Min(OW - 1, ow))
    src = tuple(ivars[:-2]) + (coh, cow)
    ohv, owv = b.index_value(oh), b.index_value(ow)
    zero = b.const(0, dt.int64)
    conds = [
        b.op("ge", ohv, zero), b.op("lt", ohv, b.const(OH, dt.int64)),
        b.op("ge", owv, zero), b.op("lt", owv, b.const(OW, dt.int64)),
        b.op("lt", b.index_value(ivars[-2] - (oh * s[0] - p[0])), b.const(k[0], dt.int64)),
        b.op("lt", b.index_value(ivars[-1] - (ow * s[1] - p[1])), b.const(k[1], dt.int64)),
    ]
    cond = conds[0]
    for c in conds[1:]:
        cond = b.op("logical_and", cond, c)
    div = b.cast(_avg_divisor(b, coh, cow, k, s, p, H, W, count_include_pad, divisor_override), acc)
    v = b.op("where", cond, b.op("truediv", b.cast(grad.load(src), acc), div), b.const(0, acc))
    r = ctx.reduction_buffer(x.sizes, (_candidates(k[0], s[0]), _candidates(k[1], s[1])), "sum", v,
                             ctx.strides_in_order_of(grad, x.sizes))
    want = out_dtype(node)
    return lazy(x.sizes, want, x.device, lambda idx: b.cast(r.load(idx), want))



LOWERINGS = {
    **table(POINTWISE, {aten.gelu: gelu}),
    **table(REDUCTION, {
        aten.linalg_vector_norm: vector_norm,
        aten.max_pool2d_with_indices: max_pool2d_with_indices,
        aten.max_pool2d_with_indices_backward: max_pool2d_backward,
        aten.avg_pool2d: avg_pool2d,
        aten.avg_pool2d_backward: avg_pool2d_backward,
    }),
}
