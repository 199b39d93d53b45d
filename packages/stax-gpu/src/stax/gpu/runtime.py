"""What generated wrappers call at run time: guards, allocation, launches, error flags.

`KernelLauncher` owns one planned kernel's variants and candidate configs; its first
call asks the autotuner for a (variant, config) pair and every call launches it,
straight through the compiled kernel's launcher once Triton has built it (`DirectLaunch`).
Benchmarking re-runs the kernel, which is harmless because kernels are pure
functions of their inputs, except when an output shares storage with an input
(in-place reuse): then the candidates run on a copy of the outputs.
"""

from __future__ import annotations

import logging

import torch

from .heuristics import LaunchConfig, grid

log = logging.getLogger("stax.gpu")

TORCH_DTYPES = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}


def check_inputs(tensors, names, sizes, strides, dtypes, device) -> None:
    """The layout guard of Listing 8.1: kernels index with compile-time strides.

    One tuple comparison per property on the hot path; only a mismatch takes the
    slow path, which allows strides of size-1 dims to differ and raises otherwise."""
    dev = device.type
    for k, t in enumerate(tensors):
        if not (
            isinstance(t, torch.Tensor)
            and t.size() == sizes[k]
            and t.stride() == strides[k]
            and t.dtype == dtypes[k]
            and t.device.type == dev
        ):
            _check_input(t, names[k], sizes[k], strides[k], dtypes[k], device)


def _check_input(t, name, size, stride, dtype, device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"stax-gpu: input {name}: expected a torch.Tensor, got {type(t).__name__}")
    if tuple(t.shape) != size:
        raise AssertionError(f"stax-gpu: input {name}: expected size {size}, got {tuple(t.shape)}")
    actual = t.stride()
    if t.numel() > 1 and any(s != 1 and a != e for s, a, e in zip(size, actual, stride)):
        raise AssertionError(f"stax-gpu: input {name}: expected stride {stride}, got {tuple(actual)}")
    if t.dtype != dtype:
        raise AssertionError(f"stax-gpu: input {name}: expected dtype {dtype}, got {t.dtype}")
    if t.device.type != device.type:
        raise AssertionError(f"stax-gpu: input {name}: expected device {device.type}, got {t.device}")


def empty_strided(sizes, strides, dtype, device) -> torch.Tensor:
    return torch.empty_strided(sizes, strides, dtype=dtype, device=device)


def allocator_for(device: torch.device):
    """The `empty_strided` a module's wrapper calls: torch's C++ fast path (what Inductor's
    wrappers call: no dispatcher, ~2.5x cheaper per buffer) when it allocates on `device`
    unambiguously (the CPU, or the only cuda device); else the generic one."""
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    fast = None
    if device.type == "cpu":
        fast = getattr(guards, "_empty_strided_cpu", None)
    elif device.type == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() == 1:
        fast = getattr(guards, "_empty_strided_cuda", None)
    if fast is None:
        return empty_strided
    return lambda sizes, strides, dtype, _device: fast(sizes, strides, dtype)


def reinterpret(t: torch.Tensor, sizes, strides) -> torch.Tensor:
    """Reuse t's storage with another shape and strides (§7.5: no copy)."""
    return torch.as_strided(t, sizes, strides, 0)


_EXCEPTIONS = {"IndexError": IndexError, "ZeroDivisionError": ZeroDivisionError, "ValueError": ValueError}


class ErrorFlag:
    """A module's sticky error flag, read back without stalling the host.

    Kernels store a code where a check fails. When every check poisons its lanes (a
    float gather out of range reads NaN, so results are never silently wrong), a cuda
    module's flag lives in pinned host memory that the kernels write directly (mapped
    into the device's address space): `begin()` reads it with one host load and raises
    what an earlier call flagged once its kernels have finished, like eager's
    asynchronous device asserts; `check()` synchronizes and reads. No copy, no event:
    the read costs nothing on the hot path (a device flag needs an async copy and an event
    per call, which cost host time). A cuda module with unpoisoned checks (integer gathers,
    x // 0: a wrong lane would be silently wrong) keeps the flag on the device and ends each
    call with a device-side assert on it (`asserted`: torch._assert_async, as eager's and
    Inductor's bounds checks do): a fault stops the process's CUDA work at the next sync, with
    no host sync per call. `sync` (GpuConfig.error_sync) reads the flag at the end of each call
    instead, and raises the check's own error. On cpu (the interpreter) every call raises at its end.
    """

    def __init__(self, table, device, sync: bool = False, why: str = "", asserted: bool = False):
        self.table = tuple(table)
        self.why = why  # what made it synchronous or asserted: error_sync, or the unpoisoned checks' messages
        self.device = torch.device(device)
        self.sync = sync or self.device.type != "cuda"
        self.asserted = asserted and not self.sync  # (cuda only; error_sync reads instead)
        self.flag = self.host = None  # allocated at the first call (AOT builds have no GPU)
        self.held = False  # inside a CUDA graph capture: `end` reads nothing (GraphedCall reads after the replay)

    def begin(self) -> torch.Tensor:
        """The flag for this call's kernels; raises what an earlier call flagged, if known by now."""
        if self.flag is None:
            if self.sync or self.asserted:
                self.flag = torch.zeros((1,), dtype=torch.int32, device=self.device)
            else:
                self.flag = torch.zeros((1,), dtype=torch.int32, pin_memory=True)
                self.host = self.flag.numpy()  # the same bytes: a plain load reads what kernels wrote
        elif self.host is not None and self.host[0]:
            self._raise(int(self.host[0]), later=True)
        return self.flag

    def end(self) -> None:
        if self.asserted:  # (captured into a CUDA graph too: each replay asserts)
            torch._assert_async(self.flag == 0)
        elif self.sync and not self.held:
            self._raise(int(self.flag.item()), later=False)

    def check(self) -> None:
        """Synchronously raise anything flagged so far."""
        if self.flag is None:
            return
        if self.host is not None:
            torch.cuda.synchronize(self.device)
            self._raise(int(self.host[0]), later=True)
        else:
            self._raise(int(self.flag.item()), later=False)

    def _raise(self, code: int, later: bool) -> None:
        if not code:
            return
        if self.host is not None:
            self.host[0] = 0  # reported once; the module stays usable
        else:
            self.flag.zero_()
        exc, message = self.table[code - 1]
        when = " (in an earlier call: its float results hold NaN where an index was out of range)" if later else ""
        raise _EXCEPTIONS.get(exc, RuntimeError)(f"stax-gpu: {message}{when}")


