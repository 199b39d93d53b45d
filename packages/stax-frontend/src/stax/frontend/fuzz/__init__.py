"""Differential fuzzer for the stax backend: random ATen-level graphs, stax vs eager.

    python -m stax.frontend.fuzz --count 300 --seed 1 --workers 1

A program (program.py) is generated from a seed (generate.py) out of the op table
(ops/), resolved against real shapes (resolve.py), printed as Python source
(source.py), run eagerly and through torch.compile(backend="stax", fullgraph=True)
(execute.py) and compared with stated tolerances (compare.py). Failures are shrunk
(shrink.py) and written as standalone reproducers (reproducer.py); runner.py drives
worker processes with a per-graph timeout.
"""

from .execute import Outcome, check_case, run_index, run_program
from .generate import GenConfig, generate
from .program import InputSpec, Node, Program
from .resolve import resolve
from .shrink import shrink

__all__ = ["GenConfig", "InputSpec", "Node", "Outcome", "Program", "check_case", "generate", "resolve", "run_index",
           "run_program", "shrink"]
