"""Is a compiled result right? Against eager, with a float64 reference where rounding differs.

The rule is the one PyTorch's own compiled-model accuracy checks use (`torch._dynamo.utils.same`
with `fp64_ref`, as its dynamo benchmark runners call it), per tensor (outputs, then parameter
gradients):

1. `allclose(compiled, eager, rtol=tol, atol=tol)`: done (tol: float32 2e-3, bfloat16 1e-2);
2. else both against the same computation in float64 from the same weights and inputs:
   `rmse(compiled, fp64) <= multiplier * rmse(eager, fp64) + tol / 10`, multiplier 3.0 for
   bfloat16 / float16 results and for tensors of fewer than 1000 elements, 2.0 otherwise.

So a compiled low-precision model may differ from eager's low-precision result as long as it is
not more than 2-3x further from the exact answer than eager is. Integer and bool tensors must be
equal. `check` returns the verdict, the largest absolute difference from eager, the first
failure, and the worst error ratio rmse(compiled)/rmse(eager) seen in step 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

TOL = {torch.float32: 2e-3, torch.float64: 1e-6, torch.bfloat16: 1e-2, torch.float16: 1e-2}
LOW = (torch.bfloat16, torch.float16)


@dataclass
class Verdict:
    ok: bool
    max_abs_err: float  # against eager
    what: str = ""  # the first tensor that failed, and why
    worst_ratio: float | None = None  # max over tensors of rmse(compiled, fp64) / rmse(eager, fp64)
    fp64_checked: int = 0  # tensors that needed (or, with always_fp64, got) the float64 comparison


def multiplier(t: torch.Tensor) -> float:
    return 3.0 if t.dtype in LOW or t.numel() < 1000 else 2.0


def rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a.detach().double().cpu() - b.detach().double().cpu()) ** 2).mean().sqrt())


def check(res: list, ref: list, fp64: Callable[[], list] | None, always_fp64: bool = False) -> Verdict:
    """`res`, `ref`: the compiled and eager tensors (same order); `fp64()`: the float64 reference's
    tensors in that order (called at most once, only when needed unless `always_fp64`)."""
    if len(res) != len(ref):
        return Verdict(False, float("nan"), "different number of outputs / gradients")
    exact: list = []

    def reference() -> list:
        if not exact:
            exact.append(fp64())
        return exact[0]

    v = Verdict(True, 0.0)
    for k, (a, b) in enumerate(zip(res, ref)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return Verdict(False, float("nan"),
                           f"tensor {k}: {a.dtype}{list(a.shape)} vs eager {b.dtype}{list(b.shape)}")
        if a.numel() == 0:
            continue
        af, bf = a.detach().double().cpu(), b.detach().double().cpu()
        diff = torch.where((af.isnan() & bf.isnan()) | (af == bf), 0.0, (af - bf).abs().nan_to_num(nan=math.inf))
        v.max_abs_err = max(v.max_abs_err, float(diff.max()))
        if not a.is_floating_point():
            if not torch.equal(a.cpu(), b.cpu()):
                v.ok, v.what = False, v.what or f"tensor {k} ({a.dtype}) differs from eager"
            continue
        tol = TOL.get(b.dtype, 2e-3)
        close = torch.allclose(af, bf, rtol=tol, atol=tol, equal_nan=True)
        if close and not always_fp64:
            continue
        if fp64 is None:
            if not close:
                v.ok, v.what = False, v.what or f"tensor {k} differs from eager (max abs error {float(diff.max()):.3g})"
            continue
        exact_k = reference()[k]
        ref_err, res_err = rmse(exact_k, b), rmse(exact_k, a)
        v.fp64_checked += 1
        if ref_err > 0:
            v.worst_ratio = max(v.worst_ratio or 0.0, res_err / ref_err)
        if close or res_err <= multiplier(a) * ref_err + tol / 10:
            continue
        v.ok, v.what = False, v.what or (f"tensor {k}: rmse vs float64 {res_err:.3g} > {multiplier(a):g} x eager's "
                                         f"{ref_err:.3g} + {tol / 10:g}")
    return v
