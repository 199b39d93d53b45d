"""Every reduction of stax.ir.REDUCTIONS over several axes/dtypes, compiled vs the interpreter.

Covers keepdim (size-1 ranges), reductions over inner, outer and several dims, full
reductions, NaN propagation (max/min as torch.amax/amin), first index on ties and NaN
for argmax/argmin, and Welford's three outputs sharing one accumulator.
"""

import re

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, isa_of, run_both, single_kernel
from stax import ir
from stax.ir import REDUCTIONS
from stax.ir import dtypes as dt
from stax.ir.ops import reduction_result_dtype

SHAPE = (7, 5, 13)
AXES = [(2,), (0,), (0, 2), (0, 1, 2)]


def reduction_node(name, x: ir.InputBuffer, rtype: str, axes, keepdim: bool, value_fn=None):
    shape = [int(s) for s in x.layout.sizes]
    strides = [int(s) for s in x.layout.strides]
    out_shape = [1 if k in axes else s for k, s in enumerate(shape)] if keepdim else [
        s for k, s in enumerate(shape) if k not in axes]
    pv = ir.pointwise_vars(len(out_shape))
    rv = ir.reduction_vars(len(axes))
    index, p = 0, 0
    for k, st in enumerate(strides):
        if k in axes:
            index += st * rv[axes.index(k)]
            p += 1 if keepdim else 0
        else:
            index += st * pv[p]
            p += 1
    value = ir.load(x.name, index, x.layout.dtype)
    if value_fn is not None:
        value = value_fn(value)
    body = ir.Reduction(tuple(out_shape), tuple(shape[k] for k in axes), rtype, value)
    out_dt = reduction_result_dtype(rtype, value.dtype)
    return ir.ComputedBuffer(name, ir.Layout.contiguous(tuple(out_shape), out_dt), body)


def _values(d: dt.DType, rng):
    if d.is_floating:
        v = rng.standard_normal(SHAPE)
        v[1, 2, 3] = np.nan  # one NaN row for max/min/argmax
        v[4, :, 0] = np.nan
        v[2, 1, :] = 1.5  # ties
        return v
    if d.is_bool:
        v = rng.integers(0, 2, SHAPE).astype(bool)
        v[3] = True
        v[5] = False
        return v
    lo, hi = (0, 4) if d == dt.uint8 else (-3, 4)  # small values: ties, and prod stays meaningful
    return rng.integers(lo, hi, SHAPE).astype(d.np)


TOL = {dt.float32: (2e-5, 1e-5), dt.float64: (1e-12, 1e-12), dt.float16: (4e-3, 4e-3), dt.bfloat16: (3e-2, 3e-2)}


@pytest.mark.parametrize(
    "d", [dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.int8, dt.uint8, dt.bool_], ids=str
)
def test_reductions(d, level_cfg):
    cfg = level_cfg
    x = contiguous("x", SHAPE, d)
    nodes = []
    for rtype in REDUCTIONS:
        if rtype.startswith("welford") and not d.is_floating:
            continue
        for k, axes in enumerate(AXES):
            nodes.append(reduction_node(f"{rtype}_{k}", x, rtype, axes, keepdim=k % 2 == 0))
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    ours, ref, _ = run_both(g, {"x": _values(d, np.random.default_rng(1))}, cfg, sched=single_kernel(g, "fused"))
    for node, o, r in zip(nodes, ours, ref):
        od = node.layout.dtype
        rtype = node.body.reduction_type
        if od.is_floating and rtype in ("sum", "prod") or rtype.startswith("welford"):
            rtol, atol = TOL[od]  # the reference sums pairwise, the kernel sequentially
            assert_close(o, r, od, rtol=rtol, atol=atol, what=node.name)
        else:
            assert_close(o, r, od, what=node.name)


def test_welford_outputs_share_one_accumulator(cfg):
    """mean, m2 and count of one value fused in one kernel update a single Welford accumulator. Checked
    structurally, so it holds at every ISA: how many vector accumulators and updates the row needs
    depends on the width (AVX-512: one vector of 16 lanes, 129 = 8 * 16 + 1; AVX2: 16 vectors of 8,
    unrolled into 4 accumulators; scalar: none)."""
    x = contiguous("x", (37, 129))
    sq = lambda v: ir.op("mul", v, v)  # noqa: E731
    nodes = [reduction_node(f"w_{t}", x, f"welford_{t}", (1,), True, sq) for t in ("mean", "m2", "count")]
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    vals = {"x": np.random.default_rng(2).standard_normal((37, 129)) + 3}
    ours, ref, mod = run_both(g, vals, cfg, sched=single_kernel(g, "fused"))
    for node, o, r in zip(nodes, ours, ref):
        assert_close(o, r, dt.float32, rtol=1e-6, atol=1e-6, what=node.name)
    kernel = mod.source[mod.source.index('extern "C" int kernel0'):mod.source.index("# ---- Python wrapper")]
    (acc,) = re.findall(r"stax::Welford (tmp_acc\d+);", kernel)  # one scalar accumulator for the three
    assert sorted(re.findall(r"(tmp_acc\d+)\.get_(\w+)\(\)", kernel)) == [(acc, "count"), (acc, "m2"), (acc, "mean")]
    lanes = re.findall(r"stax::vec::VWelford<[^>]*> (\w+);", kernel)  # W lanes of Welford state each
    assert bool(lanes) == (isa_of(mod) != "none")
    # every update goes to that accumulator or to a vector one, and every vector one is folded into it
    assert set(re.findall(r"(\w+)\.update\(", kernel)) == {acc, *lanes}
    folded = set(re.findall(r"(\w+)\.merge_into\(" + acc + r"\)", kernel))
    folded |= set(re.findall(r"\w+\.merge\((\w+)\)", kernel))
    assert folded == set(lanes)


def test_empty_reduction_gives_identity(cfg):
    x = contiguous("x", (4, 0))
    nodes = [reduction_node(f"r_{t}", x, t, (1,), True) for t in ("sum", "prod", "max", "welford_mean")]
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    ours, ref, _ = run_both(g, {"x": np.zeros((4, 0), np.float32)}, cfg)
    for node, o, r in zip(nodes, ours, ref):
        assert_close(o, r, node.layout.dtype, what=node.name)
