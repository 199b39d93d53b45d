"""The fuzzer's op table: one `Row` per op form, grouped by category in this package.

A row turns the metadata of its arguments (shape, dtype, exactness) and a seeded RNG
into an `Emit`: a Python expression over the argument names plus any auxiliary inputs it
needs (index tensors, weights, masks). Rows are data, so a new op is one more row.
"""

from __future__ import annotations

from .base import Aux, Emit, Meta, Row
from .indexing import ROWS as _INDEXING
from .inplace import ROWS as _INPLACE
from .nn import ROWS as _NN
from .pointwise import ROWS as _POINTWISE
from .reductions import ROWS as _REDUCTIONS
from .views import ROWS as _VIEWS

ROWS: dict[str, Row] = {}
for _r in (*_POINTWISE, *_REDUCTIONS, *_VIEWS, *_INDEXING, *_NN, *_INPLACE):
    assert _r.name not in ROWS, f"duplicate fuzz row {_r.name}"
    ROWS[_r.name] = _r

CATEGORIES = sorted({r.category for r in ROWS.values()})

__all__ = ["Aux", "CATEGORIES", "Emit", "Meta", "ROWS", "Row"]
