"""Scheduling with symbolic sizes (issue 23.2): the same dependences, fusion decisions and log lines as the
static graph (up to the sizes), legality on normalized symbolic indices, scores and peaks at the hints,
and storage shared only where sizes are provably equal."""

import logging
import re

import numpy as np
import pytest
import sympy
from book_graphs import F32, example_7_1, example_7_2_cpu, example_7_2_gpu, i0, i1, r0
from simulate import run_schedule
from stax.ir import (
    ComputedBuffer,
    Graph,
    InputBuffer,
    Layout,
    Pointwise,
    Reduction,
    SizeVars,
    bind_graph,
    interpret,
    load,
    op,
    outputs,
    size_var,
    to_storage,
)
from stax.ir.index import sympify as index_sympify
from stax.ir.sizevars import NO_SIZE_VARS
from stax.sched import CpuPolicy, GpuPolicy, SchedulerConfig, schedule
from stax.sched.create_nodes import create_nodes
from stax.sched.nodes import describe_nodes
from stax.sched.schedule import Kernel, Schedule

s0, s1 = size_var("s0"), size_var("s1")
NO_FUSION = SchedulerConfig(max_rounds=0, reorder=False)


def table(n, m):
    """s0, s1 with hints n, m (and ranges wide enough for any test binding)."""
    return SizeVars.of(s0=(2, 1 << 16, n), s1=(2, 1 << 16, m))


def softmax(n, m, size_vars=NO_SIZE_VARS):
    """Row softmax as the CPU lowers it: row max, exp(x - max) materialized, row sum, divide."""
    x = InputBuffer("x", Layout.contiguous((n, m), F32))
    mx = ComputedBuffer("mx", Layout.contiguous((n, 1), F32),
                        Reduction((n, 1), (m,), "max", load("x", m * i0 + r0, F32)))
    e = ComputedBuffer("e", Layout.contiguous((n, m), F32),
                       Pointwise((n, m), op("exp", op("sub", load("x", m * i0 + i1, F32), load("mx", i0, F32)))))
    sm = ComputedBuffer("sm", Layout.contiguous((n, 1), F32),
                        Reduction((n, 1), (m,), "sum", load("e", m * i0 + r0, F32)))
    out = ComputedBuffer("out", Layout.contiguous((n, m), F32),
                         Pointwise((n, m), op("truediv", load("e", m * i0 + i1, F32), load("sm", i0, F32))))
    return Graph((x,), (mx, e, sm, out), ("out",), size_vars)


def example_7_1_sym(n, m, size_vars=NO_SIZE_VARS):
    return example_7_1(n, m, size_vars=size_vars)


PROGRAMS = [
    (example_7_1_sym, CpuPolicy), (example_7_1_sym, GpuPolicy), (example_7_2_cpu, CpuPolicy),
    (example_7_2_gpu, GpuPolicy), (softmax, CpuPolicy), (softmax, GpuPolicy),
]
HINTS = [(64, 128), (3, 1000), (512, 16)]

_SIZE_TEXT = re.compile(r"\b(?:s\d+|\d+)(?:\*(?:s\d+|\d+))*\b")


def at_hints(text: str, hints: dict) -> str:
    """`text` with every size expression (s0, s0*s1, 4*s1) evaluated at the hints: 'up to the sizes'."""
    values = {size_var(k): sympy.Integer(v) for k, v in hints.items()}
    return _SIZE_TEXT.sub(lambda mt: str(index_sympify(mt.group(0)).xreplace(values)), text)


def fusion_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "stax.sched.fusion"]


def logged_schedule(caplog, graph, policy):
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="stax.sched.fusion"):
        s = schedule(graph, policy)
    return s, fusion_lines(caplog)


def bind_sizes(x, binding: dict):
    """Kernel groups (nested tuples of sizes) at a binding."""
    if isinstance(x, tuple):
        return tuple(bind_sizes(y, binding) for y in x)
    return int(sympy.sympify(x).xreplace(binding))


def bound_schedule(s: Schedule, values: dict) -> Schedule:
    """The symbolic schedule's decisions applied to the bound graph (for running it chunk by chunk)."""
    binding = {size_var(k): sympy.Integer(v) for k, v in values.items()}
    kernels = tuple(Kernel(k.name, k.kind, k.nodes, bind_sizes(k.group, binding), k.node_type, k.outer_depth,
                           bind_sizes(k.node_groups, binding)) for k in s.kernels)
    return Schedule(bind_graph(s.graph, values), kernels, s.memory, s.fusion_log)


