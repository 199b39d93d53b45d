"""stax.gpu: Triton code generation for Stax schedules, with a launch wrapper over torch tensors.

Public API: `compile_schedule(schedule, *, extern_kernels=None, config=None) -> CompiledModule`
and `GpuConfig`; compile_schedule in two steps, for caches: `generate_artifact(schedule, ...)
-> GpuArtifact` (plain data, picklable) and `load_artifact(artifact, *, extern_kernels=None,
config=None) -> CompiledModule`. Set TRITON_INTERPRET=1 before importing to run kernels on CPU tensors.
"""

from .artifact import GpuArtifact, target_identity, with_choices
from .compile import WRAPPER_NAMES, WRAPPER_PREFIXES, compile_schedule, generate_artifact
from .config import GpuConfig
from .load import artifact_of, load_artifact
from .symbolic import SymbolicUnsupported

__version__ = "0.1.0"

__all__ = ["WRAPPER_NAMES", "WRAPPER_PREFIXES", "GpuArtifact", "GpuConfig", "SymbolicUnsupported", "artifact_of",
           "compile_schedule", "generate_artifact", "load_artifact", "target_identity", "with_choices"]
