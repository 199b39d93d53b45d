"""A float32 evaluation of a Graph that deviates from the reference interpreter the way a
GPU kernel may (test-only: STAX_TEST_PERTURB=1 and test_error_model.py use it to check
the error model without a GPU).

  library functions  the correctly rounded result moved by libdevice's full stated
                     error (k ulp, random sign); tl.randn by cos.approx's absolute error
  a*b + c            contracted into one rounding (FMA)
  half types         computed in float32, rounded only at casts and stores
  sum, prod          accumulated sequentially in float32 in a shuffled order
  Welford            per-lane updates merged by Chan's combine with an approximate divide
  scans              the Hillis-Steele doubling order instead of left to right
Exact ops, comparisons and integer arithmetic are computed as the interpreter does.

With perturb=False the same evaluation has none of these deviations (numpy math, no FMA,
the interpreter's orders) but keeps the GPU's handling of half types: the baseline that
a correct kernel under TRITON_INTERPRET matches, so (perturbed - baseline) is the
deviation to add to such a kernel's outputs.
"""

from __future__ import annotations

import numpy as np
from error_model import COMPOSITES, LIBDEVICE_ULPS, LIBDEVICE_ULPS_F64
from graph_eval import evaluate_graph, output_planes
from stax.ir import dtypes as dt
from stax.ir.ops import op_def, reduction_def, scan_def

F64 = np.float64
RANDN_ABS = 5.7 * 2.0**-20.5  # radius bound times cos.approx's absolute error


def _cd(d: dt.DType):
    return dt.compute_dtype(d).np


