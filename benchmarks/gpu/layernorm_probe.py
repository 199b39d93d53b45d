"""Which layernorm kernel shape moves 16384x4096 fp32 fastest on this GPU?

Layernorm is the one suite workload where stax and Inductor tie at the copy-bandwidth
roof (both ~98 % of copy, silu reaches ~99.6 % with the same bytes). This probe times
hand-written Triton layernorms that differ in one code-generation decision each, all
writing the same output buffer (no placement effect between them), interleaved with
stax's and Inductor's compiled functions:

- per_hoist / per_sink: one row per program, weight and bias loaded before the row's
  reductions (stax's hoist_loads) or after them (fewer live registers);
- per_tuple: mean and the sum of squares in one tl.reduce over a pair (one cross-warp
  round instead of two; only timed, its numerics are not a candidate as such);
- rows_loop: a grid of k programs per SM walking rows (weight and bias loaded once per
  program), with and without tl.range pipelining;
- red_2loop: Inductor's looped form (a welford loop, then a second loop re-reading the row), with
  the row length a constexpr (Inductor's) or a runtime argument ('rt', stax's).

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:) python3 benchmarks/gpu/layernorm_probe.py --out DIR
    ... --dry-run   # 64x256 CPU tensors under TRITON_INTERPRET=1: checks every variant against eager
"""

from __future__ import annotations

import os
import sys

DRY = "--dry-run" in sys.argv
import bench_gpu as B  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from workloads_gpu import C, N  # noqa: E402

if DRY:  # bench_gpu's dry-run sizes are not powers of two
    N, C = 64, 256

EPS = 1e-5


@triton.jit
def _tile(R: tl.constexpr, XBLOCK: tl.constexpr):
    """This program's XBLOCK row offsets (row * R) and a row's R column offsets."""
    return (tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]) * R, tl.arange(0, R)[None, :]


@triton.jit
def _centered(x, R: tl.constexpr):
    """Two-pass statistics of each row: (x - mean, 1 / sqrt(var + eps))."""
    d = x - tl.sum(x, 1)[:, None] / R
    return d, tl.rsqrt(tl.sum(d * d, 1)[:, None] / R + 1e-5)


@triton.jit
def ln_per_hoist(x_ptr, w_ptr, b_ptr, y_ptr, R: tl.constexpr, XBLOCK: tl.constexpr):
    rows, r = _tile(R, XBLOCK)
    x = tl.load(x_ptr + rows + r)
    w = tl.load(w_ptr + r, eviction_policy="evict_last")
    b = tl.load(b_ptr + r, eviction_policy="evict_last")
    d, rstd = _centered(x, R)
    tl.store(y_ptr + rows + r, d * rstd * w + b)


@triton.jit
def ln_per_sink(x_ptr, w_ptr, b_ptr, y_ptr, R: tl.constexpr, XBLOCK: tl.constexpr, X_EVICT: tl.constexpr = "",
                Y_CACHE: tl.constexpr = ""):
    rows, r = _tile(R, XBLOCK)
    d, rstd = _centered(tl.load(x_ptr + rows + r, eviction_policy=X_EVICT), R)
    w = tl.load(w_ptr + r, eviction_policy="evict_last")
    b = tl.load(b_ptr + r, eviction_policy="evict_last")
    tl.store(y_ptr + rows + r, d * rstd * w + b, cache_modifier=Y_CACHE)


