"""Reductions, Welford and scans over the r axis of a [XBLOCK, R0_BLOCK] block.

Persistent form: the whole row is one block, so a reduction is one `tl.sum`-like
call on the masked block and its result is available to later nodes at once.
Looped form: per-lane accumulators are combined each R0_BLOCK step and reduced
across lanes after the loop; scans carry the last prefix value across steps.
Welford's three outputs (mean, m2, count) share one accumulator per value.
"""

from __future__ import annotations

from stax.ir import Reduction, Scan
from stax.ir import dtypes as dt
from stax.ir.ops import WELFORD_OUTPUTS

from .emit import Emitter, V
from .symbolic import is_static
from .triton_ops import compute_triton_dtype, highest, literal, lowest, triton_reduction

FULL = "[XBLOCK, R0_BLOCK]"
XR = frozenset({"x", "r"})
XONLY = frozenset({"x"})

# scan name -> (combine helper, identity(dtype), index scan)
SCANS = {
    "cumsum": ("triton_helpers.add", lambda d: "0", False),
    "cumprod": ("triton_helpers._mul", lambda d: "1", False),
    "cummax": ("triton_helpers.maximum", lowest, False),
    "cummin": ("triton_helpers.minimum", highest, False),
    "cummax_index": ("triton_helpers.cummax_index_combine", lowest, True),
    "cummin_index": ("triton_helpers.cummin_index_combine", highest, True),
    "logcumsumexp": ("triton_helpers.logaddexp_{math}", lambda d: 'float("-inf")', False),
}


def full_mask(em: Emitter) -> str:
    r = em.masks.get("r")
    return f"xmask & {r}" if r else "xmask"


def block(em: Emitter, v: V) -> V:
    """v broadcast to the full [XBLOCK, R0_BLOCK] block."""
    v = em.tensor(v)
    if v.axes == XR:
        return v
    return em.new(f"tl.broadcast_to({v.src}, {FULL})", v.dtype, XR)


def _acc_dtype(v: V) -> str:
    return compute_triton_dtype(v.dtype)


# ---------------------------------------------------------------- persistent


def persistent_reduction(em: Emitter, body: Reduction, v: V) -> V:
    if body.reduction_type in WELFORD_OUTPUTS:
        return welford_persistent(em, v, body.reduction_type)
    row = triton_reduction(body.reduction_type, v.dtype)
    out = dt.compute_dtype(body.dtype)
    b = block(em, v)
    w = em.new(f"tl.where({full_mask(em)}, {b.src}, {row.identity(v.dtype)})", v.dtype, XR)
    if row.arg:
        idx = em.new(f"tl.broadcast_to(r0_index, {FULL})", dt.int32, XR)
        expr = row.reduce.format(w.src, idx.src)
    else:
        expr = row.reduce.format(w.src)
    return em.new(f"{expr}[:, None].to({compute_triton_dtype(out)})", body.dtype, XONLY)


def welford_persistent(em: Emitter, v: V, which: str) -> V:
    """Two passes over the row in registers: mean first, then squared deviations."""
    rn = em.plan.rnumel
    count = repr(float(rn)) if is_static(rn) else "r0_numel"  # (a symbolic row: this call's length)
    tdt = _acc_dtype(v)
    if which == "welford_count":
        return em.new(f"tl.full([XBLOCK, 1], {count}, {tdt})", v.dtype, XONLY)
    b = block(em, v)
    s = em.new(f"tl.sum(tl.where({full_mask(em)}, {b.src}, 0), 1)[:, None]", v.dtype, XONLY)
    mean = em.new(f"triton_helpers.div_rn({s.src}, tl.full([1, 1], {count}, {tdt}))", v.dtype, XONLY)
    if which == "welford_mean":
        return mean
    d = em.new(f"{b.src} - {mean.src}", v.dtype, XR)
    return em.new(f"tl.sum(tl.where({full_mask(em)}, {d.src} * {d.src}, 0), 1)[:, None]", v.dtype, XONLY)


