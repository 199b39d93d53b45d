"""Which transpose+add kernel moves out = x.t() + y (16384x4096 fp32) fastest on this GPU?

Transpose+add is where stax and Inductor tie (both ~102 % of copy, bias+gelu+residual, the
same traffic without a transpose, reaches ~103.5 %). This probe times hand-written Triton
kernels that differ from stax's tile kernel in one decision each, all writing one output
buffer, interleaved with stax's and Inductor's compiled functions:

- tile: stax's kernel (a YBLOCK x XBLOCK tile, y tiles on program_id(0), loads evict_last),
  with per-load eviction hints and a streaming store (.cs) varied;
- tma: the transposed input (or every access) through host-side TMA tensor descriptors:
  the copy engine fetches the x tile into shared memory, tl.trans reads it transposed;
- loop: a grid of k programs per SM walking the tiles, with tl.range software pipelining
  (loads of the next tiles issued while this one is stored), pointer or TMA loads.

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:) python3 benchmarks/gpu/transpose_probe.py --out DIR
    ... --dry-run   # 256x128 CPU tensors under TRITON_INTERPRET=1: checks every variant against eager
"""

from __future__ import annotations

import os
import sys

DRY = "--dry-run" in sys.argv
import bench_gpu as B  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402
from workloads_gpu import C, N  # noqa: E402

if DRY:
    N, C = 256, 128


@triton.jit
def ta_tile(x_ptr, y_ptr, o_ptr, N: tl.constexpr, C: tl.constexpr, YB: tl.constexpr, XB: tl.constexpr,
            X_EVICT: tl.constexpr, Y_EVICT: tl.constexpr, O_CACHE: tl.constexpr):
    """out[n, c] = x[c, n] + y[n, c] over one tile; x is (C, N), y and out (N, C)."""
    n = tl.program_id(0) * YB + tl.arange(0, YB)[:, None]
    c = tl.program_id(1) * XB + tl.arange(0, XB)[None, :]
    a = tl.load(y_ptr + (c + C * n), eviction_policy=Y_EVICT)
    b = tl.load(x_ptr + (N * c + n), eviction_policy=X_EVICT)
    tl.store(o_ptr + (c + C * n), b + a, cache_modifier=O_CACHE)


@triton.jit
def stax_kernel(in_ptr0, in_ptr1, out_ptr0, ynumel, xnumel, YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    """stax's generated kernel for transpose+add (at e162cf1), verbatim."""
    yoffset = tl.program_id(0) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK, 1], True, tl.int1)
    xoffset = tl.program_id(1) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = tl.full([1, XBLOCK], True, tl.int1)
    y0 = yindex
    x1 = xindex
    tmp0 = tl.load(in_ptr1 + (x1 + 4096*y0), ymask & xmask, eviction_policy='evict_last', other=0.0)
    tmp1 = tl.load(in_ptr0 + (16384*x1 + y0), ymask & xmask, eviction_policy='evict_last', other=0.0)
    tmp2 = tmp1 + tmp0
    tl.store(out_ptr0 + (x1 + 4096*y0), tmp2, ymask & xmask)


@triton.jit
def ta_tma(xd, yd, od, y_ptr, o_ptr, C: tl.constexpr, YB: tl.constexpr, XB: tl.constexpr, ALL: tl.constexpr):
    """The x tile through a TMA descriptor ([XB, YB] of x, transposed in registers); y and out
    through descriptors too when ALL, else through pointers."""
    n0 = tl.program_id(0) * YB
    c0 = tl.program_id(1) * XB
    b = tl.trans(xd.load([c0, n0]))
    if ALL:
        od.store([n0, c0], b + yd.load([n0, c0]))
    else:
        n = n0 + tl.arange(0, YB)[:, None]
        c = c0 + tl.arange(0, XB)[None, :]
        tl.store(o_ptr + (c + C * n), b + tl.load(y_ptr + (c + C * n)))


