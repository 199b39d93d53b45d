"""Kernels compiled in worker processes (precompile.py): the job a worker compiles is the one the
launcher then loads from Triton's disk cache (no second compile), and every way the prepared
kernel can be missing falls back to the JIT. The cache check compiles for sm_90 on this host in
a subprocess (TRITON_INTERPRET must be unset there)."""

import os
import pathlib
import subprocess
import sys
import time
from concurrent.futures import Future

import pytest
from gpu_testlib import ON_CUDA
from stax.gpu.heuristics import LaunchConfig
from stax.gpu.kernels import KernelSource
from stax.gpu.runtime import KernelLauncher

HERE = pathlib.Path(__file__).resolve().parent

SCRIPT = r"""
import os, sys
sys.path.insert(0, {here!r})
from stax.gpu import GpuConfig, compile_schedule, precompile
from stax.gpu.compile import generated_module, launchers
from stax.gpu.testing import build_schedule
import test_reduction as R, test_indirect as I

def files():
    return sum(len(f) for _, _, f in os.walk(os.environ["TRITON_CACHE_DIR"]))

cfg = GpuConfig(autotune=True, autotune_min_elements=0, cache_dir={cache!r})
jobs = []
for graph in (R.softmax_graph(16, 4096), I.embedding_graph()):
    m = compile_schedule(build_schedule(graph, None), config=cfg)
    mod = generated_module(m)
    for launcher in launchers(mod):
        for c in launcher.candidates:
            ks, fn = launcher.variants[c.variant]
            dtypes = [mod.GRAPH.buffer_layout(b).dtype.name for b in ks.args]
            jobs.append((precompile.job_for(ks, fn, dtypes, c, launcher.options, ("cuda", 90, 32), mod), fn))
pool = precompile.Precompiler(2)
futures = [pool.submit(job) for job, _ in jobs]
print("workers compiled", sorted(set(f.result(timeout=300) for f in futures)))
bad = pool.submit(precompile.CompileJob(jobs[0][0].path, jobs[0][0].module, "no_such_kernel", (), (), (),
                                        ("cuda", 90, 32), ()))
try:
    bad.result(timeout=300)
    raise SystemExit("a bad job succeeded")
except RuntimeError as e:
    assert "no_such_kernel" in str(e), e
assert pool.submit(jobs[0][0]).result(timeout=300) == jobs[0][0].kernel, "a worker survives a failed job"
before = files()
assert before > 0
for job, fn in jobs:
    kernel = precompile.build(job, fn)
    assert kernel.metadata.num_warps == dict(job.options)["num_warps"]
print("jobs", len(jobs), "cache files", before, files())
assert files() == before, "the parent compiled again: its job hashes differ from the workers'"
"""


@pytest.mark.skipif(ON_CUDA, reason="on a GPU the frontend's modules run through the pool")
def test_what_workers_compile_the_parent_loads_from_the_cache(tmp_path):
    pytest.importorskip("triton.backends.nvidia")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    code = SCRIPT.format(here=str(HERE), cache=str(tmp_path / "stax"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    assert "workers compiled" in r.stdout and "jobs" in r.stdout, r.stdout


SRC = "@triton.jit\ndef k(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n    pass\n"


class Jit:
    def __init__(self):
        self.launches = []
        self.arg_names = ["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"]

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


def _launcher(future: Future):
    fn = Jit()
    ks = KernelSource("k", "pointwise", SRC, ("a", "b"), False, (("xnumel", 64),), ("XBLOCK",))
    cfg = LaunchConfig("pointwise", (("XBLOCK", 16),))
    launcher = KernelLauncher("k", {"pointwise": (ks, fn)}, [cfg], None, "key", 1, 1)
    launcher.prepared[cfg.key()] = ("job", future)
    return launcher, cfg, fn


@pytest.mark.parametrize("failure", ["worker raised", "build raised", "cpu tensors", "not started"])
def test_a_missing_precompiled_kernel_falls_back_to_the_jit(monkeypatch, failure):
    import stax.gpu.precompile as P
    import torch

    future = Future()
    if failure == "worker raised":
        future.set_exception(RuntimeError("ptxas died"))
    elif failure != "not started":  # a job still queued is taken back and built here
        future.set_result("k")
    built = []

    def build(job, fn):
        built.append(job)
        if failure == "build raised":
            raise OSError("cache unreadable")
        return object()

    monkeypatch.setattr(P, "build", build)
    launcher, cfg, fn = _launcher(future)
    args = (torch.zeros(64), torch.zeros(64))
    launcher.launch(cfg, args)  # DirectLaunch declines CPU tensors: the JIT launches
    assert len(fn.launches) == 1 and fn.launches[0][2]["XBLOCK"] == 16
    assert launcher.prepared == {}, "a job is consumed once"
    assert len(built) == (0 if failure == "worker raised" else 1)
    assert future.cancelled() == (failure == "not started")
    launcher.launch(cfg, args)
    assert len(fn.launches) == 2


def test_jobs_wait_in_the_queue_until_a_worker_is_ready():
    """A worker takes seconds to import torch and triton; until it says it is ready its thread
    takes no job, so a launcher that needs the kernel first can take the job back (cancel) and
    compile it itself instead of waiting for the worker's start-up."""
    from stax.gpu.precompile import CompileJob, Precompiler

    pool = Precompiler(1)
    job = CompileJob("/nonexistent.py", "m", "k", (), (), (), ("cuda", 90, 32), ())
    future = pool.submit(job)
    time.sleep(0.2)  # a serving thread that took jobs before its worker was ready has taken it by now
    assert future.cancel(), "the job was handed to a worker that is still starting"
