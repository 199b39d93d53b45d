"""The ranks of test_distributed.py: data-parallel training with backend="stax" against eager.

`launch(cases, world=2, backend="gloo", timeout=...)` starts `world` processes of this file
(`python distributed_worker.py CASES_JSON OUT_DIR`, with torchrun's environment: RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free MASTER_PORT), waits at most `timeout`
seconds, kills the process group of any rank still running, and returns a `World`: each
rank's results per case (from the JSON file it rewrites after every case) and its output.
By hand, `python distributed_worker.py '{"name": {"pattern": "compile_ddp"}}'` prints them.

A rank runs the cases in order in one process group. Each case trains the same model twice
from the same initial parameters on the same per-rank batches (ranks get different data, so
the gradient all-reduce matters), 3 SGD steps: eagerly as the reference (DDP, or FSDP2 for
pattern "fsdp2"), then the pattern under test with backend case["compiler"] ("stax"; "aot_eager"
shows what dynamo does without Stax). It reports the largest parameter difference between the
two, how far the parameters moved, a checksum of them (equal on every rank), the graphs Stax
compiled (`stax.frontend.metrics`), the graphs dynamo captured, the DDPOptimizer's bucket counts,
and the time of each compiled step. After a case fails the rank stops (its peers would wait in
a collective).

Patterns (case["pattern"]), each under torch._dynamo.config.optimize_ddp = case["optimize_ddp"]:
  compile_ddp        torch.compile(DDP(m))
  compile_inner      DDP(m) after m.compile(): compiles nothing for a torch.nn module (pytorch#150915)
  wrap_compiled      DDP(torch.compile(m)) (the parameters are named _orig_mod.*)
  compiled_autograd  torch._dynamo.config.compiled_autograd = True and forward + loss.backward() in
                     one compiled function: compiled autograd traces the backward, DDP's gradient
                     all-reduces included (needs optimize_ddp="python_reducer")
  fsdp2              fully_shard on each block and on the root, then each block compiled
                     (case["fsdp_compile"] == "blocks") or torch.compile(root) ("root")
A DDP built under optimize_ddp="python_reducer" changes dynamo's trace rules for the whole process
(it adds torch.nn.parallel.distributed to LEGACY_MOD_INLINELIST): keep such cases in a world of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

DEFAULTS = {
    "pattern": "compile_ddp",
    "optimize_ddp": "ddp_optimizer",  # torch's default (True)
    "compiler": "stax",
    "model": "mlp",  # see _models()
    "depth": None,  # the model's number of Linear layers, if not its default
    "bucket_cap_mb": None,  # DDP's default (25) unless set
    "fsdp_compile": "blocks",
    "steps": 3,
    "batch": 8,
}

# Every rank: one thread (2 ranks on 2 cores); on cuda hosts, NVLink multicast off.
CHILD_ENV = {
    "OMP_NUM_THREADS": "1",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "PYTHONUNBUFFERED": "1",
}


# ------------------------------------------------------------------------------------------------
# launcher (runs in the test process; imports no torch)


@dataclass
class World:
    results: list[dict]  # per rank: case name -> result dict (with "error" when the case raised)
    logs: list[str]  # per rank: the tail of its stdout + stderr
    why: list[str | None]  # per rank: None, or why it ended early (timeout, exit code)

    def case(self, name: str) -> list[dict]:
        """Each rank's result for `name`; AssertionError naming the rank and its output otherwise."""
        out = []
        for rank, res in enumerate(self.results):
            r = res.get(name)
            if r is None or "error" in r:
                detail = r["error"] if r else f"no result ({self.why[rank] or 'an earlier case failed'})"
                raise AssertionError(f"case {name!r}, rank {rank}: {detail}\n--- rank {rank} output (tail) ---\n"
                                     f"{self.logs[rank]}")
            out.append(r)
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cases: dict[str, dict], *, world: int = 2, backend: str = "gloo", timeout: float = 240.0,
           env: dict | None = None) -> World:
    cases = {name: {**DEFAULTS, **case, "backend": backend} for name, case in cases.items()}
    out = Path(tempfile.mkdtemp(prefix="stax-dist-"))
    port = free_port()
    procs, logs = [], []
    try:
        for rank in range(world):
            child_env = {**os.environ, **CHILD_ENV, **(env or {}), "RANK": str(rank), "LOCAL_RANK": str(rank),
                         "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
            log = open(out / f"rank{rank}.log", "w+b")  # noqa: SIM115 - closed below
            logs.append(log)
            procs.append(subprocess.Popen([sys.executable, __file__, json.dumps(cases), str(out)], env=child_env,
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        why = []
        for p in procs:  # each rank leads its own process group: end it with whatever it started
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
                p.wait()
                why.append(f"killed after the {timeout:.0f} s timeout")
            else:
                why.append(None if p.returncode == 0 else f"exit code {p.returncode}")
        results, tails = [], []
        for rank, log in enumerate(logs):
            log.seek(0)
            tails.append(log.read().decode(errors="replace")[-4000:])
            path = out / f"rank{rank}.json"
            results.append(json.loads(path.read_text()) if path.exists() else {})
        return World(results, tails, why)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        for log in logs:
            log.close()
        shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# one rank (runs in a child process)


def _models():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.lin = nn.Linear(width, width)

        def forward(self, x):
            return x + torch.nn.functional.gelu(self.lin(x))

    class MLP(nn.Module):
        """User-defined modules: dynamo compiles their forwards as frames of their own."""

        def __init__(self, width=32, depth=3):
            super().__init__()
            self.inp = nn.Linear(16, width)
            self.blocks = nn.ModuleList(Block(width) for _ in range(depth - 1))
            self.out = nn.Linear(width, 4)

        def forward(self, x):
            x = torch.nn.functional.gelu(self.inp(x))
            for b in self.blocks:
                x = b(x)
            return self.out(x)

    return {
        "mlp": lambda depth: MLP(depth=depth or 3),  # 2.6k parameters: one DDP bucket
        # blocks of 512 x 512 fp32 (1 MiB each): depth 5 gives 5 buckets at bucket_cap_mb=1, 2 at the
        # default (the DDPOptimizer's first bucket holds 1 MiB whatever the cap)
        "wide": lambda depth: MLP(width=512, depth=depth or 5),
        # a torch.nn container: its forward lives in torch/nn, which dynamo skips as a frame of its own
        "sequential": lambda depth: nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU(),
                                                  nn.Linear(32, 4)),
    }


def _new_model(case, device):
    import torch

    torch.manual_seed(0)
    return _models()[case["model"]](case["depth"]).to(device)


def _batches(case, rank, device):
    import torch

    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(case["batch"], 16, generator=g).to(device),
             torch.randn(case["batch"], 4, generator=g).to(device))
            for _ in range(case["steps"])]


