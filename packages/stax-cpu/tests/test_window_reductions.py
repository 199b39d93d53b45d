"""A pooling window over channels-last memory (ResNet's batch norm + ReLU + 3x3 max pool).

Two decisions of the loop builder and the vector emitter, each checked against the
interpreter at every ISA level and pinned in the generated code:
- a reduction's pointwise loops follow its output's memory order when every load is
  contiguous along the output's stride-1 dim, even where other dims sit inside the padding
  clamps: the channel loop becomes the vector loop (one accumulator per lane) instead of a
  scalar reduction stepping over channels;
- in that vertical form, what the window loops do not change (the per-channel batch-norm
  terms: loads, sqrt, reciprocal) is computed once per output vector, before those loops.
"""

from __future__ import annotations

import re

import numpy as np
import sympy
from cpu_harness import assert_close, isa_of, run_both
from stax import ir
from stax.ir import dtypes as dt

F32 = dt.float32
N, C, H, W = 2, 64, 16, 16
OH, OW = 8, 8  # 3x3 window, stride 2, padding 1


def _nhwc(sizes):
    n, c, h, w = sizes
    return (h * w * c, 1, w * c, c)


def _window():
    """The NHWC input, its value at window position (r0, r1) of output (n, c, oh, ow) (clamped
    into the image) and whether that position is inside the image (not padding)."""
    x = ir.InputBuffer("x", ir.Layout("cpu", F32, (N, C, H, W), _nhwc((N, C, H, W))))
    n, c, oh, ow = ir.pointwise_vars(4)
    r0, r1 = ir.reduction_vars(2)
    ih, iw = 2 * oh - 1 + r0, 2 * ow - 1 + r1
    clamp = lambda e, hi: sympy.Max(0, sympy.Min(hi - 1, e))  # noqa: E731
    v = ir.load("x", H * W * C * n + c + W * C * clamp(ih, H) + C * clamp(iw, W), F32)
    inside = None
    for e, hi in ((ih, H), (iw, W)):
        iv = ir.index_value(e)
        cond = ir.op("logical_and", ir.op("ge", iv, ir.const(0, dt.int64)), ir.op("lt", iv, ir.const(hi, dt.int64)))
        inside = cond if inside is None else ir.op("logical_and", inside, cond)
    return x, v, inside


def _pool_graph():
    x, v, inside = _window()
    params = [ir.InputBuffer(f"p{k}", ir.Layout.contiguous((C,), F32)) for k in range(4)]
    c = ir.pointwise_vars(4)[1]
    mean, var, gamma, beta = (ir.load(p.name, c, F32) for p in params)
    rstd = ir.op("reciprocal", ir.op("sqrt", ir.op("add", var, ir.const(1e-5, F32))))
    y = ir.op("relu", ir.op("add", ir.op("mul", ir.op("mul", ir.op("sub", v, mean), rstd), gamma), beta))
    y = ir.op("where", inside, y, ir.const(float("-inf"), F32))
    out = ir.ComputedBuffer("pool", ir.Layout("cpu", F32, (N, C, OH, OW), _nhwc((N, C, OH, OW))),
                            ir.Reduction((N, C, OH, OW), (3, 3), "max", y))
    return ir.Graph((x, *params), (out,), ("pool",))


def _values(rng):
    vals = {"x": rng.standard_normal((N, C, H, W)).astype(np.float32)}
    for k in range(4):
        vals[f"p{k}"] = (rng.random(C) + 0.5).astype(np.float32)
    return vals


def test_nhwc_pool_is_a_vertical_vector_reduction(level_cfg):
    ours, ref, mod = run_both(_pool_graph(), _values(np.random.default_rng(0)), level_cfg)
    assert_close(ours[0], ref[0], F32, rtol=1e-6, atol=1e-6, what="pool")
    if isa_of(mod) == "none":  # the scalar level: nothing more to pin
        return
    src = mod.source[mod.source.index('extern "C" int kernel0'):]
    # the channel loop is the vector loop, the stores whole vectors
    assert "stax::vec::storeu(out_ptr0" in src
    # the batch-norm terms are computed before the window loops open
    first_window_loop = src.index("for (int64_t x4")
    assert src.index("stax::vec::sqrt(") < first_window_loop
    assert len(re.findall(r"stax::vec::sqrt\(", src)) == 1


