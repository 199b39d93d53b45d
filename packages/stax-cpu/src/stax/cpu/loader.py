"""load_artifact: a CpuArtifact + its built libraries -> CompiledModule (dlopen, bind, exec the wrapper).

The only step of compile_schedule that needs the callables (allocator, extern kernels): a cached
artifact is loaded the same way as a freshly generated one.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from stax.ir import dtypes as dt
from stax.sched import CompiledModule

from . import runtime, toolchain
from .artifact import CpuArtifact
from .build_env import BuildEnv
from .regions import ERR_SLOT


def _input_checker(allocator):
    """The wrapper's check_input(buf, sizes, strides, dtype, name): the allocator's exact-match
    test inline (it runs for every input of every call), the full check only on a mismatch."""
    matches = getattr(allocator, "matches", None)
    if matches is None:
        return lambda buf, sizes, strides, d, name: runtime.check_input(allocator, buf, sizes, strides, d, name)

    def check_input(buf, sizes, strides, d, name):
        if not matches(buf, sizes, strides, d):
            runtime.check_input(allocator, buf, sizes, strides, d, name)

    return check_input


def extern_namespace(externs, extern_kernels: dict) -> dict:
    """`ext_<node>` (and `consts_<node>` for unbound calls) for the wrapper."""
    ns: dict = {}
    for e in externs:
        fn = extern_kernels.get(e.kernel)
        if fn is None:
            raise KeyError(f"no implementation given for extern kernel {e.kernel!r} (node {e.node})")
        if e.bound:
            bind = getattr(fn, "bind", None)
            if bind is None:
                raise TypeError(f"extern kernel {e.kernel!r} (node {e.node}) was generated as bound but its "
                                "implementation has no bind()")
            ns[f"ext_{e.node}"] = bind(**dict(e.constants))
        else:
            ns[f"ext_{e.node}"] = fn
            ns[f"consts_{e.node}"] = dict(e.constants)
    return ns


def load_artifact(artifact: CpuArtifact, env: BuildEnv, paths: list[Path], allocator, extern_kernels: dict
                  ) -> CompiledModule:
    """Load the libraries at `paths` (one per unit, from build_libraries) and exec the wrapper."""
    if artifact.identity != env.identity():
        raise ValueError(f"stax.cpu: artifact {artifact.label} was generated for build identity "
                         f"{artifact.identity[:12]}, this compile's is {env.identity()[:12]} (compiler, ISA, threads "
                         "or flags differ)")
    ns = extern_namespace(artifact.externs, extern_kernels)
    libs = [toolchain.load(path, src, env.tc, artifact.flags, env.cache) for path, src in zip(paths, artifact.units)]
    for k in artifact.kernels:
        fn = getattr(libs[k.unit], k.name)
        fn.argtypes = [ctypes.c_void_p] * k.n_params + [ctypes.c_int64] * k.n_sizes + [ctypes.c_void_p]
        fn.restype = ctypes.c_int
        ns[f"k_{k.name}"] = fn

    def build_copy():
        (p,) = toolchain.build([runtime.COPY_SOURCE], env.tc, ("-O2", "-shared", "-fPIC"), env.cache, 1)
        f = toolchain.load(p, runtime.COPY_SOURCE, env.tc, ("-O2", "-shared", "-fPIC"), env.cache).stax_copy_strided
        f.restype = None
        return f

    index_loads = {k.name: k.index_loads for k in artifact.kernels}
    runs = {k.name: k.runs or (k.name,) for k in artifact.kernels}
    slots = artifact.err_slots

    def raise_error(err, fname):
        """The first kernel of the function whose error record is set (regions: one record each)."""
        for pos, kname in enumerate(runs.get(fname, (fname,))):
            rec = (ctypes.c_int64 * ERR_SLOT).from_address(ctypes.addressof(err) + 8 * ERR_SLOT * pos)
            if rec[0]:
                runtime.raise_kernel_error(rec, kname, index_loads.get(fname, ()))
        runtime.raise_kernel_error(err, fname, index_loads.get(fname, ()))

    ns.update(
        # the wrapper's allocations pass literal tuples of ints: an allocator may have a faster path for those
        empty_strided=getattr(allocator, "empty_strided_ints", allocator.empty_strided),
        data_ptr=allocator.data_ptr,
        as_strided=getattr(allocator, "as_strided", None),
        check_input=_input_checker(allocator),
        size_of=lambda buf, dim, ndim, name: runtime.size_of(allocator, buf, dim, ndim, name),
        check_size_range=runtime.check_size_range,
        new_err=runtime.new_error_array if slots == 1 else (lambda: (ctypes.c_int64 * (ERR_SLOT * slots))()),
        addressof=ctypes.addressof,
        raise_error=raise_error,
        fix_layout=runtime.LayoutFixer(allocator, build_copy),
        **{f"dt_{d.name}": d for d in dt.ALL_DTYPES},
    )
    if ns["as_strided"] is None and "as_strided(" in artifact.wrapper:
        raise RuntimeError("memory plan reuses a buffer with another layout but the allocator has no as_strided")
    exec(compile(artifact.wrapper, f"<stax-cpu wrapper {artifact.label}>", "exec"), ns)
    return CompiledModule(artifact.source, ns["call"], "cpu", artifact.kernel_names, ns["call_unchecked"])
