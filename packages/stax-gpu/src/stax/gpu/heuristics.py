"""Launch configurations: block sizes and num_warps per kernel form, best guess first.

The first candidate is the heuristic choice (used as is under the interpreter, or
when autotuning is off); the rest form the small set the autotuner races on a real
GPU. The set is bounded (config.max_autotune_configs per variant) so compile time
stays bounded. Under the interpreter every program instance costs milliseconds, so
blocks there are as large as the caps allow and the grid stays tiny.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import GpuConfig
from .kernels import LOOPED, PERSISTENT, TILED, KernelSource, next_pow2
from .plan import KernelPlan
from .symbolic import hint

# (YBLOCK, XBLOCK, num_warps) of 2-D tiles, raced in this order up to max_autotune_configs (the
# first is kept unless another wins by the tuner's margin): 64x64 with 8 warps, Inductor's choice
# too, was the best tile measured for transposes (benchmarks/results).
TILES = [(64, 64, 8), (64, 64, 4), (32, 32, 4), (32, 128, 4), (128, 32, 4), (64, 128, 8)]


@dataclass(frozen=True)
class LaunchConfig:
    variant: str
    blocks: tuple  # ((name, value), ...)
    num_warps: int = 4
    num_stages: int = 1

    def kwargs(self) -> dict:
        return dict(self.blocks)

    def key(self) -> str:
        b = ",".join(f"{k}={v}" for k, v in self.blocks)
        return f"{self.variant}:{b},num_warps={self.num_warps},num_stages={self.num_stages}"

    def __str__(self) -> str:
        return self.key()


def _cap(v: int, cap: int | None) -> int:
    return min(v, cap) if cap else v


def _dedupe(cands: list[LaunchConfig], limit: int) -> list[LaunchConfig]:
    out, seen = [], set()
    for c in cands:
        if c.key() not in seen:
            seen.add(c.key())
            out.append(c)
    return out[:limit]


def candidates(plan: KernelPlan, ks: KernelSource, config: GpuConfig, xn: int | None = None) -> list[LaunchConfig]:
    """Launch configs for one kernel variant, heuristic choice first. Symbolic sizes are taken at
    their hints: a block is correct for every size (masked tails), only its speed depends on them.
    `xn`: the x element count to choose for instead of its hint (a size class's, size_classes.py)."""
    xn = max(hint(plan.xnumel, plan.size_hints) if xn is None else xn, 1)
    xcap = _grid_cap(plan, xn, config)
    if ks.variant == PERSISTENT:
        raw = _persistent(plan, ks.r0_block, xn, config)
        fix = lambda x: _cap(min(x, next_pow2(xn)), xcap)  # noqa: E731
        row = (("R0_BLOCK", ks.r0_block),) if "R0_BLOCK" in ks.blocks else ()  # sized per call: at the hint
        cands = [LaunchConfig(ks.variant, (("XBLOCK", fix(x)),) + row, w) for x, w in raw]
    elif ks.variant == LOOPED:
        rcap = config.r0_block_cap
        rn = next_pow2(max(hint(plan.rnumel, plan.size_hints), 1))
        cands = [
            LaunchConfig(ks.variant, (("XBLOCK", _cap(min(x, next_pow2(xn)), xcap)),
                                      ("R0_BLOCK", _cap(min(r, rn), rcap))), w)
            for x, r, w in _looped(plan, xn, config)
        ]
    elif ks.variant == TILED:
        yn = max(hint(plan.ynumel, plan.size_hints), 1)
        cands = [
            LaunchConfig(ks.variant, (("YBLOCK", _cap(min(y, next_pow2(yn)), xcap)),
                                      ("XBLOCK", _cap(min(x, next_pow2(xn)), xcap))), w)
            for y, x, w in ([(64, 64, 4)] if config.interpret else TILES)
        ]
    else:
        sizes = [(4096, 8)] if config.interpret else [(1024, 4), (2048, 8), (512, 4), (4096, 8)]
        cands = []
        for x, w in sizes:
            x = _cap(min(x, next_pow2(xn)), xcap)
            cands.append(LaunchConfig(ks.variant, (("XBLOCK", x),), max(1, min(w, x // 128))))
    return _dedupe(cands, 1 if config.interpret and not config.autotune else config.max_autotune_configs)


def at_row_block(cfg: LaunchConfig, r: int) -> LaunchConfig:
    """A persistent config made at its hint's R0_BLOCK, for rows padded to r (SizedLauncher's row
    buckets): a longer row takes as many fewer rows per program (the program's elements, so its
    registers, stay), with the warps _persistent gives rows of 512 and more; a shorter one keeps XBLOCK."""
    b = cfg.kwargs()
    base = b["R0_BLOCK"]
    x = max(1, b["XBLOCK"] * base // r) if r > base else b["XBLOCK"]
    w = max(cfg.num_warps, 8) if r >= 512 > base else cfg.num_warps
    return LaunchConfig(cfg.variant, (("XBLOCK", x), ("R0_BLOCK", r)), w, cfg.num_stages)


def _grid_cap(plan: KernelPlan, xn: int, config: GpuConfig) -> int | None:
    """XBLOCK cap of a reduction with few rows (a split reduction's partials): at least
    one program per row until the grid covers 2 programs per SM."""
    cap = config.xblock_cap
    if config.interpret or plan.form != "reduction" or plan.outer:  # outer: x is the contiguous axis
        return cap
    from .split import device_sms

    per = max(1, xn // (2 * device_sms(config)))
    grid_cap = 1 << (per.bit_length() - 1)  # power of two <= per
    return min(cap, grid_cap) if cap else grid_cap


def _persistent(plan: KernelPlan, r: int, xn: int, config: GpuConfig) -> list[tuple[int, int]]:
    """(XBLOCK, num_warps) for a row of r (padded) elements held whole."""
    if config.interpret:
        return [(max(1, 4096 // r), 4), (max(1, 1024 // r), 2)]
    if plan.outer:
        return [(max(1, 4096 // r), 8), (max(1, 2048 // r), 4), (max(1, 8192 // r), 8)]
    if r >= 2048:
        return [(1, 8), (1, 16), (1, 4), (2, 16)]
    if r >= 512:
        return [(max(1, 2048 // r), 8), (1, 4), (max(1, 4096 // r), 8), (1, 8)]
    return [(max(1, 2048 // r), 4), (max(1, 4096 // r), 8), (max(1, 1024 // r), 4), (max(1, 8192 // r), 8)]


def _looped(plan: KernelPlan, xn: int, config: GpuConfig) -> list[tuple[int, int, int]]:
    """(XBLOCK, R0_BLOCK, num_warps) for a row walked in R0_BLOCK steps."""
    if config.interpret:
        return [(8, 64, 4)]
    if plan.outer:
        return [(64, 16, 4), (128, 8, 4), (32, 32, 4), (64, 32, 8)]
    if xn <= 8:
        # a handful of rows (a loss mean over 16384 rows): each program walks its whole row
        # and is latency-bound, so take as much of the row per step as registers allow
        return [(1, 8192, 16), (1, 4096, 16), (1, 16384, 32), (1, 2048, 8)]
    # (1, 2048, 16): what Inductor's autotuner picked on the H200 for layernorm's welford loops
    return [(1, 2048, 8), (1, 2048, 16), (1, 4096, 16), (1, 1024, 4)]


def grid(ks: KernelSource, cfg: LaunchConfig, values: tuple | None = None) -> tuple:
    """Program-instance grid: axis 0 walks x blocks (2^31 limit), axis 1 y blocks
    (swapped for tiled kernels with ks.swap). `values`: the numels of this call (symbolic
    shapes), in ks.numels' order; else ks.numels' static values."""
    numels = dict(ks.numels) if values is None else {n: v for (n, _), v in zip(ks.numels, values)}
    b = cfg.kwargs()
    gx = -(-numels["xnumel"] // b["XBLOCK"])
    if "ynumel" in numels:
        gy = -(-numels["ynumel"] // b["YBLOCK"])
        if ks.flat:
            return (gx * gy,)
        return (gy, gx) if ks.swap else (gx, gy)
    return (gx,)
