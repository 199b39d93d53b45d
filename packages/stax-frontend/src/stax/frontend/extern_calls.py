"""ATen calls from compiled graphs, at compile time: explicit fallbacks (ops Stax does not
lower) and extern kernels (library ops it calls on purpose: mm, conv, ...).

Both become `ExternKernel` nodes whose `constants` describe the call as plain literals
(extern_format.py): `args` / `kwargs` templates in which tensor arguments are "$t<k>",
`views` giving tensor k as a strided view (input slot, sizes, strides, offset) of one of
the node's input buffers, and `out` the layout the caller guarantees. An op with several
outputs is one ExternKernel returning a tuple (zero-size placeholder layout) plus one
`stax.getitem` node per output actually used. An output no Stax kernel can hold — RNG
state an attention kernel returns for its backward (uint64, or a meta-device tensor at
trace time) — is an opaque value: a placeholder buffer whose runtime value is a carrier
of the object, which only other library calls read ("$o<k>" argument slots).
aten_runtime.py runs the calls.
"""

from __future__ import annotations

import logging

import sympy
import torch
from stax.ir import Layout

from .dtypes import TO_STAX, to_stax
from .errors import GraphUnsupported
from .extern_format import ENUMS, GETITEM, OPAQUE, PLACEHOLDER_DTYPE
from .strides import same_view
from .tensor import BufferView, OpaqueView, TensorValue, as_size

log = logging.getLogger("stax.frontend.fallback")  # the `fallback` logging area (logs.py)


def is_opaque_val(val) -> bool:
    """A traced value Stax cannot hold in a buffer but library calls pass on: a meta-device
    tensor (attention RNG state at trace time) or one of an unsigned dtype Stax lacks."""
    return isinstance(val, torch.Tensor) and (val.device.type == "meta" or (
        val.dtype not in TO_STAX and val.dtype in (torch.uint16, torch.uint32, torch.uint64)))


def placeholder_layout(ctx) -> Layout:
    """The zero-size layout of a tuple result or an opaque value."""
    return Layout(ctx.device, PLACEHOLDER_DTYPE, (0,), (1,))


class NotEncodable(NotImplementedError):
    pass


def _enum_name(x) -> str:
    return str(x).removeprefix("torch.")


def encode(ctx, obj, tensors: list, traced=None):
    """Replace tensors by '$t<k>' (appending them to `tensors`) and torch enums by '$kind:name'.
    `traced`: the fx argument `obj` lowers (same nesting), or None: a tensor whose layout is not
    the one the trace gave it is realized with the traced strides (see `_traced_strides`)."""
    if isinstance(obj, OpaqueView):
        tensors.append(obj)
        return f"$o{len(tensors) - 1}"
    if isinstance(obj, TensorValue):
        tensors.append(ctx.realize(obj, "rule0:extern_input", strides=_traced_strides(ctx, obj, traced)))
        return f"$t{len(tensors) - 1}"
    if isinstance(obj, (list, tuple)):
        if not isinstance(traced, (list, tuple)) or len(traced) != len(obj):
            traced = [None] * len(obj)
        return tuple(encode(ctx, x, tensors, t) for x, t in zip(obj, traced))
    if isinstance(obj, str):
        return "$str:" + obj if obj.startswith("$") else obj
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, sympy.Basic) and obj.is_integer:  # a size expression (symbolic shapes): bound per call
        return as_size(obj)
    for kind, (cls, _) in ENUMS.items():
        if isinstance(obj, cls):
            return f"${kind}:{obj if kind == 'device' else _enum_name(obj)}"
    raise NotEncodable(f"cannot pass {type(obj).__name__} {obj!r} to an extern kernel")


