"""Reductions over dims (keepdim or not), full reductions, dtypes; zero fallbacks."""

from __future__ import annotations

import pytest
import torch
from conftest import DYNAMIC, check, run_stax
from stax.frontend import config
from test_pointwise import make

SHAPE = (6, 10, 33)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", [(-1,), (0,), (1,), (0, 2), None], ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_reduce_dims_fp32(op, dims, keepdim):
    x = make(torch.float32, SHAPE)
    if dims is None:
        fn = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}[op]
        check(lambda a: fn(a), x)
    else:
        check(lambda a: getattr(torch, op)(a, dims, keepdim=keepdim), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "amax"])
def test_reduce_half(op, dtype):
    """Half sums accumulate in float32 and round once, as eager."""
    check(lambda a: getattr(torch, op)(a, -1), make(dtype, SHAPE))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool], ids=str)
def test_sum_integer_and_bool_give_int64(dtype):
    check(lambda a: (a.sum(-1), a.sum()), make(dtype, SHAPE))


def test_amax_int64():
    check(lambda a: (a.amax(1), a.amin(0)), make(torch.int64, SHAPE))


def test_sum_with_dtype_and_prod():
    x = make(torch.float32, SHAPE, low=0.5, high=1.5)
    check(lambda a: (a.sum(-1, dtype=torch.float64), a.prod(-1)), x, rtol=1e-5, atol=1e-5)


def test_argmax_argmin_max_dim():
    x = make(torch.float32, SHAPE)
    check(lambda a: (a.argmax(-1), a.argmin(1), a.argmax(), a.max(-1), a.min(0, keepdim=True)), x)


def test_any_all():
    x = make(torch.float32, SHAPE)
    check(lambda a: ((a > 2.5).any(-1), (a > -2.9).all(1), (a > 2.9).any()), x)


def test_var_std():
    x = make(torch.float32, SHAPE)
    check(lambda a: (a.var(-1), a.var(0, unbiased=False, keepdim=True), a.std(1), torch.var_mean(a, -1)), x)


def test_reduction_of_composed_pointwise_and_broadcast():
    """The reduction body inlines the pointwise producer (exp(x) * y with y broadcast)."""
    x = make(torch.float32, SHAPE, seed=1)
    y = make(torch.float32, (33,), seed=2)
    m = check(lambda a, b: (a.exp() * b).sum(-1), x, y)
    assert m.kernels_generated == 1


def test_softmax_and_log_softmax():
    x = make(torch.float32, SHAPE)
    check(lambda a: (a.softmax(-1), torch.log_softmax(a, 1), a.logsumexp(-1)), x)


def test_reduce_size_zero_dim():
    check(lambda a: (a.sum(-1), a.sum(0)), torch.ones(4, 0))


def test_var_mean_of_long_or_outer_rows_is_one_welford_reduction():
    """var_mean over rows longer than the CPU target's two_pass_row, or over a non-trailing dim, is the m2 and
    mean outputs of one Welford reduction: two Reduction buffers over the same value, one accumulator."""
    from stax.frontend.targets import TARGETS

    row = TARGETS["cpu"].two_pass_row + 1
    for fn, x in ((lambda a: torch.var_mean(a, -1, correction=2), make(torch.float32, (3, row))),
                  (lambda a: torch.var_mean(a, 0, correction=2), make(torch.float32, SHAPE))):
        torch._dynamo.reset()
        with config.patch(debug=True, debug_dir=_tmp()) as cfg:
            check(fn, x)
        ir = _ir(cfg.debug_dir)
        assert ir.count("welford_m2") == 1 and ir.count("welford_mean") == 1 and ir.count("Reduction(") == 2, ir


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_var_mean_of_short_rows_is_two_sums(offset):
    """A short trailing row's var_mean is two sums, the mean and then the squared deviations from it
    (no Welford), and as accurate as eager's on rows far from zero (no E[x^2] - E[x]^2 cancellation).
    (STAX_TEST_DYNAMIC=1: the row length is a symbol, so Welford.)"""
    if DYNAMIC and offset:
        pytest.skip("a symbolic row is one Welford reduction: its float lanes keep ~1e-4 of a far-from-zero "
                    "row's variance (stax-cpu README, reductions)")
    x = make(torch.float32, (4, 1024)) + offset
    with config.patch(debug=True, debug_dir=_tmp()) as cfg:
        check(lambda a: (torch.var_mean(a, -1, correction=2), a.std(-1, keepdim=True)), x)
    ir = _ir(cfg.debug_dir)
    assert DYNAMIC or "welford" not in ir and ir.count("Reduction(") >= 2 and "sum" in ir, ir
    got = run_stax(lambda a: torch.var(a, -1), x)
    exact = x.double().var(-1)
    assert ((got.double() - exact).abs() <= 1e-5 * exact + 1e-6).all(), (got, exact)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_scans(dtype):
    """cumsum / cumprod / cummax / cummin (values + indices) / logcumsumexp are Scan
    buffers, along an inner and an outer dim; ties and repeated values in int64."""
    x = make(dtype, SHAPE) if dtype.is_floating_point else make(dtype, SHAPE) % 4
    fns = [lambda a: (a.cumsum(-1), a.cumsum(0), a.cummax(1), a.cummin(-1))]
    if dtype.is_floating_point:
        fns.append(lambda a: (a.logcumsumexp(1), (a * 0.1).cumprod(-1)))
    for fn in fns:
        torch._dynamo.reset()
        with config.patch(debug=True, debug_dir=_tmp()) as cfg:
            check(fn, x)
        ir = _ir(cfg.debug_dir)
        assert "Scan(" in ir and "Reduction(" not in ir, ir


