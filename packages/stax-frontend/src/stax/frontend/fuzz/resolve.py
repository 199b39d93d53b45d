"""Program -> Concrete: pick every node's parameters from its salt and its arguments' real
shapes, check the op on meta tensors, track exactness / error factor / aliasing, drop
dead nodes, and name everything for the generated source.

A node that no longer applies (its argument changed type or shape after the shrinker
edited the program) is bypassed: its readers read its first argument. So any edit of a
program resolves to some valid graph.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

import torch

from . import inputs
from .ops import ROWS, Aux, Meta
from .ops.base import coarsest
from .program import FLOATS, InputSpec, Node, Program

TORCH_DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
    "i32": torch.int32, "i64": torch.int64, "b": torch.bool,
}
NAMES = {v: k for k, v in TORCH_DTYPES.items()}


@dataclass(frozen=True)
class InputDesc:
    """One parameter of the generated function and how `_input` builds it."""

    name: str
    shape: tuple
    dtype: str
    layout: str
    seed: int
    kind: str = "data"
    scale: float = 1.0
    special: bool = False
    low: int = 0
    high: int = 0
    dim: int = 0
    requires_grad: bool = False


@dataclass
class Concrete:
    """A resolved program, ready to print as source."""

    program: Program
    params: list  # InputDesc per fn parameter
    lines: list  # body lines of fn
    outputs: list  # value names returned
    out_meta: list  # Meta per output (after every mutation)
    in_meta: list  # Meta per parameter (after every mutation)
    labels: list  # op label per live node, program order
    live: list  # live node ids
    grad_k: float = 1.0  # error factor for input gradients
    grad_tol: str | None = None  # coarsest float type in the graph (gradient tolerances)
    backward: bool = False

    @property
    def signature(self) -> tuple:
        return tuple(self.labels)


def mix(*parts) -> int:
    """A 31-bit seed from parts (stable across processes, unlike hash())."""
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def overlapping(shape, strides) -> bool:
    """Conservative: True unless the strides provably map distinct indices to distinct memory."""
    dims = sorted((st, n) for n, st in zip(shape, strides) if n > 1)
    reach = 0
    for st, n in dims:
        if st <= reach:
            return True
        reach += st * (n - 1)
    return False


_CALL = re.compile(r"(?:torch\.(?:nn\.functional\.|linalg\.|special\.)?|F\.|\.)([a-z_][a-z0-9_]*)\(")


def label(row: str, expr: str, pre: tuple, dtype: str) -> str:
    """A short op label for dedupe and reports: the row, the first call in the node's code
    when it differs, and the result's dtype (e.g. 'scan:cummin@f32')."""
    text = " ".join(pre) or expr
    m = _CALL.search(text)
    if m is None:
        name = row + (":setitem" if pre else ":getitem" if "[" in expr else "")
    else:
        name = m.group(1) if m.group(1) == row else f"{row}:{m.group(1)}"
    return f"{name}@{dtype}"


_META_NS = {"torch": torch, "F": torch.nn.functional}


