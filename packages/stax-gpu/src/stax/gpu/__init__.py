"""stax.gpu: Triton code generation for Stax schedules, with a launch wrapper over torch tensors.

Public API: `compile_schedule(schedule, *, extern_kernels=None, config=None) -> CompiledModule`
and `GpuConfig`. Set TRITON_INTERPRET=1 before importing to run kernels on CPU tensors.
"""

from .compile import WRAPPER_NAMES, WRAPPER_PREFIXES, compile_schedule
from .config import GpuConfig
from .symbolic import SymbolicUnsupported

__version__ = "0.1.0"

__all__ = ["WRAPPER_NAMES", "WRAPPER_PREFIXES", "GpuConfig", "SymbolicUnsupported", "compile_schedule"]
