"""Scans (cumsum, cumprod, cummax/cummin and their indices, logcumsumexp) along an inner and an
outer axis, compiled vs the interpreter: the axis loop runs last and sequentially."""

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, run_both, single_kernel
from stax import ir
from stax.ir import dtypes as dt
from stax.ir.graph import Scan
from stax.ir.ops import SCANS, scan_result_dtype

SHAPE = (6, 37)


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.int64, dt.bfloat16], ids=str)
def test_scans(d, cfg):
    x = contiguous("x", SHAPE, d)
    i0, i1 = ir.pointwise_vars(2)
    nodes = []
    for stype in SCANS:
        if stype == "logcumsumexp" and not d.is_floating:
            continue
        for axis in (0, 1):
            body = Scan(SHAPE, axis, stype, ir.load("x", SHAPE[1] * i0 + i1, d))
            out_dt = scan_result_dtype(stype, d)
            nodes.append(ir.ComputedBuffer(f"{stype}_{axis}", ir.Layout.contiguous(SHAPE, out_dt), body))
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    rng = np.random.default_rng(0)
    if d.is_floating:
        v = rng.standard_normal(SHAPE) * 0.5 + 1.0
        v[2, 5] = np.nan
        v[4, 3:9] = 0.75  # ties
    else:
        v = rng.integers(-3, 4, SHAPE)
    ours, ref, _ = run_both(g, {"x": v}, cfg, sched=single_kernel(g, "fused"))
    for node, o, r in zip(nodes, ours, ref):
        od = node.layout.dtype
        if od.is_floating and node.body.scan_type in ("cumsum", "cumprod", "logcumsumexp"):
            rtol = {dt.float32: 1e-5, dt.float64: 1e-12, dt.bfloat16: 2e-2}[od]
            assert_close(o, r, od, rtol=rtol, atol=rtol, what=node.name)
        else:
            assert_close(o, r, od, what=node.name)