@triton.jit
def ta_loop(x_ptr, y_ptr, o_ptr, N: tl.constexpr, C: tl.constexpr, YB: tl.constexpr, XB: tl.constexpr,
            STAGES: tl.constexpr):
    """Programs walk tiles t = pid, pid + P, ... (y tiles fastest); tl.range pipelines the loads."""
    NY: tl.constexpr = N // YB
    for t in tl.range(tl.program_id(0), NY * (C // XB), tl.num_programs(0), num_stages=STAGES):
        n = (t % NY) * YB + tl.arange(0, YB)[:, None]
        c = (t // NY) * XB + tl.arange(0, XB)[None, :]
        a = tl.load(y_ptr + (c + C * n))
        b = tl.load(x_ptr + (N * c + n))
        tl.store(o_ptr + (c + C * n), b + a)


@triton.jit
def ta_tma_loop(xd, yd, od, N: tl.constexpr, C: tl.constexpr, YB: tl.constexpr, XB: tl.constexpr,
                STAGES: tl.constexpr):
    NY: tl.constexpr = N // YB
    for t in tl.range(tl.program_id(0), NY * (C // XB), tl.num_programs(0), num_stages=STAGES):
        n0 = (t % NY) * YB
        c0 = (t // NY) * XB
        od.store([n0, c0], tl.trans(xd.load([c0, n0])) + yd.load([n0, c0]))


def variants(num_sms: int, x, y, o) -> dict:
    """name -> launch(): the kernel decisions under test, each with its own launch config."""
    v = {}

    def tile(yb, xb, nw, xe="evict_last", ye="evict_last", oc=""):
        return lambda: ta_tile[(N // yb, C // xb)](x, y, o, N, C, yb, xb, xe, ye, oc, num_warps=nw)

    for nw in (4, 8):
        v[f"tile 64x64 nw{nw}"] = tile(64, 64, nw)
    v["tile 64x64 nw4 y:evict_first"] = tile(64, 64, 4, ye="evict_first")
    v["tile 64x64 nw4 no hints"] = tile(64, 64, 4, "", "")
    v["tile 64x64 nw4 out:.cs"] = tile(64, 64, 4, oc=".cs")
    v["tile 64x64 nw4 y:evict_first out:.cs"] = tile(64, 64, 4, ye="evict_first", oc=".cs")
    v["tile 32x128 nw4"] = tile(32, 128, 4)
    descs = {}
    for yb, xb in ((64, 64), (32, 128), (128, 32), (128, 64), (64, 128)):
        descs[yb, xb] = (TensorDescriptor.from_tensor(x, [xb, yb]), TensorDescriptor.from_tensor(y, [yb, xb]),
                         TensorDescriptor.from_tensor(o, [yb, xb]))
        for nw in (4, 8):
            for all_ in (False, True):
                v[f"tma{' all' if all_ else ' x'} {yb}x{xb} nw{nw}"] = (
                    lambda d=descs[yb, xb], yb=yb, xb=xb, nw=nw, a=all_:
                    ta_tma[(N // yb, C // xb)](*d, y, o, C, yb, xb, a, num_warps=nw))
    for k, nw, st in ((2, 8, 2), (4, 4, 2), (4, 4, 3), (8, 4, 2)):
        v[f"loop 64x64 {k}/SM nw{nw} st{st}"] = (
            lambda k=k, nw=nw, st=st: ta_loop[(min(k * num_sms, N * C // 4096),)](
                x, y, o, N, C, 64, 64, st, num_warps=nw))
        v[f"tma loop 64x64 {k}/SM nw{nw} st{st}"] = (
            lambda k=k, nw=nw, st=st: ta_tma_loop[(min(k * num_sms, N * C // 4096),)](
                *descs[64, 64], N, C, 64, 64, st, num_warps=nw))
    return v


def where_variants(x, y, o) -> dict:
    """The same kernel (tile 64x64 nw4) into other outputs and through other launch paths:
    is a gap between a hand-written kernel and a compiled function the kernel or its surroundings?"""
    def tile(out, nw=4):
        ta_tile[(N // 64, C // 64)](x, y, out, N, C, 64, 64, "evict_last", "evict_last", "", num_warps=nw)
        return out  # (the check reads it)

    v = {"where fresh": lambda: tile(torch.empty_like(y))}
    late = torch.empty_like(y)
    v["where late"] = lambda: tile(late)
    if not DRY:
        tile(o)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            tile(o)
        v["where graph"] = graph.replay
    if N == 16384 and C == 4096:  # the verbatim kernel's sizes
        for nw in (4, 8):
            v[f"where stax kernel nw{nw}"] = (
                lambda nw=nw: stax_kernel[(N // 64, C // 64)](x, y, o, N, C, 64, 64, num_warps=nw))
    return v


def t_exp(x):
    return x.t().exp()


def permuted_output(x, rounds: int, iters: int, out: str | None) -> None:
    """exp(x.t()): eager's output has x.t()'s strides, so a kernel in logical loop order would
    load and store with stride N on every lane; stax (write_order) against write_order=0."""
    impls = {"eager": lambda: t_exp(x)}
    for k, (name, variant) in enumerate((("stax", ""), ("stax[write_order=0]", "write_order=0"))):
        fn = B.stax_frontend(t_exp, [x], variant=variant, tag=f"t_exp_{k}")
        impls[name] = lambda fn=fn: fn(x)
    ind = torch.compile(B.fresh_copy(t_exp, "inductor"))
    impls["inductor"] = lambda: ind(x)
    ref = t_exp(x)
    for name, f in impls.items():
        got = f()
        assert got.stride() == ref.stride() and torch.allclose(got, ref, rtol=1e-5, atol=1e-6), name
    B.probe_table(f"exp(x.t()) {C}x{N} fp32 into x.t()'s strides", impls, rounds, iters, 2 * N * C * 4, out,
                  "permuted_output", width=24)


def main() -> int:
    ap = B.probe_parser(__doc__)
    ap.add_argument("--stax-variants", default="", help="comma-separated GpuConfig overrides ('a=1+b=2')")
    ap.add_argument("--permuted", action="store_true", help="time exp(x.t()) (write_order) instead")
    a = ap.parse_args()
    dev = "cpu" if DRY else "cuda"
    g = torch.Generator(device="cpu").manual_seed(0)
    x, y = (torch.randn(*s, generator=g).to(dev) for s in ((C, N), (N, C)))
    o = torch.empty_like(y)
    ref = x.t() + y
    if a.permuted:
        permuted_output(x, 2 if DRY else a.rounds, 1 if DRY else a.iters, a.out)
        return 0
    num_sms = 4 if DRY else torch.cuda.get_device_properties(0).multi_processor_count
    impls, errors, regs = {}, {}, {}
    for name, launch in {**variants(num_sms, x, y, o), **where_variants(x, y, o)}.items():
        if a.only and not any(name.startswith(p) for p in a.only.split(",")):
            continue
        try:
            o.zero_()
            k = launch()
            B.sync()
            regs[name] = (getattr(k, "n_regs", None), getattr(k, "n_spills", None))
            got = k if isinstance(k, torch.Tensor) else o
            if not torch.equal(got, ref):
                errors[name] = f"max error {(got - ref).abs().max().item()}"
                continue
            impls[name] = launch
        except Exception as e:  # noqa: BLE001 - a variant the compiler rejects is reported, not fatal
            errors[name] = f"{type(e).__name__}: {str(e)[:300]}"
    from benchmarks.workloads.micro import transpose_add

    stax_fn = B.stax_frontend(transpose_add, [x, y])
    ind = torch.compile(B.fresh_copy(transpose_add, "inductor"))
    ind(x, y)
    impls["stax"] = lambda: stax_fn(x, y)
    for variant in a.stax_variants.split(",") if a.stax_variants else ():
        fn = B.stax_frontend(transpose_add, [x, y], variant=variant)
        impls[f"stax[{variant}]"] = lambda fn=fn: fn(x, y)
    if a.out and not DRY:  # what Inductor generated and chose, and what stax's autotuner chose
        from torch._inductor.utils import run_and_get_code

        os.makedirs(a.out, exist_ok=True)
        _, codes = run_and_get_code(torch.compile(B.fresh_copy(transpose_add, "inductor_code")), x, y)
        with open(os.path.join(a.out, "transpose_inductor_code.py"), "w") as f:
            f.write("\n\n".join(codes))
        B.dump_files(os.path.join(a.out, "transpose_inductor_autotune.txt"), os.environ["TORCHINDUCTOR_CACHE_DIR"],
                     "*.best_config")
        B.dump_files(os.path.join(a.out, "transpose_stax_autotune.txt"), os.environ["STAX_CACHE_DIR"], "*.json")
    impls["inductor"] = lambda: ind(x, y)
    B.probe_table(f"transpose+add {N}x{C} fp32", impls, 2 if DRY else a.rounds, 1 if DRY else a.iters,
                  3 * N * C * 4, a.out, "transpose_probe", regs, errors, width=40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
