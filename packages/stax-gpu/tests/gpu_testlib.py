"""Shared test helpers: build graphs, run them through stax-gpu, compare with references.

How results are compared depends on where the kernels run (see `MODE`):

  interpreter (CI: TRITON_INTERPRET=1 on CPU). The kernel's outputs are compared with
      the numpy float32 interpreter (stax.ir.interpret) at tight tolerances (TOL, or a
      test's `tol`): both sides compute with numpy, so they agree to a few ulp. The same
      numpy float32 outputs are also checked against the error model below, so every CI
      run validates the model on every test graph.
  cuda (STAX_TEST_DEVICE=cuda, a real GPU). libdevice, FMA contraction and other
      summation orders make tight agreement with numpy meaningless (sin(exp(x)) is off by
      ~1 ulp of exp(x) passed through sin; row sums of randn data cancel). Outputs are
      compared with the exact (float64) result of the graph within the per-element bound
      of error_model.py: a first-order running error analysis -- each op's operand errors
      propagated through the op (evaluated at the corners of the operands' intervals)
      plus the op's own budget (0 for exact ops, the rounding for IEEE ops, (k + 0.5)
      ulp for libdevice functions with CUDA's stated k), gamma_n * sum|x_i| for sums in
      any order, and the analogous bounds for prod, Welford, scans. Integer and bool
      outputs must be exact except where a near-tie within the bounds may flip them;
      half types are bounded by their own ulp at each rounding. Tests whose point is
      bit-exactness (tol=EXACT: Philox bits, round-half-even) stay bit-exact everywhere.
  perturb (STAX_TEST_PERTURB=1 on CPU). The cuda comparison, with the kernel's outputs
      shifted by the deviations a GPU would add (gpu_sim.py: libdevice's full ulp error
      with random signs, FMA, shuffled float32 accumulation, Welford lanes, Hillis-Steele
      scans): validates the model without a GPU, while wrong kernels still fail it.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from error_model import assert_within, reference_with_bounds
from gpu_sim import simulate_gpu
from stax.gpu import GpuConfig, compile_schedule
from stax.gpu.testing import build_schedule
from stax.ir import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, Reduction, interpret, outputs, to_storage
from stax.ir import dtypes as dt
from stax.ir.index import pointwise_vars, reduction_vars, var

ON_CUDA = os.environ.get("STAX_TEST_DEVICE", "cpu") == "cuda"
AOT = os.environ.get("STAX_TEST_AOT") == "1" and not ON_CUDA
DEVICE = "cuda" if ON_CUDA else "cpu"
MODE = "cuda" if ON_CUDA else ("perturb" if os.environ.get("STAX_TEST_PERTURB") == "1" else "interpreter")
i0, i1, i2 = pointwise_vars(3)
r0, r1 = reduction_vars(2)
f32, f16, bf16, f64 = dt.float32, dt.float16, dt.bfloat16, dt.float64
i32, i64, i8, u8, b8 = dt.int32, dt.int64, dt.int8, dt.uint8, dt.bool_

# Interpreter-mode tolerances: float32 results of the same (numpy) arithmetic agree to a few
# ulp; half types are computed in float32 and rounded once at the store, while the
# interpreter rounds after every op, so they may differ by the rounding of intermediate results.
EXACT = dict(rtol=0, atol=0)  # bit-exact in every mode
TOL = {
    "float32": dict(rtol=2e-6, atol=1e-6),
    "float64": dict(rtol=1e-12, atol=1e-12),
    "float16": dict(rtol=4e-3, atol=1e-3),
    "bfloat16": dict(rtol=3e-2, atol=1e-2),
}


def config(**kw) -> GpuConfig:
    """The test config: heuristics only unless a test asks (on a GPU, autotuning every
    small test kernel would spend minutes compiling candidates)."""
    kw.setdefault("autotune", False)
    return GpuConfig.from_env(**kw)


def lay(sizes, dtype=f32, strides=None) -> Layout:
    if strides is None:
        return Layout.contiguous(sizes, dtype, "cuda")
    return Layout("cuda", dtype, tuple(sizes), tuple(strides))


def inp(name, sizes, dtype=f32, strides=None) -> InputBuffer:
    return InputBuffer(name, lay(sizes, dtype, strides))


def pw(name, sizes, value, dtype=None, strides=None) -> ComputedBuffer:
    return ComputedBuffer(name, lay(sizes, dtype or value.dtype, strides), Pointwise(tuple(sizes), value))


def red(name, sizes, rsizes, rtype, value, out_sizes=None) -> ComputedBuffer:
    body = Reduction(tuple(sizes), tuple(rsizes), rtype, value)
    return ComputedBuffer(name, lay(out_sizes or sizes, body.dtype), body)


def random_array(shape, d: dt.DType, rng, low=None, high=None) -> np.ndarray:
    if d.is_bool:
        return rng.random(shape) < 0.5
    if d.is_integer:
        lo = -50 if low is None else low
        hi = 50 if high is None else high
        if d == u8:
            lo = max(lo, 0)
        return rng.integers(lo, hi, size=shape).astype(d.np)
    if low is not None:
        a = rng.uniform(low, high, size=shape)
    else:
        a = rng.standard_normal(shape)
    return dt.round_to(a.astype(np.float64), d)


def to_torch_storage(flat: np.ndarray, d: dt.DType) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(flat))
    if d == bf16:
        t = t.to(torch.bfloat16)
    return t.to(DEVICE)


def make_inputs(graph: Graph, arrays: dict | None = None, seed: int = 0, **ranges):
    """(flat numpy storages for the interpreter, torch tensors for stax-gpu)."""
    rng = np.random.default_rng(seed)
    arrays = dict(arrays or {})
    flats, tensors = {}, []
    for b in graph.inputs:
        layout = b.layout
        sizes = tuple(int(s) for s in layout.sizes)
        a = arrays.get(b.name)
        if a is None:
            a = random_array(sizes, layout.dtype, rng, *ranges.get(b.name, (None, None)))
        flat = to_storage(np.asarray(a), layout)
        flats[b.name] = flat
        t = to_torch_storage(flat, layout.dtype)
        tensors.append(torch.as_strided(t, sizes, tuple(int(s) for s in layout.strides), 0))
    return flats, tensors


def as_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


def assert_close(actual, expected, d: dt.DType, tol=None) -> None:
    if d.is_floating:
        np.testing.assert_allclose(actual.astype(np.float64), np.asarray(expected).astype(np.float64), equal_nan=True,
                                   **(tol or TOL[d.name]))
    else:
        np.testing.assert_array_equal(actual, expected)


def _numpy_kernel(fn):
    """A torch extern kernel as the interpreter wants it: numpy arrays in and out."""

    def call(*arrays, **constants):
        return as_numpy(fn(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays], **constants))

    return call


def run(graph: Graph, groups=None, cfg: GpuConfig | None = None, arrays=None, tol=None, extern=None, seed=0,
        reuse=False, extern_bounds=None, **ranges):
    """Compile `graph` with kernels `groups` (default: all nodes in one kernel), run it
    on random inputs and compare every output with the references (see the module doc;
    `tol` is the interpreter-mode tolerance, EXACT means bit-exact everywhere).
    `extern_bounds` gives the error model of extern kernels. Returns the module."""
    cfg = cfg or config()
    sched = build_schedule(graph, groups, reuse=reuse)
    module = compile_schedule(sched, extern_kernels=extern, config=cfg)
    if AOT:  # no GPU here: build every kernel variant with the real compiler instead of running it
        from stax.gpu.aot import compile_module

        compile_module(module, graph, all_configs=False)
        return module
    flats, tensors = make_inputs(graph, arrays, seed, **ranges)
    args = list(tensors)
    got = module.call(args)  # before the reference runs: the kernel must raise its own errors
    assert args == [], "call(args) must clear its argument list"
    assert len(got) == len(graph.outputs)
    np_extern = {k: _numpy_kernel(f) for k, f in (extern or {}).items()}
    ref = outputs(graph, interpret(graph, flats, np_extern))
    got = [as_numpy(g) for g in got]
    for name, g, r in zip(graph.outputs, got, ref):
        assert tuple(g.shape) == r.shape, name
    check_outputs(graph, flats, got, ref, cfg.math, tol, np_extern, extern_bounds, seed)
    return module


def check_outputs(graph: Graph, flats, got, ref, math: str, tol=None, np_extern=None, extern_bounds=None, seed=0):
    """Compare outputs `got` (numpy) with the float32 interpreter's `ref` as MODE says."""
    exact = tol is not None and tol.get("rtol") == 0 and tol.get("atol") == 0
    if MODE != "interpreter":
        check_model(graph, flats, got, math, np_extern, extern_bounds, seed, exact_ref=ref if exact else None)
        return
    dtypes = [graph.buffer_layout(n).dtype for n in graph.outputs]
    for g, r, d in zip(got, ref, dtypes):
        assert_close(g, r, d, tol)
    for name, r, (x, e), d in zip(graph.outputs, ref, reference_with_bounds(graph, flats, math, extern_bounds), dtypes):
        assert_within(r, x, e, d, f"{name} (the numpy float32 reference itself)")