@pytest.mark.parametrize("build,policy", PROGRAMS, ids=lambda x: getattr(x, "__name__", str(x)))
@pytest.mark.parametrize("n,m", HINTS)
def test_fusion_log_with_symbolic_sizes_equals_the_static_one(caplog, build, policy, n, m):
    """Symbolic n, m with hints (n, m): the same log lines as the static (n, m) graph once sizes are read at
    the hints, the same scores (sigma from the hints), kernels and memory events."""
    static, static_lines = logged_schedule(caplog, build(n, m), policy())
    sym, sym_lines = logged_schedule(caplog, build(s0, s1, table(n, m)), policy())
    hints = {"s0": n, "s1": m}
    assert [at_hints(ln, hints) for ln in sym_lines] == static_lines
    assert [at_hints(str(r), hints) for r in sym.fusion_log] == [str(r) for r in static.fusion_log]
    binding = {s0: n, s1: m}
    assert [(k.kind, k.nodes, k.node_type, k.outer_depth, bind_sizes(k.group, binding),
             bind_sizes(k.node_groups, binding)) for k in sym.kernels] == \
        [(k.kind, k.nodes, k.node_type, k.outer_depth, k.group, k.node_groups) for k in static.kernels]
    assert [str(e) for e in sym.memory.events] == [str(e) for e in static.memory.events]
    assert (sym.memory.peak_bytes, sym.memory.lower_bound_bytes) == \
        (static.memory.peak_bytes, static.memory.lower_bound_bytes)


EXAMPLE_7_1_SYMBOLIC = """\
op0: SchedulerNode(ComputedBuffer)
op0.writes = [MemoryDep('buf1', c0, {c0: s0})]
op0.met_dependencies = [MemoryDep('primals_1', c0, {c0: s0*s1})]
op0.group.iteration = ((s0,), (s1,))

op1: SchedulerNode(ComputedBuffer)
op1.writes = [MemoryDep('buf2', c0, {c0: s0*s1})]
op1.unmet_dependencies = [MemoryDep('buf1', c0, {c0: s0})]
op1.met_dependencies = [MemoryDep('primals_1', c0, {c0: s0*s1})]
op1.group.iteration = ((s0, s1), ())"""


def test_example_7_1_dependences_with_symbolic_sizes():
    """§7.1's dump with n, m symbolic: 128*i0 + i1 over (64, 128) was c0 over 8192, s1*i0 + i1 over (s0, s1)
    is c0 over s0*s1; the row sum's write and the divide's read of buf1 are the same c0 over s0."""
    assert describe_nodes(create_nodes(example_7_1(s0, s1, size_vars=table(64, 128)))) == EXAMPLE_7_1_SYMBOLIC


def test_example_7_1_log_lines_with_symbolic_sizes(caplog):
    """The book's §7.4 lines, verbatim, for symbolic n and m (score 33024 at the hints 64, 128)."""
    _, lines = logged_schedule(caplog, example_7_1(s0, s1, size_vars=table(64, 128)), CpuPolicy())
    assert lines == [
        "found 1 possible fusions",
        "score op0 op1: (tau=0, sigma=33024, omega=2, -delta=-1)",
        "fusing op0 with op1",
        "op0_op1: OuterLoopFusedSchedulerNode(SchedulerNode,SchedulerNode)",
        "op0_op1: OUTER_LOOP_FUSION depth 1, score (tau=0, sigma=33024, omega=2, -delta=-1)",
        "found 0 possible fusions",
    ]


