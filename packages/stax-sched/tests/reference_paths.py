"""The scheduler's fast paths (issue 24), each replaced by the plain computation it stands for.

`install(monkeypatch)` puts every reference below in place of its fast path; test_fast_paths.py then
schedules the same graphs both ways and requires the same kernels, fusion log, memory plan and log
lines. The references are the code as it was before the speed work (stax-sched at 6db3501), so the
fast paths are checked against the unoptimized scheduler run in the same test, not against recorded
numbers. A new fast path in stax.sched gets its row in `PATCHES`, or nothing checks its decisions.
"""

from __future__ import annotations

import functools

from stax.ir import Layout, provably_equal
from stax.ir.index import as_int
from stax.sched import can_fuse as can_fuse_mod
from stax.sched import create_nodes as create_nodes_mod
from stax.sched import deps, fusion, policy
from stax.sched.deps import MemoryDep, WeakDep
from stax.sched.lifetimes import MemoryModel
from stax.sched.nodes import FUSED_NODE, OUTER_LOOP_FUSED_NODE, LoopFusion
from stax.sched.policy import OUTER_LOOP_FUSION, SAME_VARS_REDUCE


def memory_dep_str(self) -> str:
    """MemoryDep text printed from sympy every time (fast: once per dependence, once per distinct index)."""
    ranges = ", ".join(f"{v}: {s}" for v, s in self.index.ranges.items())
    return f"MemoryDep('{self.name}', {self.index.index}, {{{ranges}}})"


def reads_from(consumer, producer_of, skip=None) -> list:
    """Every read sorted by its text, then filtered (fast: only the reads a producer writes are sorted)."""
    found = []
    for d in sorted(consumer.read_writes.reads, key=str):
        p = producer_of(d.name)
        if p is not None and p is not skip:
            found.append((d, p))
    return found


def cross_reads(producers, consumers) -> tuple[bool, str | None]:
    """A look-up per read of the consumer (fast: one set test first for pairs that share nothing)."""
    related = False
    for d in sorted(consumers.read_writes.reads, key=str):
        p = producers.producer(d.name)
        if p is not None:
            related = True
            problem = can_fuse_mod._check_read(consumers.name, d, p)
            if problem:
                return True, problem
    return related, None


def pair_legality(a, b, policy_, config):
    """The buffer union built for every pair (fast: only when the two together could exceed the limit)."""
    union = a.snodes + b.snodes
    problem = can_fuse_mod._too_many_buffers(a.read_writes.buffer_names() | b.read_writes.buffer_names(), config)
    if problem:
        return problem
    ab, problem = cross_reads(a, b)
    if problem:
        return problem
    ba, problem = cross_reads(b, a)
    if problem:
        return problem
    dependent = a.dependent_reductions or b.dependent_reductions
    if dependent is None and (ab or ba) and (a.is_reduction or b.is_reduction):
        dependent = can_fuse_mod.dependent_reductions(union)
    return policy_.loop_fusion(union, dependent)


def groups_text(snodes) -> str:
    """Iteration groups printed per rejection (fast: once per node)."""
    return " vs ".join(g for _, g in sorted({(str(n.group_at_hints), str(n.group)) for n in snodes}))


def outer_loop_depth(snodes) -> int:
    first = snodes[0].sizes[0]
    limit = min(len(n.sizes[0]) for n in snodes)
    best = 0
    for k in range(1, limit + 1):
        if not all(provably_equal(n.sizes[0][k - 1], first[k - 1]) for n in snodes):
            break
        if all(k in n.loops.boundaries for n in snodes):
            best = k
    return best


def cpu_loop_fusion(self, snodes, dependent_reductions):
    """CpuPolicy computed from the nodes at every call (fast: remembered per tuple of LoopViews)."""
    sizes = {n.sizes for n in snodes}
    if len(sizes) == 1 and dependent_reductions is None:
        return LoopFusion(FUSED_NODE, SAME_VARS_REDUCE, 0, next(iter(sizes)))
    depth = outer_loop_depth(snodes)
    if depth == 0:
        why = f" ({dependent_reductions})" if dependent_reductions and len(sizes) == 1 else ""
        return f"incompatible iteration spaces: {groups_text(snodes)} (outer loop fusion depth 0){why}"
    outer = snodes[0].sizes[0][:depth]
    return LoopFusion(OUTER_LOOP_FUSED_NODE, f"{OUTER_LOOP_FUSION} depth {depth}", depth, (outer, ()))


