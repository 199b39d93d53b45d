"""The exact minimum-traffic fusion scheme (Def 7.3) for small graphs, to measure the greedy's gap.

Cost of a partition into kernels (Def 7.3): a buffer used outside its producer's
block (or a graph output) is written once and read once by every other block that
uses it; graph inputs are read once per block that uses them. A block is legal
when the same set-level test as greedy fusion accepts it (`fusion_legality`:
compatible loops through the policy, vertical reads at the write index, no
dependent reductions in one loop nest, size limits); the quotient graph must be
acyclic. Profitability heuristics of the greedy (shared-bytes threshold, distance
limit, one merge per round) do not apply here. Branch and bound over set partitions
in topological order (restricted growth: each partition is visited once), pruned by
block legality, partial acyclicity and a monotone partial cost; the NP-hardness of
Theorem 7.1 is why this is only for graphs of up to about 14 nodes.
"""

from __future__ import annotations

from stax.ir import ExternKernel, Graph, body_roots, loads

from .can_fuse import fusion_legality
from .config import SchedulerConfig
from .create_nodes import create_nodes
from .deps import WeakDep
from .nodes import LoopFusion
from .policy import CpuPolicy, GpuPolicy
from .topo import topological_sort


class _PermissivePolicy:
    """Accepts any loops: isolates the policy-independent part of the legality test."""

    name = "permissive"

    def loop_fusion(self, snodes, dependent_reductions):
        return "ok"


def _reads(n) -> set[str]:
    return {d.name for d in n.read_writes.reads if not isinstance(d, WeakDep)}


class _Problem:
    def __init__(self, graph: Graph, policy, config: SchedulerConfig):
        self.snodes = topological_sort(create_nodes(graph), graph.outputs)
        self.index = {n.buffer: k for k, n in enumerate(self.snodes)}
        self.size = {b.name: b.layout.nbytes() for b in (*graph.inputs, *graph.nodes)}
        self.outputs = set(graph.outputs)
        self.reads = [_reads(n) for n in self.snodes]
        self.preds = [{self.index[b] for b in r if b in self.index} for r in self.reads]
        self.policy, self.config = policy, config
        self._legal: dict = {}

    def legal(self, block: frozenset) -> bool:
        if len(block) == 1:
            return True
        if block not in self._legal:
            result = fusion_legality([self.snodes[k] for k in sorted(block)], self.policy, self.config)
            self._legal[block] = isinstance(result, LoopFusion)
        return self._legal[block]

    def hopeless(self, block: frozenset) -> bool:
        """Illegal, and no superset can be legal (prunes the search)."""
        if self.legal(block):
            return False
        if isinstance(self.policy, CpuPolicy):
            return True  # CPU legality is hereditary: adding nodes never restores shared loops
        if isinstance(self.policy, GpuPolicy):
            nodes = [self.snodes[k] for k in block]
            numels = {n.pointwise_numel() for n in nodes}
            curable = not any(n.is_reduction for n in nodes) and len(numels) == 2 and max(numels) % min(numels) == 0
            # pointwise nodes of N and N*r elements may still meet a reduction over (N, r)
            return not curable or fusion_legality(nodes, _PermissivePolicy(), self.config) != "ok"
        return False


def traffic(graph: Graph, partition) -> int:
    """Def 7.3's cost of `partition` (an iterable of sets of buffer names covering the live nodes)."""
    size = {b.name: b.layout.nbytes() for b in (*graph.inputs, *graph.nodes)}
    block_of = {b: k for k, blk in enumerate(partition) for b in blk}
    total = 0
    written = set()
    for k, blk in enumerate(partition):
        reads = set()
        for b in blk:
            node = graph.node(b)
            names = (set(node.inputs) if isinstance(node, ExternKernel)
                     else {ld.buffer for r in body_roots(node.body) for ld in loads(r)})
            for r in names:
                if block_of.get(r) != k:
                    reads.add(r)
                    if r in block_of:
                        written.add(r)
        total += sum(size[r] for r in reads)
        written |= {b for b in blk if b in graph.outputs}
    return total + sum(size[b] for b in written)


def optimal_fusion(graph: Graph, policy, config: SchedulerConfig | None = None, upper_bound: int | None = None,
                   max_nodes: int = 16) -> tuple[int, list[set[str]]]:
    """(minimum Def 7.3 traffic, one optimal partition as sets of buffer names)."""
    config = config or getattr(policy, "config", SchedulerConfig())
    p = _Problem(graph, policy, config)
    n = len(p.snodes)
    if n > max_nodes:
        raise ValueError(f"exact fusion search is for small graphs ({n} nodes > {max_nodes})")
    best = [upper_bound + 1 if upper_bound is not None else None, None]
    assign = [-1] * n
    blocks: list[set[int]] = []

    def partial_cost(k: int) -> int:
        """Traffic already implied by nodes 0..k-1 (only grows as more nodes are placed)."""
        total, written = 0, set()
        for blk_id, blk in enumerate(blocks):
            reads = set()
            for v in blk:
                for r in p.reads[v]:
                    u = p.index.get(r)
                    if u is None:
                        reads.add(r)
                    elif assign[u] != blk_id:
                        reads.add(r)
                        written.add(r)
            total += sum(p.size[r] for r in reads)
            written |= {p.snodes[v].buffer for v in blk if p.snodes[v].buffer in p.outputs}
        return total + sum(p.size[b] for b in written)

    def acyclic() -> bool:
        succ = {b: set() for b in range(len(blocks))}
        for v, preds in enumerate(p.preds):
            if assign[v] < 0:
                continue
            for u in preds:
                if assign[u] >= 0 and assign[u] != assign[v]:
                    succ[assign[u]].add(assign[v])
        state: dict = {}

        def visit(x) -> bool:
            state[x] = 1
            for y in succ[x]:
                if state.get(y) == 1 or (y not in state and not visit(y)):
                    return False
            state[x] = 2
            return True

        return all(x in state or visit(x) for x in succ)

    def search(k: int) -> None:
        if best[0] is not None and partial_cost(k) >= best[0]:
            return
        if k == n:
            if all(p.legal(frozenset(b)) for b in blocks):
                best[0] = partial_cost(k)
                best[1] = [set(b) for b in blocks]
            return
        for blk_id in range(len(blocks) + 1):
            if blk_id == len(blocks):
                blocks.append({k})
            else:
                if p.hopeless(frozenset(blocks[blk_id] | {k})):
                    continue
                blocks[blk_id].add(k)
            assign[k] = blk_id
            if acyclic():
                search(k + 1)
            assign[k] = -1
            if blk_id == len(blocks) - 1 and blocks[blk_id] == {k}:
                blocks.pop()
            else:
                blocks[blk_id].discard(k)

    search(0)
    if best[1] is None:  # the upper bound was already optimal
        return upper_bound, []
    return best[0], [{p.snodes[v].buffer for v in blk} for blk in best[1]]