def _pool_with_indices_graph():
    """A training max pool over NHWC memory as the frontend lowers it: the window's max, its
    argmax, the position of its last NaN (-1 without one) and the flat input index from those two
    (max_pool2d_with_indices), all over [N, C, OH, OW] in NHWC layout: one outer-loop fusion."""
    x, v, inside = _window()
    n, c, oh, ow = ir.pointwise_vars(4)
    r0, r1 = ir.reduction_vars(2)
    v = ir.op("where", inside, v, ir.const(float("-inf"), F32))
    out_layout = lambda d: ir.Layout("cpu", d, (N, C, OH, OW), _nhwc((N, C, OH, OW)))  # noqa: E731
    sizes = (N, C, OH, OW)
    vals = ir.ComputedBuffer("vals", out_layout(F32), ir.Reduction(sizes, (3, 3), "max", v))
    arg = ir.ComputedBuffer("arg", out_layout(dt.int64), ir.Reduction(sizes, (3, 3), "argmax", v))
    nan_at = ir.op("where", ir.op("isnan", v), ir.index_value(3 * r0 + r1), ir.const(-1, dt.int64))
    last_nan = ir.ComputedBuffer("last_nan", out_layout(dt.int64), ir.Reduction(sizes, (3, 3), "max", nan_at))
    idx = OH * OW * C * n + c + OW * C * oh + C * ow
    r = ir.op("where", ir.op("ge", ir.load("last_nan", idx, dt.int64), ir.const(0, dt.int64)),
              ir.load("last_nan", idx, dt.int64), ir.load("arg", idx, dt.int64))
    three = ir.const(3, dt.int64)
    row = ir.op("add", ir.index_value(2 * oh - 1), ir.op("floordiv", r, three))
    col = ir.op("add", ir.index_value(2 * ow - 1), ir.op("remainder", r, three))
    flat = ir.op("add", ir.op("mul", row, ir.const(W, dt.int64)), col)
    where = ir.ComputedBuffer("where", out_layout(dt.int64), ir.Pointwise(sizes, flat))
    return ir.Graph((x,), (vals, arg, last_nan, where), ("vals", "where"))


def test_nhwc_pool_with_indices_runs_its_channel_loop_innermost(level_cfg):
    """The outer-loop fusion of the four nodes shares all four pointwise loops; in logical order
    the channel loop sat outside H and W and every store stepped by C. In the outputs' memory order
    (nests._in_memory_order) the stores are contiguous along the innermost loop, and only N, H, W
    are shared: the channel loop stays inside each group, so the window reductions (max, argmax,
    last NaN) and the flat index vectorize along C (scalar before: ResNet-18's training max pool)."""
    vals = {"x": np.random.default_rng(1).standard_normal((N, C, H, W)).astype(np.float32)}
    vals["x"][0, 3, 5, 5] = np.nan  # the last-NaN path
    ours, ref, mod = run_both(_pool_with_indices_graph(), vals, level_cfg)
    assert_close(ours[0], ref[0], F32, what="vals")
    assert_close(ours[1], ref[1], dt.int64, what="indices")
    src = mod.source[mod.source.index('extern "C" int kernel0'):]
    lanes = {"avx512": 16, "avx2": 8}.get(level_cfg.isa)
    if lanes is None:  # the scalar level: plain stores, contiguous along x3
        stores = re.findall(r"out_ptr\d+\[\(([^\]]*)\)\] =", src)
        assert stores and all(s.replace(" ", "").endswith("+x3") for s in stores), stores
        return
    stores = re.findall(r"stax::vec::storeu\(out_ptr\d+ \+ \(([^;]*)\), ", src)
    assert stores and all(s.replace(" ", "").endswith("+x3") for s in stores), stores
    assert f"for (int64_t x3 = 0; x3 < {C}; x3 += {lanes})" in src
    assert "argmax_update" in src and "floordiv_by<3LL>" in src and "remainder_by<3LL>" in src
