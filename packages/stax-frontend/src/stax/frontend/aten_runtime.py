"""ATen calls from compiled graphs, at run time: the callables stax.cpu's and stax.gpu's
wrappers call for ExternKernel nodes (`kernel_table(graph)` maps each kernel name to a
Python callable (*input_buffers, **constants) -> torch.Tensor or tuple), reading the
literal form extern_format.py defines; and the carriers of tuple results and opaque values.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import sympy
import torch
from stax.ir import ExternKernel, Graph, size_var

from .extern_format import ENUMS, OPAQUE


def decode(obj, tensors):
    if isinstance(obj, tuple):
        return [decode(x, tensors) for x in obj]
    if isinstance(obj, str) and obj.startswith("$"):
        head, _, rest = obj[1:].partition(":")
        if head.startswith("t") and not rest:
            return tensors[int(head[1:])]
        if head.startswith("o") and not rest:
            return uncarry(tensors[int(head[1:])])
        if head == "str":
            return rest
        return ENUMS[head][1](rest)
    return obj


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
        return lambda tensors: uncarry(tensors[k])  # a carrier, or a host value passed as it is
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


def bind_constants(obj, env: dict):
    """An extern node's constants at one call's sizes: each size expression (symbolic shapes) -> its int."""
    if isinstance(obj, tuple):
        return tuple(bind_constants(x, env) for x in obj)
    if isinstance(obj, sympy.Basic):
        return int(obj.xreplace(env))
    return obj


class _SizedPlans:
    """The plans of one node of a symbolic-shape graph, one per distinct sizes tuple (a bounded memo:
    binding the constants is Python work, done once per size seen)."""

    LIMIT = 64

    def __init__(self, names: tuple):
        self.symbols = tuple(size_var(n) for n in names)
        self.plans: dict = {}

    def get(self, sizes: tuple, bufs, consts: tuple) -> tuple:
        hit = self.plans.get(sizes)
        if hit is None:
            if len(self.plans) >= self.LIMIT:
                self.plans.clear()
            env = {s: sympy.Integer(v) for s, v in zip(self.symbols, sizes)}
            args, kwargs, views, out = bind_constants(consts, env)
            hit = self.plans[sizes] = (_CallPlan(bufs, args, kwargs, views, out), out)
        return hit


def aten_kernel(kernel: str, fresh: bool = False, size_names: tuple = ()) -> Callable:
    """The callable of one ATen op for stax's wrappers; `fresh`: its results never alias inputs.
    `call(*bufs, **constants)`, or `call.bind(**constants)` once per node (what stax.cpu does):
    then each call passes only the buffers and skips finding the node's plan. In a symbolic-shape
    graph (`size_names`, its SizeVars row order) each call also gets `sizes=`, the values of the
    symbols its constants may hold."""
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

    sized: dict[tuple, _SizedPlans] = {}

    def call(*bufs, args=(), kwargs=(), views=(), out=False, sizes=None):
        if sizes is not None:
            consts = (args, kwargs, views, out)
            plans_of = sized.get(id(args))
            if plans_of is None or plans_of.consts is not consts[0]:
                plans_of = sized[id(args)] = _SizedPlans(size_names)
                plans_of.consts = args  # kept alive: keyed by its id
            plan, bound_out = plans_of.get(sizes, bufs, consts)
            return run(plan, bufs, bound_out)
        key = (id(args), id(kwargs), id(views), id(out))
        plan = plans.get(key)
        if plan is None or not (plan.key[0] is args and plan.key[1] is kwargs and plan.key[2] is views
                                and plan.key[3] is out):
            plan = plans[key] = _CallPlan(bufs, args, kwargs, views, out)
        return run(plan, bufs, out)

    def bind(args=(), kwargs=(), views=(), out=False) -> Callable:
        plan = None
        plans_of = _SizedPlans(size_names)

        def bound(*bufs, sizes=None):
            nonlocal plan
            if sizes is not None:
                p, bound_out = plans_of.get(sizes, bufs, (args, kwargs, views, out))
                return run(p, bufs, bound_out)
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


def getitem_kernel(tup, index, out, sizes=None, size_names: tuple = ()):
    if out == OPAQUE:
        return carry(tup.stax_items[index], tup.device)
    if sizes is not None:
        out = _bound_out(out, size_names, sizes)
    return _conform(tup.stax_items[index], out, ())


@lru_cache(maxsize=256)
def _bound_out(out, size_names: tuple, sizes: tuple):
    """getitem_kernel's result layout at one call's sizes, bound once per sizes seen (binding walks
    sympy expressions: 0.1-0.2 ms per call of a 4-layer BERT at 1 x 17 tokens)."""
    return bind_constants(out, {size_var(n): sympy.Integer(v) for n, v in zip(size_names, sizes)})


def extern_kinds(graph: Graph) -> tuple:
    """(kernel name, fallback?) per distinct extern kernel of `graph`: what kernel_table needs (plain data)."""
    seen: dict[str, bool] = {}
    for n in graph.nodes:
        if isinstance(n, ExternKernel) and n.kernel not in seen:
            seen[n.kernel] = bool(n.fallback)
    return tuple(seen.items())
