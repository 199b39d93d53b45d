"""The README demo: a small model compiled with backend="stax" on CPU, checked against eager.

Prints the max error against eager, the speedup (medians of interleaved timings in one
process), the kernels / extern calls / fallbacks Stax produced, and the fusion summary.
"""

from __future__ import annotations

import logging
import statistics
import sys
import time

import torch

torch.manual_seed(0)


class Block(torch.nn.Module):
    """LayerNorm -> Linear -> GELU -> Linear -> residual -> softmax: pointwise, reductions and mm."""

    def __init__(self, d: int = 256, hidden: int = 1024):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return torch.softmax(x + h, dim=-1)


class FusionLog(logging.Handler):
    """Collects the scheduler's `fusing a with b` lines for the summary."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.fused: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("fusing "):
            self.fused.append(msg)


def timed(fn, x) -> float:
    t0 = time.perf_counter()
    fn(x)
    return time.perf_counter() - t0


def main() -> int:
    from stax.frontend import metrics

    log = FusionLog()
    sched_logger = logging.getLogger("stax.sched")
    sched_logger.addHandler(log)
    sched_logger.setLevel(logging.DEBUG)

    model = Block().eval()
    x = torch.randn(512, 256)
    metrics.reset()
    compiled = torch.compile(model, backend="stax")
    with torch.no_grad():
        t0 = time.perf_counter()
        out = compiled(x)
        compile_s = time.perf_counter() - t0
        ref = model(x)
        err = (out - ref).abs().max().item()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)

        for _ in range(3):  # warm up both
            compiled(x), model(x)
        stax_t, eager_t = [], []
        for _ in range(50):  # interleaved: both see the same machine noise
            stax_t.append(timed(compiled, x))
            eager_t.append(timed(model, x))
    m = metrics.snapshot()
    s, e = statistics.median(stax_t), statistics.median(eager_t)
    print("Stax demo: LayerNorm -> Linear -> GELU -> Linear -> residual -> softmax, x: 512x256 float32, CPU")
    print(f"  matches eager: max abs error {err:.2e} (rtol 1e-4, atol 1e-5)")
    print(f"  first call (compile) {compile_s:.2f} s; backend compile time {m.compile_time_s:.2f} s")
    print(f"  median per call: stax {s * 1e3:.3f} ms, eager {e * 1e3:.3f} ms -> speedup {e / s:.2f}x")
    print(f"  graphs {m.graphs_compiled}, IR buffers {m.nodes_lowered}, kernels generated {m.kernels_generated}")
    print(f"  extern calls {m.extern_calls} {dict(m.extern_ops)}; fallbacks {m.fallback_calls} {dict(m.fallback_ops)}")
    print(f"  fusion: {len(log.fused)} fusions")
    for line in log.fused:
        print(f"    {line}")
    if m.graphs_failed:
        print(f"  ERROR: {m.graphs_failed} graph(s) failed to compile", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
