"""The legality test of Algorithm 7.1 line 3 and the score of line 4 (§7.3).

Legality is a property of the node set (`fusion_legality`, also used by the exact
solver): compatible iteration spaces through the policy (Def 7.2), vertical reads
at exactly the producer's injective write index after normalization (Prop 7.2;
any other distance is rejected, Prop 7.3), no reduction that needs another's
finished result inside one loop nest, at most 128 nodes and 32 buffers.
`can_fuse` adds the pair conditions: not extern, same device/stream, enough shared
bytes, no excessive lifetime extension. Every rejection carries its reason.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from .config import SchedulerConfig
from .deps import MemoryDep, WeakDep
from .nodes import LoopFusion

SCATTER_REASON = "scatters are not fused (data-dependent stores: a consumer must see every scatter done)"


class Verdict(NamedTuple):
    """can_fuse's answer for one pair (a named tuple: tens of thousands are made per large graph)."""

    ok: bool
    reason: str
    loop_fusion: LoopFusion | None = None
    score: tuple | None = None


def _check_read(c_name, d, p) -> str | None:
    """A read `d` (by `c_name`) of the buffer `p` writes must be at p's injective write index."""
    if isinstance(d, WeakDep):
        return None
    w = p.write_dep
    if not isinstance(d, MemoryDep):
        return f"index mismatch: {c_name} reads {d.name} through an unanalyzable access ({d})"
    if not p.writes_injectively:
        return f"index mismatch: {p.name} writes {d.name} at a non-injective index ({w})"
    if d != w:
        return f"index mismatch: {d.name} written at {w.index}, read by {c_name} at {d.index}"
    return None


def _vertical_problem(snodes) -> str | None:
    """Every read of a buffer produced inside the set must be at the producer's write index."""
    producer = {n.buffer: n for n in snodes}
    for c in snodes:
        for d, p in _reads_from(c, producer.get, skip=c):
            problem = _check_read(c.name, d, p)
            if problem:
                return problem
    return None


def _reads_from(consumer, producer_of, skip=None) -> list:
    """[(read, its producer)] for the reads of `consumer` that `producer_of` knows, in the order of their
    text: a deterministic first problem under any hash seed (the log, the hash). Only these few reads
    are sorted, so the (sympy-printed) text of the others is never needed."""
    found = []
    for d in consumer.read_writes.reads:
        p = producer_of(d.name)
        if p is not None and p is not skip:
            found.append((d, p))
    if len(found) > 1:
        found.sort(key=lambda dp: str(dp[0]))
    return found


def _cross_reads(producers, consumers) -> tuple[bool, str | None]:
    """(does `consumers` read what `producers` writes?, the first illegal such read)."""
    if consumers.read_writes.read_names.isdisjoint(producers.written_buffers):
        return False, None  # most candidate pairs: one set test instead of a look-up per read
    found = _reads_from(consumers, producers.producer)
    for d, p in found:
        problem = _check_read(consumers.name, d, p)
        if problem:
            return True, problem
    return bool(found), None


def dependent_reductions(snodes) -> str | None:
    """A reduction in the set that (transitively, inside the set) reads another reduction's result."""
    if sum(1 for n in snodes if n.is_reduction) < 2:
        return None  # it takes two (most candidate pairs: the walk below finds nothing)
    producer = {n.buffer: n for n in snodes}
    feeds: dict = {}  # node -> reductions inside the set it depends on
    for n in sorted(snodes, key=lambda x: x.pos):
        deps = set()
        for d in n.read_writes.reads:
            p = producer.get(d.name)
            if p is not None and p is not n:
                deps |= feeds.get(p, set())
                if p.is_reduction:
                    deps.add(p)
        feeds[n] = deps
        if n.is_reduction and deps:
            first = min(deps, key=lambda x: x.pos)
            return f"{n.name} needs the finished reduction {first.name}"
    return None


def _basic_problem(snodes, config: SchedulerConfig) -> str | None:
    if any(n.is_extern for n in snodes):
        return "extern kernels are never fused"
    if any(n.is_scan for n in snodes):
        return "scans are not fused (the scan axis carries a dependence)"
    if any(n.is_scatter for n in snodes):
        return SCATTER_REASON
    devices = {n.device for n in snodes}
    if len(devices) > 1:
        return f"different devices/streams {'/'.join(sorted(devices))}"
    if len(snodes) > config.max_fusion_nodes:
        return f"too many nodes ({len(snodes)} > {config.max_fusion_nodes})"
    return None


def _too_many_buffers(names, config: SchedulerConfig) -> str | None:
    if len(names) > config.max_fusion_buffers:
        return f"too many buffers ({len(names)} > {config.max_fusion_buffers})"
    return None


