"""The vector loop cut where a body's branches change (loop_pieces.py): a concatenation along it runs one
plain vector loop per input, a pad one per edge, both against stax.ir.interpret; a loop that an OpenMP
pragma shares out, or one with a bounded count of pieces exceeded, stays whole."""

import numpy as np
import pytest
import sympy
from cpu_harness import assert_close, contiguous, isa_of, pointwise, run_both
from stax import ir
from stax.cpu.loop_pieces import MAX_PIECES
from stax.ir import dtypes as dt

F32, I64 = dt.float32, dt.int64
x0, x1 = ir.pointwise_vars(2)
Min, Max = sympy.Min, sympy.Max


def _cat_value(widths, rows_var):
    """cat along the last dim of inputs in0.. of `widths` columns (the frontend's clamped form)."""
    t = ir.index_value(x1)
    starts = np.cumsum([0, *widths[:-1]])
    out = None
    for k in reversed(range(len(widths))):
        w, s = widths[k], int(starts[k])
        load = ir.load(f"in{k}", w * rows_var + Max(0, Min(w - 1, x1 - s)), F32)
        out = load if out is None else ir.op("where", ir.op("lt", t, ir.const(s + w, I64)), load, out)
    return out


def _kernel_code(mod) -> str:
    """The generated kernels (past the prelude), before the Python wrapper."""
    return mod.source.split("# ---- Python wrapper ----")[0].split('extern "C" int kernel0', 1)[1]


@pytest.mark.parametrize("widths", [(64, 64, 64), (24, 40, 9)])
def test_a_concatenation_runs_one_loop_per_input(cfg, widths):
    rows = 10
    ins = [contiguous(f"in{k}", (rows, w)) for k, w in enumerate(widths)]
    out = pointwise("out", (rows, sum(widths)), ir.op("mul", _cat_value(widths, x0), ir.const(2.0, F32)))
    g = ir.Graph(ins, [out], ["out"])
    rng = np.random.default_rng(0)
    vals = {i.name: rng.standard_normal(i.layout.sizes).astype(np.float32) for i in ins}
    ours, ref, mod = run_both(g, vals, cfg)
    assert_close(ours[0], ref[0], F32, what="cat")
    if isa_of(mod) == "none":
        pytest.skip("the pieces are a form of the vector loop; the scalar level has none")
    code = _kernel_code(mod)
    assert code.count("bodies specialized there") == len(widths)
    assert "std::min" not in code and "where(" not in code  # each piece reads its input with plain loads
    if all(w % 16 == 0 for w in widths):  # (no lane loops at all when no piece has a ragged end)
        assert "for (int64_t l = 0" not in code


def test_a_constant_pad_runs_its_edges_apart(cfg):
    n, p = 21, 2
    src = contiguous("src", (n, n))

    def inside(v):
        iv = ir.index_value(v)
        return ir.op("logical_and", ir.op("ge", iv, ir.const(p, I64)), ir.op("lt", iv, ir.const(n + p, I64)))
    idx = n * Max(0, Min(n - 1, x0 - p)) + Max(0, Min(n - 1, x1 - p))
    value = ir.op("where", ir.op("logical_and", inside(x0), inside(x1)), ir.load("src", idx, F32), ir.const(0.0, F32))
    out = pointwise("out", (n + 2 * p, n + 2 * p), value)
    vals = {"src": np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)}
    ours, ref, mod = run_both(ir.Graph([src], [out], ["out"]), vals, cfg)
    assert_close(ours[0], ref[0], F32, what="pad")
    if isa_of(mod) == "none":
        pytest.skip("the pieces are a form of the vector loop; the scalar level has none")
    assert _kernel_code(mod).count("bodies specialized there") == 3


def test_a_loop_with_too_many_pieces_stays_whole(cfg):
    widths = (4,) * (MAX_PIECES + 1)
    ins = [contiguous(f"in{k}", (3, w)) for k, w in enumerate(widths)]
    out = pointwise("out", (3, sum(widths)), _cat_value(widths, x0))
    vals = {i.name: np.random.default_rng(2).standard_normal(i.layout.sizes).astype(np.float32) for i in ins}
    ours, ref, mod = run_both(ir.Graph(ins, [out], ["out"]), vals, cfg)
    assert_close(ours[0], ref[0], F32, what="cat of many")
    assert "bodies specialized there" not in _kernel_code(mod)


def test_a_loop_inside_collapsed_parallel_loops_is_cut(cfg):
    """(3, 5, 4096) from the first 5 of 6 rows of each input (the outer loops do not merge): Algorithm 8.1
    shares them out as one (`collapse(2)`); the vector loop inside them is the pieces' own business."""
    x0_, x1_, x2_ = ir.pointwise_vars(3)
    ins = [contiguous(f"in{k}", (3, 6, 2048)) for k in range(2)]
    t = ir.index_value(x2_)
    value = ir.op("where", ir.op("lt", t, ir.const(2048, I64)),
                  ir.load("in0", 12288 * x0_ + 2048 * x1_ + Min(2047, x2_), F32),
                  ir.load("in1", 12288 * x0_ + 2048 * x1_ + Max(0, x2_ - 2048), F32))
    out = pointwise("out", (3, 5, 4096), value)
    vals = {i.name: np.random.default_rng(4).standard_normal(i.layout.sizes).astype(np.float32) for i in ins}
    ours, ref, mod = run_both(ir.Graph(ins, [out], ["out"]), vals, cfg)
    assert_close(ours[0], ref[0], F32, what="collapsed cat")
    if isa_of(mod) == "none":
        pytest.skip("the pieces are a form of the vector loop; the scalar level has none")
    code = _kernel_code(mod)
    assert "collapse(2)" in code and code.count("bodies specialized there") == 2


def test_the_loop_openmp_shares_out_stays_whole(cfg):
    """A 1-D concatenation big enough to run in parallel: its one loop is the `omp for` loop."""
    widths = (40000, 40000)
    ins = [contiguous(f"in{k}", (w,)) for k, w in enumerate(widths)]
    (i0,) = ir.pointwise_vars(1)
    t = ir.index_value(i0)
    value = ir.op("where", ir.op("lt", t, ir.const(widths[0], I64)), ir.load("in0", Min(widths[0] - 1, i0), F32),
                  ir.load("in1", Max(0, i0 - widths[0]), F32))
    out = pointwise("out", (sum(widths),), value)
    vals = {i.name: np.random.default_rng(3).standard_normal(i.layout.sizes).astype(np.float32) for i in ins}
    ours, ref, mod = run_both(ir.Graph(ins, [out], ["out"]), vals, cfg)
    assert_close(ours[0], ref[0], F32, what="1-D cat")
    code = _kernel_code(mod)
    assert "#pragma omp parallel for" in code and "bodies specialized there" not in code
