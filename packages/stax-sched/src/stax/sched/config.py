"""Scheduler thresholds (§7.3, §7.5) as one frozen dataclass, passed explicitly."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerConfig:
    """Every number the §7 pipeline uses. Defaults are the book's values."""

    max_rounds: int = 10  # Algorithm 7.1: at most 10 rounds of greedy fusion
    max_fusion_nodes: int = 128  # at most 128 nodes in one fused kernel
    max_fusion_buffers: int = 32  # at most 32 distinct buffers touched by one fused kernel
    min_shared_bytes: int = 1  # a pair must share at least this many bytes (same index) to fuse
    max_fusion_distance: int = 64  # lifetime extension limit: nodes farther apart (original order) are not fused
    score_sigma_ratio: int = 16  # when sigmas differ more than 16x, compare sigma only
    max_pairs_per_buffer: int = 64  # candidate pairs per shared buffer: users at most this far apart
    fuse_dependent_reductions: bool = False  # one loop nest may not hold a reduction reading another's result
    reorder: bool = True  # 7.5: choose the least-peak of four topological orders
    reuse: bool = True  # 7.5: reuse freed buffers of the same device/dtype/size
    inplace_reuse: bool = False  # 7.5: write a node's result into a dying input it reads at the same index
    inplace_reuse_graph_inputs: bool = False  # also into graph inputs (only if the caller donates them)
    # (graph input, graph output) pairs: the output may be written into that input's storage in place
    # (the caller overwrites the input with it after the call: AOTAutograd's data-mutated inputs)
    donated_inputs: tuple = ()
    plan_arena: bool = False  # 7.5: storage pool with fixed offsets (inference)
    arena_alignment: int = 64  # bytes; every buffer in the arena starts at a multiple of this
    pause_gc: bool = True  # hold Python's cyclic collector while scheduling (about 2x faster on big graphs)
