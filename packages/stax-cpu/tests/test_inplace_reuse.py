"""§7.5's in-place reuse in the generated wrapper: a kernel writes its result over a dying buffer
it reads at its write index. The donor stays alive (and is passed) until the call, both pointers
then name one storage and lose `__restrict__`; results match stax.ir.interpret."""

from dataclasses import replace

import numpy as np
import pytest
from cpu_harness import F32, assert_close, contiguous, pointwise, run_both
from stax import ir
from stax.sched import CpuPolicy, SchedulerConfig
from stax.sched import schedule as make_schedule

i0, i1 = ir.pointwise_vars(2)
INPLACE = CpuPolicy(SchedulerConfig(max_rounds=0, reorder=False, inplace_reuse=True))


def exp_then_affine(rows, cols):
    """buf1 = exp(x); buf2 = buf1 * 2 + 1 (buf1 dies there, read where buf2 is written)."""
    x = contiguous("x", (rows, cols))
    buf1 = pointwise("buf1", (rows, cols), ir.op("exp", ir.load("x", cols * i0 + i1, F32)))
    twice = ir.op("mul", ir.load("buf1", cols * i0 + i1, F32), ir.const(2.0, F32))
    buf2 = pointwise("buf2", (rows, cols), ir.op("add", twice, ir.const(1.0, F32)))
    return ir.Graph([x], [buf1, buf2], ["buf2"])


@pytest.mark.parametrize("regions", [False, True])
def test_kernel_writes_over_the_buffer_it_reads(cfg, regions):
    g = exp_then_affine(48, 40)
    sched = make_schedule(g, INPLACE)
    assert "[1] buf2 = buf1; del buf1  # reuse" in [str(e) for e in sched.memory.events]
    x = np.random.default_rng(0).standard_normal((48, 40)).astype(np.float32)
    ours, ref, mod = run_both(g, {"x": x}, replace(cfg, regions=regions, localize=False), sched)
    assert_close(ours[0], ref[0], F32, rtol=2e-6, what="buf2")
    wrapper = mod.source.split("# ---- Python wrapper ----", 1)[1]
    assert "buf2 = buf1  # reuse; buf1 is released after" in wrapper  # not `del buf1` before the call
    call = next(line for line in wrapper.splitlines() if "data_ptr(buf2)" in line)
    assert "data_ptr(buf1)" in call
    fn = call.split("k_", 1)[1].split("(", 1)[0]
    sig = mod.source[mod.source.index(f'extern "C" int {fn}('):].split("\n", 1)[0]
    params = sig.split("(", 1)[1].rstrip(")").split(", ")
    shared = [p for p in params if "__restrict__" not in p]
    assert len(shared) == 2 and all(p.startswith(("float*", "const float*")) for p in shared)  # buf1, buf2
    assert len(params) - len(shared) == (2 if regions else 1)  # x (a region's), err
