"""The lowering table type: ATen op -> (function, kind).

`kind` tells the materialization cost model how a node uses its inputs:
pointwise (inlines them), reduction (inlines them into a reduction body), view
(passes them on: its users count instead), buffer (needs them in memory: extern).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

POINTWISE, REDUCTION, VIEW, BUFFER = "pointwise", "reduction", "view", "buffer"


@dataclass(frozen=True)
class Lowering:
    fn: Callable  # fn(ctx, node, *args, **kwargs) -> TensorValue | tuple
    kind: str = POINTWISE


def table(kind: str, mapping: dict) -> dict:
    """{op: fn} -> {op: Lowering(fn, kind)}."""
    return {op: Lowering(fn, kind) for op, fn in mapping.items()}