def forward_backward(model):
    import torch

    def fwd_bwd(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    return fwd_bwd


def _train(fwd_bwd, params, batches, step_times=None):
    import torch

    opt = torch.optim.SGD(params, lr=0.1)
    for x, y in batches:
        t0 = time.perf_counter()
        fwd_bwd(x, y)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step_times is not None:
            if x.is_cuda:
                torch.cuda.synchronize()
            step_times.append(round(time.perf_counter() - t0, 3))


def _count_buckets(counts: list):
    """Append the DDPOptimizer's bucket count for each graph it splits to `counts`; returns a
    function that undoes it."""
    from torch._dynamo.backends.distributed import DDPOptimizer

    orig = DDPOptimizer.compile_fn

    def compile_fn(self, gm, example_inputs, **kw):
        try:
            return orig(self, gm, example_inputs, **kw)
        finally:
            counts.append(len(getattr(self, "buckets", [])))

    DDPOptimizer.compile_fn = compile_fn
    return lambda: setattr(DDPOptimizer, "compile_fn", orig)


def _compare(params, ref_params, init):
    """(max |p - p_ref|, max |p_ref - p_init|, sum of p) over all parameters (full tensors)."""
    diff = max(float((p - r).abs().max()) for p, r in zip(params, ref_params))
    moved = max(float((r - i).abs().max()) for r, i in zip(ref_params, init))
    return diff, moved, float(sum(p.double().sum() for p in params))


def _run_ddp(case, rank, device):
    import torch
    import torch._dynamo
    from torch.nn.parallel import DistributedDataParallel as DDP

    kw = {} if case["bucket_cap_mb"] is None else {"bucket_cap_mb": case["bucket_cap_mb"]}
    if device.type == "cuda":
        kw["device_ids"] = [device.index]
    batches = _batches(case, rank, device)
    init = [p.detach().clone() for p in _new_model(case, device).parameters()]

    # the reference: eager DDP with its C++ reducer, built before the mode below is set
    ref = DDP(_new_model(case, device), **kw)
    _train(forward_backward(ref), ref.parameters(), batches)

    compiler, pattern = case["compiler"], case["pattern"]
    times = []
    with torch._dynamo.config.patch(optimize_ddp=case["optimize_ddp"],
                                    compiled_autograd=pattern == "compiled_autograd"):
        model = _new_model(case, device)
        if pattern == "compile_inner":
            model.compile(backend=compiler)
            step = forward_backward(DDP(model, **kw))
        elif pattern == "wrap_compiled":
            step = forward_backward(DDP(torch.compile(model, backend=compiler), **kw))
        elif pattern == "compiled_autograd":
            step = torch.compile(forward_backward(DDP(model, **kw)), backend=compiler)
        else:
            step = forward_backward(torch.compile(DDP(model, **kw), backend=compiler))
        _train(step, model.parameters(), batches, times)
    return _compare([p.detach() for p in model.parameters()], [p.detach() for p in ref.parameters()], init), times


def _run_fsdp2(case, rank, device):
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (int(os.environ["WORLD_SIZE"]),))
    batches = _batches(case, rank, device)
    init = [p.detach().clone() for p in _new_model(case, device).parameters()]

    def sharded(compiled):
        m = _new_model(case, device)
        for block in m.blocks:
            fully_shard(block, mesh=mesh)
            if compiled and case["fsdp_compile"] == "blocks":
                block.compile(backend=case["compiler"])
        fully_shard(m, mesh=mesh)  # the root: inp and out
        if compiled and case["fsdp_compile"] == "root":
            return m, torch.compile(m, backend=case["compiler"])
        return m, m

    ref, _ = sharded(False)
    _train(forward_backward(ref), ref.parameters(), batches)
    model, run = sharded(True)
    times = []
    _train(forward_backward(run), model.parameters(), batches, times)

    def full(m):
        return [p.detach().full_tensor() for p in m.parameters()]  # DTensor shards -> whole parameters

    return _compare(full(model), full(ref), init), times


