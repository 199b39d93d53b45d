"""Pass 4 (§7.6 step 4): greedy fusion, Algorithm 7.1, with the fusion log of §7.4.

Each round: candidate pairs are nodes sharing a buffer (only users of a buffer at
most `max_pairs_per_buffer` apart, which keeps the candidate set linear in the
graph); `can_fuse` filters them (`found N possible fusions`); they are merged in
descending score order, each node at most once per round, when Prop 7.1 finds no
cycle. At most 10 rounds; stop when a round merges nothing. Log lines go to the
`stax.sched.fusion` logger at DEBUG, and the same records into Schedule.fusion_log.
"""

from __future__ import annotations

import logging

from .ancestors import FusionDag
from .can_fuse import can_fuse, dependent_reductions, sort_by_score
from .config import SchedulerConfig
from .deps import ReadWrites
from .nodes import FusedGroup
from .schedule import FusionRecord

log = logging.getLogger("stax.sched.fusion")


class Candidates:
    """Pairs of current nodes that share a buffer (Algorithm 7.1 line 2), kept across merges.

    For each buffer only users at most `window` apart (in the current order) are paired,
    which keeps the candidate set linear in the graph even for widely shared buffers.
    Extern calls, scans and scatters never fuse and are left out.
    """

    def __init__(self, dag: FusionDag, window: int):
        self.dag, self.window = dag, window
        self.users: dict[str, list] = {}
        for g in dag.nodes():
            if g.is_extern or g.is_scan or g.is_scatter:
                continue
            for name in g.read_writes.buffer_names():
                self.users.setdefault(name, []).append(g)

    def all_pairs(self) -> set:
        pairs = set()
        for group in self.users.values():
            for i, g in enumerate(group):
                for h in group[i + 1 : i + 1 + self.window]:
                    pairs.add((g, h))
        return pairs

    def pairs_of(self, g) -> set:
        tpos = self.dag.tpos
        pairs = set()
        for name in g.read_writes.buffer_names():
            group = self.users[name]
            if len(group) > 2 * self.window + 1:
                group = sorted(group, key=tpos.__getitem__)
                i = group.index(g)
                group = group[max(0, i - self.window) : i + 1 + self.window]
            for h in group:
                if h is not g:
                    pairs.add((g, h) if tpos[g] < tpos[h] else (h, g))
        return pairs

    def replace(self, a, b, new) -> None:
        for old in (a, b):
            for name in old.read_writes.buffer_names():
                self.users[name].remove(old)
        for name in new.read_writes.buffer_names():
            self.users[name].append(new)


def _fmt_score(s: tuple) -> str:
    return f"(tau={s[0]}, sigma={s[1]}, omega={s[2]}, -delta={s[3]})"


def greedy_fusion(dag: FusionDag, policy, config: SchedulerConfig) -> list[FusionRecord]:
    """Fuse nodes of `dag` in place; returns the fusion log."""
    records: list[FusionRecord] = []
    seen: dict = {}  # {a.name, b.name} -> Verdict; a pair's verdict never changes
    debug = log.isEnabledFor(logging.DEBUG)
    candidates = Candidates(dag, config.max_pairs_per_buffer)
    pairs = candidates.all_pairs()
    if debug:
        for g in dag.nodes():
            if g.is_extern or g.is_scan or g.is_scatter:
                kind = "extern kernel" if g.is_extern else "scan" if g.is_scan else "scatter"
                log.debug("%s: %s, never fused", g.name, kind)
    for rnd in range(1, config.max_rounds + 1):
        before = len(dag)
        possible = []
        for a, b in sorted(pairs, key=lambda p: (dag.tpos[p[0]], dag.tpos[p[1]])):
            key = frozenset((a.name, b.name))
            verdict = seen.get(key)
            if verdict is None:
                verdict = seen[key] = can_fuse(a, b, policy, config)
                if not verdict.ok:
                    records.append(FusionRecord(rnd, a.name, b.name, False, verdict.reason, verdict.score))
                    if debug:
                        log.debug("cannot fuse %s with %s: %s", a.name, b.name, verdict.reason)
            if verdict.ok:
                possible.append((a, b, verdict))
        if debug:
            log.debug("found %d possible fusions", len(possible))
        possible = sort_by_score(possible, key=lambda p: p[2].score, ratio=config.score_sigma_ratio)
        if debug:
            for a, b, v in possible:
                log.debug("score %s %s: %s", a.name, b.name, _fmt_score(v.score))
        merged: set = set()
        new_groups = []
        for a, b, verdict in possible:
            if a in merged or b in merged:  # one merge per node per round; the pair is gone
                continue
            if dag.would_create_cycle(a, b):  # permanent: merging only adds paths
                reason = "would create a cycle (Prop 7.1)"
                records.append(FusionRecord(rnd, a.name, b.name, False, reason, verdict.score))
                if debug:
                    log.debug("cannot fuse %s with %s: %s", a.name, b.name, reason)
                continue
            snodes = a.snodes + b.snodes
            rw = ReadWrites.merge(n.read_writes for n in (a, b))
            new = FusedGroup(snodes, rw, verdict.loop_fusion, dependent_reductions(snodes))
            dag.merge(a, b, new)
            candidates.replace(a, b, new)
            merged |= {a, b, new}
            new_groups.append(new)
            records.append(FusionRecord(rnd, a.name, b.name, True, verdict.reason, verdict.score))
            if debug:
                log.debug("fusing %s with %s", a.name, b.name)
                log.debug("%s", new.header())
                log.debug("%s: %s, score %s", new.name, verdict.reason, _fmt_score(verdict.score))
        if len(dag) == before:
            break
        # Every legal pair of this round was merged, refused for a cycle (for good) or lost a
        # member; pairs of unchanged nodes keep their verdict. New candidates involve new nodes.
        pairs = set()
        for g in new_groups:
            pairs |= candidates.pairs_of(g)
    return records
