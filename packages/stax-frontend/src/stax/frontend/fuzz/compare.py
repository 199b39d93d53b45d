"""Stax vs eager, one tensor at a time, with the fuzzer's stated tolerances.

1. dtype and shape equal; integer and bool tensors equal exactly.
2. NaN / +inf / -inf at the same positions, except where eager's own class differs from a
   more precise run's (a position that overflows or cancels by rounding alone).
3. Values, where both are finite:
   fp32 / fp64: |stax - eager| <= k * (atol + rtol * |eager|), k the graph's error factor
   (1 per op, sqrt(n) + 1 per reduction or scan over n elements: `ops.base`).
   fp16 / bf16: |stax - eager| within one rounding of the result type, else
   |stax - ref| <= 4 * |eager - ref| + (atol + rtol * |ref|), ref = the same graph run in
   fp64 on the same (upcast) inputs: stax may be no worse than 4x eager's own error, at
   each element or (eager may be lucky at one) for the worst error over the tensor, both
   errors counted in units of that floor.
   The same reference test rescues fp32 values an ill-conditioned graph (cancellation)
   moves beyond the direct tolerance; fp64 uses an fp32 run of the graph to estimate
   its own error ((fp32 - fp64) * eps64 / eps32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

# (rtol, atol). fp32 / fp64: per unit of the error factor k; fp16 / bf16: one rounding of the type.
TOL = {
    torch.float64: (2.5e-15, 1e-13),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (8e-3, 1e-4),
}
REF_FACTOR = 4.0  # stax's error may be this many times eager's own
EPS = {torch.float64: 2.22e-16, torch.float32: 1.19e-7}


@dataclass(frozen=True)
class Mismatch:
    what: str  # 'dtype' | 'shape' | 'exact' | 'nonfinite' | 'value' | 'structure' | 'autograd'
    detail: str


def classes(x: torch.Tensor) -> torch.Tensor:
    """0 finite, 1 NaN, 2 +inf, 3 -inf."""
    c = torch.zeros(x.shape, dtype=torch.int8)
    c[torch.isnan(x)] = 1
    c[x == float("inf")] = 2
    c[x == float("-inf")] = 3
    return c


def _show(t: torch.Tensor, pos: tuple):
    return t[pos].item() if t.ndim else t.item()


TORCH = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def compare_tensor(stax, eager, k: float = 1.0, ref_fn: Callable | None = None, tol: str | None = None,
                   exact: bool = False) -> Mismatch | None:
    """None when stax's tensor passes. `exact`: no rounding difference can reach this value
    (views, selections, integer math): equal bits required. `tol`: the coarsest float type a
    rounding difference came from (default: the tensor's own); `ref_fn()` -> (more precise
    tensor, is_probe) or None, called only when the direct comparison fails."""
    if not isinstance(stax, torch.Tensor) or not isinstance(eager, torch.Tensor):
        if isinstance(stax, torch.Tensor) != isinstance(eager, torch.Tensor):
            return Mismatch("structure", f"stax gave {type(stax).__name__}, eager {type(eager).__name__}")
        return None if stax == eager else Mismatch("exact", f"stax {stax!r} eager {eager!r}")
    if stax.dtype != eager.dtype:
        return Mismatch("dtype", f"stax {stax.dtype} eager {eager.dtype}")
    if tuple(stax.shape) != tuple(eager.shape):
        return Mismatch("shape", f"stax {tuple(stax.shape)} eager {tuple(eager.shape)}")
    s, e = stax.detach().cpu(), eager.detach().cpu()
    if not e.dtype.is_floating_point:
        if torch.equal(s, e):
            return None
        bad = (s != e).nonzero()
        pos = tuple(bad[0].tolist())
        return Mismatch("exact", f"{len(bad)}/{e.numel()} elements differ; at {pos}: stax {_show(s, pos)} "
                                 f"eager {_show(e, pos)}")
    s64, e64 = s.double(), e.double()
    ref_cache: list = []

    def ref():
        if not ref_cache:
            got = ref_fn() if ref_fn is not None else None
            ref_cache.append(got)
        return ref_cache[0]

    cs, ce = classes(s64), classes(e64)
    bad = cs != ce
    if bad.any():
        got = ref()
        if got is not None:
            bad &= ce == classes(got[0].double())  # positions where eager agrees with the precise run
        if bad.any():
            pos = tuple(bad.nonzero()[0].tolist())
            return Mismatch("nonfinite", f"{int(bad.sum())}/{e.numel()} NaN/inf positions differ; at {pos}: "
                                         f"stax {_show(s64, pos)} eager {_show(e64, pos)}")
    fin = (cs == 0) & (ce == 0)
    diff = torch.where(fin, (s64 - e64).abs(), torch.zeros_like(s64))
    if exact:
        over = diff > 0
        if not over.any():
            return None
        pos = tuple(over.nonzero()[0].tolist()) if over.ndim else ()
        return Mismatch("value", f"{int(over.sum())}/{e.numel()} values differ from eager's, which must be "
                                 f"bit-identical here (no rounding on the way); at {pos}: stax {_show(s64, pos)} "
                                 f"eager {_show(e64, pos)}")
    tdt = TORCH.get(tol, e.dtype) if TORCH.get(tol, e.dtype) in TOL else e.dtype
    rtol, atol = TOL[tdt]
    kk = k if tdt in EPS else 1.0
    allowed = (atol + rtol * e64.abs()) * kk
    over = diff > allowed
    if not over.any():
        return None
    got = ref()
    if got is not None:
        r64, probe = got[0].double(), got[1]
        rfin = torch.isfinite(r64)
        if probe:  # fp64: the fp32 run's distance estimates fp64's own error
            est = (e64 - r64).abs() * (EPS[torch.float64] / EPS[torch.float32])
            bound = REF_FACTOR * est + allowed
            over &= ~(rfin & (diff <= bound)) & rfin
        else:
            err_s, err_e = (s64 - r64).abs(), (e64 - r64).abs()
            floor = (atol + rtol * r64.abs()) * kk
            over &= rfin & ~(err_s <= REF_FACTOR * err_e + floor)
            if over.any():  # eager may be lucky at one element: compare worst errors, in roundings
                ok = rfin & fin
                if ok.any() and (err_s / floor)[ok].max() <= REF_FACTOR * (err_e / floor)[ok].max() + 1:
                    return None
        if not over.any():
            return None
    pos = tuple(over.nonzero()[0].tolist()) if over.ndim else ()
    flat = (diff - allowed).masked_fill(~over, float("-inf")).reshape(-1).argmax().item()
    wpos = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)) if e.ndim else ()
    rtext = ""
    if got is not None:
        rtext = f" ref {_show(got[0].double(), wpos)}"
    return Mismatch("value", f"{int(over.sum())}/{e.numel()} values out of tolerance (k={kk:.3g}, rtol={rtol:g}, "
                             f"atol={atol:g}); worst at {wpos}: stax {_show(s64, wpos)} eager {_show(e64, wpos)}{rtext}"
                             f"; first at {pos}")
