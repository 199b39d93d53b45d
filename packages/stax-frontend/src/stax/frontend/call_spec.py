"""CallSpec: what the runtime wrapper needs of a lowered graph, as plain data.

CompiledGraph is built from it (not from the LoweredGraph), so a graph loaded from the
whole-graph cache runs through the same wrapper without being lowered again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .graph_lowering import LoweredGraph, constant_tensor
from .size_binding import SizeBinding, size_binding


@dataclass(frozen=True)
class CallSpec:
    input_names: tuple  # FX placeholder order
    inputs: tuple  # per placeholder: (sizes, strides, stax dtype name) compiled for
    extras: tuple  # after the placeholders: ('const', FX get_attr node name) | ('seed', None)
    outputs: tuple  # graph_lowering.OutputSpec per FX output
    output_is_tuple: bool
    n_module_outputs: int  # len(graph.outputs): the module's result tuple
    opaque_positions: frozenset  # placeholders holding opaque values (RNG state)
    output_strides: tuple  # per FX output, the strides really returned (None: not a tensor)
    # symbolic shapes: where the size symbols are read from at each call (None: a static graph); then
    # `inputs` holds expressions, and None for a SymInt placeholder (no buffer of the module)
    size_binding: SizeBinding | None = None


def from_lowered(lowered: LoweredGraph) -> CallSpec:
    binding = size_binding(lowered.graph.size_vars, lowered.placeholder_exprs)
    ints = set() if binding is None else {k for k, p in enumerate(binding.placeholders) if p[0] == "int"}
    tensors = iter(lowered.graph.inputs)
    layouts = [None if k in ints else next(tensors).layout for k in range(len(lowered.input_names))]
    size = int if binding is None else (lambda s: s)
    consts = iter(lowered.const_nodes)
    return CallSpec(
        tuple(lowered.input_names),
        tuple(None if lay is None else (tuple(size(s) for s in lay.sizes), tuple(size(s) for s in lay.strides),
                                        lay.dtype.name)
              for lay in layouts),
        tuple(("const", next(consts)) if kind == "const" else (kind, None) for kind, _ in lowered.extra_inputs),
        tuple(lowered.outputs),
        bool(lowered.output_is_tuple),
        len(lowered.graph.outputs),
        frozenset(k for k, name in enumerate(lowered.input_names) if name in lowered.opaque_inputs),
        tuple(None if s is None else tuple(s) for s in lowered.output_strides),
        binding,
    )


def extra_values(spec: CallSpec, lowered: LoweredGraph | None, gm: torch.fx.GraphModule, device) -> list:
    """The extras' runtime values: the lowering's own, or (a cache load) the constants read from `gm` again."""
    if lowered is not None:
        return list(lowered.extra_inputs)
    nodes = {n.name: n for n in gm.graph.nodes if n.op == "get_attr"}
    return [("const", constant_tensor(gm, nodes[name], device)) if kind == "const" else (kind, None)
            for kind, name in spec.extras]
