"""Store cache hints on streaming kernels: layernorm (stax persistent X2 w16) and a copy, same buffers."""
import statistics, torch, triton, triton.language as tl
from triton.language.extra import libdevice
from stax.gpu import triton_helpers

@triton.jit
def ln(in_ptr0, in_ptr1, in_ptr2, out_ptr0, XBLOCK: tl.constexpr, MODE: tl.constexpr):
    R0_BLOCK: tl.constexpr = 4096
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0_1 = tl.arange(0, R0_BLOCK)[None, :]
    tmp0 = tl.load(in_ptr0 + (r0_1 + 4096*x0))
    tmp1 = tl.load(in_ptr1 + (r0_1), eviction_policy='evict_last')
    tmp2 = tl.load(in_ptr2 + (r0_1), eviction_policy='evict_last')
    tmp3 = tl.sum(tmp0, 1)[:, None]
    tmp4 = triton_helpers.div_rn(tmp3, tl.full([1, 1], 4096.0, tl.float32))
    tmp5 = tmp0 - tmp4
    tmp6 = tl.sum(tmp5 * tmp5, 1)[:, None]
    tmp8 = triton_helpers.div_rn(tmp6, tl.full([1, 1], 4096.0, tl.float32))
    tmp10 = libdevice.rsqrt(tmp8 + 9.999999747378752e-06)
    y = tmp5 * tmp10 * tmp1 + tmp2
    if MODE == 0:
        tl.store(out_ptr0 + (r0_1 + 4096*x0), y)
    elif MODE == 1:
        tl.store(out_ptr0 + (r0_1 + 4096*x0), y, cache_modifier=".cs")
    elif MODE == 2:
        tl.store(out_ptr0 + (r0_1 + 4096*x0), y, eviction_policy="evict_first")
    else:
        tl.store(out_ptr0 + (r0_1 + 4096*x0), y, cache_modifier=".cg")

@triton.jit
def silu(in_ptr0, out_ptr0, XBLOCK: tl.constexpr, MODE: tl.constexpr):
    i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    x = tl.load(in_ptr0 + i)
    y = x / (1 + tl.exp(-x))
    if MODE == 0:
        tl.store(out_ptr0 + i, y)
    elif MODE == 1:
        tl.store(out_ptr0 + i, y, cache_modifier=".cs")
    elif MODE == 2:
        tl.store(out_ptr0 + i, y, eviction_policy="evict_first")
    else:
        tl.store(out_ptr0 + i, y, cache_modifier=".cg")

N, C = 16384, 4096
x = torch.randn(N, C, device="cuda"); w = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
out = torch.empty(N, C, device="cuda")
ref = torch.nn.functional.layer_norm(x, (C,), w, b)
impls = {"copy": lambda: out.copy_(x)}
names = ["plain", ".cs", "evict_first", ".cg"]
for m in range(4):
    impls[f"ln {names[m]}"] = (lambda m=m: ln[(N // 2,)](x, w, b, out, XBLOCK=2, MODE=m, num_warps=16))
    impls[f"silu {names[m]}"] = (lambda m=m: silu[(N * C // 1024,)](x, out, XBLOCK=1024, MODE=m, num_warps=4))
for n, f in impls.items():
    f(); torch.cuda.synchronize()
    if n.startswith("ln"):
        assert float((out - ref).abs().max()) < 1e-4, n
samples = {n: [] for n in impls}
order = list(impls)
for rnd in range(25):
    for k in range(len(order)):
        n = order[(k + rnd) % len(order)]
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            impls[n]()
        e.record(); e.synchronize()
        samples[n].append(s.elapsed_time(e) / 20)
c = statistics.median(samples["copy"])
for n, v in samples.items():
    m = statistics.median(v)
    print(f"{n:18s} {m*1e3:8.2f} us  {100*c/m:.1f}% of copy")
