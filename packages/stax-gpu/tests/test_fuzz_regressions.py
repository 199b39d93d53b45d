"""Bugs the differential fuzzer found on the cuda path (issue 18.6), as stax.ir graphs
against the numpy interpreter.

Zero-element nodes in a kernel: a (0, 3) pointwise node beside a reduction over 0 rows
(the fuzzer's masked_fill / all over a (0, 3) input: ZeroDivisionError in plan._dims), and
a [0] pointwise node beside a reduction of 3 rows of 0 elements (mean / logsumexp over a
(0, 1, 3) input: "cannot be split into 3 rows of 0 elements"). Such a node is never
computed nor stored; it must not take part in the kernel's axes.

Literal operands of a where: tl.where(c, 0, -1) is int32 and tl.where(c, 0.1, 0.2)
float32 whatever c is; a where of two literals must be typed by a tensor of its own dtype
(max_pool2d's NaN index, max(where(isnan(x), 0, -1)): an int32 block reduced with the
int64 identity -2**63 does not compile).
"""

import numpy as np
import pytest
from gpu_testlib import config, f32, f64, i0, i1, i64, inp, lay, pw, r0, red, run
from stax.gpu.plan import plan_kernels
from stax.gpu.testing import build_schedule
from stax.ir import ComputedBuffer, Graph, Scan, const, load, op


@pytest.mark.parametrize("rtype", ["sum", "any"])
def test_pointwise_beside_a_reduction_over_no_rows(rtype):
    x = load("x", 3 * i0 + i1, f32)
    row = load("x", 3 * i0 + r0, f32)
    value = op("ne", row, const(0.0, f32)) if rtype == "any" else row
    g = Graph((inp("x", (0, 3)),), (pw("buf0", (0, 3), op("mul", x, const(2.0, f32))),
                                    red("buf1", (0,), (3,), rtype, value)), ("buf0", "buf1"))
    module = run(g)
    (plan,) = plan_kernels(build_schedule(g), config())
    assert plan.empty and [p.node.name for p in plan.nodes] == ["buf0", "buf1"]
    assert "launch_0" not in module.source


def test_pointwise_beside_a_scan_over_no_rows():
    g = Graph((inp("x", (0, 4)),), (pw("buf0", (0, 4), op("neg", load("x", 4 * i0 + i1, f32))),
                                    ComputedBuffer("buf1", lay((0, 4)), Scan((0, 4), 1, "cumsum",
                                                                             load("x", 4 * i0 + i1, f32)))),
              ("buf0", "buf1"))
    run(g)


@pytest.mark.parametrize("rtype", ["sum", "max"])
def test_empty_pointwise_beside_rows_of_zero_elements(rtype):
    """(3,) rows of 0 elements reduced, with an 'xr' node over [0] in the same kernel: the
    rows still get the reduction's empty value, the [0] output is allocated empty."""
    g = Graph((inp("x", (3, 0)),), (red("buf0", (3,), (0,), rtype, load("x", i0 + r0, f32)),
                                    pw("buf1", (0,), op("exp", load("x", i0, f32)))), ("buf0", "buf1"))
    module = run(g)
    (plan,) = plan_kernels(build_schedule(g), config())
    assert not plan.empty and plan.stores == ("buf0", "buf1")
    assert "launch_0" in module.source


def test_where_of_two_int64_literals_reduced_with_the_int64_identity():
    """max_pool2d's NaN index: max over r of where(isnan(x), 0, -1), int64."""
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    x[1, 2] = x[3, 0] = np.nan
    body = op("where", op("isnan", load("x", 6 * i0 + r0, f32)), const(0, i64), const(-1, i64))
    g = Graph((inp("x", (4, 6)),), (red("buf0", (4,), (6,), "max", body),), ("buf0",))
    run(g, arrays={"x": x})


def test_where_of_two_float64_literals_is_float64():
    """where(x > 0, 0.1, 0.2) in float64: the literals as float32 would round 0.1."""
    body = op("where", op("gt", load("x", i0, f64), const(0.0, f64)), const(0.1, f64), const(0.2, f64))
    g = Graph((inp("x", (16,), f64),), (pw("buf0", (16,), body),), ("buf0",))
    run(g)

