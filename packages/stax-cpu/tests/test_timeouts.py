"""Every subprocess stax.cpu starts has a timeout: a compiler that hangs (here a shell script that
sleeps, in a child of its own, as g++ runs cc1plus) gives a prompt ToolchainTimeoutError naming the
command and the timeout, and nothing is left running (the process group is killed and reaped)."""

import os
import time

import pytest
from stax.cpu import CpuConfig, ToolchainTimeoutError, compile_schedule
from stax.cpu.toolchain import find_cxx
from stax.sched import schedule as make_schedule
from test_toolchain import _graph

# `--version`, the ISA probe's and the miscompile probe's check programs go to the real compiler unless
# HANG_ALL is set; anything else (a kernel unit) starts a sleeping child, records the pids and waits for it.
FAKE = """#!/bin/sh
case "$HANG_ALL $*" in
  " "*--version*|" "*stax-isa-*|" "*stax-miscompile-*) exec {cxx} "$@" ;;
esac
sleep 60 &
echo $$ $! > {pids}
wait
"""


def _fake_cxx(tmp_path):
    pids = tmp_path / "pids"
    script = tmp_path / "hanging-g++"
    script.write_text(FAKE.format(cxx=find_cxx(), pids=pids))
    script.chmod(0o755)
    return str(script), pids


def _gone(pid: int, within: float = 5.0) -> bool:
    """True once `pid` no longer runs (exited and reaped, or a zombie waiting for init to reap it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_hanging_compile_is_killed_after_the_compile_timeout(tmp_path, monkeypatch):
    cxx, pids = _fake_cxx(tmp_path)
    monkeypatch.setenv("CXX", cxx)
    monkeypatch.setenv("STAX_CPU_COMPILE_TIMEOUT", "1.5")  # the env var; the field wins over it below
    t0 = time.monotonic()
    with pytest.raises(ToolchainTimeoutError, match=r"hanging-g\+\+.*within 1\.5 s.*STAX_CPU_COMPILE_TIMEOUT"):
        compile_schedule(make_schedule(_graph(2.5)), config=CpuConfig(cache_dir=str(tmp_path / "c")))
    assert time.monotonic() - t0 < 20  # the probe (real g++) plus 1.5 s, not the script's 60 s
    shell, sleeper = map(int, pids.read_text().split())
    assert not os.path.exists(f"/proc/{shell}")  # our child: reaped, no zombie
    assert _gone(sleeper)  # its child: killed with the group, not left running
    assert not list((tmp_path / "c").rglob("*.tmp*"))
    cfg = CpuConfig(cache_dir=str(tmp_path / "c"), compile_timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(ToolchainTimeoutError, match=r"within 0\.5 s"):
        compile_schedule(make_schedule(_graph(2.5)), config=cfg)
    assert time.monotonic() - t0 < 10


def test_hanging_version_call_is_killed_after_the_probe_timeout(tmp_path, monkeypatch):
    cxx, pids = _fake_cxx(tmp_path)
    monkeypatch.setenv("HANG_ALL", "1")
    t0 = time.monotonic()
    with pytest.raises(ToolchainTimeoutError, match=r"hanging-g\+\+ --version.*within 1 s.*probe_timeout"):
        compile_schedule(make_schedule(_graph()), config=CpuConfig(cache_dir=str(tmp_path / "c"), cxx=cxx,
                                                                   probe_timeout=1))
    assert time.monotonic() - t0 < 10
    shell, sleeper = map(int, pids.read_text().split())
    assert not os.path.exists(f"/proc/{shell}") and _gone(sleeper)


def test_timeout_settings_are_checked(monkeypatch):
    with pytest.raises(ValueError, match="compile_timeout"):
        CpuConfig(compile_timeout=0)
    monkeypatch.setenv("STAX_CPU_PROBE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="STAX_CPU_PROBE_TIMEOUT"):
        compile_schedule(make_schedule(_graph()), config=CpuConfig())