def _run_case(case, rank, device):
    import torch._dynamo
    import torch._dynamo.utils
    from stax.frontend import config, metrics

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    metrics.reset()
    buckets: list[int] = []
    undo = _count_buckets(buckets)
    try:
        with config.patch(strict=True):
            run = _run_fsdp2 if case["pattern"] == "fsdp2" else _run_ddp
            (diff, moved, checksum), times = run(case, rank, device)
    finally:
        undo()
    m = metrics.snapshot()
    stats = torch._dynamo.utils.counters
    return {
        "max_diff": diff,
        "moved": moved,
        "checksum": checksum,
        "graphs_compiled": m.graphs_compiled,
        "graphs_failed": m.graphs_failed,
        "fallback_ops": dict(m.fallback_ops),
        "stax_compile_s": round(m.compile_time_s, 3),
        "dynamo_graphs": int(stats["stats"]["unique_graphs"]),
        "graph_breaks": sum(stats["graph_break"].values()),
        "compiled_autograd_captures": int(stats["compiled_autograd"]["captures"]),
        "buckets": buckets,
        "step_s": times,
    }


def _rank_main(cases: dict[str, dict], out: Path) -> None:
    rank = int(os.environ["RANK"])
    results: dict = {}

    def save():
        tmp = out / f".rank{rank}.json"
        tmp.write_text(json.dumps(results))
        tmp.replace(out / f"rank{rank}.json")

    import torch

    torch.set_num_threads(1)
    import torch.distributed as dist
    from stax.frontend import register

    register()
    backend = next(iter(cases.values()))["backend"]
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=60),
                            device_id=device if device.type == "cuda" else None)
    try:
        for name, case in cases.items():
            try:
                results[name] = _run_case(case, rank, device)
            except BaseException:  # noqa: BLE001 - reported to the launcher
                results[name] = {"error": traceback.format_exc()}
                save()
                return  # the peers may be in a collective this rank will never join
            save()
            dist.barrier()
    finally:
        if all("error" not in r for r in results.values()):
            dist.destroy_process_group()


if __name__ == "__main__":
    if len(sys.argv) == 3:
        _rank_main(json.loads(sys.argv[1]), Path(sys.argv[2]))
    else:  # by hand: a world of two on gloo
        w = launch(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {"compile_ddp": {}})
        for rank, (res, log, why) in enumerate(zip(w.results, w.logs, w.why)):
            print(f"rank {rank}: {why or 'ok'}")
            for name, r in res.items():
                print(f"  {name}: {json.dumps(r)[:3000]}")
            if why or any("error" in r for r in res.values()):
                print(log)
