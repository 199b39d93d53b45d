"""Shared fixtures: every test starts with a fresh dynamo cache, zeroed metrics and a
strict config (a graph that fails to compile raises instead of running eagerly, so no
test can pass by silently falling back).

Without a GPU, Triton runs in its interpreter (TRITON_INTERPRET=1, set before anything
imports triton — `import torch._dynamo` does), so the stax.gpu routing tests run on CPU
tensors with config.device_override='gpu'. With a GPU the cuda tests run instead.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():  # `import torch` alone does not import triton
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch._dynamo  # noqa: E402
from stax.frontend import config, metrics, register  # noqa: E402

register()  # backend="stax" also when running from PYTHONPATH (no installed entry point)

# Tolerances per dtype (rtol, atol): float32 allows a few ulp for vectorized math
# functions; half types allow one ulp of the result type (eager rounds per op too).
TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-12, 1e-12),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    metrics.reset()
    # the whole-graph cache off: tests watch lowering and scheduling happen (spies, logs, reports);
    # test_graph_cache.py turns it on
    with config.patch(strict=True, graph_cache=False):
        yield
    torch._dynamo.reset()


@pytest.fixture(params=["AVX512", "AVX2"])
def cpu_capability(request, monkeypatch):
    """The CPU capability onednn_post_ops.py decides by, as if this CPU had it (oneDNN runs either
    way: only which activations run inside its primitives changes)."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: request.param)
    return request.param


def tol(dtype):
    return TOL.get(dtype, (0, 0))


def assert_same(actual, expected, rtol=None, atol=None, check_stride=True):
    """stax result vs eager: same type, dtype, shape, (strides), values within tolerance."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol, check_stride)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    r, a = tol(expected.dtype)
    torch.testing.assert_close(
        actual, expected, rtol=r if rtol is None else rtol, atol=a if atol is None else atol, equal_nan=True
    )
    if check_stride and expected.numel() > 1:
        sig = [(n, s) for n, s in zip(expected.shape, expected.stride()) if n != 1]
        got = [(n, s) for n, s in zip(actual.shape, actual.stride()) if n != 1]
        assert got == sig, f"strides {actual.stride()} differ from eager's {expected.stride()}"


def no_grad_call(m):
    """`m`'s call under torch.no_grad(): what an inference graph is traced from."""
    def f(*args):
        with torch.no_grad():
            return m(*args)

    return f


# STAX_TEST_DYNAMIC=1: `run_stax` compiles with dynamic=True (every size symbolic), so the op suites
# run the symbolic-shape lowering and stax.cpu's symbolic kernels instead of the static ones
DYNAMIC = os.environ.get("STAX_TEST_DYNAMIC") == "1"


def run_stax(fn, *args, **kwargs):
    """fn compiled with backend='stax' (static shapes; STAX_TEST_DYNAMIC=1: symbolic) applied to args."""
    return torch.compile(fn, backend="stax", dynamic=True if DYNAMIC else False)(*args, **kwargs)


def check(fn, *args, fallbacks=0, rtol=None, atol=None, check_stride=True):
    """Compile, run, compare with eager, and assert the number of fallback ATen calls."""
    expected = fn(*args)
    actual = run_stax(fn, *args)
    assert_same(actual, expected, rtol, atol, check_stride)
    m = metrics.snapshot()
    assert m.graphs_failed == 0
    assert m.graphs_compiled >= 1
    if fallbacks is not None:
        assert m.fallback_calls == fallbacks, f"fallback ops: {dict(m.fallback_ops)}"
    return m


def pytest_configure(config):
    # Triton's interpreter evaluates masked-off lanes too (log(0), x/0 there are expected)
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:triton.*")