FLOAT32_SCANS = {  # op -> (fn, input range: products of a thousand values stay in range)
    "cumsum": (lambda a: a.cumsum(-1), (-3.0, 3.0)),
    "cumprod": (lambda a: a.cumprod(-1), (0.9, 1.1)),
    "logcumsumexp": (lambda a: a.logcumsumexp(-1), (-3.0, 3.0)),
}


@pytest.mark.parametrize("op", sorted(FLOAT32_SCANS))
def test_float32_scan_accumulates_in_float64_in_one_kernel(op):
    """On the CPU a float32 scan accumulates in float64 (ATen's acc type) and each prefix is
    rounded to float32 by the scan's own store (Scan.out_dtype): one kernel reads float32 and
    writes float32, the memory plan holds just the input and the output. It was a float64
    scan buffer plus a convert kernel (issue 21: cumsum 2.13x -> 0.62x eager, plan 96 MiB)."""
    fn, (low, high) = FLOAT32_SCANS[op]
    x = make(torch.float32, (8, 1003), low=low, high=high, seed=3)  # vector blocks and a ragged tail
    with config.patch(debug=True, debug_dir=_tmp()) as cfg:
        m = check(fn, x)
    assert m.kernels_generated == 1
    ir = _ir(cfg.debug_dir)
    assert "out_dtype=float32" in ir and ": float64" in ir and "float64[" not in ir, ir  # no float64 buffer
    (report,) = _reports(cfg.debug_dir)
    assert report["memory"]["peak_bytes"] == 2 * x.nbytes, report["memory"]
    # float64 accumulation: the float64 reference rounded once, up to an ulp (in-vector sums reassociate)
    ref = fn(x.double()).float()
    torch.testing.assert_close(run_stax(fn, x), ref, rtol=1.2e-7, atol=1e-6)


def _reports(debug_dir: str) -> list:
    import json
    import pathlib

    return [json.loads(p.read_text()) for p in pathlib.Path(debug_dir).glob("*/report.json")]


def _tmp() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="stax-fe-test-")


def _ir(debug_dir: str) -> str:
    import pathlib

    return "".join(p.read_text() for p in pathlib.Path(debug_dir).glob("*/ir.txt"))


def test_reductions_over_concatenated_and_padded_rows():
    """cat / pad along the reduced dim: stax.cpu cuts the vector loop where the input changes
    (loop_pieces.py) and the accumulators run on across the pieces; results equal eager."""
    def f(a, b):
        c = torch.cat([a, b], -1)
        return (c.sum(-1), c.amax(-1), torch.nn.functional.pad(a, (3, 5)).softmax(-1),
                *torch.var_mean(torch.cat([b, a * 2], -1), -1))
    check(f, make(torch.float32, (37, 70)), make(torch.float32, (37, 45)))
