"""The GPU benchmark suite (issue 8): the stax-cpu suite at GPU scale, 16384x4096 float32.

Each workload has an eager function, its cuda inputs, the minimum bytes it must move
(inputs read once + outputs written once), and a hand-written stax.ir graph with the
kernel grouping a GPU fusion policy should reach — the fallback when the frontend
(torch.compile(backend="stax")) cannot route the graph to stax.gpu yet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from stax.ir import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, Reduction, Scan, const, load, op
from stax.ir import dtypes as dt
from stax.ir.index import pointwise_vars, reduction_vars, var

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

# bench_gpu.py --dry-run shrinks the suite to run on CPU tensors under the Triton interpreter
N = int(os.environ.get("STAX_GPU_BENCH_ROWS", 16384))
C = int(os.environ.get("STAX_GPU_BENCH_COLS", 4096))
DEVICE = os.environ.get("STAX_GPU_BENCH_DEVICE", "cuda")
f32, i64 = dt.float32, dt.int64
i0, i1 = pointwise_vars(2)
(r0,) = reduction_vars(1)
S = var("s", 0)


# The eager definitions are the micro suite's own (one source of truth for both devices).
from benchmarks.workloads.micro import (  # noqa: E402
    bias_gelu_residual,
    cumsum,
    div_by_sum,
    exp_sum_amax,
    layernorm,
    log_softmax_nll,
    rmsnorm,
    silu,
    softmax,
    transpose_add,
    var_mean,
)


# ---- IR graphs (GPU materialization: cheap pointwise values inlined) ----
def _lay(sizes, d=f32):
    return Layout.contiguous(sizes, d, "cuda")


def _inp(name, sizes, d=f32):
    return InputBuffer(name, _lay(sizes, d))


def _pw(name, sizes, value):
    return ComputedBuffer(name, _lay(sizes, value.dtype), Pointwise(sizes, value))


def _red(name, sizes, rsizes, rtype, value, out=None):
    body = Reduction(sizes, rsizes, rtype, value)
    return ComputedBuffer(name, _lay(out or sizes, body.dtype), body)


def _x(idx=None):
    return load("arg0_1", C * i0 + (r0 if idx is None else idx), f32)


def _xi():
    return load("arg0_1", C * i0 + i1, f32)


def _c(v):
    return const(v, f32)


def g_softmax():
    mx = _red("buf0", (N, 1), (C,), "max", _x())
    e = lambda x: op("exp", op("sub", x, load("buf0", i0, f32)))  # noqa: E731
    s = _red("buf1", (N, 1), (C,), "sum", e(_x()))
    out = _pw("buf2", (N, C), op("truediv", e(_xi()), load("buf1", i0, f32)))
    return Graph((_inp("arg0_1", (N, C)),), (mx, s, out), ("buf2",)), [["buf0", "buf1", "buf2"]]


def g_layernorm():
    mean = _red("buf0", (N, 1), (C,), "welford_mean", _x())
    m2 = _red("buf1", (N, 1), (C,), "welford_m2", _x())
    rstd = op("rsqrt", op("add", op("truediv", load("buf1", i0, f32), _c(float(C))), _c(1e-5)))
    y = op("add", op("mul", op("mul", op("sub", _xi(), load("buf0", i0, f32)), rstd), load("arg1_1", i1, f32)),
           load("arg2_1", i1, f32))
    g = Graph((_inp("arg0_1", (N, C)), _inp("arg1_1", (C,)), _inp("arg2_1", (C,))), (mean, m2, _pw("buf2", (N, C), y)),
              ("buf2",))
    return g, [["buf0", "buf1", "buf2"]]


def g_rmsnorm():
    ss = _red("buf0", (N, 1), (C,), "sum", op("mul", _x(), _x()))
    scale = op("rsqrt", op("add", op("truediv", load("buf0", i0, f32), _c(float(C))), _c(1e-6)))
    y = op("mul", op("mul", _xi(), scale), load("arg1_1", i1, f32))
    return (Graph((_inp("arg0_1", (N, C)), _inp("arg1_1", (C,))), (ss, _pw("buf1", (N, C), y)), ("buf1",)),
            [["buf0", "buf1"]])


def g_silu():
    x = _xi()
    return (Graph((_inp("arg0_1", (N, C)),), (_pw("buf0", (N, C), op("mul", x, op("sigmoid", x))),), ("buf0",)),
            [["buf0"]])


def g_bias_gelu_residual():
    v = op("add", _xi(), load("arg1_1", i1, f32))
    gelu = op("mul", op("mul", v, _c(0.5)), op("add", _c(1.0), op("erf", op("mul", v, _c(0.7071067811865476)))))
    y = op("add", gelu, load("arg2_1", C * i0 + i1, f32))
    g = Graph((_inp("arg0_1", (N, C)), _inp("arg1_1", (C,)), _inp("arg2_1", (N, C))),
              (_pw("buf0", (N, C), y),), ("buf0",))
    return g, [["buf0"]]


def g_div_by_sum():
    s = _red("buf0", (N, 1), (C,), "sum", _x())
    out = _pw("buf1", (N, C), op("truediv", _xi(), load("buf0", i0, f32)))
    return Graph((_inp("arg0_1", (N, C)),), (s, out), ("buf1",)), [["buf0", "buf1"]]


def g_exp_sum_amax():
    e = op("exp", _x())
    g = Graph((_inp("arg0_1", (N, C)),), (_red("buf0", (N,), (C,), "sum", e), _red("buf1", (N,), (C,), "max", e)),
              ("buf0", "buf1"))
    return g, [["buf0", "buf1"]]


def g_transpose_add():
    # x: (C, N) contiguous, x.t()[i, j] = x[j, i]; y: (N, C)
    v = op("add", load("arg0_1", i0 + N * i1, f32), load("arg1_1", C * i0 + i1, f32))
    g = Graph((_inp("arg0_1", (C, N)), _inp("arg1_1", (N, C))), (_pw("buf0", (N, C), v),), ("buf0",))
    return g, [["buf0"]]


def g_log_softmax_nll():
    mx = _red("buf0", (N,), (C,), "max", _x())
    se = _red("buf1", (N,), (C,), "sum", op("exp", op("sub", _x(), load("buf0", i0, f32))))
    picked = load("arg0_1", C * i0 + S, f32, indirect=((S, load("arg1_1", i0, i64), C),))
    loss = op("neg", op("sub", picked, op("add", load("buf0", i0, f32), op("log", load("buf1", i0, f32)))))
    mean = _red("buf3", (), (N,), "sum", op("truediv", load("buf2", r0, f32), _c(float(N))))
    g = Graph((_inp("arg0_1", (N, C)), _inp("arg1_1", (N,), i64)), (mx, se, _pw("buf2", (N,), loss), mean), ("buf3",))
    return g, [["buf0", "buf1", "buf2"], ["buf3"]]


def g_var_mean():
    mean = _red("buf0", (N,), (C,), "welford_mean", _x())
    m2 = _red("buf1", (N,), (C,), "welford_m2", _x())
    var_ = _pw("buf2", (N,), op("truediv", load("buf1", i0, f32), _c(float(C - 1))))
    return Graph((_inp("arg0_1", (N, C)),), (mean, m2, var_), ("buf2", "buf0")), [["buf0", "buf1", "buf2"]]


def g_cumsum():
    body = Scan((N, C), 1, "cumsum", _xi())
    return Graph((_inp("arg0_1", (N, C)),), (ComputedBuffer("buf0", _lay((N, C)), body),), ("buf0",)), [["buf0"]]


@dataclass
class Workload:
    name: str
    fn: Callable
    make_inputs: Callable[[], tuple]
    ir: Callable[[], tuple]  # () -> (Graph, kernel groups)
    tol: tuple = (1e-4, 1e-5)  # (rtol, atol) against eager


def suite() -> list[Workload]:
    g = torch.Generator(device=DEVICE)
    g.manual_seed(0)

    def rn(*shape):
        return torch.randn(*shape, device=DEVICE, generator=g)

    # the workloads with an Inductor baseline in issue 8 first, in case the run is cut short
    return [
        Workload("softmax", softmax, lambda: (rn(N, C),), g_softmax),
        Workload("exp->sum&amax", exp_sum_amax, lambda: (rn(N, C),), g_exp_sum_amax, (1e-4, 1e-3)),
        Workload("log_softmax+nll", log_softmax_nll,
                 lambda: (rn(N, C), torch.randint(0, C, (N,), device=DEVICE, generator=g)), g_log_softmax_nll),
        Workload("cumsum", cumsum, lambda: (rn(N, C),), g_cumsum, (1e-3, 1e-3)),
        Workload("layernorm", layernorm, lambda: (rn(N, C), rn(C), rn(C)), g_layernorm, (1e-4, 1e-4)),
        Workload("rmsnorm", rmsnorm, lambda: (rn(N, C), rn(C)), g_rmsnorm, (1e-4, 1e-4)),
        Workload("silu", silu, lambda: (rn(N, C),), g_silu),
        Workload("bias+gelu+residual", bias_gelu_residual, lambda: (rn(N, C), rn(C), rn(N, C)), g_bias_gelu_residual),
        Workload("x/x.sum(-1)", div_by_sum, lambda: (rn(N, C).abs() + 0.1,), g_div_by_sum),
        Workload("transpose+add", transpose_add, lambda: (rn(C, N), rn(N, C)), g_transpose_add),
        Workload("var_mean", var_mean, lambda: (rn(N, C),), g_var_mean, (1e-4, 1e-5)),
    ]


def nbytes(t) -> int:
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    if isinstance(t, (tuple, list)):
        return sum(nbytes(x) for x in t)
    return 0