def fusion_legality(snodes, policy, config: SchedulerConfig) -> LoopFusion | str:
    """How the node set `snodes` shares loops as one kernel, or why it cannot (a set property)."""
    problem = _basic_problem(snodes, config)
    if problem:
        return problem
    names = frozenset().union(*(n.read_writes.buffer_names() for n in snodes))
    problem = _too_many_buffers(names, config) or _vertical_problem(snodes)
    if problem:
        return problem
    return policy.loop_fusion(snodes, dependent_reductions(snodes))


def pair_legality(a, b, policy, config: SchedulerConfig) -> LoopFusion | str:
    """fusion_legality(a.snodes + b.snodes) for two legal groups that `can_fuse` has already
    checked for kind, device and node count: only what crosses between them is checked."""
    union = a.snodes + b.snodes
    na, nb = a.read_writes.buffer_names(), b.read_writes.buffer_names()
    if len(na) + len(nb) > config.max_fusion_buffers:  # else the union cannot be too large either
        problem = _too_many_buffers(na | nb, config)
        if problem:
            return problem
    ab, problem = _cross_reads(a, b)
    if problem:
        return problem
    ba, problem = _cross_reads(b, a)
    if problem:
        return problem
    dependent = a.dependent_reductions or b.dependent_reductions
    if dependent is None and (ab or ba) and (a.is_reduction or b.is_reduction):
        dependent = dependent_reductions(union)
    return policy.loop_fusion(union, dependent)


def score(a, b) -> tuple:
    """(tau, sigma, omega, -delta): same-kind bonus, shared bytes, shared buffers, -distance."""
    common = a.read_writes.memory_deps & b.read_writes.memory_deps
    sigma = sum(d.nbytes for d in common)
    omega = len(a.read_writes.buffer_names() & b.read_writes.buffer_names())
    tau = int(a.is_reduction == b.is_reduction and sigma > 0)
    return (tau, sigma, omega, -distance(a, b))


def distance(a, b) -> int:
    """Gap between the two in the original (graph) order: how far fusing moves one of them."""
    return max(0, b.min_pos - a.max_pos, a.min_pos - b.max_pos)


def compare_scores(s1: tuple, s2: tuple, ratio: int = 16) -> int:
    """Lexicographic, except that sigmas more than `ratio`x apart decide alone."""
    a, b = s1[1], s2[1]
    if max(a, b) > ratio * min(a, b):
        return (a > b) - (a < b)
    return (s1 > s2) - (s1 < s2)


def sort_by_score(items, key, ratio: int = 16) -> list:
    """Highest score first (Algorithm 7.1 line 4).

    The comparison is not transitive (the sigma-ratio rule), so the result depends on the
    comparisons timsort makes: this sorts (score, item) pairs by `compare_scores` of their
    scores — the same comparisons on the same sequence as comparing `key(item)`s, without
    calling `key` twice per comparison (sorting thousands of candidates per round).
    """

    def descending(x: tuple, y: tuple) -> int:
        return compare_scores(y[0], x[0], ratio)

    decorated = sorted(((key(x), x) for x in items), key=functools.cmp_to_key(descending))
    return [x for _, x in decorated]


def can_fuse(a, b, policy, config: SchedulerConfig) -> Verdict:
    if a.is_extern or b.is_extern:
        return Verdict(False, "extern kernels are never fused")
    if a.is_scan or b.is_scan:
        return Verdict(False, "scans are not fused (the scan axis carries a dependence)")
    if a.is_scatter or b.is_scatter:
        return Verdict(False, SCATTER_REASON)
    if a.device != b.device:
        return Verdict(False, f"different devices/streams {a.device}/{b.device}")
    if len(a.snodes) + len(b.snodes) > config.max_fusion_nodes:
        return Verdict(False, f"too many nodes ({len(a.snodes) + len(b.snodes)} > {config.max_fusion_nodes})")
    s = score(a, b)
    if s[1] < config.min_shared_bytes:
        # A producer/consumer pair shares nothing only when the indices differ: say so.
        problem = _cross_reads(a, b)[1] or _cross_reads(b, a)[1]
        reason = problem or f"shared bytes {s[1]} below threshold {config.min_shared_bytes}"
        return Verdict(False, reason, score=s)
    if -s[3] > config.max_fusion_distance:
        return Verdict(
            False, f"peak memory: {-s[3]} nodes apart would extend lifetimes (> {config.max_fusion_distance})", score=s
        )
    result = pair_legality(a, b, policy, config)
    if isinstance(result, str):
        return Verdict(False, result, score=s)
    return Verdict(True, result.reason, result, s)
