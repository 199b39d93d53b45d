"""Graph -> Schedule: the §7.6 pipeline, one pass per module.

  1. create_nodes       one SchedulerNode per buffer with its dependences (7.1)
  2. topological_sort   order by dependence, drop nodes nobody uses
  3. build_dag          the dependence DAG for Prop 7.1's cycle test (7.2)
  4. greedy_fusion      at most 10 rounds of Algorithm 7.1, logged (7.3, 7.4)
  5. reorder            least-peak of four topological orders (7.5)
  6. plan_memory        last users -> free / reuse events, M*, arena (7.5)
"""

from __future__ import annotations

import contextlib
import gc

from stax.ir import Graph

from .ancestors import build_dag
from .config import SchedulerConfig
from .create_nodes import create_nodes
from .fusion import greedy_fusion
from .kernels import to_kernels
from .lifetimes import MemoryModel
from .memory import plan_memory
from .policy import CpuPolicy
from .reorder import reorder
from .schedule import Schedule
from .topo import topological_sort


@contextlib.contextmanager
def _gc_paused(enabled: bool):
    """Scheduling allocates many short-lived objects next to large long-lived caches (sympy):
    full collections in between roughly double its time, so the collector waits until it ends."""
    was = gc.isenabled()
    if enabled and was:
        gc.disable()
    try:
        yield
    finally:
        if enabled and was:
            gc.enable()


def schedule(graph: Graph, policy=None, config: SchedulerConfig | None = None) -> Schedule:
    """Fuse, order and plan memory for `graph` (policy default: CpuPolicy; config default: the policy's)."""
    policy = policy if policy is not None else CpuPolicy()
    config = config if config is not None else getattr(policy, "config", SchedulerConfig())
    with _gc_paused(config.pause_gc):
        return _schedule(graph, policy, config)


def _schedule(graph: Graph, policy, config: SchedulerConfig) -> Schedule:
    snodes = topological_sort(create_nodes(graph), graph.outputs)
    dag = build_dag(snodes)
    fusion_log = greedy_fusion(dag, policy, config)
    model = MemoryModel(graph, dag.nodes())
    order, _ = reorder(dag, model, config.reorder)
    memory = plan_memory(order, model, config)
    return Schedule(graph, to_kernels(order), memory, tuple(fusion_log))
