"""Storage pools for inference (§7.5): every intermediate buffer at a fixed offset of one arena.

The pool is a tree. A temporal split's children have pairwise disjoint lifetimes
and share one address range; a spatial split's children sit side by side.
Buffers go in by decreasing size, longer-lived first; each tries the existing
temporal splits (nesting a spatial split inside one when it overlaps a single
child in time and both fit) before new space is opened at the end. A greedy
approximation of dynamic storage allocation; the arena size is reported next to M*.
"""

from __future__ import annotations


class _Leaf:
    def __init__(self, name: str, size: int, lo: int, hi: int):
        self.name, self.size, self.lo, self.hi = name, size, lo, hi

    def overlaps(self, lo: int, hi: int) -> bool:
        return not (self.hi < lo or hi < self.lo)

    def place(self, base: int, out: dict) -> None:
        out[self.name] = base


class _Temporal:
    """Children with disjoint lifetimes, all starting at this split's base address."""

    def __init__(self, capacity: int, children):
        self.capacity, self.children = capacity, list(children)

    def overlaps(self, lo, hi) -> bool:
        return any(c.overlaps(lo, hi) for c in self.children)

    def insert(self, leaf: _Leaf) -> bool:
        if leaf.size > self.capacity:
            return False
        hits = [c for c in self.children if c.overlaps(leaf.lo, leaf.hi)]
        if not hits:
            self.children.append(leaf)
            return True
        if len(hits) != 1:
            return False
        c = hits[0]
        if isinstance(c, _Spatial):
            return c.insert(leaf, self.capacity)
        if c.size + leaf.size <= self.capacity:
            self.children[self.children.index(c)] = _Spatial([_Temporal(c.size, [c]), _Temporal(leaf.size, [leaf])])
            return True
        return False

    def place(self, base: int, out: dict) -> None:
        for c in self.children:
            c.place(base, out)


class _Spatial:
    """Temporal splits side by side."""

    def __init__(self, children):
        self.children = list(children)

    @property
    def size(self) -> int:
        return sum(c.capacity for c in self.children)

    def overlaps(self, lo, hi) -> bool:
        return any(c.overlaps(lo, hi) for c in self.children)

    def insert(self, leaf: _Leaf, capacity: int | None = None) -> bool:
        if any(t.insert(leaf) for t in self.children):
            return True
        if capacity is None or self.size + leaf.size <= capacity:
            self.children.append(_Temporal(leaf.size, [leaf]))
            return True
        return False

    def place(self, base: int, out: dict) -> None:
        for t in self.children:
            t.place(base, out)
            base += t.capacity


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment if alignment > 1 else n


def plan_arena(order, model, life: dict, alignment: int = 64) -> tuple[int, tuple]:
    """(arena bytes, ((buffer, offset), ...)) for the intermediates of `order`."""
    leaves = []
    for g in order:
        if g.is_extern:
            continue
        for name in model.writes[g]:
            info = model.buffers[name]
            if info.is_output or info.nbytes == 0:
                continue
            lo, hi = life[name]
            leaves.append(_Leaf(name, _align(info.nbytes, alignment), lo, hi))
    leaves.sort(key=lambda x: (-x.size, -(x.hi - x.lo), x.lo, x.name))
    root = _Spatial([])
    for leaf in leaves:
        root.insert(leaf)
    offsets: dict = {}
    root.place(0, offsets)
    return root.size, tuple(sorted(offsets.items(), key=lambda kv: (kv[1], kv[0])))