class Resolver:
    """Resolves nodes one at a time (generation asks after each node; `resolve` after all)."""

    def __init__(self, program: Program):
        self.p = program
        self.meta: dict[int, Meta] = {}
        self.tensor: dict[int, torch.Tensor] = {}
        self.name: dict[int, str] = {}
        self.group: dict[int, int] = {}  # value id -> alias group (a storage)
        self.input_group: set[int] = set()
        self.alias: dict[int, int] = {}  # bypassed node -> the value it stands for
        self.nodes: dict[int, dict] = {}  # live-able node id -> info
        self.params: dict[int, InputDesc] = {}
        for spec in program.inputs:
            self._add_input(spec)

    # ---- inputs ---------------------------------------------------------------------------------

    def _add_input(self, s: InputSpec):
        grad = s.requires_grad and s.dtype in FLOATS and self.p.backward
        desc = InputDesc(f"x{s.id}", tuple(s.shape), s.dtype, s.layout, mix(self.p.seed, "in", s.id),
                         scale=s.scale, special=s.special and s.dtype in FLOATS, requires_grad=grad)
        t = _meta_tensor(desc)
        self.params[s.id] = desc
        self.name[s.id] = desc.name
        self.tensor[s.id] = t
        self.group[s.id] = s.id
        self.input_group.add(s.id)
        self.meta[s.id] = Meta(tuple(t.shape), s.dtype, tuple(t.stride()), exact=True, special=desc.special,
                               k=1.0, grad=grad, writable=not grad and not overlapping(t.shape, t.stride()))

    # ---- nodes ----------------------------------------------------------------------------------

    def value(self, vid: int) -> int:
        while vid in self.alias:
            vid = self.alias[vid]
        return vid

    def add(self, node: Node) -> Meta | None:
        """Resolve one node; None if it does not apply (it is then bypassed)."""
        res = self._try(node)
        if res is None:
            if node.args and self.value(node.args[0]) in self.meta:
                self.alias[node.id] = self.value(node.args[0])
            return None
        return res

    def _try(self, node: Node) -> Meta | None:
        row = ROWS.get(node.row)
        args = [self.value(a) for a in node.args]
        if row is None or not args or any(a not in self.meta for a in args):
            return None
        ms = [self.meta[a] for a in args]
        if not row.accepts(ms[0]):
            return None
        if len(args) > 1 and (row.partner is None or not all(row.partner(ms[0], m) for m in ms[1:])):
            args, ms = args[:1], ms[:1]  # the partner no longer fits: let the row choose one
        if len(args) < row.arity - row.optional or len(args) > row.arity:
            return None
        if row.needs_exact and not all(m.exact and not (m.special and m.is_float) for m in ms):
            return None
        r = random.Random(node.salt)
        try:
            emit = row.build(r, ms)
        except (ValueError, IndexError, ZeroDivisionError):
            emit = None
        if emit is None:
            return None
        inplace = emit.inplace
        if inplace and not ms[0].writable:
            return None
        aux_descs = [self._aux_desc(node, j, a, r) for j, a in enumerate(emit.aux)]
        fmt_names = [self.name[a] for a in args]
        aux_names = {f"a{j}": d.name for j, d in enumerate(aux_descs)}
        try:
            expr = emit.expr.format(*fmt_names, **aux_names)
            pre = tuple(s.format(*fmt_names, **aux_names) for s in emit.pre)
        except (IndexError, KeyError):
            return None
        out = self._meta_eval(args, aux_descs, expr, pre)
        if out is None or out.dtype not in NAMES:
            return None
        if inplace and (tuple(out.shape) != ms[0].shape or NAMES[out.dtype] != ms[0].dtype):
            return None
        rule = emit.exact if emit.exact is not None else row.exact
        dtype = NAMES[out.dtype]
        all_exact = all(m.exact for m in ms)
        exact = (all_exact and dtype not in FLOATS) if rule == "int" else (bool(rule) and all_exact)
        special = any(m.special for m in ms) or emit.special or any(d.special for d in aux_descs)
        k = max(m.k for m in ms) + emit.cost
        tol = coarsest(*[m.tol for m in ms]) if exact else coarsest(*[m.tol for m in ms], dtype)
        grad = dtype in FLOATS and emit.grad and (any(m.grad for m in ms) or any(d.requires_grad for d in aux_descs))
        gid = self.group[args[0]] if (emit.view or inplace) else node.id
        base_writable = ms[0].writable if (emit.view or inplace) else True
        meta = Meta(tuple(out.shape), dtype, tuple(out.stride()), exact=exact, special=special, k=k,
                    grad=grad or (inplace and ms[0].grad),
                    writable=base_writable and not overlapping(out.shape, out.stride()), tol=tol)
        vid = node.id
        self.meta[vid] = meta
        self.tensor[vid] = out
        self.name[vid] = f"v{vid}"
        self.group[vid] = gid
        if inplace:  # every alias of the target now holds the written values
            for other, g in self.group.items():
                if g == gid and other != vid:
                    o = self.meta[other]
                    self.meta[other] = Meta(o.shape, o.dtype, o.strides, exact=o.exact and exact,
                                            special=o.special or special, k=max(o.k, k), grad=o.grad or grad,
                                            writable=o.writable, tol=coarsest(o.tol, tol))
        for j, d in enumerate(aux_descs):
            self.params[(node.id, j)] = d
        self.nodes[vid] = dict(row=node.row, args=args, aux=[(node.id, j) for j in range(len(aux_descs))],
                               line=list(pre) + [f"v{vid} = {expr}"], inplace=inplace, group=gid,
                               cost=emit.cost, label=label(node.row, emit.expr, emit.pre, dtype))
        return meta

    def _aux_desc(self, node: Node, j: int, a: Aux, r: random.Random) -> InputDesc:
        grad = a.kind == "data" and a.grad and a.dtype in FLOATS and self.p.backward and r.random() < 0.7
        return InputDesc(f"a{node.id}_{j}", tuple(a.shape), a.dtype, a.layout, mix(self.p.seed, "aux", node.id, j),
                         kind=a.kind, low=a.low, high=a.high, dim=a.dim, requires_grad=grad)

    def _meta_eval(self, args, aux_descs, expr, pre):
        ns = dict(_META_NS)
        ns["D"] = _D
        for a in args:
            ns[self.name[a]] = self.tensor[a]
        for d in aux_descs:
            ns[d.name] = _meta_tensor(d)
        try:
            with _quiet():
                for stmt in pre:
                    exec(stmt, ns)
                out = eval(expr, ns)
        except Exception:  # noqa: BLE001 - any error means "does not apply"
            return None
        return out if isinstance(out, torch.Tensor) and out.device.type == "meta" else None

    # ---- the whole program ----------------------------------------------------------------------

    def finish(self) -> Concrete:
        outs = list(dict.fromkeys(self.value(o) for o in self.p.outputs if self.value(o) in self.meta))
        if not outs:
            outs = [max(self.meta)] if self.nodes else [self.p.inputs[0].id]
        live_vals = set(outs)
        live: list[int] = []
        for vid in sorted(self.nodes, reverse=True):
            info = self.nodes[vid]
            g = info["group"]
            needed = vid in live_vals or (info["inplace"] and (
                g in self.input_group or any(self.group[v] == g for v in live_vals)))
            if needed:
                live.append(vid)
                live_vals.update(info["args"])
        live.reverse()
        used_inputs = [s.id for s in self.p.inputs if s.id in live_vals]
        params = [self.params[i] for i in used_inputs]
        param_vids = list(used_inputs)
        lines, labels, cost = [], [], 0.0
        for vid in live:
            info = self.nodes[vid]
            lines += info["line"]
            labels.append(info["label"])
            cost += info["cost"]
            params += [self.params[a] for a in info["aux"]]
            param_vids += [None] * len(info["aux"])
        all_tol = coarsest(*[self.meta[v].tol for v in live], *[p.dtype for p in params])
        # an aux input may be written by the op that reads it (batch-norm running stats)
        in_meta = [self.meta[v] if v is not None else Meta(p.shape, p.dtype, exact=False, k=1.0 + cost, tol=all_tol)
                   for v, p in zip(param_vids, params)]
        backward = self.p.backward and any(p.requires_grad for p in params)
        return Concrete(self.p, params, lines, [self.name[o] for o in outs], [self.meta[o] for o in outs], in_meta,
                        labels, live, grad_k=2.0 * (1.0 + cost), grad_tol=all_tol, backward=backward)


def resolve(program: Program) -> Concrete:
    r = Resolver(program)
    for n in program.nodes:
        r.add(n)
    return r.finish()


class _DTypes:
    f32, f64, f16, bf16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
    i32, i64, b = torch.int32, torch.int64, torch.bool


_D = _DTypes()


def _meta_tensor(d: InputDesc) -> torch.Tensor:
    return inputs.build(d.shape, TORCH_DTYPES[d.dtype], d.layout, d.seed, "meta")


class _quiet:
    """Silence warnings raised while checking ops on meta tensors."""

    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)
        return False


__all__ = ["Concrete", "InputDesc", "Resolver", "TORCH_DTYPES", "mix", "resolve"]
