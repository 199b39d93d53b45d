"""A whole graph that runs eagerly says so (issue 18, item 3): one StaxEagerWarning per
cause per process, every graph still counted, strict mode still raising."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from stax.frontend import StaxEagerWarning, config, eager_warnings, metrics


@pytest.fixture(autouse=True)
def _not_strict():
    eager_warnings.reset()
    with config.patch(strict=False):
        yield
    eager_warnings.reset()


def _eager_warnings(fn, *calls):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for args in calls:
            torch._dynamo.reset()
            fn(*args)
    return [w for w in seen if issubclass(w.category, StaxEagerWarning)]


def test_complex_dtype_warns_once_and_counts_each_graph():
    f = torch.compile(lambda x: x * 2, backend="stax")
    x = torch.randn(4, dtype=torch.complex64)
    got = _eager_warnings(f, (x,), (x.reshape(2, 2),))
    assert len(got) == 1 and "complex64" in str(got[0].message)
    assert metrics.graphs_failed == 2 and metrics.graphs_compiled == 0


def test_symbolic_shapes_warn_once_across_graphs():
    """Different graphs (other names, other symbols) share the cause: one warning. (A size made by an
    irrational function of sizes, `int(math.sqrt(n))`, is a node Stax does not lower: those graphs
    still run eagerly.)"""
    f = torch.compile(lambda x: x[: int(math.sqrt(x.shape[0]))].sin(), backend="stax", dynamic=True)
    g = torch.compile(lambda x, y: (x * y)[: int(math.sqrt(x.shape[0] + 7))], backend="stax", dynamic=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        f(torch.randn(6))
        g(torch.randn(8), torch.randn(8))
    got = [w for w in seen if issubclass(w.category, StaxEagerWarning)]
    assert len(got) == 1 and "sqrt" in str(got[0].message)
    assert metrics.graphs_failed == 2


def test_missing_compiler_warns(monkeypatch, tmp_path):
    """No C++ compiler and nothing cached: the graph runs eagerly, with a warning naming why."""
    monkeypatch.setenv("CXX", "stax-no-such-compiler")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "cache"))
    f = torch.compile(lambda x: x.exp() * 3, backend="stax")
    x = torch.randn(16)
    got = _eager_warnings(lambda x: torch.testing.assert_close(f(x), x.exp() * 3), (x,))
    assert len(got) == 1 and "stax-no-such-compiler" in str(got[0].message)
    assert metrics.graphs_failed == 1


def test_strict_still_raises():
    with config.patch(strict=True), pytest.raises(Exception, match="complex64"):
        torch.compile(lambda x: x * 2, backend="stax")(torch.randn(4, dtype=torch.complex64))


def test_cause_masks_graph_specific_names():
    a = eager_warnings.cause_of(ValueError("non-tensor graph input arg0_1=s77"))
    b = eager_warnings.cause_of(ValueError("non-tensor graph input arg3_1=s12"))
    assert a == b
