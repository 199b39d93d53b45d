"""stax.ir: the loop-level IR of Stax (no torch): dtypes, index functions, the value DAG,
the op table, the Graph interface and the numpy reference interpreter."""

from . import dtypes
from .build import cast, const, index_value, load, op
from .dtypes import DType, promote_types
from .expr import Constant, IndexValue, Load, Op, Value, format_value, loads, walk
from .graph import ComputedBuffer, ExternKernel, Graph, InputBuffer, Layout, Pointwise, Reduction
from .index import CeilDiv, FloorDiv, ModularIndexing, pointwise_vars, reduction_vars, var
from .interpreter import from_storage, interpret, outputs, to_storage
from .ops import OPS, REDUCTIONS, op_def, reduction_def

__version__ = "0.1.0"

__all__ = [
    "CeilDiv", "ComputedBuffer", "Constant", "DType", "ExternKernel", "FloorDiv", "Graph",
    "IndexValue", "InputBuffer", "Layout", "Load", "ModularIndexing", "OPS", "Op", "Pointwise",
    "REDUCTIONS", "Reduction", "Value", "cast", "const", "dtypes", "format_value", "from_storage",
    "index_value", "interpret", "load", "loads", "op", "op_def", "outputs", "pointwise_vars",
    "promote_types", "reduction_def", "reduction_vars", "to_storage", "var", "walk",
]
