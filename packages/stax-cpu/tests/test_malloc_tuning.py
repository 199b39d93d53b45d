"""The glibc malloc tuning stax.cpu applies at compile time: switchable, logged, and effective
(a large block freed and allocated again reuses its pages: no fresh page faults)."""

import logging
import os
import subprocess
import sys
import textwrap

import pytest
from stax.cpu import CpuConfig, tune_malloc
from stax.cpu import malloc_tuning as mt

glibc_only = pytest.mark.skipif(mt._glibc() is None or not sys.platform.startswith("linux"), reason="glibc only")


def test_switches(monkeypatch):
    monkeypatch.delenv(mt.ENV, raising=False)
    assert mt.enabled(None) and not mt.enabled(False) and mt.enabled(True)
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv(mt.ENV, off)
        assert not mt.enabled(None) and mt.enabled(True)  # the config field wins over the variable
    monkeypatch.setenv(mt.ENV, "1")
    assert mt.enabled(None)
    got = tune_malloc(CpuConfig(tune_malloc=False))
    assert got.applied == {} and "disabled" in got.reason


def test_user_policy_is_left_alone(monkeypatch):
    monkeypatch.delenv(mt.ENV, raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000")
    got = tune_malloc()
    assert got.applied == {} and "MALLOC_TRIM_THRESHOLD_" in got.reason
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")
    assert "jemalloc" in tune_malloc().reason


@glibc_only
def test_applied_and_logged(monkeypatch, caplog):
    for name in mt._USER_POLICY_ENV + ("LD_PRELOAD", mt.ENV):
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level(logging.DEBUG, logger="stax.cpu"):
        got = tune_malloc(CpuConfig(malloc_mmap_threshold=512 << 20, malloc_trim_threshold=768 << 20))
    assert got.applied == {"M_MMAP_THRESHOLD": 512 << 20, "M_TRIM_THRESHOLD": 768 << 20}, got.reason
    assert any("M_MMAP_THRESHOLD=536870912" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)


FAULTS = textwrap.dedent("""
    import sys
    import numpy as np
    from stax.cpu import tune_malloc
    print(tune_malloc().applied, file=sys.stderr)

    def minflt():
        with open("/proc/self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])

    for _ in range(2):  # warm up: the heap grows once
        np.ones(16 << 20, np.float32)  # 64 MiB, written whole
    before = minflt()
    for _ in range(5):
        np.ones(16 << 20, np.float32)
    print((minflt() - before) / 5)
""")


@glibc_only
def test_a_freed_large_block_is_reused_without_page_faults():
    env = {k: v for k, v in os.environ.items() if k not in mt._USER_POLICY_ENV + ("LD_PRELOAD",)}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)

    def faults(flag: str) -> float:
        res = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True,
                             env={**env, mt.ENV: flag})
        assert res.returncode == 0, res.stderr
        return float(res.stdout.strip())

    tuned, default = faults("1"), faults("0")
    assert tuned < 64, tuned  # 64 MiB is 16384 pages of 4 KiB: reused pages do not fault
    assert default > tuned  # glibc's default mmaps the block afresh every time
