"""Layernorm kernels in isolation, same input/output buffers: stax persistent vs Inductor's welford kernel."""
import statistics, torch, triton, triton.language as tl
from triton.language.extra import libdevice
from torch._inductor.runtime import triton_helpers as ih
from stax.gpu import triton_helpers

@triton.jit
def stax_per(in_ptr0, in_ptr1, in_ptr2, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr):
    R0_BLOCK: tl.constexpr = 4096
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK, 1], True, tl.int1)
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    r0_1 = r0_index
    tmp0 = tl.load(in_ptr0 + (r0_1 + 4096*x0), xmask, other=0.0)
    tmp1 = tl.load(in_ptr1 + (r0_1), eviction_policy='evict_last')
    tmp2 = tl.load(in_ptr2 + (r0_1), eviction_policy='evict_last')
    tmp3 = tl.sum(tl.where(xmask, tmp0, 0), 1)[:, None]
    tmp4 = triton_helpers.div_rn(tmp3, tl.full([1, 1], 4096.0, tl.float32))
    tmp5 = tmp0 - tmp4
    tmp6 = tl.sum(tl.where(xmask, tmp5 * tmp5, 0), 1)[:, None]
    tmp7 = tl.full([1, 1], 4096.0, tl.float32)
    tmp8 = triton_helpers.div_rn(tmp6, tmp7)
    tmp9 = tmp8 + 9.999999747378752e-06
    tmp10 = libdevice.rsqrt(tmp9)
    tmp11 = tmp5 * tmp10
    tmp12 = tmp11 * tmp1
    tmp13 = tmp12 + tmp2
    tl.store(out_ptr0 + (r0_1 + 4096*x0), tmp13, xmask)

@triton.jit
def stax_per_ef(in_ptr0, in_ptr1, in_ptr2, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr):
    R0_BLOCK: tl.constexpr = 4096
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    r0_1 = r0_index
    tmp0 = tl.load(in_ptr0 + (r0_1 + 4096*x0), eviction_policy='evict_first')
    tmp1 = tl.load(in_ptr1 + (r0_1), eviction_policy='evict_last')
    tmp2 = tl.load(in_ptr2 + (r0_1), eviction_policy='evict_last')
    tmp3 = tl.sum(tmp0, 1)[:, None]
    tmp4 = tmp3 / 4096.0
    tmp5 = tmp0 - tmp4
    tmp6 = tl.sum(tmp5 * tmp5, 1)[:, None]
    tmp10 = libdevice.rsqrt(tmp6 / 4096.0 + 9.999999747378752e-06)
    tl.store(out_ptr0 + (r0_1 + 4096*x0), tmp5 * tmp10 * tmp1 + tmp2)

@triton.jit
def ind_red(in_ptr0, in_ptr1, in_ptr2, out_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    tmp2_mean = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    tmp2_m2 = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    tmp2_weight = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + 4096*x0), r0_mask, eviction_policy='evict_last', other=0.0)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp2_mean_next, tmp2_m2_next, tmp2_weight_next = ih.welford_reduce(tmp1, tmp2_mean, tmp2_m2, tmp2_weight, r0_offset == 0)
        tmp2_mean = tl.where(r0_mask, tmp2_mean_next, tmp2_mean)
        tmp2_m2 = tl.where(r0_mask, tmp2_m2_next, tmp2_m2)
        tmp2_weight = tl.where(r0_mask, tmp2_weight_next, tmp2_weight)
    tmp3, tmp4, tmp5 = ih.welford(tmp2_mean, tmp2_m2, tmp2_weight, 1)
    tmp2 = tmp3[:, None]
    tmp6 = tmp4[:, None]
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp8 = tl.load(in_ptr0 + (r0_1 + 4096*x0), r0_mask, eviction_policy='evict_first', other=0.0)
        tmp16 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
        tmp18 = tl.load(in_ptr2 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
        tmp9 = tmp8 - tmp2
        tmp14 = libdevice.rsqrt((tmp6 / 4096.0) + 1e-05)
        tl.store(out_ptr2 + (r0_1 + 4096*x0), tmp9 * tmp14 * tmp16 + tmp18, r0_mask)

N, C = 16384, 4096
x = torch.randn(N, C, device="cuda"); w = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
outs = [torch.empty(N, C, device="cuda") for _ in range(2)]
ref = torch.nn.functional.layer_norm(x, (C,), w, b)
impls = {
    "stax per X2 w16": lambda o: stax_per[(N // 2,)](x, w, b, o, N, C, XBLOCK=2, num_warps=16),
    "stax per X1 w16": lambda o: stax_per[(N,)](x, w, b, o, N, C, XBLOCK=1, num_warps=16),
    "stax per X1 w8": lambda o: stax_per[(N,)](x, w, b, o, N, C, XBLOCK=1, num_warps=8),
    "stax per_ef X2 w16": lambda o: stax_per_ef[(N // 2,)](x, w, b, o, N, C, XBLOCK=2, num_warps=16),
    "stax per_ef X1 w16": lambda o: stax_per_ef[(N,)](x, w, b, o, N, C, XBLOCK=1, num_warps=16),
    "inductor X1 R4096 w16": lambda o: ind_red[(N,)](x, w, b, o, N, C, XBLOCK=1, R0_BLOCK=4096, num_warps=16),
    "inductor X1 R2048 w16": lambda o: ind_red[(N,)](x, w, b, o, N, C, XBLOCK=1, R0_BLOCK=2048, num_warps=16),
    "copy": lambda o: o.copy_(x),
}
for name, f in impls.items():
    f(outs[0]); torch.cuda.synchronize()
    if name != "copy":
        print(name, "max err", float((outs[0] - ref).abs().max()))
samples = {n: [] for n in impls}
names = list(impls)
for rnd in range(30):
    for k in range(len(names)):
        n = names[(k + rnd) % len(names)]
        o = outs[rnd % 2]
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            impls[n](o)
        e.record(); e.synchronize()
        samples[n].append(s.elapsed_time(e) / 20)
base = statistics.median(samples["inductor X1 R4096 w16"])
for n, v in samples.items():
    m = statistics.median(v)
    print(f"{n:24s} {m*1e3:8.2f} us  vs inductor {base/m:.4f}  GB/s {(2*N*C*4)/(m*1e-3)/1e9:.0f}")
