"""Delta debugging of a failing program: keep any edit after which the same failure
persists, until no edit helps (or the time budget is spent).

Edits, in order: drop dead nodes (free), run forward only, drop outputs, remove chunks of
nodes (halving the chunk size: ddmin), drop a node's second operand, shrink input shapes
(dims -> 1, halved, removed), simplify inputs (contiguous, no NaN/inf, no grad, scale 1,
fp32 / int64), reset node salts. Programs resolve after any edit (resolve.py), so each
candidate is a valid graph; whether it still fails is the predicate's business.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator

from .program import Program, remove_nodes
from .resolve import resolve


def prune(p: Program) -> Program:
    """Drop nodes that do not reach an output and inputs nothing reads (same graph)."""
    c = resolve(p)
    live = set(c.live)
    dead = {n.id for n in p.nodes if n.id not in live}
    q = remove_nodes(p, dead) if dead else p
    read = {a for n in q.nodes for a in n.args} | set(q.outputs)
    inputs = tuple(i for i in q.inputs if i.id in read)
    return q.replace(inputs=inputs) if inputs else q


def _chunks(ids: list, size: int) -> Iterator[list]:
    for k in range(0, len(ids), size):
        yield ids[k:k + size]


def _node_edits(p: Program) -> Iterator[Program]:
    ids = [n.id for n in p.nodes]
    size = max(1, len(ids) // 2)
    while True:
        for chunk in _chunks(list(reversed(ids)), size):
            yield remove_nodes(p, set(chunk))
        if size == 1:
            return
        size = max(1, size // 2)


def _partner_edits(p: Program) -> Iterator[Program]:
    for k, n in enumerate(p.nodes):
        if len(n.args) > 1:
            nodes = list(p.nodes)
            nodes[k] = dataclasses.replace(n, args=n.args[:1])
            yield p.replace(nodes=tuple(nodes))


def _with_input(p: Program, k: int, **kw) -> Program:
    inputs = list(p.inputs)
    inputs[k] = dataclasses.replace(inputs[k], **kw)
    return p.replace(inputs=tuple(inputs))


def _shape_edits(p: Program) -> Iterator[Program]:
    for k, i in enumerate(p.inputs):
        s = list(i.shape)
        if any(n > 3 for n in s):
            yield _with_input(p, k, shape=tuple(min(n, 3) for n in s))
        for d, n in enumerate(s):
            if n > 1:
                yield _with_input(p, k, shape=tuple(s[:d] + [1] + s[d + 1:]))
                if n > 3:
                    yield _with_input(p, k, shape=tuple(s[:d] + [n // 2] + s[d + 1:]))
        for d in range(len(s)):
            yield _with_input(p, k, shape=tuple(s[:d] + s[d + 1:]))


SIMPLER_DTYPE = {"f16": "f32", "bf16": "f32", "f64": "f32", "i32": "i64"}


def _input_edits(p: Program) -> Iterator[Program]:
    for k, i in enumerate(p.inputs):
        if i.layout != "contig":
            yield _with_input(p, k, layout="contig")
        if i.special:
            yield _with_input(p, k, special=False)
        if i.requires_grad:
            yield _with_input(p, k, requires_grad=False)
        if i.scale != 1.0:
            yield _with_input(p, k, scale=1.0)
        if i.dtype in SIMPLER_DTYPE:
            yield _with_input(p, k, dtype=SIMPLER_DTYPE[i.dtype])


def _salt_edits(p: Program) -> Iterator[Program]:
    for k, n in enumerate(p.nodes):
        if n.salt:
            nodes = list(p.nodes)
            nodes[k] = dataclasses.replace(n, salt=0)
            yield p.replace(nodes=tuple(nodes))


def _output_edits(p: Program) -> Iterator[Program]:
    if len(p.outputs) > 1:
        for o in p.outputs:
            yield p.replace(outputs=tuple(x for x in p.outputs if x != o))


def _backward_edits(p: Program) -> Iterator[Program]:
    if p.backward:
        yield p.replace(backward=False)


PASSES = (_backward_edits, _output_edits, _node_edits, _partner_edits, _shape_edits, _input_edits, _salt_edits)


def shrink(program: Program, still_fails: Callable[[Program], bool], budget_s: float = 300.0,
           log: Callable[[str], None] | None = None) -> Program:
    """The smallest program reached from `program` for which `still_fails` holds."""
    deadline = time.monotonic() + budget_s
    best = prune(program)
    tried: set = {best.to_json()}
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for edits in PASSES:
            restart = True
            while restart and time.monotonic() < deadline:
                restart = False
                for cand in edits(best):
                    if time.monotonic() >= deadline:
                        break
                    cand = prune(cand)
                    key = cand.to_json()
                    if key in tried:
                        continue
                    tried.add(key)
                    if still_fails(cand):
                        best, changed, restart = cand, True, True
                        if log:
                            log(f"shrink: {len(best.nodes)} nodes, inputs {[i.shape for i in best.inputs]}")
                        break
    return best