@triton.jit
def _add_pair(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def ln_per_tuple(x_ptr, w_ptr, b_ptr, y_ptr, R: tl.constexpr, XBLOCK: tl.constexpr):
    rows, r = _tile(R, XBLOCK)
    x = tl.load(x_ptr + rows + r)
    w = tl.load(w_ptr + r, eviction_policy="evict_last")  # hoisted, as when measured
    b = tl.load(b_ptr + r, eviction_policy="evict_last")
    s, ss = tl.reduce((x, x * x), 1, _add_pair)
    mean = s[:, None] / R
    rstd = tl.rsqrt(ss[:, None] / R - mean * mean + 1e-5)
    tl.store(y_ptr + rows + r, (x - mean) * rstd * w + b)


@triton.jit
def ln_rows_loop(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, R: tl.constexpr, STAGES: tl.constexpr):
    r = tl.arange(0, R)
    w = tl.load(w_ptr + r)
    b = tl.load(b_ptr + r)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        x = tl.load(x_ptr + row * R + r)
        mean = tl.sum(x, 0) / R
        d = x - mean
        rstd = tl.rsqrt(tl.sum(d * d, 0) / R + 1e-5)
        tl.store(y_ptr + row * R + r, d * rstd * w + b)


@triton.jit
def _welford_pair(m_a, m2_a, n_a, m_b, m2_b, n_b):
    n = n_a + n_b
    delta = m_b - m_a
    frac = tl.where(n == 0.0, 0.0, n_b / n)
    return m_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac, n


@triton.jit
def ln_red_2loop(x_ptr, w_ptr, b_ptr, y_ptr, r_numel, R: tl.constexpr, RB: tl.constexpr, STATIC: tl.constexpr):
    n_r = R if STATIC else r_numel  # a constexpr bound lets Triton unroll the loops
    row = tl.program_id(0)
    mean_acc = tl.zeros([RB], tl.float32)
    m2_acc = tl.zeros([RB], tl.float32)
    n_acc = tl.zeros([RB], tl.float32)
    for off in range(0, n_r, RB):
        x = tl.load(x_ptr + row * R + off + tl.arange(0, RB), eviction_policy="evict_last")
        n_acc = n_acc + 1.0
        delta = x - mean_acc
        mean_acc = mean_acc + delta / n_acc
        m2_acc = m2_acc + delta * (x - mean_acc)
    mean, m2, n = tl.reduce((mean_acc, m2_acc, n_acc), 0, _welford_pair)
    rstd = tl.rsqrt(m2 / R + 1e-5)
    for off in range(0, n_r, RB):
        r = off + tl.arange(0, RB)
        x = tl.load(x_ptr + row * R + r, eviction_policy="evict_first")
        w = tl.load(w_ptr + r, eviction_policy="evict_last")
        b = tl.load(b_ptr + r, eviction_policy="evict_last")
        tl.store(y_ptr + row * R + r, (x - mean) * rstd * w + b)


def variants(num_sms: int) -> dict:
    """name -> launch(x, w, b, y): the kernel decisions under test, each with its own launch config."""
    v = {}
    for nw in (4, 8, 16):
        v[f"per_hoist nw{nw}"] = lambda x, w, b, y, nw=nw: ln_per_hoist[(N,)](x, w, b, y, C, 1, num_warps=nw)
        v[f"per_sink nw{nw}"] = lambda x, w, b, y, nw=nw: ln_per_sink[(N,)](x, w, b, y, C, 1, num_warps=nw)
    v["per_hoist x2 nw16"] = lambda x, w, b, y: ln_per_hoist[(N // 2,)](x, w, b, y, C, 2, num_warps=16)
    v["per_sink x2 nw16"] = lambda x, w, b, y: ln_per_sink[(N // 2,)](x, w, b, y, C, 2, num_warps=16)
    v["per_sink nw8 x:evict_first"] = lambda x, w, b, y: ln_per_sink[(N,)](x, w, b, y, C, 1, "evict_first", num_warps=8)
    v["per_sink nw8 y:.cs"] = lambda x, w, b, y: ln_per_sink[(N,)](x, w, b, y, C, 1, "", ".cs", num_warps=8)
    v["per_tuple nw8"] = lambda x, w, b, y: ln_per_tuple[(N,)](x, w, b, y, C, 1, num_warps=8)
    for k, nw in ((2, 8), (4, 8), (3, 8), (8, 4), (4, 4)):
        for st in (1, 2):
            v[f"rows_loop {k}/SM nw{nw} st{st}"] = (
                lambda x, w, b, y, k=k, nw=nw, st=st: ln_rows_loop[(min(N, k * num_sms),)](
                    x, w, b, y, N, C, st, num_warps=nw))
    for rb, nw in ((2048, 16), (2048, 8), (1024, 8)):
        rb = min(rb, C // 2)  # no masks: two or more steps of a whole row
        for static in (True, False):
            v[f"red_2loop rb{rb} nw{nw}{'' if static else ' rt'}"] = (
                lambda x, w, b, y, rb=rb, nw=nw, st=static: ln_red_2loop[(N,)](x, w, b, y, C, C, rb, st, num_warps=nw))
    return v


def main() -> int:
    ap = B.probe_parser(__doc__)
    a = ap.parse_args()
    dev = "cpu" if DRY else "cuda"
    g = torch.Generator(device="cpu").manual_seed(0)
    x, w, b = (torch.randn(*s, generator=g).to(dev) for s in ((N, C), (C,), (C,)))
    y = torch.empty_like(x)
    ref = torch.nn.functional.layer_norm(x, (C,), w, b, EPS)
    num_sms = 4 if DRY else torch.cuda.get_device_properties(0).multi_processor_count
    impls, errors, regs = {}, {}, {}
    for name, launch in variants(num_sms).items():
        if a.only and not any(name.startswith(p) for p in a.only.split(",")):
            continue
        try:
            y.zero_()
            k = launch(x, w, b, y)
            B.sync()
            regs[name] = (getattr(k, "n_regs", None), getattr(k, "n_spills", None))
            err = (y - ref).abs().max().item()
            if not err <= 1e-3:
                errors[name] = f"max error {err}"
                continue
            impls[name] = lambda launch=launch: launch(x, w, b, y)
        except Exception as e:  # noqa: BLE001 - a variant the compiler rejects is reported, not fatal
            errors[name] = f"{type(e).__name__}: {str(e)[:300]}"
    from benchmarks.workloads.micro import layernorm

    impls["stax"] = B.stax_frontend(layernorm, [x, w, b])
    ind = torch.compile(B.fresh_copy(layernorm, "inductor"))
    if a.out and not DRY:  # what Inductor generated, and what stax's autotuner chose
        from torch._inductor.utils import run_and_get_code

        os.makedirs(a.out, exist_ok=True)
        _, codes = run_and_get_code(ind, x, w, b)
        with open(os.path.join(a.out, "layernorm_inductor_code.py"), "w") as f:
            f.write("\n\n".join(codes))
        B.dump_files(os.path.join(a.out, "layernorm_stax_autotune.txt"), os.environ["STAX_CACHE_DIR"], "*.json")
    impls["inductor"] = lambda: ind(x, w, b)
    stax_fn = impls["stax"]
    impls["stax"] = lambda: stax_fn(x, w, b)
    B.probe_table(f"layernorm {N}x{C} fp32", impls, 2 if DRY else a.rounds, 1 if DRY else a.iters, 2 * N * C * 4,
                  a.out, "layernorm_probe", regs, errors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