def check_read(c_name, d, p) -> str | None:
    """The producer's write checked at every read (fast: once per producer)."""
    if isinstance(d, WeakDep):
        return None
    w = p.write_dep
    if not isinstance(d, MemoryDep):
        return f"index mismatch: {c_name} reads {d.name} through an unanalyzable access ({d})"
    if not isinstance(w, MemoryDep) or not w.is_injective() or not provably_equal(w.numel_expr(), p.pointwise_numel()):
        return f"index mismatch: {p.name} writes {d.name} at a non-injective index ({w})"
    if d != w:
        return f"index mismatch: {d.name} written at {w.index}, read by {c_name} at {d.index}"
    return None


def sort_by_score(items, key, ratio: int = 16) -> list:
    """`key` called on both sides of every comparison (fast: scores looked up once per item)."""
    cmp = functools.cmp_to_key(lambda x, y: can_fuse_mod.compare_scores(key(y), key(x), ratio))
    return sorted(items, key=cmp)


def dependent_reductions(snodes) -> str | None:
    """The walk for every set (fast: not for sets with fewer than two reductions, where it finds nothing)."""
    producer = {n.buffer: n for n in snodes}
    feeds: dict = {}
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


def canonical(table: dict, dep):
    """Every node keeps its own dependence objects (fast: one object per distinct dependence)."""
    return dep


def storage_size(self) -> int:
    """Layout.storage_size recomputed from sympy sizes at every call (fast: once per layout)."""
    if any(as_int(s) == 0 for s in self.sizes):
        return 0
    return as_int(self.offset) + sum((as_int(s) - 1) * as_int(st) for s, st in zip(self.sizes, self.strides)) + 1


def lifetimes(self, order) -> dict:
    """Lifetimes with a list of user steps per buffer (fast: one max over a generator)."""
    step = {g: k for k, g in enumerate(order)}
    end = max(len(order) - 1, 0)
    out = {}
    for name in self.inputs:
        users = [step[u] for u in self.users.get(name, ())]
        out[name] = (0, end if name in self.outputs else max(users, default=0))
    for g in order:
        for name in self.writes[g]:
            k = step[g]
            users = [step[u] for u in self.users.get(name, ())]
            out[name] = (k, end if name in self.outputs else max(users, default=k))
    return out


def occupancy(self, order, life=None) -> list:
    """Occupancy that recomputes the lifetimes and sums step by step (fast: given lifetimes, accumulate)."""
    occ = [0] * (max(len(order), 1) + 1)
    for name, (lo, hi) in self.lifetimes(order).items():
        occ[lo] += self.buffers[name].nbytes
        occ[hi + 1] -= self.buffers[name].nbytes
    total, out = 0, []
    for k in range(len(order)):
        total += occ[k]
        out.append(total)
    return out


PATCHES = [
    (deps.MemoryDep, "__str__", memory_dep_str),
    (can_fuse_mod, "_reads_from", reads_from),
    (can_fuse_mod, "_cross_reads", cross_reads),
    (can_fuse_mod, "pair_legality", pair_legality),
    (policy.CpuPolicy, "loop_fusion", cpu_loop_fusion),
    (can_fuse_mod, "_check_read", check_read),
    (can_fuse_mod, "dependent_reductions", dependent_reductions),
    (fusion, "dependent_reductions", dependent_reductions),
    (fusion, "sort_by_score", sort_by_score),
    (create_nodes_mod, "_canonical", canonical),
    (Layout, "storage_size", storage_size),
    (MemoryModel, "lifetimes", lifetimes),
    (MemoryModel, "occupancy", occupancy),
]


def install(monkeypatch) -> None:
    """Replace every fast path by its reference (raises if a patched name no longer exists)."""
    for owner, name, ref in PATCHES:
        monkeypatch.setattr(owner, name, ref)
