"""Layered drawing of a DAG (Sugiyama style, small graphs): layers, order, coordinates.

1. layer = longest path from a source, so every edge points downwards; sources
   (graph inputs, parameters) then move down to just above their first user;
2. order inside each layer by repeated barycenter sweeps (down, then up), which
   removes most crossings on the graphs a compiled region produces;
3. x = position in the layer, centred; y = layer. Edges spanning several layers
   are drawn straight: the picture stays readable for a few hundred nodes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Placed:
    x: float
    y: float
    layer: int
    pos: int


def layers(nodes: list, edges: list[tuple]) -> dict:
    """node -> layer (0 for sources), by the longest path; `nodes` must be topologically ordered."""
    preds: dict = {n: [] for n in nodes}
    for a, b in edges:
        if a in preds and b in preds:
            preds[b].append(a)
    out: dict = {}
    for n in nodes:
        out[n] = 1 + max((out[p] for p in preds[n] if p in out), default=-1)
    succs: dict = {n: [] for n in nodes}
    for a, b in edges:
        if a in succs and b in succs:
            succs[a].append(b)
    for n in nodes:  # a source (graph input) sits just above its first user, not all in layer 0
        if not preds[n] and succs[n]:
            out[n] = max(0, min(out[s] for s in succs[n]) - 1)
    return out


def order(nodes: list, edges: list[tuple], layer_of: dict, sweeps: int = 4) -> list[list]:
    """Nodes of each layer, ordered by barycenter sweeps to reduce edge crossings."""
    n_layers = 1 + max(layer_of.values(), default=-1)
    rows: list[list] = [[] for _ in range(n_layers)]
    for n in nodes:
        rows[layer_of[n]].append(n)
    preds: dict = {n: [] for n in nodes}
    succs: dict = {n: [] for n in nodes}
    for a, b in edges:
        if a in preds and b in preds:
            succs[a].append(b)
            preds[b].append(a)

    def sweep(indices, neighbours):
        for i in indices:
            pos = {}
            for row in rows:
                for k, n in enumerate(row):
                    pos[n] = k
            def key(n, pos=pos):
                ns = [pos[m] for m in neighbours[n]]
                return (sum(ns) / len(ns)) if ns else pos[n]
            rows[i].sort(key=key)

    for _ in range(sweeps):
        sweep(range(1, n_layers), preds)
        sweep(range(n_layers - 2, -1, -1), succs)
    return rows


def place(nodes: list, edges: list[tuple], dx: float = 150.0, dy: float = 80.0) -> dict:
    """node -> Placed, with every layer centred on the widest one."""
    layer_of = layers(nodes, edges)
    rows = order(nodes, edges, layer_of)
    width = max((len(r) for r in rows), default=0)
    out = {}
    for i, row in enumerate(rows):
        shift = (width - len(row)) * dx / 2
        for k, n in enumerate(row):
            out[n] = Placed(shift + k * dx + dx / 2, i * dy + dy / 2, i, k)
    return out
