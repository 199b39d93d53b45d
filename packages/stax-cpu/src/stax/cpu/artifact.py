"""CpuArtifact: everything `compile_schedule` generates from a Schedule, as plain data.

Source text, names and counts only (no callables, no IR objects), so that a whole-graph cache
can store it and `loader.load_artifact` can rebuild the module without the schedule: a second
process then skips lowering, scheduling and code generation (and, with the .so cache, g++).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExternCall:
    """One ExternKernel node as the wrapper calls it: `ext_<node>` is `extern_kernels[kernel]`,
    bound once to `constants` when `bound` (the callable had `bind`), else called with them."""

    node: str
    kernel: str
    constants: tuple  # the node's (name, literal) pairs
    bound: bool


@dataclass(frozen=True)
class KernelEntry:
    """One C function: its name, the translation unit it is in, and how many buffer pointers it takes."""

    name: str
    unit: int
    n_params: int
    index_loads: tuple = ()  # load id -> description, for IndexError messages
    runs: tuple = ()  # schedule kernels the function runs in order (a region); () = just `name`
    n_sizes: int = 0  # int64_t size arguments after the pointers (a symbolic-shape graph)


@dataclass(frozen=True)
class CpuArtifact:
    """A compiled schedule before loading. `identity` is the BuildEnv it was generated for (compiler,
    ISA, threads, flags): loading it under another one is an error, never a silent mismatch."""

    identity: str
    isa: str
    threads: int
    flags: tuple
    units: tuple  # translation unit sources (prelude + kernels)
    kernels: tuple  # KernelEntry per C function, schedule order
    externs: tuple  # ExternCall per extern node, schedule order
    wrapper: str  # the Python wrapper's source (defines call and call_unchecked)
    err_slots: int
    label: str  # the schedule's content hash (short): names the wrapper's code object
    source: str  # what CompiledModule.source shows (C++ and wrapper)

    @property
    def kernel_names(self) -> tuple:
        """The schedule kernels the C functions run, in order (CompiledModule.kernel_names)."""
        return tuple(n for k in self.kernels for n in (k.runs or (k.name,)))
