"""STAX_LOG areas (stax.frontend.logs): quiet by default, selectable areas, one line per record."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import pytest
from stax.frontend import logs
from stax.ir import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, Reduction, load, op
from stax.ir import dtypes as dt
from stax.ir.index import pointwise_vars, reduction_vars
from stax.sched import schedule


def example_7_2_graph() -> Graph:
    """§7 Example 7.2 as IR: buf1 = exp(x) (64x128), buf2 = sum, buf3 = max over rows of buf1."""
    i0, i1 = pointwise_vars(2)
    (r0,) = reduction_vars(1)
    x = InputBuffer("x", Layout.contiguous((64, 128), dt.float32))
    buf1 = ComputedBuffer("buf1", Layout.contiguous((64, 128), dt.float32),
                          Pointwise((64, 128), op("exp", load("x", 128 * i0 + i1, dt.float32))))
    row = Layout("cpu", dt.float32, (64, 1), (1, 1))
    red = lambda t: Reduction((64, 1), (128,), t, load("buf1", 128 * i0 + r0, dt.float32))  # noqa: E731
    return Graph((x,), (buf1, ComputedBuffer("buf2", row, red("sum")), ComputedBuffer("buf3", row, red("max"))),
                 ("buf2", "buf3"))


@pytest.fixture(autouse=True)
def _reset_logs():
    yield
    logs.configure("")


def test_parse_areas_and_levels():
    assert logs.parse("fusion,memory") == {"stax.sched.fusion": logging.DEBUG, "stax.sched.memory": logging.DEBUG}
    assert logs.parse("codegen:INFO") == {"stax.cpu": logging.INFO, "stax.gpu": logging.INFO}
    assert logs.parse(" fallback , stax.frontend.report ") == {
        "stax.frontend.fallback": logging.DEBUG, "stax.frontend.report": logging.DEBUG}
    assert logs.parse("") == {}
    with pytest.raises(ValueError, match="unknown area 'fuson'.*fusion"):
        logs.parse("fuson")
    with pytest.raises(ValueError, match="unknown level"):
        logs.parse("fusion:LOUD")


def test_every_area_names_a_logger_the_packages_use():
    """Areas map to the logger names in the sources (checked by grep over packages/*/src)."""
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    used = set()
    for dirpath, _, files in os.walk(root):
        if "tests" in dirpath.split(os.sep):
            continue
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f)) as fh:
                    text = fh.read()
                used |= {part.split('"')[0] for part in text.split('logging.getLogger("')[1:]}
    for area, names in logs.AREAS.items():
        for name in names:
            assert any(u == name or u.startswith(name + ".") for u in used) or name == "stax", (area, name)


def test_quiet_by_default():
    logs.configure_from_env({})
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("stax").handlers)
    assert not any(getattr(h, "_stax_logs", False) for h in logging.getLogger("stax.sched.fusion").handlers)
    assert logging.getLogger("stax.sched.fusion").level == logging.NOTSET


def test_fusion_area_prints_the_fusion_log_once():
    """sched and fusion both on: each record reaches the one handler exactly once."""
    stream = io.StringIO()
    logs.configure("sched,fusion", stream=stream)
    schedule(example_7_2_graph())
    text = stream.getvalue()
    assert text.count("[stax.sched.fusion] DEBUG fusing op1 with op2\n") == 1
    assert "cannot fuse op0 with op1: incompatible iteration spaces" in text
    assert "[stax.sched.memory] DEBUG peak" in text  # sched covers the memory planner too
    logs.configure("", stream=stream)
    stream.truncate(0)
    schedule(example_7_2_graph())
    assert stream.getvalue() == ""


def test_memory_area_only():
    stream = io.StringIO()
    logs.configure("memory", stream=stream)
    schedule(example_7_2_graph())
    text = stream.getvalue()
    assert "[stax.sched.memory]" in text and "stax.sched.fusion" not in text


def test_bad_env_value_is_reported_not_raised(capsys):
    assert logs.configure_from_env({"STAX_LOG": "nonsense"}) == {}
    assert "ignoring STAX_LOG" in capsys.readouterr().err


def test_env_var_read_when_the_frontend_is_imported():
    """STAX_LOG=fusion in a fresh process: importing stax.frontend turns the fusion log on."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import stax.frontend, sys; sys.path.insert(0, {here!r}); from test_logs import example_7_2_graph; "
            "from stax.sched import schedule; schedule(example_7_2_graph())")
    env = dict(os.environ, STAX_LOG="fusion")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[stax.sched.fusion] DEBUG fusing op1 with op2" in proc.stderr
    assert "stax.sched.memory" not in proc.stderr
