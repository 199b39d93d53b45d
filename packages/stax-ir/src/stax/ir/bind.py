"""Bind a symbolic-shape graph's size symbols to integers: the static graph it means at those sizes.

The reference interpreter runs a symbolic graph this way (its meaning at a binding is the static
program with the sizes substituted), and a backend can compare against it. Every place a size can
appear is substituted: layouts, body ranges, every index, indirect and scatter bounds, extern
constants. The binding is checked against the graph's ranges first (`SizeVars.bind`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import sympy

from .expr import Value, map_indices
from .graph import ComputedBuffer, ExternKernel, Graph, InputBuffer, Layout, Pointwise, Reduction, Scan, Scatter
from .sizevars import NO_SIZE_VARS


def bind_graph(graph: Graph, binding: Mapping) -> Graph:
    """`graph` with its size symbols replaced by `binding` ({symbol or name: int}); a static graph."""
    if not graph.size_vars:
        return graph
    sub = graph.size_vars.bind(binding)
    b = _Binder(sub)
    inputs = tuple(InputBuffer(i.name, b.layout(i.layout)) for i in graph.inputs)
    nodes = tuple(b.node(n) for n in graph.nodes)
    return Graph(inputs, nodes, graph.outputs, NO_SIZE_VARS)


class _Binder:
    """Substitution of one binding (values through expr.map_indices: DAG sharing is kept)."""

    def __init__(self, sub: dict):
        self.sub = sub

    def e(self, x):
        return x.xreplace(self.sub) if isinstance(x, sympy.Basic) else x

    def es(self, xs) -> tuple:
        return tuple(self.e(x) for x in xs)

    def layout(self, lay: Layout) -> Layout:
        return Layout(lay.device, lay.dtype, self.es(lay.sizes), self.es(lay.strides), self.e(lay.offset))

    def const(self, c):
        if isinstance(c, tuple | list):
            return type(c)(self.const(x) for x in c)
        return self.e(c)

    def node(self, n):
        if isinstance(n, ExternKernel):
            consts = tuple((k, self.const(v)) for k, v in n.constants)
            return dataclasses.replace(n, layout=self.layout(n.layout), constants=consts)
        return ComputedBuffer(n.name, self.layout(n.layout), self.body(n.body), n.origins)

    def body(self, body):
        v = self.value
        if isinstance(body, Pointwise):
            return Pointwise(self.es(body.ranges), v(body.value))
        if isinstance(body, Reduction):
            return Reduction(self.es(body.ranges), self.es(body.reduction_ranges), body.reduction_type, v(body.value))
        if isinstance(body, Scan):
            return Scan(self.es(body.ranges), body.axis, body.scan_type, v(body.value), body.out_dtype)
        assert isinstance(body, Scatter), body
        indirect = tuple((s, v(x), self.e(bound)) for s, x, bound in body.indirect)
        return Scatter(self.es(body.ranges), v(body.init), self.es(body.scatter_ranges), self.es(body.index),
                       indirect, v(body.value), body.mode)

    def value(self, root: Value) -> Value:
        return map_indices(root, self.e, bounds=self.e)
