"""stax.cpu: C++/OpenMP code generation and runtime for Stax schedules (§8), without torch.

compile_schedule(schedule, allocator=..., extern_kernels=..., config=...) returns a
stax.sched.CompiledModule whose `call(args)` runs the graph on any buffers the
allocator understands (numpy arrays by default).
"""

from .compile import WRAPPER_NAMES, WRAPPER_PREFIXES, compile_schedule, generate_kernels
from .config import CpuConfig
from .cpp_ops import OP_TABLE, REDUCTION_TABLE
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
    "CompileError", "CompilerNotFoundError", "CpuConfig", "InputLayoutError", "KernelZeroDivisionError", "MallocTuning",
    "NegativeIntegerPowerError", "NumpyAllocator", "OP_TABLE", "REDUCTION_TABLE", "bf16_from_float32",
    "ToolchainTimeoutError", "WRAPPER_NAMES", "WRAPPER_PREFIXES", "bf16_to_float32", "compile_schedule",
    "generate_kernels", "tune_malloc",
]
