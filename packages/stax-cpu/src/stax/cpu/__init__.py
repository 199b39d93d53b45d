"""stax.cpu: C++/OpenMP code generation and runtime for Stax schedules (§8), without torch.

compile_schedule(schedule, allocator=..., extern_kernels=..., config=...) returns a
stax.sched.CompiledModule whose `call(args)` runs the graph on any buffers the
allocator understands (numpy arrays by default). Its steps are public for callers
that cache the generated code: prepare -> generate_artifact -> build_libraries -> load_artifact.
"""

from .artifact import CpuArtifact, ExternCall, KernelEntry
from .build_env import BuildEnv, prepare
from .compile import (
    WRAPPER_NAMES,
    WRAPPER_PREFIXES,
    build_libraries,
    compile_schedule,
    generate_artifact,
    generate_kernels,
)
from .config import CpuConfig
from .cpp_ops import OP_TABLE, REDUCTION_TABLE
from .loader import load_artifact
from .malloc_tuning import MallocTuning, tune_malloc
from .runtime import (
    InputLayoutError,
    KernelZeroDivisionError,
    NegativeIntegerPowerError,
    NumpyAllocator,
    bf16_from_float32,
    bf16_to_float32,
)
from .toolchain import CompileError, CompilerNotFoundError, ToolchainTimeoutError

__version__ = "0.1.0"

__all__ = [
    "BuildEnv", "CpuArtifact", "ExternCall", "KernelEntry", "build_libraries", "generate_artifact", "load_artifact",
    "prepare",
    "CompileError", "CompilerNotFoundError", "CpuConfig", "InputLayoutError", "KernelZeroDivisionError", "MallocTuning",
    "NegativeIntegerPowerError", "NumpyAllocator", "OP_TABLE", "REDUCTION_TABLE", "bf16_from_float32",
    "ToolchainTimeoutError", "WRAPPER_NAMES", "WRAPPER_PREFIXES", "bf16_to_float32", "compile_schedule",
    "generate_kernels", "tune_malloc",
]