def persistent_scan(em: Emitter, body: Scan, v: V) -> V:
    fn, ident, indexed = _scan_row(em, body.scan_type)
    b = block(em, v)
    rmask = em.masks.get("r")
    w = em.new(f"tl.where({rmask}, {b.src}, {ident(v.dtype)})", v.dtype, XR) if rmask else b
    if indexed:
        idx = em.new(f"tl.broadcast_to(r0_index, {FULL})", dt.int32, XR)
        pair = em.fresh()
        em.line(f"_, {pair} = tl.associative_scan(({w.src}, {idx.src}), 1, {fn})")
        return em.new(f"{pair}.to(tl.int64)", dt.int64, XR)
    return em.new(f"tl.associative_scan({w.src}, 1, {fn})", v.dtype, XR)


def _scan_row(em: Emitter, name: str):
    try:
        fn, ident, indexed = SCANS[name]
    except KeyError:
        raise NotImplementedError(f"stax-gpu: no Triton scan for {name!r}") from None
    return fn.format(math="ld" if em.config.math == "libdevice" else "portable"), ident, indexed


# ---------------------------------------------------------------- looped


class LoopAccumulators:
    """Accumulators of one r-loop: initialised in the preheader, updated per step,
    reduced across lanes after the loop (`finish`)."""

    def __init__(self, em: Emitter):
        self.em = em
        self.pending: list = []  # (kind, node plan, state)
        self.welford: dict = {}

    def _init(self, value: str, dtype: str) -> str:
        name = self.em.fresh("_tmp")
        self.em.scope.pre.append(f"{name} = tl.full({FULL}, {value}, {dtype})")
        return name

    def reduction(self, p, body: Reduction, v: V) -> None:
        em = self.em
        m = full_mask(em)
        if body.reduction_type in WELFORD_OUTPUTS:
            state = self._welford(v)
            self.pending.append(("welford", p, (state, body.reduction_type, v.dtype)))
            return
        row = triton_reduction(body.reduction_type, v.dtype)
        b = block(em, v)
        acc = self._init(row.identity(v.dtype), _acc_dtype(v))
        if row.arg:
            acci = self._init("0", "tl.int32")
            idx = em.new(f"tl.broadcast_to(r0_index, {FULL})", dt.int32, XR)
            nv, ni = em.fresh(), em.fresh()
            em.line(f"{nv}, {ni} = {row.combine.format(acc, acci, b.src, idx.src)}")
            em.line(f"{acc} = tl.where({m}, {nv}, {acc})")
            em.line(f"{acci} = tl.where({m}, {ni}, {acci})")
            self.pending.append(("arg", p, (row, acc, acci, body)))
        else:
            nxt = em.fresh()
            em.line(f"{nxt} = {row.combine.format(acc, b.src)}")
            em.line(f"{acc} = tl.where({m}, {nxt}, {acc})")
            self.pending.append(("plain", p, (row, acc, body)))

    def _welford(self, v: V):
        key = v.src
        if key in self.welford:
            return self.welford[key]
        em = self.em
        tdt = _acc_dtype(v)
        mean, m2, wt = self._init("0", tdt), self._init("0", tdt), self._init("0", tdt)
        b = block(em, v)
        m = full_mask(em)
        w1, delta, mean1 = em.fresh(), em.fresh(), em.fresh()
        em.line(f"{w1} = {wt} + 1")
        em.line(f"{delta} = {b.src} - {mean}")
        # `/` (div.full, <= 2 ulp), as welford_combine: an IEEE div_rn per element
        # makes the looped welford compute-bound.
        em.line(f"{mean1} = {mean} + {delta} / {w1}")
        em.line(f"{m2} = tl.where({m}, {m2} + {delta} * ({b.src} - {mean1}), {m2})")
        em.line(f"{mean} = tl.where({m}, {mean1}, {mean})")
        em.line(f"{wt} = tl.where({m}, {w1}, {wt})")
        self.welford[key] = (mean, m2, wt)
        return self.welford[key]

    def scan(self, p, body: Scan, v: V) -> V:
        """Block scan combined with the carry of the previous steps; updates the carry."""
        em = self.em
        fn, ident, indexed = _scan_row(em, body.scan_type)
        b = block(em, v)
        w = em.new(f"tl.where({em.masks['r']}, {b.src}, {ident(v.dtype)})", v.dtype, XR)
        last = em.new("r0_index == tl.minimum(r0_numel, r0_offset + R0_BLOCK) - 1", dt.bool_, XR, hoist=False)
        if indexed:
            cv, ci = self._carry(ident(v.dtype), _acc_dtype(v)), self._carry("0", "tl.int32")
            idx = em.new(f"tl.broadcast_to(r0_index, {FULL})", dt.int32, XR)
            sv, si, tv, ti = em.fresh(), em.fresh(), em.fresh(), em.fresh()
            em.line(f"{sv}, {si} = tl.associative_scan(({w.src}, {idx.src}), 1, {fn})")
            em.line(f"{tv}, {ti} = {fn}({cv}, {ci}, {sv}, {si})")
            em.line(f"{cv} = tl.sum(tl.where({last.src}, {tv}, 0), 1)[:, None]")
            em.line(f"{ci} = tl.sum(tl.where({last.src}, {ti}, 0), 1)[:, None]")
            return em.new(f"{ti}.to(tl.int64)", dt.int64, XR, hoist=False)
        carry = self._carry(ident(v.dtype), _acc_dtype(v))
        s, t = em.fresh(), em.fresh()
        em.line(f"{s} = tl.associative_scan({w.src}, 1, {fn})")
        em.line(f"{t} = {fn}({carry}, {s})")
        em.line(f"{carry} = tl.sum(tl.where({last.src}, {t}, 0), 1)[:, None].to({_acc_dtype(v)})")
        return V(t, v.dtype, XR)

    def _carry(self, value: str, dtype: str) -> str:
        name = self.em.fresh("_carry")
        self.em.scope.pre.append(f"{name} = tl.full([XBLOCK, 1], {value}, {dtype})")
        return name

    def finish(self) -> list:
        """After the loop (top scope): [(node plan, result V)] of the loop's reductions."""
        em = self.em
        out = []
        done: dict = {}
        for kind, p, state in self.pending:
            if kind == "plain":
                row, acc, body = state
                out_dt = dt.compute_dtype(body.dtype)
                r = em.new(f"{row.reduce.format(acc)}[:, None].to({compute_triton_dtype(out_dt)})", body.dtype, XONLY)
            elif kind == "arg":
                row, acc, acci, body = state
                r = em.new(f"{row.reduce.format(acc, acci)}[:, None].to(tl.int64)", dt.int64, XONLY)
            else:
                (mean, m2, wt), which, vdt = state
                if (mean, m2, wt) not in done:
                    names = (em.fresh(), em.fresh(), em.fresh())
                    em.line(f"{', '.join(names)} = tl.reduce(({mean}, {m2}, {wt}), 1, triton_helpers.welford_combine)")
                    done[(mean, m2, wt)] = names
                rm, rm2, rw = done[(mean, m2, wt)]
                pick = {"welford_mean": rm, "welford_m2": rm2, "welford_count": rw}[which]
                if which == "welford_mean" and em.plan.rnumel == 0:
                    r = em.new(f"tl.full([XBLOCK, 1], float('nan'), {compute_triton_dtype(vdt)})", vdt, XONLY)
                else:
                    r = em.new(f"{pick}[:, None]", vdt, XONLY)
            out.append((p, r))
        return out


__all__ = ["LoopAccumulators", "persistent_reduction", "persistent_scan", "literal"]
