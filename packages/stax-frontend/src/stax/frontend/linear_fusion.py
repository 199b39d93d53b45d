"""CPU inference graphs: a linear layer whose weight and bias are parameters —
`addmm(bias, x, permute(w, [1, 0]))` or `mm(x, permute(w, [1, 0]))`, as AOTAutograd writes
`F.linear`, or by a weight stored (in, out) (GPT-2's Conv1D: `addmm(bias, x, w)`) — becomes one
`stax::packed_linear` call (packed_linear.py), taking over a ReLU or GELU that follows it (through
the view back to the input's batch shape) where oneDNN runs it cheaply (onednn_post_ops.py). The
weights are parameters or buffers the graph does not write (conv_fusion.frozen_inputs).
"""

from __future__ import annotations

import torch

from . import onednn_post_ops, packed_linear
from .conv_fusion import frozen_inputs, rewrite_all

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def fuse_linears(gm: torch.fx.GraphModule, mutated=()) -> int:
    """Rewrite the packable linear layers of inference graph `gm` in place; returns how many."""
    if not packed_linear.available():
        return 0
    frozen = frozen_inputs(gm.graph, mutated)
    return rewrite_all(gm, lambda n: _linear(n, frozen), _rewrite, "linear layers", symbolic_ok=True)


def _val(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _f32(n, dim: int) -> bool:
    v = _val(n)
    return isinstance(v, torch.Tensor) and v.dim() == dim and v.dtype == torch.float32 and v.device.type == "cpu"


def _linear(n, frozen):
    """(n, x, weight, bias, weight stored (in, out)?) of a linear layer `n` on frozen weights, else None."""
    if n.op != "call_function" or n.kwargs:
        return None
    if n.target is aten.addmm.default and len(n.args) == 3:
        bias, x, wt = n.args
    elif n.target is aten.mm.default and len(n.args) == 2:
        (x, wt), bias = n.args, None
    else:
        return None
    transposed = isinstance(wt, torch.fx.Node) and wt.op == "call_function" and (
        (wt.target is aten.permute.default and list(wt.args[1]) == [1, 0]) or wt.target is aten.t.default)
    w = wt.args[0] if transposed else wt
    if not (w in frozen and _f32(w, 2) and _f32(x, 2) and _f32(n, 2)
            and (bias is None or (bias in frozen and _f32(bias, 1)))):
        return None
    return n, x, w, bias, not transposed


def _post_op(n):
    """(post-op name, the node it ends at, the view between) for a ReLU / GELU after `n`."""
    users = list(n.users)
    view = None
    if len(users) == 1 and users[0].target in _VIEWS and len(users[0].users) == 1:
        view, users = users[0], list(users[0].users)
    if len(users) != 1:
        return "none", n, None
    act = onednn_post_ops.fusable("linear", users[0])
    if act is not None:
        return act, users[0], view
    return "none", n, None


def _rewrite(graph: torch.fx.Graph, n, x, w, bias, in_by_out: bool) -> None:
    unary, end, view = _post_op(n)
    with graph.inserting_before(n):
        new = graph.call_function(packed_linear.OP, (x, w, bias, unary, in_by_out))
    new.meta["val"] = _val(n)
    new.meta["stack_trace"] = n.meta.get("stack_trace")
    if view is None:
        end.replace_all_uses_with(new)
        return
    with graph.inserting_before(end):
        reshaped = graph.call_function(view.target, (new, *view.args[1:]))
    reshaped.meta["val"] = _val(end)
    end.replace_all_uses_with(reshaped)
