"""Scans (tl.associative_scan): a whole row in one block, or R0_BLOCK steps with a carry."""

import numpy as np
import pytest
from gpu_testlib import bf16, config, f32, f64, i0, i1, i64, inp, lay, pw, run
from stax.ir import ComputedBuffer, Graph, Scan, cast, load, op

LOOPED = dict(persistent_reduction_max=8, r0_block_cap=8, xblock_cap=4)
SMALL = dict(xblock_cap=4)


def scan_graph(kind, n=6, m=21, axis=1, dtype=f32):
    x = inp("x", (n, m), dtype)
    body = Scan((n, m), axis, kind, load("x", m * i0 + i1, dtype))
    return Graph((x,), (ComputedBuffer("buf0", lay((n, m), body.dtype), body),), ("buf0",))


@pytest.mark.parametrize("kind", ["cumsum", "cumprod", "cummax", "cummin", "cummax_index", "cummin_index",
                                  "logcumsumexp"])
@pytest.mark.parametrize("mode", ["persistent", "looped"])
def test_scan(kind, mode):
    n, m = 6, 21
    x = np.random.default_rng(3).uniform(0.6, 1.4, size=(n, m)).astype(np.float32)
    x[1, 4] = np.nan  # NaN propagates / sticks in the index scans
    x[2, 3] = x[2, 10] = 5.0  # ties move cummax's index to the later element
    x[3, 2] = x[3, 12] = 0.1
    run(scan_graph(kind, n, m), cfg=config(**(LOOPED if mode == "looped" else SMALL)), arrays={"x": x},
        tol=dict(rtol=1e-5, atol=1e-6))


def test_scan_along_the_outer_axis():
    n, m = 9, 5
    body = Scan((n, m), 0, "cumsum", load("x", m * i0 + i1, f32))
    g = Graph((inp("x", (n, m)),), (ComputedBuffer("buf0", lay((n, m)), body),), ("buf0",))
    run(g, cfg=config(**SMALL), tol=dict(rtol=1e-5, atol=1e-6))


def test_int64_cumsum_and_a_consumer_in_the_same_kernel():
    """cumsum then x - cumsum in one kernel: the consumer reads the scan from registers."""
    n, m = 4, 30
    body = Scan((n, m), 1, "cumsum", load("x", m * i0 + i1, i64))
    c = ComputedBuffer("buf0", lay((n, m), i64), body)
    d = pw("buf1", (n, m), op("sub", load("x", m * i0 + i1, i64), load("buf0", m * i0 + i1, i64)))
    g = Graph((inp("x", (n, m), i64),), (c, d), ("buf1",))
    for cfg in (config(**SMALL), config(**LOOPED)):
        run(g, cfg=cfg)


@pytest.mark.parametrize("kind", ["cumsum", "cumprod", "cummax", "logcumsumexp"])
@pytest.mark.parametrize("mode", ["persistent", "looped"])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_scan_stores_its_out_dtype_from_a_wider_accumulator(kind, mode, out):
    """Scan.out_dtype (the CPU frontend's float32 scans accumulate in float64; half types in float32):
    the carry and the block scan stay in the accumulator's type, each prefix is rounded by the store,
    and a consumer in the same kernel reads the rounded value, as it would from memory."""
    n, m = 6, 21
    out_dt, acc = (f32, f64) if out == "float32" else (bf16, f32)
    x = np.random.default_rng(4).uniform(0.6, 1.4, size=(n, m)).astype(np.float32)
    x[1, 4] = np.nan
    body = Scan((n, m), 1, kind, cast(load("x", m * i0 + i1, out_dt), acc), out_dt)
    scan = ComputedBuffer("buf0", lay((n, m), out_dt), body)
    # x - scan: in float64 (cast back up) it shows whether the consumer saw the rounded prefix
    diff = pw("buf1", (n, m), op("sub", cast(load("x", m * i0 + i1, out_dt), acc),
                                 cast(load("buf0", m * i0 + i1, out_dt), acc)))
    g = Graph((inp("x", (n, m), out_dt),), (scan, diff), ("buf0", "buf1"))
    module = run(g, cfg=config(**(LOOPED if mode == "looped" else SMALL)), arrays={"x": x},
                 tol=dict(rtol=1e-12, atol=1e-12) if out == "float32" else None)
    assert f".to({'tl.float32' if out == 'float32' else 'tl.bfloat16'})" in module.source