@pytest.mark.parametrize("build,policy", PROGRAMS, ids=lambda x: getattr(x, "__name__", str(x)))
@pytest.mark.parametrize("n,m", [(2, 3), (5, 17), (33, 8)])
def test_symbolic_schedule_runs_right_at_every_binding(build, policy, n, m):
    """The fusion chosen on symbols, run chunk by chunk (forward and reverse) at bindings far from the hints,
    equals the interpreter: a fusion legal for the symbols is legal at every size."""
    sym = schedule(build(s0, s1, table(64, 128)), policy())
    s = bound_schedule(sym, {"s0": n, "s1": m})
    rng = np.random.default_rng(n * 100 + m)
    feed = {i.name: to_storage(rng.standard_normal((n, m)), i.layout) for i in s.graph.inputs}
    want = outputs(s.graph, interpret(s.graph, feed))
    for reverse in (False, True):
        got = outputs(s.graph, run_schedule(s, feed, {}, reverse=reverse))
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_read_at_distance_one_is_rejected_with_symbolic_sizes():
    """Prop 7.3: buf1 (s0 + 1 elements) read at i0 + 1 by a loop over s0 is not the write index: no fusion."""
    x = InputBuffer("x", Layout.contiguous((s0 + 1,), F32))
    buf1 = ComputedBuffer("buf1", Layout.contiguous((s0 + 1,), F32),
                          Pointwise((s0 + 1,), op("neg", load("x", i0, F32))))
    buf2 = ComputedBuffer("buf2", Layout.contiguous((s0,), F32),
                          Pointwise((s0,), op("add", load("buf1", i0 + 1, F32), load("x", i0, F32))))
    g = Graph((x,), (buf1, buf2), ("buf2",), SizeVars.of(s0=(2, 1 << 16, 64)))
    s = schedule(g)
    assert len(s.kernels) == 2
    (rec,) = [r for r in s.fusion_log if {r.a, r.b} == {"op0", "op1"}]
    assert not rec.fused and "index mismatch" in rec.reason


# ---------------------------------------------------------------- memory planning


def chain(first, second, size_vars):
    """x -> a (shape `first`) -> b -> c (shape `second`, reading a's elements through c's own shape)
    -> out: c may take a's storage (a dies at b) when their sizes are provably equal."""
    numel = sympy.Mul(*second)

    def flat(sizes):
        return Layout.contiguous(sizes, F32)

    x = InputBuffer("x", flat((numel,)))
    a = ComputedBuffer("a", flat(first), Pointwise(first, op("neg", load("x", _flat_index(first), F32))))
    b = ComputedBuffer("b", flat(first), Pointwise(first, op("exp", load("a", _flat_index(first), F32))))
    c = ComputedBuffer("c", flat(second), Pointwise(second, op("neg", load("x", _flat_index(second), F32))))
    out = ComputedBuffer("out", flat((numel,)), Pointwise((numel,), op(
        "add", load("b", i0, F32), load("c", i0, F32))))
    return Graph((x,), (a, b, c, out), ("out",), size_vars)


def _flat_index(sizes):
    """Row-major flat index of the loop variables over `sizes`."""
    e, stride = 0, 1
    for v, s in reversed(list(zip((i0, i1), sizes))):
        e, stride = e + stride * v, stride * s
    return e


def _reuses(s):
    return [(e.buffer, e.reuses) for e in s.memory.events if e.kind == "reuse"]


def test_storage_is_shared_only_where_sizes_are_provably_equal():
    """(s0, s1) and (s1, s0) buffers hold s0*s1 elements at every size: c reuses a's storage. Vectors of s0 and
    s1 elements do not share even with equal hints (s0 = s1 is not known); the static graph at the hints,
    where the sizes are equal, shares both (the rule is provable equality, not equal hints)."""
    sv = SizeVars.of(s0=(2, 1 << 16, 32), s1=(2, 1 << 16, 32))
    shared = schedule(chain((s0, s1), (s1, s0), sv), CpuPolicy(NO_FUSION))
    assert _reuses(shared) == [("c", "a")]
    assert "c = a; del a  # reuse" in str(shared.memory)
    apart = schedule(chain((s0,), (s1,), sv), CpuPolicy(NO_FUSION))
    assert _reuses(apart) == []
    static = schedule(chain((32,), (32,), NO_SIZE_VARS), CpuPolicy(NO_FUSION))
    assert _reuses(static) == [("c", "a")]
    # the peak estimate and M* are the static graph's at the hints (reuse never raises them)
    static_2d = schedule(chain((32, 32), (32, 32), NO_SIZE_VARS), CpuPolicy(NO_FUSION))
    for sym, st in ((shared, static_2d), (apart, static)):
        assert (sym.memory.peak_bytes, sym.memory.lower_bound_bytes) == \
            (st.memory.peak_bytes, st.memory.lower_bound_bytes)


def test_symbolic_arena_is_off():
    """Fixed offsets need fixed sizes: with symbolic sizes the inference arena is not planned (reuse still is)."""
    sv = SizeVars.of(s0=(2, 1 << 16, 32), s1=(2, 1 << 16, 32))
    s = schedule(chain((s0, s1), (s1, s0), sv), CpuPolicy(SchedulerConfig(max_rounds=0, reorder=False,
                                                                          plan_arena=True)))
    assert s.memory.arena_bytes is None and s.memory.offsets == () and _reuses(s) == [("c", "a")]
