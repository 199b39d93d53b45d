"""Programmatic dependent launch (GpuConfig.pdl): the kernel prologue, the launch option,
and where it is turned off. The PTX it compiles to is checked in test_sm90_compile.py; the
kernels run with it on the GPU in test_graphs.py (and the whole cuda suite passed under
STAX_GPU_CONFIG=pdl=1 on the H200)."""

import pytest
from gpu_testlib import ON_CUDA, config
from stax.gpu import compile_schedule
from stax.gpu.compile import generated_module, launchers, why_no_pdl
from stax.gpu.heuristics import LaunchConfig
from stax.gpu.kernels import PDL_PROLOGUE, KernelSource, with_pdl
from stax.gpu.runtime import KernelLauncher
from stax.gpu.testing import build_schedule
from test_reduction import example_7_2

SRC = "@triton.jit\ndef k(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n    xoffset = tl.program_id(0) * XBLOCK\n"


def test_the_wait_comes_before_any_statement_of_the_kernel():
    ks = with_pdl(KernelSource("k", "pointwise", SRC, ("a", "b"), False, (("xnumel", 8),), ("XBLOCK",)))
    lines = ks.src.splitlines()
    assert lines[1].startswith("def k(") and tuple(lines[2:4]) == PDL_PROLOGUE
    assert lines[4] == "    xoffset = tl.program_id(0) * XBLOCK"
    assert ks.args == ("a", "b") and ks.numels == (("xnumel", 8),)


def test_an_unexpected_header_is_an_error_not_a_silent_skip():
    with pytest.raises(ValueError, match="unexpected kernel header"):
        with_pdl(KernelSource("k", "pointwise", "def k(x):\n    pass\n", (), False, (), ()))


@pytest.mark.skipif(ON_CUDA, reason="on cuda the test config is a cuda module (PDL on)")
def test_the_interpreter_and_cpu_modules_get_no_pdl():
    assert why_no_pdl(config(pdl=True)) == "not a cuda module"
    m = compile_schedule(build_schedule(example_7_2(), None), config=config(pdl=True))
    assert "gdc_wait" not in m.source
    assert all(launcher.options == {} for launcher in launchers(generated_module(m)))


def test_the_launch_option_reaches_every_config_launch():
    seen = []

    class Jit:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: seen.append(kwargs)

    ks = with_pdl(KernelSource("k", "pointwise", SRC, ("a", "b"), False, (("xnumel", 8),), ("XBLOCK",)))
    launcher = KernelLauncher("k", {"pointwise": (ks, Jit())}, [], None, "key", 1, 1, options={"launch_pdl": True})
    launcher.launch(LaunchConfig("pointwise", (("XBLOCK", 8),), num_warps=2), ("x", "y"))
    assert seen == [{"XBLOCK": 8, "num_warps": 2, "num_stages": 1, "launch_pdl": True}]