def extern_call(fn, inputs, constants, sizes, strides, dtype, device, call_sizes=None) -> torch.Tensor:
    """Call a library kernel and hand back its result in the layout the graph expects. `call_sizes`:
    a symbolic-shape module's size values (row order), passed as `sizes=` (the callable binds its
    constants' size expressions with them)."""
    out = fn(*inputs, **constants) if call_sizes is None else fn(*inputs, **constants, sizes=call_sizes)
    if type(out) is torch.Tensor and out.stride() == strides and out.shape == sizes and out.dtype == dtype:
        return out  # the common case, in three comparisons (a static module passes int tuples)
    if not isinstance(out, torch.Tensor):
        out = torch.as_tensor(out, device=device)
    if tuple(out.shape) != tuple(sizes):
        raise AssertionError(f"stax-gpu: extern kernel returned size {tuple(out.shape)}, expected {tuple(sizes)}")
    if out.dtype == dtype and (out.numel() <= 1
                               or all(s == 1 or a == e for s, a, e in zip(sizes, out.stride(), strides))):
        return out
    fixed = torch.empty_strided(sizes, strides, dtype=dtype, device=out.device)
    fixed.copy_(out)
    return fixed


class KernelLauncher:
    """Launches one kernel: variants {name: (KernelSource, jit fn)}, candidates in order.

    After the first launch of the chosen config, calls go straight to the compiled
    kernel (`DirectLaunch`) when Triton exposes it, skipping JITFunction.run's
    per-call argument binding and cache lookup; anything the direct path cannot
    vouch for (hooks, another device, a misaligned pointer) takes the JIT path.
    """

    def __init__(self, name: str, variants: dict, candidates: list[LaunchConfig], autotuner, key: str, n_in: int,
                 n_out: int, options: dict | None = None):
        self.name = name
        self.options = dict(options or {})  # Triton compile options of every config (launch_pdl)
        self.variants = variants
        self.candidates = candidates
        self.autotuner = autotuner
        self.key = key
        self.n_in = n_in  # pointer arguments the kernel only reads
        self.n_out = n_out  # pointer arguments it writes (they follow the inputs)
        self.choice: LaunchConfig | None = None
        self._bound = None  # (launch fn, numels, kwargs) of the choice: no per-call recomputation
        self._direct = None  # DirectLaunch of the choice, once its compiled kernel is known
        self._try_direct = True
        self.prepared: dict = {}  # config key -> (CompileJob, Future) compiling in worker processes (precompile.py)
        self._prepared_direct: dict = {}  # config key -> DirectLaunch of a precompiled kernel

    def _bind(self, cfg: LaunchConfig):
        ks, fn = self.variants[cfg.variant]
        g = grid(ks, cfg)
        kwargs = dict(cfg.kwargs(), num_warps=cfg.num_warps, num_stages=cfg.num_stages, **self.options)
        return (None if 0 in g else fn[g]), tuple(v for _, v in ks.numels), kwargs

    def launch(self, cfg: LaunchConfig, args) -> None:
        run, numels, kwargs = self._bind(cfg)
        if run is None:
            return
        direct = self._precompiled(cfg, args, numels, kwargs)
        if direct is None or not direct(args):
            run(*args, *numels, **kwargs)

    def _precompiled(self, cfg: LaunchConfig, args, numels, kwargs):
        """A DirectLaunch of cfg's kernel as compiled by a worker process, or None (the JIT compiles it)."""
        direct = self._prepared_direct.get(cfg.key())
        entry = self.prepared.pop(cfg.key(), None) if direct is None else None
        if entry is None:
            return direct
        from . import precompile

        job, future = entry
        ks, fn = self.variants[cfg.variant]
        try:
            if future.cancel():  # no worker has started it: compile here rather than wait
                precompile.STATS["taken_back"] += 1
            else:
                future.result(timeout=precompile.WAIT_S)  # a hung worker: the JIT compiles it after this
                precompile.STATS["from_worker"] += 1
            kernel = precompile.build(job, fn)  # from Triton's disk cache, where the worker put it
        except Exception as e:  # noqa: BLE001 - the JIT path compiles it instead
            precompile.STATS["failed"] += 1
            log.info("%s: no precompiled kernel for %s (%s: %s)", self.name, cfg.key(), type(e).__name__, e)
            return None
        direct = DirectLaunch.build(fn, kernel, grid(ks, cfg), args, numels, kwargs)
        if direct is not None:
            self._prepared_direct[cfg.key()] = direct
        return direct

    def __call__(self, *args) -> None:
        direct = self._direct
        if direct is not None and direct(args):
            return
        if self._bound is None:
            if self.choice is None:
                trial = self._trial_args(args)
                self.choice = self.autotuner.select(self.key, self.candidates, lambda c: self.launch(c, trial))
                log.info("%s: %s", self.name, self.choice.key())
            self._bound = self._bind(self.choice)
        run, numels, kwargs = self._bound
        if run is None:
            return
        if self._try_direct:  # launch once through the JIT, keeping its compiled kernel
            self._try_direct = False
            direct = self._precompiled(self.choice, args, numels, kwargs)
            self._prepared_direct = {}
            self.prepared = {}
            if direct is not None and direct(args):
                self._direct = direct
                return
            ks, fn = self.variants[self.choice.variant]
            g = grid(ks, self.choice)
            jit_run = getattr(fn, "run", None)
            if jit_run is not None:
                compiled = jit_run(*args, *numels, grid=g, warmup=False, **kwargs)
                if compiled is not None:
                    self._direct = DirectLaunch.build(fn, compiled, g, args, numels, kwargs)
                return
        run(*args, *numels, **kwargs)

    def _trial_args(self, args):
        """Arguments for benchmark runs: outputs copied if they alias an input."""
        n_in, n_out = self.n_in, self.n_out
        ins = {a.untyped_storage().data_ptr() for a in args[:n_in]}
        outs = range(n_in, n_in + n_out)
        if not any(args[k].untyped_storage().data_ptr() in ins for k in outs):
            return args
        return tuple(a.clone() if k in outs else a for k, a in enumerate(args))


