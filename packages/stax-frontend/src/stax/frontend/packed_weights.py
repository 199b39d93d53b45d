"""The runtime side of CPU inference ops on prepacked weights (packed_conv.py, packed_linear.py):
one cached packed state per extern node, rebuilt when a tensor it was made from changed.

A tensor counts as unchanged while its data pointer and version counter are: in-place writes
through torch ops bump the counter (optimizer steps, `load_state_dict`, `p.mul_()`); the cache
entry keeps the tensors alive, so their memory cannot be handed to another tensor meanwhile. A
write through `p.data` does not bump the counter `p` has (torch gives `.data` its own): such a
write is not seen — Config.conv_prepack / linear_prepack off compile without packing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from .aten_runtime import _CallPlan, _conform, _SizedPlans

log = logging.getLogger("stax.frontend")


def register(name: str, impl: Callable, fake: Callable):
    """The OpOverload of custom op `name` ("ns::op", schema from `impl`'s annotations) with its fake
    implementation; None, logged, where this torch's custom-op API refuses it (then the fusion
    passes leave the graph as it is: a torch version must never lose the whole frontend to this)."""
    try:
        op = torch.library.custom_op(name, mutates_args=())(impl)
        op.register_fake(fake)
    except Exception as e:  # noqa: BLE001
        log.warning("stax: could not register %s (%s: %s); CPU inference runs without it", name, type(e).__name__, e)
        return None
    ns, op_name = name.split("::")
    return getattr(getattr(torch.ops, ns), op_name).default


def stamp(tensors) -> tuple:
    """What says a tensor was not written since: its data pointer and version counter."""
    return tuple((t.data_ptr(), t._version) if isinstance(t, torch.Tensor) else None for t in tensors)


class PackedKernel:
    """The callable stax.cpu's wrapper binds once per extern node. `sources(args)`: the tensors
    (and a shape key) the packed state depends on; `build(args)`: the state; `run(args, state)`:
    the result. `args` are the op's decoded arguments in schema order."""

    def __init__(self, name: str, sources: Callable, build: Callable, run: Callable, size_names: tuple = ()):
        self.__name__, self.sources, self.build, self.run = name, sources, build, run
        self.size_names = size_names  # a symbolic-shape graph's size symbols: its calls pass `sizes=`

    def bind(self, args=(), kwargs=(), views=(), out=False) -> Callable:
        plan = None
        plans_of = _SizedPlans(self.size_names)
        cache: dict = {}
        sources, build, run = self.sources, self.build, self.run

        def bound(*bufs, sizes=None):
            nonlocal plan
            if sizes is not None:  # (constants bound at this call's sizes, once per size seen)
                p, o = plans_of.get(sizes, bufs, (args, kwargs, views, out))
            else:
                if plan is None:  # (at the first call, as aten_kernel's: which views are the buffer itself)
                    plan = _CallPlan(bufs, args, kwargs, views, out)
                p, o = plan, out
            a = p.args(p.tensors(bufs))
            tensors, key = sources(a)
            now = (stamp(tensors), key)
            if cache.get("stamp") != now:
                cache.update(stamp=now, keep=tensors, state=build(a))
            y = run(a, cache["state"])
            return _conform(y, o, bufs, True) if isinstance(o, tuple) else y

        bound.__name__ = self.__name__
        return bound

    def __call__(self, *bufs, **constants):
        return self.bind(**constants)(*bufs)
