"""stax.cpu imports and runs with torch and triton unavailable (a meta_path blocker in a subprocess)."""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "triton"):
                raise ImportError(f"blocked: {name}")
            return None

    sys.meta_path.insert(0, Blocker())
    import numpy as np
    from stax import ir
    from stax.cpu import compile_schedule, CpuConfig
    from stax.sched import schedule
    i0 = ir.pointwise_vars(1)[0]
    x = ir.InputBuffer("x", ir.Layout.contiguous((5,), ir.dtypes.float32))
    y = ir.ComputedBuffer("y", x.layout, ir.Pointwise((5,), ir.op("neg", ir.load("x", i0, ir.dtypes.float32))))
    mod = compile_schedule(schedule(ir.Graph([x], [y], ["y"])), config=CpuConfig(cache_dir=sys.argv[1]))
    (out,) = mod.call([np.arange(5, dtype=np.float32)])
    assert out.tolist() == [0, -1, -2, -3, -4], out
    assert not any(m.split(".")[0] in ("torch", "triton") for m in sys.modules)
    print("ok")
""")


def test_imports_without_torch_and_triton(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
