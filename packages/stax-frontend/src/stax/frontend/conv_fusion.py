"""CPU inference graphs: each 2-D convolution whose weight is a graph input becomes one
`stax::packed_conv2d` call (packed_conv.py) that also takes over the work after it that oneDNN
can do: the per-channel affine chain (batch norm in eval mode, decomposed to sub / mul / add
by per-channel values of graph inputs; a bias add), then a ReLU or GELU, or a residual add
and a ReLU.

Matched on the decomposed ATen graph, so it follows whatever form torch's batch-norm
decomposition takes: a chain step is an add / sub / mul / div of the convolution's (single-use)
value by an operand that broadcasts per output channel and is computed only from graph inputs
by the ops of packed_conv._OPS — the operand's computation is written into the call's
`program` and runs when the packed weight is (re)built, not on every call. Only parameters and
buffers are packed or folded (`frozen_inputs`), never one the graph itself writes (donation.py:
a Stax kernel writing one in place leaves its version counter unchanged).
"""

from __future__ import annotations

import json
import logging

import torch

from . import onednn_post_ops, packed_conv

aten = torch.ops.aten
log = logging.getLogger("stax.frontend")

# one chain step: op -> how, when the convolution's value is the first operand / the second
_CHAIN = {
    aten.add.Tensor: ("add", "add"),
    aten.sub.Tensor: ("sub", "rsub"),
    aten.mul.Tensor: ("mul", "mul"),
    aten.div.Tensor: ("div", None),
}
# ops an operand may be computed with: ATen op -> (program op, how many leading args it keeps)
_OPERAND_OPS = {
    aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "sub", aten.mul.Tensor: "mul",
    aten.mul.Scalar: "mul", aten.div.Tensor: "div", aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt",
    aten.reciprocal.default: "reciprocal", aten.neg.default: "neg", aten.unsqueeze.default: "unsqueeze",
    aten.squeeze.dim: "squeeze", aten.view.default: "view", aten._unsafe_view.default: "view",
    aten.reshape.default: "view", aten.alias.default: "identity", aten.clone.default: "identity",
    aten._to_copy.default: "identity",
}


def fuse_convolutions(gm: torch.fx.GraphModule, mutated=()) -> int:
    """Rewrite the packable convolutions of inference graph `gm` in place; returns how many.
    `mutated`: placeholder positions the graph writes (never folded or cached)."""
    if not packed_conv.available():
        return 0
    frozen = frozen_inputs(gm.graph, mutated)
    if not symbolic(gm.graph) and any(_packable(n, frozen) for n in gm.graph.nodes):
        elide_clones(gm.graph)
    return rewrite_all(gm, lambda n: (n, frozen) if _packable(n, frozen) else None, _rewrite, "convolutions")


def elide_clones(graph: torch.fx.Graph) -> int:
    """Drop `clone(x)` where x is an op's floating-point result no one else reads, in x's own layout:
    the copy only moves dead data (eval-mode dropout traces as one, between a convolution and its
    epilogue). Run only on graphs with a packable convolution."""
    done = 0
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target is not aten.clone.default or len(n.args) != 1:
            continue
        x, fmt = n.args[0], n.kwargs.get("memory_format", torch.preserve_format)
        xv, v = _val(x), _val(n)
        if (isinstance(x, torch.fx.Node) and x.op == "call_function" and len(x.users) == 1 and set(n.kwargs) <= {
                "memory_format"} and fmt is torch.preserve_format and isinstance(xv, torch.Tensor)
                and isinstance(v, torch.Tensor) and v.dtype.is_floating_point and v.device.type == "cpu"
                and xv.stride() == v.stride() and xv.shape == v.shape):
            n.replace_all_uses_with(x)
            graph.erase_node(n)
            done += 1
    return done


def symbolic(graph: torch.fx.Graph) -> bool:
    """Whether any input has a symbolic size (dynamic shapes): the passes leave such graphs alone."""
    for n in graph.nodes:
        v = n.meta.get("val") if n.op == "placeholder" else None
        if isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and any(
                isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride()))):
            return True
    return False


def rewrite_all(gm: torch.fx.GraphModule, match, rewrite, what: str, symbolic_ok: bool = False) -> int:
    """rewrite(graph, *parts) for every node where match(node) gives parts; dead nodes removed after.
    Static shapes only unless `symbolic_ok` (a packed convolution keys on the input's size; a packed
    linear weight serves any row count)."""
    if symbolic(gm.graph) and not symbolic_ok:
        return 0
    done = 0
    for n in list(gm.graph.nodes):
        parts = match(n)
        if parts is not None:
            rewrite(gm.graph, *parts)
            done += 1
    if done:
        gm.graph.eliminate_dead_code()
        gm.recompile()
        log.debug("%d %s on packed weights", done, what)
    return done


def frozen_inputs(graph: torch.fx.Graph, mutated=()) -> set:
    """The placeholders a packed weight may be made from: the module's parameters and buffers
    (AOTAutograd's static inputs; a tensor the caller passes is new on every call, packing it
    would cost more than it saves), but none the graph writes. Outside AOTAutograd: none."""
    tc = torch._guards.TracingContext.try_get()
    static = getattr(getattr(tc, "fw_metadata", None), "static_input_indices", None) or ()
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    keep = set(static) - set(mutated)
    return {n for k, n in enumerate(placeholders) if k in keep} - _written(graph)


def _written(graph: torch.fx.Graph) -> set:
    """Every node passed to an op that may write its arguments (an in-graph copy_ into an input)."""
    out: set = set()
    for n in graph.nodes:
        schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
        if schema is not None and schema.is_mutable:
            out.update(a for a in (*n.args, *n.kwargs.values()) if isinstance(a, torch.fx.Node))
    return out


