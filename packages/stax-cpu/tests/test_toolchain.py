"""Compile pipeline: on-disk cache (hits, corrupt entries rebuilt), compiler discovery ($CXX), errors."""

import logging
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from cpu_harness import F32, contiguous, pointwise
from stax import ir
from stax.cpu import CompilerNotFoundError, CpuConfig, compile_schedule
from stax.sched import schedule as make_schedule

(i0,) = ir.pointwise_vars(1)


def _graph(scale: float = 3.0):
    x = contiguous("x", (11,))
    return ir.Graph([x], [pointwise("y", (11,), ir.op("mul", ir.load("x", i0, F32), ir.const(scale, F32)))], ["y"])


def _libs(cache):
    return sorted(p for p in (cache / "cpu").rglob("*.so"))


def _check(mod, scale=3.0):
    x = np.arange(11, dtype=np.float32)
    np.testing.assert_array_equal(mod.call([x])[0], x * np.float32(scale))


def test_cache_hit_skips_compiler(tmp_path, caplog):
    cfg = CpuConfig(cache_dir=str(tmp_path))
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        _check(compile_schedule(make_schedule(_graph()), config=cfg))
        assert "compiling 1 C++ unit(s)" in caplog.text
        caplog.clear()
        _check(compile_schedule(make_schedule(_graph()), config=cfg))
        assert "compiling" not in caplog.text
    assert len(_libs(tmp_path)) == 1
    assert not list(tmp_path.rglob("*.tmp*"))  # atomic writes leave no temporaries


FIRST_COMPILE = """
import sys
sys.path[:0] = sys.argv[2].split(":")
from test_toolchain import _graph, make_schedule, compile_schedule, CpuConfig
compile_schedule(make_schedule(_graph(float(sys.argv[3]))), config=CpuConfig(cache_dir=sys.argv[1]))
"""


@pytest.mark.parametrize("damage", ["truncate", "garbage", "sidecar"])
def test_corrupt_cache_entry_is_rebuilt(tmp_path, damage, caplog):
    """Entries damaged by someone else (a crash, a full disk) are detected and rebuilt. The entry is made in
    another process: damaging a library this process has mapped would crash it (SIGBUS), not test anything."""
    cfg = CpuConfig(cache_dir=str(tmp_path))
    scale = 5.0 + len(damage)
    here = os.path.dirname(__file__)
    subprocess.run([sys.executable, "-c", FIRST_COMPILE, str(tmp_path), os.pathsep.join([here, *sys.path]),
                    str(scale)], check=True)
    (so,) = _libs(tmp_path)
    if damage == "truncate":
        so.write_bytes(so.read_bytes()[:100])
    elif damage == "garbage":
        so.write_bytes(b"\0" * 4096)
    else:
        so.with_suffix(".so.sha256").write_text("0" * 64)
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        _check(compile_schedule(make_schedule(_graph(scale)), config=cfg), scale)
    assert "compiling 1 C++ unit(s)" in caplog.text


def test_no_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.raises(CompilerNotFoundError, match="nonexistent"):
        compile_schedule(make_schedule(_graph()), config=CpuConfig(cache_dir=str(tmp_path)))
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, c++ or clang++ anywhere
    with pytest.raises(CompilerNotFoundError, match="no C\\+\\+ compiler found"):
        compile_schedule(make_schedule(_graph()), config=CpuConfig(cache_dir=str(tmp_path)))


def test_cxx_env_var_is_honoured(tmp_path, monkeypatch):
    log = tmp_path / "calls"
    wrapper = tmp_path / "my-cxx"
    wrapper.write_text(f"#!/bin/sh\necho called >> {log}\nexec g++ \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", str(wrapper))
    _check(compile_schedule(make_schedule(_graph(7.0)), config=CpuConfig(cache_dir=str(tmp_path / "c"))), 7.0)
    assert log.exists() and os.path.getsize(log) > 0


def test_many_kernels_split_into_parallel_units(tmp_path, caplog):
    """A graph of 20 kernels compiles as 2 units in parallel (2 workers), each holding ~10 kernels."""
    x = contiguous("x", (11,))
    nodes, prev = [], "x"
    for k in range(20):
        nodes.append(pointwise(f"b{k}", (11,), ir.op("add", ir.load(prev, i0, F32), ir.const(1.0, F32))))
        prev = f"b{k}"
    g = ir.Graph([x], nodes, [prev])
    from stax.sched import Kernel, MemoryPlan, Schedule

    sched = Schedule(g, tuple(Kernel(f"kernel{k}", "pointwise", (n.name,), ((11,), ())) for k, n in enumerate(nodes)),
                     MemoryPlan())
    cfg = CpuConfig(cache_dir=str(tmp_path), compile_workers=2, regions=False)  # one function per kernel
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        mod = compile_schedule(sched, config=cfg)
    assert "compiling 2 C++ unit(s)" in caplog.text
    x_in = np.arange(11, dtype=np.float32)
    np.testing.assert_array_equal(mod.call([x_in])[0], x_in + 20)
