"""Reduction accumulators: declaration, update, lane combine and result, scalar and vector.

One table row per reduction keeps the emitters generic. Scalar rows are cpp_ops'
REDUCTION_TABLE; `VEC_ACC` gives the vector form (W lane accumulators: plain vectors for
sum/prod/max/min, value + index vectors for argmax/argmin, bool lanes for any/all, and
per-lane Welford states in double), `PARTIAL_COMBINE` how per-thread partials of a split
full reduction are combined (in thread order, so the result is deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass

from stax.ir import Reduction
from stax.ir.index_printer import to_c

from . import cpp_ops as co
from .cpp_ops import vtype
from .loops import NodeLoops


@dataclass
class Accumulator:
    nl: NodeLoops
    acc: str
    idx: str | None = None
    shared: bool = False  # reuses another node's Welford accumulator
    vacc: str | None = None  # vector accumulator (vectorized form)
    vidx: str | None = None  # vector of indices (vectorized arg reductions)

    @property
    def body(self) -> Reduction:
        return self.nl.node.body

    @property
    def acc_ctype(self) -> str:
        if self.nl.accumulate in ("any", "all"):
            return "bool"
        if self.nl.accumulate in co.WELFORD:
            return "stax::Welford"
        return co.compute_ctype(self.body.value.dtype)

    def share(self, nl: NodeLoops) -> Accumulator:
        """The same accumulator read by another output (Welford's mean / m2 / count)."""
        return Accumulator(nl, self.acc, self.idx, True, self.vacc, self.vidx)


@dataclass(frozen=True)
class VecAcc:
    """Vector accumulator templates. {VT} value vector type, {ident} identity, {v} the value
    vector, {vri} the vector of reduction indices (arg), {RT} the result vector type."""

    decl: str
    update: str
    finish: str  # combine the lanes into the scalar accumulator {acc} (and {idx})
    result: str  # the per-lane results (vertical form: W outputs at once)
    merge: str  # lane-wise: the independent accumulator {b} ({bidx}) of an unrolled loop into {vacc}


def _plain(op: str, combine: str, scalar: str) -> VecAcc:
    return VecAcc("{VT} {vacc} = stax::vec::bcast<{VT}>({ident});", "{vacc} = " + combine + ";",
                  "{acc} = "
                  + scalar.format(a="{acc}", b=f"stax::vec::vec_reduce_all(stax::vec::{op}{{{{}}}}, {{vacc}})")
                  + ";", "{vacc}", "{vacc} = " + combine.replace("{v}", "{b}") + ";")


def _arg(kind: str) -> VecAcc:
    return VecAcc("{VT} {vacc} = stax::vec::bcast<{VT}>({ident}); stax::vec::vint64 {vidx} = {{}};",
                  f"stax::vec::arg{kind}_update({{vacc}}, {{vidx}}, {{v}}, {{vri}});",
                  f"stax::vec::arg{kind}_lanes({{acc}}, {{idx}}, {{vacc}}, {{vidx}});", "{vidx}",
                  f"stax::vec::arg{kind}_vmerge({{vacc}}, {{vidx}}, {{b}}, {{bidx}});")


def _welford(part: str) -> VecAcc:
    return VecAcc("stax::vec::VWelford<{VT}> {vacc};", "{vacc}.update({v});", "{vacc}.merge_into({acc});",
                  f"{{vacc}}.{part}<{{RT}}>()", "{vacc}.merge({b});")


VEC_ACC: dict[str, VecAcc] = {
    "sum": _plain("op_add", "{vacc} + {v}", "{a} + {b}"),
    "prod": _plain("op_mul", "{vacc} * {v}", "{a} * {b}"),
    "max": _plain("op_max", "stax::vec::maximum({vacc}, {v})", "stax::maximum({a}, {b})"),
    "min": _plain("op_min", "stax::vec::minimum({vacc}, {v})", "stax::minimum({a}, {b})"),
    "argmax": _arg("max"),
    "argmin": _arg("min"),
    "any": VecAcc("stax::vec::vbool {vacc} = stax::vec::bcast_bool(false);",
                  "{vacc} = {vacc} | stax::vec::nonzero({v});", "{acc} = {acc} || stax::vec::any_lane({vacc});",
                  "{vacc}", "{vacc} = {vacc} | {b};"),
    "all": VecAcc("stax::vec::vbool {vacc} = stax::vec::bcast_bool(true);",
                  "{vacc} = {vacc} & stax::vec::nonzero({v});", "{acc} = {acc} && stax::vec::all_lanes({vacc});",
                  "{vacc}", "{vacc} = {vacc} & {b};"),
    "welford_mean": _welford("mean_v"),
    "welford_m2": _welford("m2_v"),
    "welford_count": _welford("count_v"),
}

# partial {v} (and {vi}) of a later thread into {acc} ({idx}); arg reductions keep the first index
PARTIAL_COMBINE: dict[str, str] = {
    "argmax": "stax::argmax_pick({acc}, {idx}, {v}, {vi});",
    "argmin": "stax::argmin_pick({acc}, {idx}, {v}, {vi});",
    **{w: "{acc}.merge({v});" for w in co.WELFORD},
}


class AccEmitter:
    """Emits accumulator statements into `lines` for kernel context `ctx`."""

    def __init__(self, ctx):
        self.ctx = ctx

    def init(self, lines, nl: NodeLoops, vector: bool = False, scalar: bool = True) -> Accumulator:
        a = Accumulator(nl, self.ctx.tmp("tmp_acc"))
        rtype = nl.accumulate
        vdt = nl.node.body.value.dtype
        if vector:
            a.vacc = a.acc + "_vec"
            a.vidx = a.acc + "_vidx" if co.accumulator_row(rtype).arg else None
            ident = co.identity_literal(rtype, vdt) if rtype not in co.WELFORD + ("any", "all") else ""
            lines(VEC_ACC[rtype].decl.format(VT=vtype(vdt) if not vdt.is_bool else "stax::vec::vbool",
                                             vacc=a.vacc, vidx=a.vidx, ident=ident))
            if not scalar:
                return a
        if rtype in co.WELFORD:
            lines(f"stax::Welford {a.acc};")
            return a
        ident = {"any": "false", "all": "true"}.get(rtype) or co.identity_literal(rtype, vdt)
        lines(f"{a.acc_ctype} {a.acc} = {ident};")
        if co.accumulator_row(rtype).arg:
            a.idx = a.acc + "_idx"
            lines(f"int64_t {a.idx} = 0;")
        return a

    @staticmethod
    def update(lines, a: Accumulator, v: str) -> None:
        row = co.accumulator_row(a.nl.accumulate)
        ri = to_c(a.nl.reduction_linear_index()) if row.arg else ""
        lines(row.update.format(acc=a.acc, v=v, idx=a.idx, ri=ri))

    @staticmethod
    def vupdate(lines, a: Accumulator, v: str, vri: str | None = None) -> None:
        lines(VEC_ACC[a.nl.accumulate].update.format(vacc=a.vacc, vidx=a.vidx, v=v, vri=vri))

    @staticmethod
    def vmerge(lines, a: Accumulator, b: Accumulator) -> None:
        """Unrolled loops: fold the independent vector accumulator `b` into `a`, lane by lane."""
        lines(VEC_ACC[a.nl.accumulate].merge.format(vacc=a.vacc, vidx=a.vidx, b=b.vacc, bidx=b.vidx))

    @staticmethod
    def finish_lanes(lines, a: Accumulator) -> None:
        """Horizontal form: fold the W lane accumulators into the scalar one (after the tail)."""
        lines(VEC_ACC[a.nl.accumulate].finish.format(acc=a.acc, idx=a.idx, vacc=a.vacc, vidx=a.vidx))

    @staticmethod
    def result(a: Accumulator) -> str:
        rtype = a.nl.accumulate
        if rtype in co.WELFORD:
            get = {"welford_mean": "get_mean", "welford_m2": "get_m2", "welford_count": "get_count"}[rtype]
            ct = co.compute_ctype(a.body.value.dtype)
            return co.round_expr(a.body.value.dtype, f"static_cast<{ct}>({a.acc}.{get}())")
        return a.idx if a.idx else a.acc

    @staticmethod
    def vresult(a: Accumulator) -> str:
        """Vertical form: the W per-lane results as one vector of the output's compute type."""
        d = a.nl.node.layout.dtype
        return VEC_ACC[a.nl.accumulate].result.format(vacc=a.vacc, vidx=a.vidx, RT=vtype(d))

    @staticmethod
    def combine_partial(lines, a: Accumulator, v: str, vi: str | None) -> None:
        rtype = a.nl.accumulate
        tmpl = PARTIAL_COMBINE.get(rtype)
        if tmpl is None:
            AccEmitter.update(lines, a, v)
        else:
            lines(tmpl.format(acc=a.acc, idx=a.idx, v=v, vi=vi))
