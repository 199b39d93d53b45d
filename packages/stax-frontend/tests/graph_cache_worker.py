"""One process of test_graph_cache.py: compile a tiny model with the whole-graph cache on, check
it against eager, and print what the backend did as one JSON line.

`python graph_cache_worker.py [ARRIVE_DIR N]` (the cache directories come from the environment:
STAX_CACHE_DIR, STAX_GRAPH_CACHE_DIR). With ARRIVE_DIR, its first cache write waits until N workers
have reached theirs (a file per worker in ARRIVE_DIR): each has looked its forward graph up and
missed, so all of them write that key at once. The model has a forward and a backward
graph, a constant tensor (get_attr), a matmul (extern) and a sort (an ATen fallback): every kind
of entry content the cache stores. STAX_WORKER_TARGET=gpu (test_graph_cache_gpu.py): the graphs go to
stax.gpu, on cuda when there is one, else CPU tensors through Triton's interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from stax.frontend import config, metrics, register

GPU = os.environ.get("STAX_WORKER_TARGET") == "gpu"
DEVICE = "cuda" if GPU and torch.cuda.is_available() else "cpu"


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.lin(x)) * torch.tensor([0.5, 2.0], device=x.device).repeat(8)
        return torch.sort(h, -1)[0].sum(-1) + h.softmax(-1).amax(-1)


def _meet_before_the_first_write(arrive_dir: str, n: int) -> None:
    from stax.frontend.graph_cache import GraphCache

    real = GraphCache.store
    met = []

    def store(self, entry):
        if not met:
            met.append(True)
            open(os.path.join(arrive_dir, str(os.getpid())), "w").close()
            deadline = time.monotonic() + 120
            while len(os.listdir(arrive_dir)) < n and time.monotonic() < deadline:
                time.sleep(0.002)
        return real(self, entry)

    GraphCache.store = store


def main() -> int:
    register()
    torch.manual_seed(0)
    model = Tiny().to(DEVICE)
    x = torch.randn(4, 8, requires_grad=True, device=DEVICE)
    ref = model(x)
    ref.sum().backward()
    ref_grad = model.lin.weight.grad.clone()
    model.lin.weight.grad = None
    if len(sys.argv) > 2:
        _meet_before_the_first_write(sys.argv[1], int(sys.argv[2]))
    override = "gpu" if GPU and DEVICE == "cpu" else None
    with config.patch(strict=True, graph_cache=True, device_override=override):
        out = torch.compile(model, backend="stax", dynamic=False)(x)
        out.sum().backward()
    m = metrics.snapshot()
    print(json.dumps({
        "max_err": float((out - ref).detach().abs().max()),
        "max_grad_err": float((model.lin.weight.grad - ref_grad).abs().max()),
        "hits": m.graph_cache_hits, "misses": m.graph_cache_misses, "stores": m.graph_cache_stores,
        "corrupt": m.graph_cache_corrupt, "skipped": dict(m.graph_cache_skipped),
        "phase_runs": dict(m.phase_runs), "graphs": m.graphs_compiled, "fallbacks": dict(m.fallback_ops),
        "kernels": m.kernels_generated,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
