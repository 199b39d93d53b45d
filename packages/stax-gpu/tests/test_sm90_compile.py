"""Every kernel form, compiled by the real Triton compiler for sm_90 (H100/H200), on
this CPU-only machine: libdevice math, 2-D tiles, persistent/looped reductions,
Welford, scans, gathers with error flags, half types. Runs in a subprocess because
TRITON_INTERPRET must be unset there."""

import os
import pathlib
import subprocess
import sys

import pytest
from gpu_testlib import ON_CUDA

HERE = pathlib.Path(__file__).resolve().parent

SCRIPT = r"""
import sys
sys.path.insert(0, {here!r})
from stax.gpu import GpuConfig, compile_schedule
from stax.gpu.aot import compile_module
from stax.gpu.testing import build_schedule
import test_reduction as R, test_scan as S, test_indirect as I, test_pointwise as P
from gpu_testlib import f16, inp, pw, f32, i0, i1
from stax.ir import Graph, load, op

cfg = GpuConfig(autotune=True, autotune_min_elements=0, cache_dir={cache!r}, dual_variant_min=64)
small = cfg.with_(persistent_reduction_max=16)
transpose = Graph((inp("x", (64, 32)), inp("y", (32, 64))),
                  (pw("buf0", (64, 32), op("add", load("x", 32 * i0 + i1, f32), load("y", i0 + 64 * i1, f32))),),
                  ("buf0",))
cases = [
    (R.example_7_2(), None, cfg),
    (R.softmax_graph(16, 4096), None, cfg),
    (R.softmax_graph(16, 300, f16), None, small),
    (R.example_7_1(16, 200), None, small),
    (transpose, None, cfg),
    (S.scan_graph("cumsum", 8, 512), None, cfg),
    (S.scan_graph("cummax_index", 8, 100), None, small),
    (S.scan_graph("logcumsumexp", 8, 100), None, cfg),
    (I.embedding_graph(), None, cfg),
]
# symbolic sizes (dynamic shapes): size and element-count arguments, unspecialized, int64 indices
import dataclasses
from stax.ir import SizeVars, size_var
s0, s1 = size_var("s0"), size_var("s1")
dyn = SizeVars.of(s0=(2, float("inf"), 8), s1=(2, float("inf"), 300))
for g in (R.softmax_graph(s0, s1), R.layernorm_graph(s0, s1), R.softmax_graph(s0, 300)):
    cases.append((dataclasses.replace(g, size_vars=dyn), None, cfg))
import test_symbolic as Y
cases.append((Y.sized(Y.pointwise_graph()), None, cfg))  # digits x // s1, an unbounded int64 index
mean_graph = Y.sized(Graph((inp("x", (s0, s1)),), (
    R.red("buf0", (s0,), (s1,), "sum", load("x", s1 * i0 + Y.r0, f32)),
    pw("buf1", (s0,), op("truediv", load("buf0", i0, f32), Y.cast(Y.index_value(s1), f32)))), ("buf1",)))
cases.append((mean_graph, None, cfg))  # a size as a number: tl.full([1, 1], s1, tl.int64)
tdyn = SizeVars.of(s0=(2, float("inf"), 64), s1=(2, float("inf"), 64))
ttile = Graph((inp("x", (s0, s1)), inp("y", (s1, s0))),
              (pw("buf0", (s0, s1), op("add", load("x", s1 * i0 + i1, f32), load("y", i0 + s0 * i1, f32))),), ("buf0",))
cases.append((dataclasses.replace(ttile, size_vars=tdyn), None, cfg))  # 2-D tiles on a flat grid (tl.cdiv)
# split reductions: a column sum (partials laid out (S, columns)) and welford mean + m2 (Chan's combine:
# a sum that reads the other sum of its kernel)
split = cfg.with_(num_sms=2, split_min_rnumel=64, split_min_chunk=8)
col = Graph((inp("x", (256, 3)),), (R.red("buf0", (1, 3), (256,), "sum", load("x", 3 * Y.r0 + i1, f32)),), ("buf0",))
wv = load("x", 256 * i0 + Y.r0, f32)
wel = Graph((inp("x", (3, 256)),), (R.red("buf0", (3,), (256,), "welford_mean", wv),
                                     R.red("buf1", (3,), (256,), "welford_m2", wv)), ("buf0", "buf1"))
cases += [(col, None, split), (wel, None, split)]
for graph, groups, c in cases:
    m = compile_schedule(build_schedule(graph, groups), config=c)
    for line in compile_module(m, graph):
        print(line, flush=True)
# programmatic dependent launch (GpuConfig.pdl): every kernel waits on the previous grid first
m = compile_schedule(build_schedule(R.example_7_2(), None), config=cfg.with_(pdl=True))
ptx = []
compile_module(m, R.example_7_2(), ptx=ptx)
assert ptx and all("griddepcontrol.wait" in p and "griddepcontrol.launch_dependents" in p for p in ptx), ptx
off = compile_schedule(build_schedule(R.example_7_2(), None), config=cfg.with_(pdl=False))
ptx = []
compile_module(off, R.example_7_2(), ptx=ptx, arch=80)
assert ptx and not any("griddepcontrol" in p for p in ptx)
# squared deviations of a fused product: no fma (NVPTX contracted x * y - mean: the variance of one element
# was the product's rounding error squared, not 0; compile.kernel_options turns contraction off)
prod = op("mul", load("x", i0, f32), load("y", i0, f32))
wf = Graph((inp("x", (4, 1)), inp("y", (4, 1))), (R.red("buf0", (4, 1), (1,), "welford_m2", prod),), ("buf0",))
ptx = []
compile_module(compile_schedule(build_schedule(wf, None), config=cfg), wf, ptx=ptx)
assert ptx and not any("fma.rn.f32" in p for p in ptx), [p for p in ptx if "fma" in p][:1]
# a symbolic scatter kernel (an embedding's backward): atomic adds at indices checked against s0
from stax.sched import GpuPolicy, schedule
emb = Y.embedding_backward_graph()
for line in compile_module(compile_schedule(schedule(emb, GpuPolicy()), config=cfg), emb):
    print(line, flush=True)
try:
    compile_module(m, R.example_7_2(), arch=80)
    raise SystemExit("a PDL module compiled for sm_80")
except ValueError as e:
    print("pdl-check", e, flush=True)
"""


@pytest.mark.skipif(ON_CUDA, reason="on a GPU the kernels are compiled and run by the other tests")
def test_kernels_compile_for_sm90(tmp_path):
    pytest.importorskip("triton.backends.nvidia")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    code = SCRIPT.format(here=str(HERE), cache=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    lines = r.stdout.splitlines()
    assert any(ln.startswith("pdl-check") for ln in lines), lines
    for name in ("triton_per_fused_0", "triton_red_fused_0", "triton_poi_fused_0", "triton_sca_fused_1"):
        assert any(ln.startswith(name) for ln in lines), lines
