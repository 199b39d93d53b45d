"""stax.sched must import and schedule in a process where torch and triton cannot be imported."""

import os
import subprocess
import sys
from pathlib import Path

BLOCKER = """
import sys

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'triton'):
            raise ImportError(f'{name} is blocked in this test')
        return None

sys.meta_path.insert(0, Blocker())
import stax.sched
from stax.sched import schedule, CpuPolicy, GpuPolicy
from stax.sched.random_graphs import random_graph
import random
g = random_graph(random.Random(0), 8)
schedule(g, CpuPolicy()); schedule(g, GpuPolicy())
assert not any(m.split('.')[0] in ('torch', 'triton') for m in sys.modules)
print('ok')
"""


def test_imports_without_torch_or_triton():
    src = Path(__file__).resolve().parents[1] / "src"
    ir_src = Path(__file__).resolve().parents[2] / "stax-ir" / "src"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src), str(ir_src), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", BLOCKER], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
