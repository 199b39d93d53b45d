"""Stax differential-fuzzer reproducer: fwd-nonfinite.

output 0 (v6): 1/65537 NaN/inf positions differ; at (65520,): stax inf eager 65504.0

Found by `python -m stax.frontend.fuzz` (seed 2027 graph 648); shrunk to 1 op(s): factory:arange@f16.
Forward only; ATen fallbacks: none.
Run: python <this file>  (raises while the bug is present)
Program: {"seed": 1354949222, "inputs": [{"id": 2, "shape": [65537], "dtype": "f16", "layout": "contig", "requires_grad": false, "special": false, "scale": 1.0}], "nodes": [{"id": 6, "row": "factory", "args": [2], "salt": 1652483576}], "outputs": [6], "backward": false, "device": "cpu", "origin": "seed 2027 graph 648"}
"""
import torch
import torch.nn.functional as F
from types import SimpleNamespace

D = SimpleNamespace(f32=torch.float32, f64=torch.float64, f16=torch.float16, bf16=torch.bfloat16,
                    i32=torch.int32, i64=torch.int64, b=torch.bool)

def _values(shape, dtype, kind, g, scale, special, low, high, dim):
    if kind == "index":
        return torch.randint(low, high, shape, generator=g).to(dtype)
    if kind == "unique":  # distinct along `dim`, in [0, high)
        full = list(shape)
        full[dim] = high
        return torch.rand(full, generator=g).argsort(dim=dim).narrow(dim, 0, shape[dim]).to(dtype)
    if kind == "mask" or dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if kind == "positive":
        return (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    if kind == "unit":
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 0.98 + 0.01).to(dtype)
    if not dtype.is_floating_point:
        return torch.randint(-8, 9, shape, generator=g).to(dtype)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    if special and x.numel():
        flat = x.view(-1)
        # distinct positions: a repeated one makes the assignment below a race on a multi-threaded
        # CPU (index_put_ without accumulate), so two calls would build different inputs
        pos = torch.randperm(flat.numel(), generator=g)[: max(1, flat.numel() // 16)]
        vals = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0], dtype=torch.float64)
        flat[pos] = vals[torch.randint(0, 4, pos.shape, generator=g)]
    return x.to(dtype)


def _layout(make, shape, layout, g):
    n = len(shape)
    if layout == "t" and n >= 2:
        s = list(shape)
        s[-1], s[-2] = s[-2], s[-1]
        return make(s).transpose(-1, -2)
    if layout == "perm" and n >= 2:
        p = torch.randperm(n, generator=g).tolist()
        base = [0] * n
        for k in range(n):
            base[p[k]] = shape[k]
        return make(base).permute(p)
    if layout == "step" and n >= 1:
        d = int(torch.randint(0, n, (1,), generator=g))
        step = int(torch.randint(2, 4, (1,), generator=g))
        s = list(shape)
        s[d] = s[d] * step
        index = [slice(None)] * n
        index[d] = slice(None, None, step)
        return make(s)[tuple(index)]
    if layout == "expand" and any(s > 1 for s in shape):
        big = [k for k, s in enumerate(shape) if s > 1]
        keep = torch.rand(len(big), generator=g) < 0.5
        s = list(shape)
        for k, kept in zip(big, keep.tolist()):
            if not kept or k == big[0]:
                s[k] = 1
        return make(s).expand(shape)
    if layout == "offset":
        numel = 1
        for s in shape:
            numel *= s
        return make([numel + 3])[3:].view(shape)
    return make(list(shape))


def _input(shape, dtype, layout, seed, device, kind="data", scale=1.0, special=False, low=0, high=0, dim=0,
           requires_grad=False, upcast=None):
    """One graph input: seeded values, then the requested memory layout. `upcast` (a float
    dtype) converts float values after rounding them to `dtype`: the reference's inputs."""
    g = torch.Generator().manual_seed(seed)
    to = upcast if upcast is not None and dtype.is_floating_point else dtype
    if device == "meta":
        make = lambda s: torch.empty(s, dtype=to, device="meta")  # noqa: E731
    else:
        make = lambda s: _values(tuple(s), dtype, kind, g, scale, special, low, high, dim).to(device, to)  # noqa: E731
    x = _layout(make, tuple(shape), layout, g)
    if requires_grad:
        x = x.detach().requires_grad_(True)
    return x


def make_inputs(device='cpu', upcast=None):
    return [
        _input((65537,), torch.float16, 'contig', 1554231031, device, upcast=upcast),  # x2
    ]


def fn(x2):
    v6 = x2 + torch.arange(65537, dtype=D.f16, device=x2.device)
    return (v6,)


SEED = 1354949222  # seeds the cotangents
DEVICE = 'cpu'
CHECK = {'backward': False, 'outputs': [{'name': 'v6', 'k': 1.0, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}], 'inputs': [{'name': 'x2', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f16', 'grad': False}], 'grad': {'k': 2.0, 'tol': 'f16'}}  # per output / input: error factor k, tolerance type, bit-exact or not


def main(device=DEVICE):
    """Eager vs torch.compile(fn, backend="stax", fullgraph=True) under strict config; raises on mismatch."""
    from stax.frontend.fuzz.execute import check_case  # registers backend "stax"

    outcome = check_case(globals(), CHECK, SEED, device, raise_errors=True)
    if outcome.status == "fail":
        raise AssertionError(f"{outcome.kind}: {outcome.detail}")
    print(f"{outcome.status}: stax agrees with eager (fallback ops: {outcome.fallback_ops})")


if __name__ == "__main__":
    main()
