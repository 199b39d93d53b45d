"""ATen calls from compiled graphs: explicit fallbacks (ops Stax does not lower) and
extern kernels (library ops it calls on purpose: mm, conv, ...).

Both become `ExternKernel` nodes whose `constants` describe the call as plain
literals: `args` / `kwargs` templates in which tensor arguments are "$t<k>",
`views` giving tensor k as a strided view (input slot, sizes, strides, offset) of
one of the node's input buffers, and `out` the layout the caller guarantees.
An op with several outputs is one ExternKernel returning a tuple (zero-size
placeholder layout) plus one `stax.getitem` node per output actually used.
An output no Stax kernel can hold — RNG state an attention kernel returns for its
backward (uint64, or a meta-device tensor at trace time) — is an opaque value: a
placeholder buffer whose runtime value is a carrier of the object, which only other
library calls read ("$o<k>" argument slots).

At run time `kernel_table(graph)` maps each kernel name to a Python callable
(*input_buffers, **constants) -> torch.Tensor (or tuple), as stax.cpu expects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from stax.ir import ExternKernel, Graph, Layout
from stax.ir import dtypes as dt

from .dtypes import TO_STAX, to_stax
from .tensor import BufferView, OpaqueView, TensorValue

log = logging.getLogger("stax.frontend.fallback")

GETITEM = "stax.getitem"
_TUPLE_LAYOUT_DTYPE = dt.uint8
OPAQUE = "opaque"  # the `out` constant of a call whose result is an opaque value


def is_opaque_val(val) -> bool:
    """A traced value Stax cannot hold in a buffer but library calls pass on: a meta-device
    tensor (attention RNG state at trace time) or one of an unsigned dtype Stax lacks."""
    return isinstance(val, torch.Tensor) and (val.device.type == "meta" or (
        val.dtype not in TO_STAX and val.dtype in (torch.uint16, torch.uint32, torch.uint64)))


def placeholder_layout(ctx) -> Layout:
    """The zero-size layout of a tuple result or an opaque value."""
    return Layout(ctx.device, _TUPLE_LAYOUT_DTYPE, (0,), (1,))

_ENUMS = {
    "dtype": (torch.dtype, lambda n: getattr(torch, n)),
    "device": (torch.device, torch.device),
    "layout": (torch.layout, lambda n: getattr(torch, n)),
    "memory_format": (torch.memory_format, lambda n: getattr(torch, n)),
}


class NotEncodable(NotImplementedError):
    pass


def _enum_name(x) -> str:
    return str(x).removeprefix("torch.")


def encode(ctx, obj, tensors: list):
    """Replace tensors by '$t<k>' (appending them to `tensors`) and torch enums by '$kind:name'."""
    if isinstance(obj, OpaqueView):
        tensors.append(obj)
        return f"$o{len(tensors) - 1}"
    if isinstance(obj, TensorValue):
        tensors.append(ctx.realize(obj, "rule0:extern_input"))
        return f"$t{len(tensors) - 1}"
    if isinstance(obj, (list, tuple)):
        return tuple(encode(ctx, x, tensors) for x in obj)
    if isinstance(obj, str):
        return "$str:" + obj if obj.startswith("$") else obj
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    for kind, (cls, _) in _ENUMS.items():
        if isinstance(obj, cls):
            return f"${kind}:{obj if kind == 'device' else _enum_name(obj)}"
    raise NotEncodable(f"cannot pass {type(obj).__name__} {obj!r} to an extern kernel")


def decode(obj, tensors):
    if isinstance(obj, tuple):
        return [decode(x, tensors) for x in obj]
    if isinstance(obj, str) and obj.startswith("$"):
        head, _, rest = obj[1:].partition(":")
        if head.startswith("t") and not rest:
            return tensors[int(head[1:])]
        if head.startswith("o") and not rest:
            return tensors[int(head[1:])].stax_items[0]
        if head == "str":
            return rest
        return _ENUMS[head][1](rest)
    return obj


def _layout_of(ctx, val) -> Layout:
    from .graph_lowering import GraphUnsupported, meta_strides

    if val.device != ctx.tensor_device:
        raise GraphUnsupported(f"an ATen call returns a tensor on {val.device} in a graph on {ctx.tensor_device}")
    return Layout(ctx.device, to_stax(val.dtype), tuple(val.shape), meta_strides(val))


def _op_name(target) -> str:
    if not isinstance(target, torch._ops.OpOverload):
        raise NotEncodable(f"{target} is not an ATen operator overload")
    return str(target)


class ExternTuple(tuple):
    """The outputs of a multi-output extern call; items are created on first use."""


def call_aten(ctx, node, args, kwargs, fallback: bool, out_strides=None):
    """Lower `node` to an ExternKernel calling its ATen op; returns a BufferView or a tuple.
    `out_strides`: the strides the op returns when they differ from the traced ones (the
    caller changed its inputs' layouts: conv_layout.py); for a tuple-returning op, one entry
    per item (None: the traced strides)."""
    from .graph_lowering import GraphUnsupported

    try:
        kernel = _op_name(node.target)
        tensors: list[BufferView] = []
        targs = encode(ctx, tuple(args), tensors)
        tkwargs = tuple((k, encode(ctx, v, tensors)) for k, v in sorted(kwargs.items()))
        val = node.meta.get("val")
        if val is None and node.target._schema.returns:
            raise NotEncodable(f"{kernel} has no meta value")
    except NotEncodable as e:
        raise GraphUnsupported(str(e)) from None
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
    return tuple(int(s) for s in lay.sizes), tuple(int(s) for s in lay.strides)


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


# ---- run time -----------------------------------------------------------------

_REINTERPRET = getattr(getattr(getattr(torch._C, "_dynamo", None), "guards", None), "_reinterpret_tensor", None)


def reinterpret(t: torch.Tensor, sizes, strides, offset: int = 0) -> torch.Tensor:
    """A view of `t`'s storage with these sizes and strides, `offset` elements past `t`'s own
    start: torch's C++ path (what Inductor's wrappers call, ~0.7 us) where it exists, else as_strided (~1.3 us)."""
    if _REINTERPRET is not None:
        return _REINTERPRET(t, sizes, strides, offset)
    return torch.as_strided(t, sizes, strides, t.storage_offset() + offset)


def _shares_storage(t: torch.Tensor, bufs) -> bool:
    if t.numel() == 0:
        return False
    p = t.untyped_storage().data_ptr()
    return any(isinstance(b, torch.Tensor) and b.numel() and b.untyped_storage().data_ptr() == p for b in bufs)


def _conform(t: torch.Tensor, out, bufs, fresh: bool = False) -> torch.Tensor:
    """Make `t` own its memory and have the promised strides (size-1 dims free).
    `fresh`: the op never returns (a view of) an input: skip the aliasing check."""
    sizes, strides = out
    if t._is_zerotensor():  # no storage to hand on: real zeros in the promised layout
        return torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device).zero_()
    ok = (t.stride() == strides and t.shape == sizes) or (  # (exact: the common case, one comparison each)
        tuple(t.shape) == tuple(sizes) and all(n == 1 or a == b for n, a, b in zip(sizes, t.stride(), strides)))
    if ok and (fresh or not _shares_storage(t, bufs)):
        return t
    r = torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
    r.copy_(t)
    return r


# Hot extern ops whose public torch function takes the ATen schema's arguments as they are: it
# skips the OpOverload path (2 cores: addmm 64x64x192 15.3 vs 16.3 us, bmm 4.6 vs 5.2 us).
_PUBLIC = {"aten.mm.default": torch.mm, "aten.addmm.default": torch.addmm, "aten.bmm.default": torch.bmm,
           "aten.baddbmm.default": torch.baddbmm}


def _resolve(kernel: str):
    ns, name, overload = kernel.split(".")
    return getattr(getattr(getattr(torch.ops, ns), name), overload)


def _template(obj) -> Callable:
    """decode(obj, tensors) as a function of the tensors, built once: constants are not
    walked again on every call (the per-call cost of an extern call is Python work)."""
    if isinstance(obj, tuple):
        parts = [_template(x) for x in obj]
        if all(getattr(f, "constant", False) for f in parts):
            return _constant([f(()) for f in parts])
        return lambda tensors: [f(tensors) for f in parts]
    if isinstance(obj, str) and obj[:2] == "$t" and obj[2:].isdigit():
        k = int(obj[2:])
        return lambda tensors: tensors[k]
    if isinstance(obj, str) and obj[:2] == "$o" and obj[2:].isdigit():
        k = int(obj[2:])
        return lambda tensors: tensors[k].stax_items[0]
    return _constant(decode(obj, ()))


def _constant(value) -> Callable:
    f = lambda tensors: value  # noqa: E731
    f.constant = True
    return f


class _CallPlan:
    """What one extern node's constants mean, worked out at its first call: which views are
    the buffer itself (no as_strided), and the argument builders."""

    def __init__(self, bufs, args, kwargs, views, out):
        self.key = (args, kwargs, views, out)  # kept alive: the cache is keyed by their ids
        self.views = tuple(
            (slot, None if (tuple(bufs[slot].shape) == tuple(sizes) and tuple(bufs[slot].stride()) == tuple(strides)
                            and offset == 0) else (sizes, strides, offset))
            for slot, sizes, strides, offset in views
        )
        self.args = _template(args)
        self.kwargs = tuple((k, _template(v)) for k, v in kwargs)

    def tensors(self, bufs) -> list:
        return [bufs[slot] if v is None else reinterpret(bufs[slot], v[0], v[1], v[2]) for slot, v in self.views]


def aten_kernel(kernel: str, fresh: bool = False) -> Callable:
    """The callable of one ATen op for stax's wrappers; `fresh`: its results never alias inputs.
    `call(*bufs, **constants)`, or `call.bind(**constants)` once per node (what stax.cpu does):
    then each call passes only the buffers and skips finding the node's plan."""
    op = _PUBLIC.get(kernel)
    if op is None:
        op = _resolve(kernel)
        op = getattr(op, "_op", op)  # the C++ operator: skips OpOverload.__call__'s Python frame
    plans: dict[tuple, _CallPlan] = {}

    def run(plan: _CallPlan, bufs, out):
        tensors = plan.tensors(bufs)
        result = op(*plan.args(tensors), **{k: f(tensors) for k, f in plan.kwargs})
        if out is None:
            return _carrier((), _device_of(bufs))
        if out is False:
            return _carrier(tuple(result), _device_of(bufs))
        if out == OPAQUE:
            return carry(result, _device_of(bufs))
        return _conform(result, out, bufs, fresh)

    def call(*bufs, args=(), kwargs=(), views=(), out=False):
        key = (id(args), id(kwargs), id(views), id(out))
        plan = plans.get(key)
        if plan is None or not (plan.key[0] is args and plan.key[1] is kwargs and plan.key[2] is views
                                and plan.key[3] is out):
            plan = plans[key] = _CallPlan(bufs, args, kwargs, views, out)
        return run(plan, bufs, out)

    def bind(args=(), kwargs=(), views=(), out=False) -> Callable:
        plan = None

        def bound(*bufs):
            nonlocal plan
            if plan is None:  # (at the first call: which views are the buffer itself depends on it)
                plan = _CallPlan(bufs, args, kwargs, views, out)
            return run(plan, bufs, out)

        bound.__name__ = call.__name__
        return bound

    call.__name__ = kernel.replace(".", "_")
    call.bind = bind
    return call


