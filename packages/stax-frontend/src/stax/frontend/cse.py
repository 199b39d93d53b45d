"""Frontend CSE on the ATen FX graph: identical pure calls become one node.

Users are counted per FX node by the §6.6 cost model, so `x.exp()` written twice
must become one node with two users before lowering (Example 7.2). Random ops
(nondeterministic_seeded) and ops with mutable arguments are never merged.
"""

from __future__ import annotations

import torch
import torch.fx


def _pure(target) -> bool:
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return not any(a.alias_info is not None and a.alias_info.is_write for a in target._schema.arguments)


def _key(x):
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(_key(y) for y in x)
    if isinstance(x, dict):
        return ("dict",) + tuple(sorted((k, _key(v)) for k, v in x.items()))
    if isinstance(x, torch.fx.Node):
        return ("node", x.name)
    if isinstance(x, float) and x != x:
        return ("nan",)
    return (type(x).__name__, x)


def cse(gm: torch.fx.GraphModule) -> int:
    """Merge duplicate pure call_function nodes in place; returns how many were removed."""
    seen: dict = {}
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not _pure(node.target):
            continue
        try:
            key = (node.target, _key(node.args), _key(node.kwargs))
            hash(key)
        except TypeError:
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        node.replace_all_uses_with(first)
        gm.graph.erase_node(node)
        removed += 1
    if removed:
        gm.recompile()
    return removed
