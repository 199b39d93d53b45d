"""Compile pipeline: on-disk cache (hits, corrupt entries rebuilt, a warm cache without a compiler, unusable
cache directories), compiler discovery ($CXX), errors."""

import logging
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from cpu_harness import F32, contiguous, isa_of, pointwise
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


@pytest.mark.parametrize("unit_chars,units", [(32_000, 1), (1, 4)])
def test_many_kernels_split_into_parallel_units(tmp_path, caplog, monkeypatch, unit_chars, units):
    """20 small kernels (~12 KB of C++) are one unit at the default UNIT_CHARS (a unit's prelude costs more
    than they do); with a unit per character, as four units (two per worker, the cap) in parallel. The
    results are the same."""
    import stax.cpu.compile

    monkeypatch.setattr(stax.cpu.compile, "UNIT_CHARS", unit_chars)
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
    assert f"compiling {units} C++ unit(s)" in caplog.text
    x_in = np.arange(11, dtype=np.float32)
    np.testing.assert_array_equal(mod.call([x_in])[0], x_in + 20)


def test_warm_cache_loads_without_a_compiler(tmp_path, monkeypatch, caplog):
    """Libraries are also listed under a key computed without the compiler (CPU, flags, source): a warm
    cache serves a machine without g++ (or with $CXX pointing nowhere); a miss is CompilerNotFoundError."""
    cfg = CpuConfig(cache_dir=str(tmp_path / "c"))
    warm = compile_schedule(make_schedule(_graph(4.5)), config=cfg)
    _check(warm, 4.5)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, c++ or clang++ anywhere
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        _check(compile_schedule(make_schedule(_graph(4.5)), config=cfg), 4.5)
    assert "no C++ compiler" in caplog.text and "loaded from the cache" in caplog.text
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    mod = compile_schedule(make_schedule(_graph(4.5)), config=cfg)
    _check(mod, 4.5)
    assert isa_of(mod) == isa_of(warm)  # the level probed with the compiler, recorded for use without one
    with pytest.raises(CompilerNotFoundError, match="nonexistent.*1 of 1 library is not in the cache"):
        compile_schedule(make_schedule(_graph(5.5)), config=cfg)  # not cached
    with pytest.raises(CompilerNotFoundError, match="nonexistent"):
        compile_schedule(make_schedule(_graph(4.5)), config=CpuConfig(cache_dir=str(tmp_path / "empty")))


def test_unusable_cache_dir_compiles_into_a_private_directory(tmp_path):
    """A cache directory that cannot be created (its parent is a regular file: fails even for root) costs
    one warning per process and directory, not the compile: libraries go to a private temporary
    directory, reused in the process and removed at exit (checked in a child process)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    script = f"""
import sys, warnings
sys.path[:0] = {sys.path!r}
from test_toolchain import _graph, _check, make_schedule, compile_schedule, CpuConfig
from stax.cpu import toolchain
cfg = CpuConfig(cache_dir={str(blocker / "cache")!r})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for scale in (1.5, 2.5, 1.5):
        _check(compile_schedule(make_schedule(_graph(scale)), config=cfg), scale)
msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
assert len(msgs) == 1 and "not usable" in msgs[0], msgs
(private,) = toolchain._PRIVATE.values()
assert len(list(private.rglob("*.so"))) == 2, list(private.rglob("*"))
print(private)
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=os.path.dirname(__file__))
    assert res.returncode == 0, res.stderr
    private = res.stdout.strip()
    assert private and not os.path.exists(private)  # removed at exit
    assert blocker.read_text() == ""


def test_read_only_cache_dir_still_serves_its_entries(tmp_path, monkeypatch, recwarn, caplog):
    """A read-only cache (a shared, pre-warmed one) is still read; only new entries go to the private
    directory. The write check is faked: root writes through a chmod 0o500 directory."""
    from stax.cpu import toolchain

    cache = tmp_path / "ro"
    cfg = CpuConfig(cache_dir=str(cache))
    _check(compile_schedule(make_schedule(_graph(6.5)), config=cfg), 6.5)
    real = toolchain._check_writable

    def read_only(d):
        if str(d).startswith(str(cache)):
            raise PermissionError(13, "Read-only file system", str(d))
        real(d)

    monkeypatch.setattr(toolchain, "_check_writable", read_only)
    before = _libs(cache)
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        _check(compile_schedule(make_schedule(_graph(6.5)), config=cfg), 6.5)
        assert "compiling" not in caplog.text  # the warm entry, read from the read-only directory
        _check(compile_schedule(make_schedule(_graph(7.5)), config=cfg), 7.5)
        assert "compiling 1 C++ unit(s)" in caplog.text
    assert _libs(cache) == before  # nothing written there
    assert len([w for w in recwarn if "not usable" in str(w.message)]) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a chmod 0o500 directory")
def test_unwritable_cache_dir_warns_once(tmp_path, recwarn):
    cache = tmp_path / "locked"
    (cache / "cpu").mkdir(parents=True)
    (cache / "cpu").chmod(0o500)
    try:
        for scale in (8.5, 9.5):
            _check(compile_schedule(make_schedule(_graph(scale)), config=CpuConfig(cache_dir=str(cache))), scale)
    finally:
        (cache / "cpu").chmod(0o700)
    assert len([w for w in recwarn if "not usable" in str(w.message)]) == 1


def test_partition_balances_units_by_code_and_keeps_every_kernel():
    """compile.partition: a unit per UNIT_CHARS of kernel code, at most two per worker, largest kernels
    first into the lightest unit; every kernel in exactly one unit, the same split for the same kernels."""
    from types import SimpleNamespace

    from stax.cpu.compile import UNIT_CHARS, partition

    ks = [SimpleNamespace(name=f"k{i}", code="x" * n) for i, n in enumerate([30_000, 9_000, 14_000, 1_200] * 3)]
    units = partition(ks, workers=2)
    assert len(units) == 4  # 162 KB: five units' worth, capped at two per worker
    assert sorted(k.name for u in units for k in u) == sorted(k.name for k in ks)
    sizes = [sum(len(k.code) for k in u) for u in units]
    assert max(sizes) - min(sizes) <= 30_000  # within the largest kernel of even
    assert [[k.name for k in u] for u in partition(list(ks), 2)] == [[k.name for k in u] for u in units]
    assert len(partition(ks, workers=1)) == 2
    assert len(partition(ks[:2], workers=8)) == 1  # 39 KB: one unit's worth
    assert len(partition([SimpleNamespace(name="a", code="x" * (3 * UNIT_CHARS))], 4)) == 1
