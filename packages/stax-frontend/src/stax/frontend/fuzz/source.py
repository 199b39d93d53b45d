"""Concrete -> Python source: `fn` (the graph under test) and `make_inputs(device)`.

The fuzzer executes exactly this text, and a reproducer contains exactly this text, so
what fails in the fuzzer fails the same way in the reproducer. Float dtypes inside `fn`
are spelled `D.f16` etc.: the fp64 reference run rebinds `D` (every float type -> fp64).
"""

from __future__ import annotations

import sys
import types

from . import inputs
from .resolve import TORCH_DTYPES, Concrete

HEADER = """import torch
import torch.nn.functional as F
from types import SimpleNamespace

D = SimpleNamespace(f32=torch.float32, f64=torch.float64, f16=torch.float16, bf16=torch.bfloat16,
                    i32=torch.int32, i64=torch.int64, b=torch.bool)
"""

_TORCH_NAME = {v: "torch." + str(v).split(".")[-1] for v in TORCH_DTYPES.values()}


def fn_source(c: Concrete) -> str:
    params = ", ".join(p.name for p in c.params)
    body = [f"    {line}" for line in c.lines]
    body.append(f"    return ({', '.join(c.outputs)},)")
    return f"def fn({params}):\n" + "\n".join(body) + "\n"


def inputs_source(c: Concrete) -> str:
    rows = []
    for p in c.params:
        kw = []
        if p.kind != "data":
            kw.append(f"kind={p.kind!r}")
        if p.scale != 1.0:
            kw.append(f"scale={p.scale!r}")
        if p.special:
            kw.append("special=True")
        if p.kind in ("index", "unique"):
            kw += [f"low={p.low}", f"high={p.high}"] + ([f"dim={p.dim}"] if p.kind == "unique" else [])
        if p.requires_grad:
            kw.append("requires_grad=True")
        extra = "".join(", " + k for k in kw)
        rows.append(f"        _input({tuple(p.shape)!r}, {_TORCH_NAME[TORCH_DTYPES[p.dtype]]}, {p.layout!r}, {p.seed}, "
                    f"device{extra}, upcast=upcast),  # {p.name}")
    return "def make_inputs(device='cpu', upcast=None):\n    return [\n" + "\n".join(rows) + "\n    ]\n"


def program_source(c: Concrete) -> str:
    """The whole text: imports, D, input helpers, make_inputs, fn."""
    return "\n".join([HEADER, inputs.HELPERS.strip() + "\n", "", inputs_source(c), "", fn_source(c)])


def load(c: Concrete) -> dict:
    """Execute the program source as module `stax_fuzz_case` (dynamo may import a traced
    function's module by name, so it is in sys.modules); returns its namespace."""
    mod = types.ModuleType("stax_fuzz_case")
    sys.modules[mod.__name__] = mod  # the previous case's module is dropped
    exec(compile(program_source(c), f"<stax fuzz {c.program.origin or 'case'}>", "exec"), mod.__dict__)
    return mod.__dict__