def check_model(graph: Graph, flats, got, math: str, np_extern=None, extern_bounds=None, seed=0, exact_ref=None):
    """Kernel outputs `got` against the error model (`math`: the kernels' math mode);
    under STAX_TEST_PERTURB first shifted by simulated GPU deviations. With `exact_ref`
    (the interpreter's outputs) the comparison is bit-exact instead."""
    if MODE == "perturb":
        sim = simulate_gpu(graph, flats, seed, np_extern)
        base = simulate_gpu(graph, flats, seed, np_extern, perturb=False)
        got = [gpu_like(g, s, b) for g, s, b in zip(got, sim, base)]
        math = "perturb"
    if exact_ref is not None:
        for name, g, r in zip(graph.outputs, got, exact_ref):
            np.testing.assert_array_equal(g, r, err_msg=name)
        return
    for name, g, (x, e) in zip(graph.outputs, got, reference_with_bounds(graph, flats, math, extern_bounds)):
        assert_within(g, x, e, graph.buffer_layout(name).dtype, name)


def gpu_like(got, sim, ref) -> np.ndarray:
    """`got` shifted by the GPU-like deviation (sim - ref, ref the deviation-free baseline):
    a correct kernel then looks like one on a GPU, a wrong one stays as wrong."""
    got, sim, ref = np.asarray(got), np.asarray(sim), np.asarray(ref)
    if got.dtype.kind != "f":
        return np.where(got == ref, sim.astype(got.dtype), got)
    g, s, r = (a.astype(np.float64) for a in (got, sim, ref))
    agree = (g == r) | (np.isnan(g) & np.isnan(r))
    finite = np.isfinite(s) & np.isfinite(r)
    with np.errstate(invalid="ignore"):
        return np.where(finite, g + (s - r), np.where(agree, s, g))


def kernel_src(module, name: str) -> str:
    """The source text of one generated kernel function."""
    src = module.source
    start = src.index(f"def {name}(")
    end = src.find("\n\n", start)
    return src[start : end if end > 0 else None]


__all__ = [n for n in dir() if not n.startswith("_")] + ["var"]


def async_flag(module):
    """A module's error flag, read asynchronously as on cuda: on CPU (where every call reads it
    at its end) the end-of-call read is switched off, so a test can look at the output first."""
    from stax.gpu.compile import generated_module

    flag = generated_module(module).ERRORS
    if not ON_CUDA:
        flag.end = lambda: None
    return flag


def assert_raised_later(module, flag, next_inputs, match: str, exc=IndexError) -> None:
    """What a call flagged is raised later: on cuda by the next call (once the GPU caught up),
    on CPU by `check()`."""
    import pytest

    if ON_CUDA:
        torch.cuda.synchronize()
        with pytest.raises(exc, match=match + ".*earlier call"):
            module.call(list(next_inputs))
    else:
        with pytest.raises(exc, match=match):
            flag.check()
