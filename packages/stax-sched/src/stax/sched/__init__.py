"""stax.sched: dependences, greedy fusion and memory planning (§7), usable without torch."""

from .compiled_module import CompiledModule
from .pipeline import schedule
from .schedule import FusionRecord, Kernel, MemoryEvent, MemoryPlan, Schedule

__version__ = "0.1.0"

__all__ = ["CompiledModule", "FusionRecord", "Kernel", "MemoryEvent", "MemoryPlan", "Schedule", "schedule"]
