"""The accuracy scan tool runs end to end (a coarse stride: a smoke test, not the scan)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_exp_scan_reports_a_worst_case_within_one_ulp():
    out = subprocess.run([sys.executable, "benchmarks/cpu/ulp_scan.py", "--fn", "exp", "--stride", "100003"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"(\d+) values: worst ([0-9.]+) ulp at x = ", out)
    assert m and int(m.group(1)) > 10_000, out
    assert float(m.group(2)) <= 1.0, out
