"""torch's `_foreach_*` ops (what `foreach=True` optimizers call) as one per-tensor op each.

core ATen keeps them whole, so they reached Stax as ATen fallbacks: an SGD step was one
`_foreach_add.List` library call making new tensors that AOTAutograd then copied into the
parameters. Split, each tensor's update is a Stax pointwise kernel, which can write into its
donated parameter in place (donation.py). The per-tensor op is found from the schemas: the
overload of `aten.<name>` whose arguments are the foreach overload's with lists replaced by
their elements (`Tensor[]` -> `Tensor`, `Scalar[]` -> `Scalar`), trailing defaults allowed.
"""

from __future__ import annotations

import functools

import torch

aten = torch.ops.aten

_ELEMENT = {"List[Tensor]": "Tensor", "List[number]": "number"}

# foreach ops without a per-tensor twin of the same arguments: norm (clip_grad_norm_'s) by hand
_SPECIAL = {"_foreach_norm.Scalar": lambda self, ord=2, dtype=None: [
    aten.linalg_vector_norm.default(t, ord, dtype=dtype) for t in self]}


def _pure(schema) -> bool:
    return not any(a.alias_info is not None for a in schema.arguments) and all(
        r.alias_info is None for r in schema.returns)


def _twin(op: torch._ops.OpOverload):
    """The per-tensor overload of `op` (None if there is none with matching arguments)."""
    name = op._schema.name.split("::")[1]
    packet = getattr(aten, name[len("_foreach_"):], None)
    if packet is None:
        return None
    want = [_ELEMENT.get(str(a.type), str(a.type)) for a in op._schema.arguments]
    for overload in packet.overloads():
        twin = getattr(packet, overload)
        args = twin._schema.arguments
        if not _pure(twin._schema) or len(args) < len(want):
            continue
        if [str(a.type) for a in args[: len(want)]] == want and all(a.has_default_value() for a in args[len(want):]):
            return twin
    return None


def _split(op: torch._ops.OpOverload, twin: torch._ops.OpOverload):
    """foreach(*args) as [twin(*element_k) for each k]: list arguments zipped, others repeated."""
    schema, names = op._schema, [a.name for a in op._schema.arguments]
    is_list = [str(a.type) in _ELEMENT for a in schema.arguments]
    kw_only = {a.name for a in twin._schema.arguments if a.kwarg_only}
    twin_names = [a.name for a in twin._schema.arguments]

    def run(*args, **kwargs):
        values = list(args) + [kwargs[n] if n in kwargs else a.default_value
                               for n, a in zip(names[len(args):], schema.arguments[len(args):])]
        n = next(len(v) for v, listed in zip(values, is_list) if listed)
        out = []
        for k in range(n):
            elems = [v[k] if listed else v for v, listed in zip(values, is_list)]
            pos = [e for e, tn in zip(elems, twin_names) if tn not in kw_only]
            kw = {tn: e for e, tn in zip(elems, twin_names) if tn in kw_only}
            out.append(twin(*pos, **kw))
        return out

    return run


@functools.cache
def foreach_decompositions() -> dict:
    """{foreach OpOverload: per-tensor decomposition} for every functional foreach overload with a twin."""
    names = sorted({s.name for s in torch._C._jit_get_all_schemas()
                    if s.name.startswith("aten::_foreach_") and not s.name.endswith("_")})
    table = {}
    for full in names:
        packet = getattr(aten, full.split("::")[1])
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if overload == "out" or not _pure(op._schema):
                continue
            special = _SPECIAL.get(f"{full.split('::')[1]}.{overload}")
            twin = None if special else _twin(op)
            if special or twin is not None:
                table[op] = special or _split(op, twin)
    return table
