"""Compile a module's Triton kernels in worker processes, all at once, ahead of their first launch.

Triton's JIT compiles a kernel at its first launch, one kernel after another, and more than
half of a compile holds the GIL (threads barely help), so a model with many small kernels
waits for them in series where Inductor compiles in a process pool. Here every (variant,
config) a module may launch becomes a picklable `CompileJob`: the
generated module's file, the kernel's name, its signature and the specialization the JIT
would pick for aligned arguments (pointers and sizes divisible by 16). `compile_schedule`
submits the jobs to a pool of worker processes, which compile into Triton's on-disk cache;
`KernelLauncher` then builds the same job in-process (a cache hit: milliseconds) and launches
the CompiledKernel directly; a job no worker has started yet when the launcher needs it is
taken back and compiled in-process, so the pool never makes a first call slower. A failed
job costs nothing but time: the launcher falls back to the JIT, which also covers arguments
the job did not specialize for (misalignment).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass

log = logging.getLogger("stax.gpu")

WAIT_S = 300.0  # longest a launcher waits on a worker's job before compiling the kernel itself
STATS: Counter = Counter()  # submitted, from_worker, taken_back, failed: what the pool did in this process

POINTER_TYPES = {
    "bool": "*i1", "uint8": "*u8", "int8": "*i8", "int16": "*i16", "int32": "*i32", "int64": "*i64",
    "float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64",
}


def int_type(v: int) -> str:
    return "i32" if -(2**31) <= v < 2**31 else "i64"


@dataclass(frozen=True)
class CompileJob:
    """Everything `triton.compile` needs for one kernel and config, as plain data."""

    path: str  # the generated module's file (workers import it to get the @triton.jit function)
    module: str
    kernel: str
    signature: tuple  # ((parameter, Triton type or 'constexpr'), ...) in parameter order
    constexprs: tuple  # ((parameter, value), ...)
    attrs: tuple  # ((parameter index, divisible by 16), ...) for every non-constexpr parameter
    target: tuple  # ('cuda', 90, 32)
    options: tuple  # ((name, value), ...): num_warps, num_stages, launch_pdl ...


def job_for(ks, fn, pointer_dtypes: list[str], cfg, options: dict, target: tuple, module) -> CompileJob:
    """The job of kernel `ks` (its @triton.jit `fn`) under launch config `cfg`; `pointer_dtypes`:
    the dtype name of each buffer argument, in order (the error flag, if any, is int32)."""
    types = [POINTER_TYPES[d] for d in pointer_dtypes] + (["*i32"] if ks.uses_err else [])
    # call-time sizes (symbolic shapes): int32 as the JIT passes values below 2^31, never divisibility-marked
    ints = [v if isinstance(v, int) else None for _, v in ks.numels] + [None] * len(ks.size_args)
    types += ["i32" if v is None else int_type(v) for v in ints]
    params = list(fn.arg_names)
    constexprs = cfg.kwargs()
    signature = tuple((p, "constexpr" if p in constexprs else t)
                      for p, t in zip(params, types + ["constexpr"] * len(params)))
    if len(types) + len(constexprs) != len(params):
        raise ValueError(f"stax-gpu: {ks.name}: {len(params)} parameters, "
                         f"{len(types)} arguments + {sorted(constexprs)}")
    n_ptr = len(types) - len(ints)
    attrs = (tuple((i, True) for i in range(n_ptr))
             + tuple((n_ptr + i, v is not None and v % 16 == 0) for i, v in enumerate(ints)))
    opts = dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages, **options)
    return CompileJob(module.__file__, module.__name__, ks.name, signature, tuple(sorted(constexprs.items())), attrs,
                      tuple(target), tuple(sorted(opts.items())))


def build(job: CompileJob, fn=None):
    """triton.compile of the job (`fn`: the parent's own @triton.jit function; workers import it)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = fn if fn is not None else getattr(_module(job), job.kernel)
    attrs = {(i,): [["tt.divisibility", 16]] if d16 else [] for i, d16 in job.attrs}
    src = ASTSource(fn, dict(job.signature), dict(job.constexprs), attrs)
    return triton.compile(src, target=GPUTarget(*job.target), options=dict(job.options))


_MODULES: dict = {}


def _module(job: CompileJob):
    mod = _MODULES.get(job.path)
    if mod is None:
        spec = importlib.util.spec_from_file_location(job.module, job.path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[job.module] = mod  # triton resolves the kernel's globals through the module
        spec.loader.exec_module(mod)
        _MODULES[job.path] = mod
    return mod


class Precompiler:
    """Worker processes running `python -m stax.gpu.compile_worker` (a fresh interpreter each:
    multiprocessing's spawn would re-run the user's main script, and the parent holds a CUDA
    context that fork must not copy), fed pickled jobs over a pipe by one thread each."""

    def __init__(self, workers: int):
        self.workers = workers
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._started = False

    def submit(self, job: CompileJob) -> Future:
        if not self._started:
            self._start()
        future: Future = Future()
        self._jobs.put((job, future))
        STATS["submitted"] += 1
        return future

    def _start(self) -> None:
        self._started = True
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # workers compile for the GPU
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # whatever made stax.gpu importable here
        for _ in range(self.workers):
            threading.Thread(target=self._serve, args=(env,), daemon=True, name="stax-gpu-compile").start()
        log.info("stax-gpu: compiling kernels in %d worker processes", self.workers)

    def _serve(self, env: dict) -> None:
        proc = None
        while True:
            if proc is None or proc.poll() is not None:
                proc = self._spawn(env)  # a job stays queued (the launcher may take it back) until a worker is ready
                if proc is None:
                    return
            job, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():  # the launcher compiled it itself meanwhile
                continue
            try:
                pickle.dump(job, proc.stdin)
                proc.stdin.flush()
                ok, value = pickle.load(proc.stdout)
            except Exception as e:  # noqa: BLE001 - a dead worker fails its job; the next job starts another
                future.set_exception(RuntimeError(f"compile worker failed: {type(e).__name__}: {e}"))
                proc = None
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(RuntimeError(value))

    @staticmethod
    def _spawn(env: dict):
        try:
            proc = subprocess.Popen([sys.executable, "-m", "stax.gpu.compile_worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=env)
            if pickle.load(proc.stdout) == (True, "ready"):
                return proc
            proc.kill()
        except Exception as e:  # noqa: BLE001 - no worker: the launchers compile everything themselves
            log.info("stax-gpu: a compile worker did not start (%s: %s)", type(e).__name__, e)
        return None

    def warm_up(self) -> None:
        """Start the workers now (they take seconds to import torch and triton) without a job."""
        if not self._started:
            self._start()


_POOL: Precompiler | None = None


def pool(workers: int) -> Precompiler | None:
    """The process-wide pool (None for workers <= 0)."""
    global _POOL
    if workers <= 0:
        return None
    if _POOL is None:
        _POOL = Precompiler(workers)
    return _POOL


def default_workers() -> int:
    """Half the host's cores, at most 8: compiles overlap the parent's own work on the rest."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(8, n // 2)) if n > 2 else 0
