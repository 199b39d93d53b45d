"""Memory pools shared by a process's CUDA graphs: instance slot k of every module captures into pool k.

With a private pool per graph, every graph keeps the peak memory of its capture reserved for good:
a training step whose forward, backward and optimizer are each graphed holds all their intermediates
at once (ViT-tiny on the H200: 5.2 GiB reserved against 2.1 for a plain step). In a shared pool a
later capture reuses the blocks an earlier one freed, as plain calls reuse memory.

The price is one rule. A replay writes the blocks its capture used for intermediates again, and
those may since hold the outputs of any graph captured after it in the same pool. So a member
replays only while every member captured after it is idle (nothing outside holds its outputs; its
own outputs are GraphedCall's check). Outputs of earlier members are safe: their instances hold
them, so no later capture was given their blocks. A member its module drops (keys evicted, graphs
turned off, the module freed) stays listed until its outputs are idle: until then their blocks are
someone's tensors.
"""

from __future__ import annotations

import weakref


class Pool:
    """One shared pool: its allocator handle and its members (graph instances) in capture order."""

    __slots__ = ("handle", "members")

    def __init__(self, handle):
        self.handle = handle
        self.members: list = []

    def join(self, inst, owner) -> None:
        """`inst` was captured into this pool for `owner` (a GraphedCall); it is the latest member."""
        inst.owner = weakref.ref(owner)
        self.members.append(inst)

    def clear_for(self, inst) -> bool:
        """Whether replaying `inst` overwrites nothing anyone holds: every later member is idle.
        Members that are dropped and idle leave the list here."""
        gone = []
        clear = True
        for m in reversed(self.members):
            if m is inst:
                break
            idle = m.idle()
            if idle and (m.retired or m.owner() is None):
                gone.append(m)
            elif not idle:
                clear = False
                break
        for m in gone:
            self.members.remove(m)
        return clear

    def sweep(self) -> None:
        """Forget dropped members nobody holds outputs of (their memory goes back to the pool)."""
        self.members = [m for m in self.members if not ((m.retired or m.owner() is None) and m.idle())]


class PoolRegistry:
    """Pools by (graph backend, device, slot). One registry per process (`POOLS`); tests make their own."""

    def __init__(self):
        self.pools: dict[tuple, Pool] = {}

    def pool(self, backend, device, slot: int) -> Pool:
        key = (backend, str(device), slot)
        p = self.pools.get(key)
        if p is None:
            p = self.pools[key] = Pool(backend.new_pool())
        return p


POOLS = PoolRegistry()
