"""The fuzzer's program: abstract, seed-built, shrinkable data (no torch objects).

A `Program` is a list of graph inputs and of nodes. A node names a row of the op table
(`ops.ROWS`), the value ids it reads, and a salt that seeds its parameter choices. The
parameters are resolved against the actual input shapes (`resolve.py`), so removing a
node or shrinking a shape leaves a program that still resolves: that is what lets the
shrinker edit programs freely. Programs round-trip through JSON (worker processes).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

# dtype names used throughout the fuzzer (and in generated code as D.<name>)
FLOATS = ("f32", "f64", "f16", "bf16")
INTS = ("i32", "i64")
DTYPES = FLOATS + INTS + ("b",)
LAYOUTS = ("contig", "t", "perm", "step", "expand", "offset")


@dataclass(frozen=True)
class InputSpec:
    """One graph input: values come from a generator seeded by (program seed, id)."""

    id: int
    shape: tuple
    dtype: str
    layout: str = "contig"
    requires_grad: bool = False
    special: bool = False  # a few NaN / inf / -0.0 entries
    scale: float = 1.0


@dataclass(frozen=True)
class Node:
    """One op: `row` from the op table applied to values `args`; `salt` seeds its params."""

    id: int
    row: str
    args: tuple
    salt: int


@dataclass(frozen=True)
class Program:
    seed: int  # seeds input values (and cotangents)
    inputs: tuple
    nodes: tuple
    outputs: tuple  # value ids returned by the graph
    backward: bool = True
    device: str = "cpu"
    origin: str = ""  # "seed S graph I" for reports

    def value_ids(self) -> list[int]:
        return [i.id for i in self.inputs] + [n.id for n in self.nodes]

    def replace(self, **kw) -> Program:
        return dataclasses.replace(self, **kw)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> Program:
        d = json.loads(text)
        return Program(
            seed=d["seed"],
            inputs=tuple(InputSpec(**{**i, "shape": tuple(i["shape"])}) for i in d["inputs"]),
            nodes=tuple(Node(n["id"], n["row"], tuple(n["args"]), n["salt"]) for n in d["nodes"]),
            outputs=tuple(d["outputs"]),
            backward=d["backward"],
            device=d["device"],
            origin=d.get("origin", ""),
        )


def remove_nodes(p: Program, ids: set) -> Program:
    """Drop nodes; a reader of a dropped node reads that node's first argument instead."""
    repl = {}
    for n in p.nodes:
        if n.id in ids:
            repl[n.id] = repl.get(n.args[0], n.args[0])
    nodes = tuple(
        dataclasses.replace(n, args=tuple(repl.get(a, a) for a in n.args)) for n in p.nodes if n.id not in ids
    )
    outputs = tuple(dict.fromkeys(repl.get(o, o) for o in p.outputs))
    return p.replace(nodes=nodes, outputs=outputs)


@dataclass
class Stats:
    """Counters of one fuzz run (printed as the summary)."""

    graphs: int = 0
    passed: int = 0
    invalid: int = 0  # programs eager itself rejected after all retries (generator's fault)
    failures: dict = field(default_factory=dict)  # kind -> count
    reproducers: list = field(default_factory=list)  # paths written (distinct failures)
    duplicates: int = 0
    fallback_ops: dict = field(default_factory=dict)  # ATen op -> count (info)
    graphs_with_fallbacks: int = 0
    backward_graphs: int = 0
    stride_mismatches: int = 0  # info: outputs whose strides differ from eager's
    torch_differences: int = 0  # info: mismatches with eager that torch's own aot_eager shares