def _device_of(bufs):
    return next((b.device for b in bufs if isinstance(b, torch.Tensor)), None)


def _carrier(items: tuple, device) -> torch.Tensor:
    """A zero-size uint8 tensor (the placeholder layout) carrying a multi-output result."""
    t = torch.empty(0, dtype=torch.uint8, device=device)
    t.stax_items = items
    return t


def carry(obj, device) -> torch.Tensor:
    """An opaque value's runtime form: a carrier of the one object (RNG state, say)."""
    t = _carrier((obj,), device)
    t.stax_opaque = True
    return t


def is_opaque_carrier(t) -> bool:
    return isinstance(t, torch.Tensor) and getattr(t, "stax_opaque", False)


def uncarry(t):
    """The object an opaque carrier holds; anything else as it is (what eager code expects)."""
    return t.stax_items[0] if is_opaque_carrier(t) else t


def getitem_kernel(tup, index, out):
    if out == OPAQUE:
        return carry(tup.stax_items[index], tup.device)
    return _conform(tup.stax_items[index], out, ())


def kernel_table(graph: Graph) -> dict[str, Callable]:
    """{kernel name: callable} for every ExternKernel of `graph`."""
    table: dict[str, Callable] = {}
    for n in graph.nodes:
        if isinstance(n, ExternKernel) and n.kernel not in table:
            table[n.kernel] = getitem_kernel if n.kernel == GETITEM else aten_kernel(n.kernel, fresh=not n.fallback)
    return table
