"""Pass 6 (§7.6 step 6): allocation, release and reuse events for a fixed kernel order (§7.5).

Every buffer gets an allocation before its producer kernel and a release after its
last user (graph inputs too; graph outputs never). Scanning the records in order
with a free pool: a released intermediate (not an output, not an input) joins the
pool; an allocation takes a pooled buffer of the same device, dtype and storage
size if holding that storage until now keeps occupancy at every step within the
current peak — emitted as `buf5 = buf2; del buf2  # reuse`, and the pooled buffer's
own release is dropped (its storage passes on). With symbolic sizes "same storage size"
means provably equal (the canonical expressions match: s0*s1 and s1*s0 share, s0 and
s1 never do, whatever their hints) and the peak checks use the hints. Optional in-place reuse lets a node
write into a buffer that dies at that node when it reads it at its write index.

In-place pairs are chosen first, and M* is Def 7.5's maximum with each pair counted
once at the step where it meets: Def 7.5 holds a last user's input and its output at
that moment together, an in-place write holds one storage for both, so Def 7.5's sum
alone could exceed the peak this plan reaches and would not bound it. Without in-place
reuse M* is exactly Def 7.5's. Pool reuse then never lets occupancy exceed M*, so the
plan's peak is M*.
"""

from __future__ import annotations

import logging

import numpy as np

from .arena import plan_arena
from .config import SchedulerConfig
from .deps import MemoryDep
from .lifetimes import MemoryModel
from .schedule import ALLOC, FREE, REUSE, MemoryEvent, MemoryPlan

log = logging.getLogger("stax.sched.memory")


def _inplace_candidate(g, snode, step, life, model, config, taken) -> str | None:
    """A dying buffer `snode` may overwrite: same device/dtype/size, read at its write index."""
    w = snode.write_dep
    if not isinstance(w, MemoryDep) or len(g.snodes) != 1:
        return None
    mine = model.buffers[snode.buffer]
    for d in sorted(snode.read_writes.reads, key=str):  # the same victim in every process (hash seed)
        r = d.name
        info = model.buffers.get(r)
        if info is None or r in taken or info.is_output or not isinstance(d, MemoryDep):
            continue
        if info.is_input and not (config.inplace_reuse_graph_inputs or (r, snode.buffer) in config.donated_inputs):
            continue
        lo, hi = life[r]
        if hi != step or (lo == step and not info.is_input):
            continue
        if (info.device, info.dtype, info.storage_size) != (mine.device, mine.dtype, mine.storage_size):
            continue
        same_buffer = [x for x in snode.read_writes.reads if x.name == r]
        if len(same_buffer) == 1 and d.index == w.index:
            return r
    return None


def plan_memory(order, model: MemoryModel, config: SchedulerConfig) -> MemoryPlan:
    life = model.lifetimes(order)
    occ = np.array(model.occupancy(order, life), dtype=np.int64)
    taken: set[str] = set()  # buffers whose storage passed to a later buffer (no release event)
    in_place: dict[str, str] = {}  # buffer -> the dying buffer it overwrites
    if config.inplace_reuse:
        # A victim dies at its writer's step, so no pool reuse can take it first: these choices
        # are independent of the pool's, and are made before M* so that M* counts each pair once.
        for k, g in enumerate(order):
            for snode in g.snodes:
                victim = _inplace_candidate(g, snode, k, life, model, config, taken)
                if victim is not None:
                    taken.add(victim)
                    in_place[snode.buffer] = victim
                    occ[k] -= model.buffers[snode.buffer].nbytes
    lower_bound = int(occ.max()) if len(occ) else 0
    peak = lower_bound
    dying: dict[int, list[str]] = {}
    for name, (_, hi) in life.items():
        if name not in model.outputs:
            dying.setdefault(hi, []).append(name)
    events: list = []
    pool: dict[tuple, list[tuple[str, int]]] = {}  # (device, dtype, storage size) -> [(buffer, freed after step)]
    for k, g in enumerate(order):
        for snode in g.snodes:
            b = snode.buffer
            info = model.buffers[b]
            victim = in_place.get(b)
            if victim is not None:
                events.append(MemoryEvent(k, REUSE, b, victim))
                log.debug("%s = %s; del %s  # reuse (in place)", b, victim, victim)
                continue
            key = (info.device, info.dtype, info.storage_size)
            chosen = None
            if config.reuse and not info.is_output and not g.is_extern and pool.get(key):
                # The most recently freed candidate has the shortest gap to hold; every older
                # candidate's gap contains it, so if this one would raise the peak, all would.
                name, freed = pool[key][-1]
                gap = occ[freed + 1 : k]
                if len(gap) == 0 or int(gap.max()) + info.nbytes <= peak:
                    chosen = pool[key].pop()
            if chosen is None:
                events.append(MemoryEvent(k, ALLOC, b))
                continue
            name, freed = chosen
            occ[freed + 1 : k] += info.nbytes
            taken.add(name)
            events.append(MemoryEvent(k, REUSE, b, name))
            log.debug("%s = %s; del %s  # reuse", b, name, name)
        for name in sorted(dying.get(k, []), key=lambda n: (model.buffers[n].is_input, n)):
            if name in taken:
                continue
            events.append(MemoryEvent(k, FREE, name))
            info = model.buffers[name]
            if not info.is_input:
                pool.setdefault((info.device, info.dtype, info.storage_size), []).append((name, k))
    # A pooled buffer that was reused lost its release; drop the events that were already emitted.
    events = [e for e in events if not (e.kind == FREE and e.buffer in taken)]
    # Symbolic sizes: no fixed offsets exist (the pool is off; reuse above still applies).
    arena = plan_arena(order, model, life, config.arena_alignment) if config.plan_arena and not model.symbolic else None
    log.debug("peak %d B, M* %d B%s", int(occ.max()) if len(occ) else 0, lower_bound,
              f", arena {arena[0]} B" if arena else "")
    return MemoryPlan(
        tuple(events),
        int(occ.max()) if len(occ) else 0,
        lower_bound,
        arena[0] if arena else None,
        arena[1] if arena else (),
    )
