"""§6.6 materialization cost model: when a composed pointwise value gets a buffer.

Lazies compose into one expression (§6.3); a value is written to memory only when

  rule 0  something needs it as a buffer: a graph output, or an extern / fallback
          kernel among its users (they read memory, not expressions);
  rule 1  it has several users and its body is expensive to recompute on this
          device (CPU: transcendental ops; GPU: never — Example 7.2);
  rule 2  its body reads too many buffers (`config.max_reads`): inlining it into
          each user multiplies memory traffic and register pressure;
  rule 3  it feeds a reduction and also has other users, with a body that is not
          trivial on this device: the reduction and the pointwise users cannot
          share one loop, so inlining would compute it twice;
  rule 4  its body is too large (`config.max_body_ops`) for one kernel;
  rule 5  it gathers (an indirect load) and feeds a reduction with few outputs
          (GPU: `few_outputs`): inlined, every gather would run in the reduction's
          few programs, latency-bound; as a buffer it is computed in parallel;
  rule 6  every user is pointwise over many times its elements (`broadcast_ratio`: it
          is read through a broadcast) and its body is not trivial on this device: as
          a buffer it is computed once per element of its own (batch norm's per-channel
          1/sqrt(var + eps): 16 values, not once per element of a 4x16x112x112 map),
          and what reads it becomes cheap enough to inline (CPU; GPU: never).

Reductions are always buffers (their inputs are inlined into their bodies).
Users are counted through view ops: `e.view(...).sum()` is a user of `e`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stax.ir import Load, Op, walk
from stax.ir.index import pointwise_vars

from .config import Config
from .targets import of_device
from .tensor import Lazy, TensorValue


@dataclass(frozen=True)
class BodyStats:
    ops: int
    reads: int
    cost: float
    gathers: int = 0  # indirect loads


def body_stats(tv: TensorValue, cfg: Config) -> BodyStats:
    value = tv.load(pointwise_vars(tv.ndim))
    costs = of_device(tv.device).costs(cfg)
    ops = reads = gathers = 0
    cost = 0.0
    for n in walk(value):
        if isinstance(n, Op):
            if n.name != "to_dtype":
                ops += 1
            cost += costs.cost(n.name)
        elif isinstance(n, Load):
            reads += 1
            gathers += bool(n.indirect)
    return BodyStats(ops, reads, cost, gathers)


def decide(tv: TensorValue, users: list[UserKind], cfg: Config, fewest_outputs: int | None = None,
           user_numels: list[int] | None = None, numel: int | None = None) -> str | None:
    """The rule that makes `tv` a buffer now, or None to keep it inline. `fewest_outputs`:
    the smallest output count among the reductions that read it (None: none does);
    `user_numels`: the element count of each user, in `users` order (None: unknown); `numel`:
    tv's own (symbolic shapes: at the size hints; None: from its static sizes)."""
    if not isinstance(tv, Lazy) or not users:
        return None
    if "output" in users:
        return "rule0:output"
    if "buffer" in users:
        return "rule0:extern_input"
    stats = body_stats(tv, cfg)
    if stats.ops == 0 and stats.reads <= 1:
        return None  # a view-like or constant expression is free to recompute
    costs = of_device(tv.device).costs(cfg)
    if len(users) >= 2 and stats.cost >= costs.recompute_threshold:
        return "rule1:expensive_multi_use"
    if stats.reads > cfg.max_reads:
        return "rule2:too_many_reads"
    if len(users) >= 2 and "reduction" in users and stats.cost >= costs.reduction_input_threshold:
        return "rule3:reduction_input"
    if stats.ops > cfg.max_body_ops:
        return "rule4:body_size"
    if stats.gathers and fewest_outputs is not None and fewest_outputs <= costs.few_outputs:
        return "rule5:gather_into_few_outputs"
    if stats.cost >= costs.reduction_input_threshold and _broadcast(tv, users, user_numels, costs.broadcast_ratio,
                                                                    numel):
        return "rule6:broadcast_expensive"
    return None


def _broadcast(tv: TensorValue, users: list[UserKind], user_numels: list[int] | None, ratio: float,
               numel: int | None = None) -> bool:
    """Is `tv` read only by pointwise users over at least `ratio` times its own elements?"""
    if not user_numels or len(user_numels) != len(users) or any(k != "pointwise" for k in users):
        return False
    n = math.prod(int(s) for s in tv.sizes) if numel is None else numel
    return n > 0 and min(user_numels) >= ratio * n


UserKind = str  # 'output' | 'buffer' | 'reduction' | 'pointwise'
