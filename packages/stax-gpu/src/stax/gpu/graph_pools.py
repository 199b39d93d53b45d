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
turned off, the module freed) is freed with its graph, but stays listed, by weak references to its
outputs' storages, until none is alive: until then their blocks are someone's tensors. The pools
hold no instance: a freed module's memory goes back (a registry that kept them leaked 1.4 GiB of a
ResNet-18 training step after its model was gone).
"""

from __future__ import annotations

import weakref

from torch.multiprocessing.reductions import StorageWeakRef


class _Member:
    """A pool member: its instance while the module keeps it, then weak references to the
    storages of its outputs (a user may still hold them: a dropped instance frees its graph,
    not their memory)."""

    __slots__ = ("inst", "storages")

    def __init__(self, inst):
        self.inst = weakref.ref(inst)
        self.storages = tuple(StorageWeakRef(o.untyped_storage()) for o in inst.result)

    def idle(self) -> bool:
        inst = self.inst()
        if inst is not None:
            return inst.idle()
        return all(s.expired() for s in self.storages)

    def gone(self) -> bool:
        return self.inst() is None and all(s.expired() for s in self.storages)


class Pool:
    """One shared pool: its allocator handle and its members (graph instances) in capture order."""

    __slots__ = ("handle", "members", "used")

    def __init__(self, handle):
        self.handle = handle
        self.members: list[_Member] = []
        self.used = False  # captured into: the allocator holds it while one of its graphs lives

    def join(self, inst) -> None:
        """`inst` was captured into this pool: it is the latest member."""
        self.members.append(_Member(inst))
        self.used = True

    def live(self) -> bool:
        """Can a capture join it: never captured into, or one of its graphs still alive."""
        return not self.used or any(m.inst() is not None for m in self.members)

    def clear_for(self, inst) -> bool:
        """Whether replaying `inst` overwrites nothing anyone holds: every later member is idle."""
        for m in reversed(self.members):
            if m.inst() is inst:
                return True
            if not m.idle():
                return False
        return True

    def sweep(self) -> None:
        """Forget dropped members whose outputs nobody holds (their memory is the pool's again)."""
        self.members = [m for m in self.members if not m.gone()]


class PoolRegistry:
    """Pools by (graph backend, device, slot). One registry per process (`POOLS`); tests make their own."""

    def __init__(self):
        self.pools: dict[tuple, Pool] = {}

    def pool(self, backend, device, slot: int) -> Pool:
        """Slot `slot`'s pool, a fresh one when every graph captured into the current one is gone: CUDA's
        allocator counts a pool's graphs and refuses a capture into one whose count fell to 0 (its
        blocks may still hold dropped members' outputs, which stay safe in the old pool)."""
        key = (backend, str(device), slot)
        p = self.pools.get(key)
        if p is None or not p.live():
            p = self.pools[key] = Pool(backend.new_pool())
        return p


POOLS = PoolRegistry()