def _val(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _packable(conv, frozen) -> bool:
    if conv.op != "call_function" or conv.target is not aten.convolution.default or len(conv.args) < 9:
        return False
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = conv.args[:9]
    xv, wv, out = _val(x), _val(w), _val(conv)
    return (
        not transposed
        and all(isinstance(t, torch.Tensor) and t.dim() == 4 and t.dtype == torch.float32 and t.device.type == "cpu"
                for t in (xv, wv, out))
        and w in frozen
        and (b is None or b in frozen)
        and len(stride) == len(padding) == len(dilation) == 2
        and not any(out_pad)
    )


def _only_user(n):
    users = list(n.users)
    return users[0] if len(users) == 1 and users[0].op == "call_function" else None


def _per_channel(v, channels: int) -> bool:
    """A value that broadcasts over (N, C, H, W) as one number per channel (or one for all)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return True
    if not isinstance(v, torch.Tensor) or v.dim() > 4 or v.dtype != torch.float32:
        return False
    shape = (1,) * (4 - v.dim()) + tuple(v.shape)
    return shape[0] == shape[2] == shape[3] == 1 and shape[1] in (1, channels)


class _Program:
    """The steps computing the chain's operands from frozen graph inputs, then the chain."""

    def __init__(self, frozen):
        self.frozen, self.consts, self.steps, self.ref = frozen, [], [], {}

    def operand(self, a):
        """The program reference of `a` (a literal as it is); None: not computable from frozen inputs."""
        if not isinstance(a, torch.fx.Node):
            return a if isinstance(a, (int, float, list, tuple)) and not isinstance(a, bool) else None
        if a in self.ref:
            return self.ref[a]
        if a in self.frozen:
            self.consts.append(a)
            r = self.ref[a] = ["c", len(self.consts) - 1]
            return r
        op = _OPERAND_OPS.get(a.target) if a.op == "call_function" else None
        if op is None or not _operand_call_ok(a):
            return None
        args = [self.operand(x) for x in a.args]
        if any(r is None for r in args):
            return None
        self.steps.append([op, *[list(r) if isinstance(r, tuple) else r for r in args]])
        r = self.ref[a] = ["v", len(self.steps) - 1]
        return r

    def chain(self, how: str, ref) -> None:
        self.steps.append(["chain", how, ref])


def _operand_call_ok(n) -> bool:
    """No keyword that changes the meaning (alpha, another dtype / device / layout)."""
    kw = dict(n.kwargs)
    if n.target is aten._to_copy.default:
        src, dst = _val(n.args[0]), _val(n)
        return (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor) and src.dtype == dst.dtype
                and src.device == dst.device and set(kw) <= {"dtype", "layout", "device", "memory_format"})
    if n.target is aten.clone.default:
        return set(kw) <= {"memory_format"}
    return not kw or kw == {"alpha": 1}


def _chain_step(u, v, channels: int, prog: _Program) -> bool:
    """Add `u` = v <op> operand to the program if it is an affine step per channel."""
    hows = _CHAIN.get(u.target)
    if hows is None or len(u.args) != 2 or (u.kwargs and dict(u.kwargs) != {"alpha": 1}):
        return False
    first = u.args[0] is v
    other = u.args[1] if first else u.args[0]
    how = hows[0] if first else hows[1]
    if how is None or other is v or not _per_channel(_val(other) if isinstance(other, torch.fx.Node) else other,
                                                     channels):
        return False
    mark = (len(prog.consts), len(prog.steps), dict(prog.ref))
    ref = prog.operand(other)
    if ref is None:
        prog.consts[mark[0]:], prog.steps[mark[1]:], prog.ref = [], [], mark[2]
        return False
    prog.chain(how, ref)
    return True


def _residual(u, v, out: torch.Tensor):
    """The other operand of `u` = v + other (alpha 1) when it is a whole tensor like v."""
    if u.target is not aten.add.Tensor or len(u.args) != 2 or (u.kwargs and dict(u.kwargs) != {"alpha": 1}):
        return None
    other = u.args[1] if u.args[0] is v else u.args[0]
    ov = _val(other)
    if other is v or not isinstance(ov, torch.Tensor) or tuple(ov.shape) != tuple(out.shape) or ov.dtype != out.dtype:
        return None
    return other


def _rewrite(graph: torch.fx.Graph, conv, frozen) -> None:
    x, w, b, stride, padding, dilation, _, _, groups = conv.args[:9]
    out = _val(conv)
    prog = _Program(frozen)
    v = conv
    while (u := _only_user(v)) is not None and _chain_step(u, v, out.shape[1], prog):
        v = u
    unary, other = "none", None
    u = _only_user(v)
    if u is not None and (act := onednn_post_ops.fusable("conv", u)) is not None:
        unary, v = act, u
    elif u is not None and (other := _residual(u, v, out)) is not None:
        v = u
        if (r := _only_user(v)) is not None and r.target is aten.relu.default:
            unary, v = "relu", r
    with graph.inserting_before(v):
        new = graph.call_function(packed_conv.OP, (
            x, w, b, other, list(prog.consts), json.dumps(prog.steps), list(stride), list(padding), list(dilation),
            int(groups), unary))
    new.meta["val"] = _val(v)  # (eager's strides: what a graph output must have; the lowering says NHWC)
    new.meta["stack_trace"] = conv.meta.get("stack_trace")
    v.replace_all_uses_with(new)
