"""Seed -> Program: random inputs (shapes with sizes 0, 1, small primes and some long
rows; strided / transposed / expanded / offset layouts; seven dtypes) and 2-30 nodes, each
a row of the op table applied to earlier values whose types fit it.

Deterministic: (seed, index, attempt) fixes the program. The worker retries the next
attempt when eager itself rejects a program.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass

from .ops import ROWS
from .ops.base import broadcast_shape
from .program import FLOATS, InputSpec, Node, Program
from .resolve import Resolver, mix

DTYPE_WEIGHTS = {"f32": 40, "f16": 10, "bf16": 10, "f64": 10, "i64": 12, "i32": 8, "b": 6}
SIZES = {1: 12, 2: 8, 3: 10, 4: 6, 5: 8, 7: 8, 8: 5, 11: 6, 13: 5, 16: 3, 17: 4, 31: 3, 32: 2, 64: 1, 0: 1.5}
RANKS = {0: 6, 1: 20, 2: 32, 3: 26, 4: 16}
SCALES = {1.0: 70, 0.1: 10, 10.0: 15, 1000.0: 5}
CATEGORY_WEIGHTS = {
    "unary": 2.5, "activation": 1.0, "binary": 3.0, "ternary": 1.0, "reduction": 2.5, "scan": 0.8, "view": 3.0,
    "shape": 1.5, "indexing": 1.5, "nn": 1.2, "extern": 0.8, "creation": 0.3, "inplace": 1.5,
}


@dataclass(frozen=True)
class GenConfig:
    """Generator knobs. The CI slice uses smaller shapes (`max_numel`, `large_sizes`), the
    same op kinds."""

    min_ops: int = 2
    max_ops: int = 30
    max_numel: int = 1 << 17  # per input
    large_sizes: tuple = (4097, 65537)  # some rows this long
    large_prob: float = 0.06
    backward: bool = True
    device: str = "cpu"


def _weighted(r: random.Random, table: dict):
    keys = list(table)
    return r.choices(keys, weights=[table[k] for k in keys])[0]


def gen_shape(r: random.Random, cfg: GenConfig) -> tuple:
    rank = _weighted(r, RANKS)
    shape = [_weighted(r, SIZES) for _ in range(rank)]
    if rank and r.random() < cfg.large_prob:
        shape = [r.choice([1, 2, 3]) for _ in range(rank - 1)] + [r.choice(cfg.large_sizes)]
    while math.prod(shape) > cfg.max_numel:
        k = max(range(rank), key=lambda d: shape[d])
        shape[k] = max(1, shape[k] // 2)
    return tuple(shape)


def _layout(r: random.Random, shape: tuple) -> str:
    options = {"contig": 45, "offset": 12, "step": 12 if shape else 0, "t": 10 if len(shape) >= 2 else 0,
               "perm": 10 if len(shape) >= 3 else 0, "expand": 10 if any(s > 1 for s in shape) else 0}
    return _weighted(r, {k: v for k, v in options.items() if v})


def _input(r: random.Random, vid: int, shape: tuple, dtype: str, backward: bool) -> InputSpec:
    floating = dtype in FLOATS
    return InputSpec(
        id=vid, shape=shape, dtype=dtype, layout=_layout(r, shape),
        requires_grad=backward and floating and r.random() < 0.8,
        special=floating and r.random() < 0.1,
        scale=_weighted(r, SCALES) if floating else 1.0,
    )


def _pick_row(r: random.Random):
    cats = {c: w for c, w in CATEGORY_WEIGHTS.items() if any(row.category == c for row in ROWS.values())}
    cat = _weighted(r, cats)
    rows = [row for row in ROWS.values() if row.category == cat]
    return r.choices(rows, weights=[row.weight for row in rows])[0]


def _fits(row, m) -> bool:
    return row.accepts(m) and (not row.needs_exact or (m.exact and not (m.special and m.is_float)))


def generate(seed: int, index: int, attempt: int = 0, cfg: GenConfig = GenConfig()) -> Program:
    """The program for (seed, index, attempt)."""
    r = random.Random(f"stax-fuzz:{seed}:{index}:{attempt}")
    theme = _weighted(r, DTYPE_WEIGHTS)
    backward = cfg.backward and r.random() < 0.75
    base = gen_shape(r, cfg)
    specs = []
    for k in range(r.choice([1, 1, 2, 2, 3])):
        if k == 0 or r.random() < 0.35:
            shape = base
        elif r.random() < 0.7:
            shape = broadcast_shape(r, base)
        else:
            shape = gen_shape(r, cfg)
        dtype = theme if r.random() < 0.75 else _weighted(r, DTYPE_WEIGHTS)
        specs.append(_input(r, k, shape, dtype, backward))
    program = Program(seed=mix(seed, index, attempt), inputs=tuple(specs), nodes=(), outputs=(), backward=backward,
                      device=cfg.device, origin=f"seed {seed} graph {index}")
    res = Resolver(program)
    pool = [s.id for s in specs]
    users: Counter = Counter()
    nodes: list[Node] = []
    n_ops = r.randint(cfg.min_ops, cfg.max_ops)
    tries = 0
    while len(nodes) < n_ops and tries < 15 * n_ops:
        tries += 1
        row = _pick_row(r)
        cands = [v for v in pool if _fits(row, res.meta[v])]
        if not cands:
            continue
        a0 = cands[-1] if r.random() < 0.45 else r.choice(cands)
        args = [a0]
        if row.arity >= 2:
            m0 = res.meta[a0]
            partners = [v for v in pool if row.partner(m0, res.meta[v]) and (
                not row.needs_exact or res.meta[v].exact)]
            if partners and (row.optional == 0 or r.random() < 0.5):
                args.append(r.choice(partners))
            elif row.optional == 0:
                continue
        node = Node(len(specs) + len(nodes), row.name, tuple(args), r.getrandbits(31))
        if res.add(node) is None:
            res.alias.pop(node.id, None)
            continue
        nodes.append(node)
        pool.append(node.id)
        users.update(args)
    sinks = [n.id for n in nodes if users[n.id] == 0]
    outputs = sinks[-6:]
    extra = [n.id for n in nodes if n.id not in outputs]
    if extra and r.random() < 0.3:
        outputs.append(r.choice(extra))
    if not outputs:
        outputs = [specs[0].id]
    return program.replace(nodes=tuple(nodes), outputs=tuple(outputs))