class DirectLaunch:
    """One compiled Triton kernel launched without JITFunction.run (Triton >= 3.4).

    `build` asks the JIT function for the CompiledKernel of these exact arguments
    (compiling or finding it as a normal launch would) and fixes the launcher's
    argument tuple: pointers, then the constant numels and constexprs in parameter
    order. The kernel was specialized for 16-byte-aligned pointers on one device, so
    a call whose pointers or device differ, or with launch hooks set, returns False
    and the caller takes the JIT path (which re-specializes) instead.
    """

    __slots__ = ("launcher", "function", "metadata", "grid", "tail", "device", "get_device", "get_stream", "knobs")

    @staticmethod
    def build(fn, kernel, g, args, numels, kwargs) -> DirectLaunch | None:
        """The direct launcher of `kernel` (what `fn.run` just launched for `args`), or None."""
        try:
            import triton
            from triton import knobs
            from triton.runtime.driver import driver

            if tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 4):
                return None
            if not all(isinstance(a, torch.Tensor) and (a.is_cuda or a.is_pinned()) and not a.data_ptr() % 16
                       for a in args):  # pinned: a mapped error flag
                return None
            names = list(fn.arg_names)
            fixed = len(args) + len(numels)
            if len(names) < fixed:
                return None
            tail = numels + tuple(kwargs[n] for n in names[fixed:])
            active = driver.active
            return DirectLaunch(kernel, g, tail, active.get_current_device, active.get_current_stream, knobs.runtime)
        except Exception as e:  # noqa: BLE001 - any API difference: keep the JIT path
            log.info("stax-gpu: direct launch unavailable (%s: %s)", type(e).__name__, e)
            return None

    def __init__(self, kernel, g, tail, get_device, get_stream, knobs_runtime):
        self.launcher = kernel.run  # the module's launcher (loads the module on this device)
        self.function = kernel.function
        self.metadata = kernel.packed_metadata
        self.grid = (g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1)
        self.tail = tail
        self.get_device = get_device
        self.get_stream = get_stream
        self.device = get_device()
        self.knobs = knobs_runtime

    def __call__(self, args) -> bool:
        for a in args:
            if a.data_ptr() & 15:
                return False
        device = self.get_device()
        if device != self.device:
            return False
        rt = self.knobs
        enter, exit_ = rt.launch_enter_hook, rt.launch_exit_hook
        if ((enter is not None and getattr(enter, "calls", True))
                or (exit_ is not None and getattr(exit_, "calls", True))):
            return False
        g0, g1, g2 = self.grid
        self.launcher(g0, g1, g2, self.get_stream(device), self.function, self.metadata, None, enter, exit_,
                      *args, *self.tail)
        return True
