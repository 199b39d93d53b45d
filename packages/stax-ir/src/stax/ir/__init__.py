"""stax.ir: the loop-level IR of Stax (no torch): dtypes, index functions and their
simplification, value ranges, the value DAG, the op table, views as index maps,
the Graph interface and the numpy reference interpreter."""

from . import dtypes
from .bind import bind_graph
from .build import cast, const, index_value, load, op
from .dtypes import DType, promote_types
from .expr import Constant, IndexValue, Load, Op, Value, format_value, loads, map_indices, walk
from .graph import (
    SCATTER_MODES,
    ComputedBuffer,
    ExternKernel,
    Graph,
    InputBuffer,
    Layout,
    Pointwise,
    Reduction,
    Scan,
    Scatter,
    body_roots,
)
from .index import CeilDiv, FloorDiv, ModularIndexing, index_max, index_min, pointwise_vars, reduction_vars, var
from .index_printer import to_c, to_python
from .interpreter import from_storage, interpret, outputs, to_storage
from .normalize import NormalizedIndex, normalize_index
from .ops import OPS, REDUCTIONS, SCANS, WELFORD_OUTPUTS, op_def, reduction_def, scan_def
from .simplify import LoopMerge, coalesce_loops, memory_order, simplify_index
from .sizevars import SizeVar, SizeVars, SymbolRange, provably_equal, size_var
from .value_ranges import ValueRange, bound_index, bound_value, bounds_check_needed, index_fits_int32, provably_true
from .views import View, cat, constant_pad

__version__ = "0.1.0"

__all__ = [
    "SizeVar", "SizeVars", "SymbolRange", "bind_graph", "provably_equal", "size_var",
    "CeilDiv", "ComputedBuffer", "Constant", "DType", "ExternKernel", "FloorDiv", "Graph",
    "IndexValue", "InputBuffer", "Layout", "Load", "LoopMerge", "ModularIndexing", "NormalizedIndex", "OPS", "Op",
    "Pointwise", "REDUCTIONS", "Reduction", "SCANS", "SCATTER_MODES", "Scan", "Scatter", "Value", "ValueRange", "View",
    "WELFORD_OUTPUTS", "body_roots", "bound_index", "bound_value", "bounds_check_needed", "cast", "cat",
    "coalesce_loops", "const", "constant_pad", "dtypes", "format_value", "from_storage",
    "index_fits_int32", "index_max", "index_min", "index_value", "interpret", "load", "loads", "map_indices",
    "memory_order", "normalize_index", "op",
    "op_def", "outputs", "pointwise_vars", "promote_types", "provably_true", "reduction_def",
    "reduction_vars", "scan_def", "simplify_index", "to_c", "to_python", "to_storage", "var", "walk",
]
