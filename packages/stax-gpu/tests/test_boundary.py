"""Package boundary: stax.gpu may import torch, triton, stax.ir and stax.sched only."""

import ast
import os
import pathlib
import subprocess
import sys

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "stax" / "gpu"
FORBIDDEN = ("stax.cpu", "stax.frontend")


def test_no_forbidden_imports_in_source():
    for path in SRC.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                assert not n.startswith(FORBIDDEN), f"{path.name} imports {n}"


def test_importing_stax_gpu_loads_neither_cpu_nor_frontend():
    code = (
        "import sys, stax.gpu, stax.gpu.compile, stax.gpu.testing\n"
        "bad = [m for m in sys.modules if m.startswith(('stax.cpu', 'stax.frontend'))]\n"
        "assert not bad, bad\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_no_stax_namespace_init():
    assert not (SRC.parent / "__init__.py").exists()
