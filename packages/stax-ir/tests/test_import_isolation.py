"""stax.ir imports and runs with torch and triton unavailable, and its source never names them."""

import ast
import os
import pathlib
import subprocess
import sys

import stax.ir

SRC = pathlib.Path(stax.ir.__file__).parent

_CHILD = r"""
import importlib, importlib.abc, pkgutil, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("torch", "triton"):
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, Block())
import numpy as np
import stax.ir
from stax.ir import dtypes as dt
for m in pkgutil.iter_modules(stax.ir.__path__):
    importlib.import_module("stax.ir." + m.name)
bad = sorted(k for k in sys.modules if k.split(".")[0] in ("torch", "triton"))
assert not bad, bad
others = sorted(k for k in sys.modules if k.startswith("stax.") and not k.startswith("stax.ir"))
assert not others, others
# and it works: Example 7.1 through the interpreter
from stax.ir import interpret, outputs
from stax.ir.examples import example_7_1
g = example_7_1()
a = np.arange(64 * 128, dtype=np.float32)
bufs = interpret(g, {"primals_1": a})
assert np.array_equal(bufs["buf1"], a.reshape(64, 128).sum(1))
assert np.array_equal(outputs(g, bufs)[0], a.reshape(64, 128) / bufs["buf1"].reshape(64, 1))
print("ok")
"""


def test_imports_with_torch_and_triton_blocked():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def _imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_source_imports_only_numpy_sympy_and_stdlib():
    allowed_third_party = {"numpy", "sympy"}
    for path in sorted(SRC.glob("*.py")):
        for name in _imported_modules(path):
            top = name.split(".")[0]
            assert top not in ("torch", "triton"), f"{path.name} imports {name}"
            assert not (top == "stax" and not name.startswith("stax.ir")), f"{path.name} imports {name}"
            if top not in sys.stdlib_module_names:
                assert top in allowed_third_party | {"stax"}, f"{path.name} imports {name}"


def test_no_namespace_init():
    """`stax` is a PEP 420 namespace package: no stax/__init__.py in this distribution."""
    assert not (SRC.parent / "__init__.py").exists()