def _traced_strides(ctx, tv: TensorValue, traced) -> tuple | None:
    """The strides an ATen call must see `tv` with: None where its realized layout is the traced
    one (or nothing was traced), else the traced strides (contiguous for a non-dense trace).
    Stax may lay out a value otherwise than eager (a channels-last convolution's output:
    conv_layout.py), but ATen kernels were chosen at trace time for the traced strides: given
    a channels-last query, the CPU flash-attention kernel (picked only for a last-dim stride
    of 1) read past its rows (the fuzzer's fwd-nonfinite_aa3f735fae)."""
    val = traced.meta.get("val") if isinstance(traced, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or ctx.symbols.meta_sizes(val) != tuple(tv.sizes):
        return None
    if isinstance(tv, BufferView) and same_view(tv.sizes, tv.strides, ctx.symbols.meta_sizes(val),
                                                ctx.symbols.exprs(val.stride())):
        return None
    return ctx.symbols.meta_strides(val)


def _layout_of(ctx, val) -> Layout:
    if val.device != ctx.tensor_device:
        raise GraphUnsupported(f"an ATen call returns a tensor on {val.device} in a graph on {ctx.tensor_device}")
    return Layout(ctx.device, to_stax(val.dtype), ctx.symbols.meta_sizes(val), ctx.symbols.meta_strides(val))


def _op_name(target) -> str:
    if not isinstance(target, torch._ops.OpOverload):
        raise NotEncodable(f"{target} is not an ATen operator overload")
    return str(target)


def reads_rng_state(node) -> bool:
    """Whether a library call given opaque RNG state uses it: the attention kernels read their philox
    seed and offset only for dropout, so not at `dropout_p` 0; an op without that argument is assumed to."""
    args = getattr(getattr(node.target, "_schema", None), "arguments", None)
    k = next((k for k, a in enumerate(args or ()) if a.name == "dropout_p"), None)
    if k is None:
        return True
    p = node.kwargs.get("dropout_p", node.args[k] if k < len(node.args) else args[k].default_value)
    return not (isinstance(p, (int, float)) and p == 0)


class ExternTuple(tuple):
    """The outputs of a multi-output extern call; items are created on first use."""


def call_aten(ctx, node, args, kwargs, fallback: bool, out_strides=None, traced_inputs: bool = True):
    """Lower `node` to an ExternKernel calling its ATen op; returns a BufferView or a tuple.
    `out_strides`: the strides the op returns when they differ from the traced ones (the
    caller changed its inputs' layouts: conv_layout.py); for a tuple-returning op, one entry
    per item (None: the traced strides). `traced_inputs`: tensor arguments are passed with
    the strides the trace saw (copied so where Stax laid them out otherwise); False: as they
    are (the caller realized them in the layout it wants)."""
    try:
        kernel = _op_name(node.target)
        tensors: list[BufferView] = []
        targs = encode(ctx, tuple(args), tensors, tuple(node.args) if traced_inputs else None)
        tkwargs = tuple((k, encode(ctx, v, tensors, node.kwargs.get(k) if traced_inputs else None))
                        for k, v in sorted(kwargs.items()))
        val = node.meta.get("val")
        if val is None and node.target._schema.returns:
            raise NotEncodable(f"{kernel} has no meta value")
    except NotEncodable as e:
        raise GraphUnsupported(str(e)) from None
    if any(isinstance(t, OpaqueView) for t in tensors) and reads_rng_state(node):
        ctx.rng_readers.append(node.name)
    inputs: list[str] = []
    views = []
    for t in tensors:
        if t.buffer not in inputs:
            inputs.append(t.buffer)
        views.append((inputs.index(t.buffer), t.sizes, t.strides, t.offset))
    constants = [("args", targs), ("kwargs", tkwargs), ("views", tuple(views))]
    name = kernel.removeprefix("aten.")
    if fallback:
        ctx.fallback_ops[name] += 1
        log.info("fallback to ATen: %s (%s)", kernel, node.name)
    else:
        ctx.extern_ops[name] += 1
    if val is None:  # an op run for its effect (e.g. _assert_async): an empty placeholder result
        constants.append(("out", None))
        return ctx.add_extern(kernel, placeholder_layout(ctx), inputs, constants, fallback)
    if is_opaque_val(val):
        constants.append(("out", OPAQUE))
        return opaque_view(ctx, ctx.add_extern(kernel, placeholder_layout(ctx), inputs, constants, fallback))
    if isinstance(val, torch.Tensor):
        lay = _layout_of(ctx, val)
        if out_strides is not None:
            lay = Layout(lay.device, lay.dtype, lay.sizes, tuple(out_strides))
        constants.append(("out", _sizes_strides(lay)))
        buf = ctx.add_extern(kernel, lay, inputs, constants, fallback)
        return BufferView(ctx.builder, buf, lay, lay)
    if isinstance(val, (list, tuple)) and all(v is None or isinstance(v, (torch.Tensor, int)) for v in val):
        buf = ctx.add_extern(kernel, placeholder_layout(ctx), inputs, constants, fallback)
        per_item = out_strides or [None] * len(val)
        return ExternTuple(ExternItem(ctx, buf, k, v, st) for k, (v, st) in enumerate(zip(val, per_item)))
    raise GraphUnsupported(f"{kernel} returns {type(val).__name__}, not tensors")


def opaque_view(ctx, buf: str) -> OpaqueView:
    lay = placeholder_layout(ctx)
    ctx.opaque.add(buf)
    return OpaqueView(ctx.builder, buf, lay, lay)


def _sizes_strides(lay: Layout):
    return tuple(as_size(s) for s in lay.sizes), tuple(as_size(s) for s in lay.strides)


class ExternItem:
    """Output k of a tuple extern call: a `stax.getitem` node created on first use."""

    def __init__(self, ctx, tuple_buf: str, k: int, val, strides=None):
        self.ctx, self.tuple_buf, self.k, self.val, self.strides = ctx, tuple_buf, k, val, strides
        self._view = None

    def get(self):
        if not isinstance(self.val, torch.Tensor):  # None, or an int output (static: a literal)
            return self.val
        if self._view is None and is_opaque_val(self.val):
            consts = (("index", self.k), ("out", OPAQUE))
            self._view = opaque_view(self.ctx, self.ctx.add_extern(
                GETITEM, placeholder_layout(self.ctx), (self.tuple_buf,), consts, False))
        if self._view is None:
            lay = _layout_of(self.ctx, self.val)
            if self.strides is not None:
                lay = Layout(lay.device, lay.dtype, lay.sizes, tuple(self.strides))
            consts = (("index", self.k), ("out", _sizes_strides(lay)))
            buf = self.ctx.add_extern(GETITEM, lay, (self.tuple_buf,), consts, False)
            self._view = BufferView(self.ctx.builder, buf, lay, lay)
        return self._view


def lower_fallback(ctx, node, args, kwargs):
    return call_aten(ctx, node, args, kwargs, fallback=True)
