"""Pass 3 (§7.6 step 3): the dependence DAG and the cycle test of Prop 7.1.

Merging a and b creates a cycle iff some c outside {a, b} is an ancestor of one
and a descendant of the other. The DAG keeps the current (fused) nodes in a
topological order, so every such c lies strictly between a and b: the test walks
the ancestor set of the later node upward inside that window only, and a merge
repairs the order inside the window (the later node's ancestors move before the
merged node, everything else after it). New ancestor relations appear only
through fused nodes and are picked up by the walk; no transitive closure is ever
recomputed, and the work per query is bounded by the window, not the graph.
"""

from __future__ import annotations


class FusionDag:
    """Quotient dependence graph of the current nodes, in a maintained topological order."""

    def __init__(self, snodes):
        self.order: list = list(snodes)  # None marks the slot a merge freed
        self.tpos = {n: k for k, n in enumerate(self.order)}
        self.preds: dict = {n: set() for n in self.order}
        self.succs: dict = {n: set() for n in self.order}
        producer = {n.buffer: n for n in self.order}
        for n in self.order:
            for d in n.read_writes.reads:
                p = producer.get(d.name)
                if p is not None and p is not n:
                    self.preds[n].add(p)
                    self.succs[p].add(n)
        self._last_query = None

    def nodes(self) -> list:
        """Current nodes in topological order."""
        return [n for n in self.order if n is not None]

    def __len__(self) -> int:
        return len(self.preds)

    def has_path(self, a, b) -> bool:
        """Is there an edge or a longer path between a and b (either direction)?"""
        u, v = (a, b) if self.tpos[a] < self.tpos[b] else (b, a)
        return u in self.preds[v] or self.would_create_cycle(a, b)

    def _ancestors_in_window(self, u, v) -> list:
        """Ancestors of v whose position lies strictly after u (u precedes v)."""
        lo = self.tpos[u]
        seen = set()
        stack = [p for p in self.preds[v] if self.tpos[p] > lo]
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            stack.extend(p for p in self.preds[c] if p not in seen and self.tpos[p] > lo)
        return sorted(seen, key=self.tpos.__getitem__)

    def would_create_cycle(self, a, b) -> bool:
        """Prop 7.1: a path a -> c -> ... -> b (or b to a) through a third node exists."""
        u, v = (a, b) if self.tpos[a] < self.tpos[b] else (b, a)
        window = self._ancestors_in_window(u, v)
        self._last_query = (u, v, window)
        return any(u in self.preds[c] for c in window)

    def merge(self, a, b, new) -> None:
        """Replace a and b by `new` (the caller checked `would_create_cycle(a, b)` is False)."""
        u, v = (a, b) if self.tpos[a] < self.tpos[b] else (b, a)
        if self._last_query and self._last_query[:2] == (u, v):
            window = self._last_query[2]
        else:
            window = self._ancestors_in_window(u, v)
        lo, hi = self.tpos[u], self.tpos[v]
        before = set(window)
        middle = [n for n in self.order[lo + 1 : hi] if n is not None]
        arranged = window + [new] + [n for n in middle if n not in before]
        arranged += [None] * (hi - lo + 1 - len(arranged))
        self.order[lo : hi + 1] = arranged
        for k, n in enumerate(arranged, start=lo):
            if n is not None:
                self.tpos[n] = k
        del self.tpos[u], self.tpos[v]
        preds = (self.preds.pop(u) | self.preds.pop(v)) - {u, v}
        succs = (self.succs.pop(u) | self.succs.pop(v)) - {u, v}
        self.preds[new], self.succs[new] = preds, succs
        for p in preds:
            self.succs[p] -= {u, v}
            self.succs[p].add(new)
        for s in succs:
            self.preds[s] -= {u, v}
            self.preds[s].add(new)
        self._last_query = None

    def ancestors(self, n) -> set:
        """All ancestors of n in the current graph (for tests and the exact solver)."""
        seen, stack = set(), list(self.preds[n])
        while stack:
            c = stack.pop()
            if c not in seen:
                seen.add(c)
                stack.extend(self.preds[c])
        return seen


def build_dag(snodes) -> FusionDag:
    """The dependence DAG over topologically sorted SchedulerNodes (data and WeakDep edges)."""
    return FusionDag(snodes)