class SimArith:
    """Values are (x,) in the compute dtype, or (x, exact product) right after a float32
    mul, so that an add/sub consuming it can contract into an FMA."""

    def __init__(self, seed: int = 0, extern=None, perturb: bool = True):
        self.rng = np.random.default_rng(1_000_003 + seed)
        self.extern_kernels = extern or {}
        self.perturb = perturb

    def input(self, flat, d):
        return (np.asarray(flat).astype(_cd(d)),)

    def constant(self, value, d):
        return (np.asarray(dt.round_to(np.asarray(value), d)).astype(_cd(d)),)

    def index_value(self, ints, d):
        return (np.asarray(ints).astype(_cd(d)),)

    def exact_ints(self, planes, what):
        return planes[0]

    def store(self, planes, computed, storage):
        return (np.asarray(dt.round_to(planes[0], storage)).astype(storage.np),)

    def extern(self, node, args):
        fn = self.extern_kernels[node.kernel]
        return (
            np.asarray(dt.round_to(np.asarray(fn(*[a[0] for a in args], **dict(node.constants))), node.layout.dtype)),
        )

    # ---- ops
    def _move_ulps(self, r, k: int):
        """r moved by k ulp toward a random direction per element (finite values only)."""
        if k <= 0 or not self.perturb:
            return r
        toward = np.where(self.rng.random(np.shape(r)) < 0.5, -np.inf, np.inf).astype(r.dtype)
        out = np.array(r, copy=True)
        for _ in range(k):
            out = np.where(np.isfinite(out), np.nextafter(out, toward), out)
        return out

    def _libdevice(self, name, d, xs):
        """The exact function, rounded, then off by libdevice's stated maximum error."""
        cd = _cd(d)
        with np.errstate(all="ignore"):
            r = np.asarray(op_def(name).numpy(*[np.asarray(x).astype(F64) for x in xs])).astype(cd)
        k = (LIBDEVICE_ULPS_F64 if d == dt.float64 else LIBDEVICE_ULPS)[name]
        return self._move_ulps(r, k)

    def op(self, node, args):
        name, d = node.name, node.dtype
        xs = [a[0] for a in args]
        if name == "to_dtype":
            return (np.asarray(dt.round_to(xs[0], d)).astype(_cd(d)),)
        if d.is_floating and name in COMPOSITES:
            ap = lambda n, *vs: self._prim(n, dt.bool_ if n == "eq" else d, vs)  # noqa: E731
            return COMPOSITES[name](ap, lambda c: self.constant(c, d), *args)
        return self._prim(name, d, args)

    def _prim(self, name, d, args):
        xs = [a[0] for a in args]
        cd = _cd(d)
        fused = self.perturb and cd == np.float32 and name in ("add", "sub") and any(len(a) > 1 for a in args)
        if fused:  # fma(a, b, c): the product enters unrounded
            k = next(i for i, a in enumerate(args) if len(a) > 1)
            ops = [np.asarray(x).astype(F64) for x in xs]
            ops[k] = args[k][1]
            r = ops[0] + ops[1] if name == "add" else ops[0] - ops[1]
            return (r.astype(cd),)
        if name == "mul" and cd == np.float32 and self.perturb:
            with np.errstate(all="ignore"):
                p = np.asarray(xs[0]).astype(F64) * np.asarray(xs[1]).astype(F64)
            return (p.astype(cd), p)
        if self.perturb and d.is_floating and name in LIBDEVICE_ULPS:
            return (self._libdevice(name, d, xs),)
        fn = op_def(name)
        with np.errstate(all="ignore"):
            r = fn.numpy(*xs, dtype=d) if fn.dtype_arg else fn.numpy(*xs)
        r = np.asarray(r)
        if name == "randn" and self.perturb:
            r = r + self.rng.uniform(-RANDN_ABS, RANDN_ABS, size=r.shape)
        if d.is_floating:
            return (r.astype(cd),)  # half types stay in float32: no rounding per op
        return (np.asarray(dt.round_to(r, d)).astype(cd),)

    # ---- reductions and scans
    def reduce(self, body, planes):
        x = planes[0]
        rt, d = body.reduction_type, body.value.dtype
        cd = _cd(d)
        if self.perturb and d.is_floating and rt in ("sum", "prod"):
            order = self.rng.permutation(x.shape[-1])
            ufunc = np.add if rt == "sum" else np.multiply
            with np.errstate(all="ignore"):
                return (ufunc.accumulate(x[..., order], axis=-1, dtype=cd)[..., -1],)
        if self.perturb and d.is_floating and rt.startswith("welford_"):
            mean, m2, w = self._welford(x.astype(cd))
            return ({"welford_mean": mean, "welford_m2": m2, "welford_count": w}[rt],)
        with np.errstate(all="ignore"):
            r = reduction_def(rt).numpy(x, x.ndim - 1)
        return (np.asarray(r).astype(_cd(body.dtype)),)

    def _welford(self, x, lanes: int = 4):
        """Per-lane Welford updates over strided chunks, then a tree of Chan combines."""
        n = x.shape[-1]
        lanes = max(1, min(lanes, n))
        shape = x.shape[:-1] + (lanes,)
        mean, m2, w = (np.zeros(shape, x.dtype) for _ in range(3))
        with np.errstate(all="ignore"):
            for k in range(0, n, lanes):
                blk = x[..., k : k + lanes]
                j = blk.shape[-1]
                w1 = w[..., :j] + 1
                delta = blk - mean[..., :j]
                mean1 = mean[..., :j] + delta / w1
                m2[..., :j] = m2[..., :j] + delta * (blk - mean1)
                mean[..., :j], w[..., :j] = mean1, w1
            while mean.shape[-1] > 1:
                if mean.shape[-1] % 2:
                    mean, m2, w = (
                        np.concatenate([a, np.zeros(a.shape[:-1] + (1,), a.dtype)], -1) for a in (mean, m2, w)
                    )
                a, b = (mean[..., 0::2], m2[..., 0::2], w[..., 0::2]), (mean[..., 1::2], m2[..., 1::2], w[..., 1::2])
                mean, m2, w = self._combine(*a, *b)
        return mean[..., 0], m2[..., 0], w[..., 0]

    def _combine(self, mean1, m2_1, w1, mean2, m2_2, w2):
        w = w1 + w2
        delta = mean2 - mean1
        frac = np.where(w == 0, 0, self._move_ulps(w2 / np.where(w == 0, 1, w), 2))  # div.full: 2 ulp
        return mean1 + delta * frac, m2_1 + m2_2 + delta * delta * w1 * frac, w

    def scan(self, body, planes):
        x = np.moveaxis(planes[0], body.axis, -1)
        st, d = body.scan_type, body.value.dtype
        cd = _cd(d)
        if self.perturb and d.is_floating and st in ("cumsum", "cumprod", "logcumsumexp"):
            if st == "logcumsumexp":

                def comb(a, b):
                    return COMPOSITES["logaddexp"](
                        lambda n, *vs: self._prim(n, dt.bool_ if n == "eq" else d, vs),
                        lambda c: self.constant(c, d),
                        (a,),
                        (b,),
                    )[0]
            else:
                ufunc = np.add if st == "cumsum" else np.multiply

                def comb(a, b):
                    return ufunc(a, b).astype(cd)

            y = x.astype(cd)
            s = 1
            with np.errstate(all="ignore"):
                while s < y.shape[-1]:
                    nxt = y.copy()
                    nxt[..., s:] = comb(y[..., :-s], y[..., s:])
                    y, s = nxt, 2 * s
            r = y
        else:
            r = np.asarray(scan_def(st).numpy(np.ascontiguousarray(x), x.ndim - 1))
        return (np.moveaxis(r, -1, body.axis),)


def simulate_gpu(graph, inputs: dict, seed: int = 0, extern=None, perturb: bool = True) -> list[np.ndarray]:
    """Each graph output as a GPU-like float32 computation would give it (perturb=False:
    the deviation-free baseline)."""
    arith = SimArith(seed, extern, perturb)
    return [p[0] for p in output_planes(graph, evaluate_graph(graph, inputs, arith))]
