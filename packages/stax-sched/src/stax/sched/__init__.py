"""stax.sched: dependences, greedy fusion and memory planning (§7), usable without torch."""

from .compiled_module import CompiledModule
from .config import SchedulerConfig
from .deps import MemoryDep, StarDep, WeakDep
from .nodes import LoopFusion
from .pipeline import schedule
from .policy import CpuPolicy, FusionPolicy, GpuPolicy
from .schedule import FusionRecord, Kernel, MemoryEvent, MemoryPlan, Schedule

__version__ = "0.1.0"

__all__ = [
    "CompiledModule", "CpuPolicy", "FusionPolicy", "FusionRecord", "GpuPolicy", "Kernel", "LoopFusion",
    "MemoryDep", "MemoryEvent", "MemoryPlan", "Schedule", "SchedulerConfig", "StarDep", "WeakDep", "schedule",
]
