"""Stax differential-fuzzer reproducer: fwd-value.

output 0 (v14): 1/65536 values out of tolerance (k=4, rtol=2.5e-15, atol=1e-13); worst at (1,
17111): stax 31.904743314142173 eager 31.904743314140372 ref 31.904722213745117; first at (1, 17111)

Found by `python -m stax.frontend.fuzz` (seed 2027 graph 1891); shrunk to 2 op(s): logaddexp@f64, rsqrt@f64.
Forward only; ATen fallbacks: none.
Run: python <this file>  (raises while the bug is present)
Program: {"seed": 1724797350, "inputs": [{"id": 1, "shape": [2, 32768], "dtype": "f64", "layout": "offset", "requires_grad": false, "special": false, "scale": 10.0}], "nodes": [{"id": 13, "row": "logaddexp", "args": [1], "salt": 1990945280}, {"id": 14, "row": "rsqrt", "args": [13], "salt": 15801365}], "outputs": [14], "backward": false, "device": "cpu", "origin": "seed 2027 graph 1891"}
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
        _input((2, 32768), torch.float64, 'offset', 1148275473, device, scale=10.0, upcast=upcast),  # x1
        _input((2, 1), torch.float64, 'contig', 1019640530, device, upcast=upcast),  # a13_0
    ]


def fn(x1, a13_0):
    v13 = torch.logaddexp(x1, a13_0)
    v14 = torch.rsqrt(v13)
    return (v14,)


SEED = 1724797350  # seeds the cotangents
DEVICE = 'cpu'
CHECK = {'backward': False, 'outputs': [{'name': 'v14', 'k': 4.0, 'tol': 'f64', 'exact': False, 'dtype': 'f64'}], 'inputs': [{'name': 'x1', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f64', 'grad': False}, {'name': 'a13_0', 'k': 4.0, 'tol': 'f64', 'exact': False, 'dtype': 'f64', 'grad': False}], 'grad': {'k': 8.0, 'tol': 'f64'}}  # per output / input: error factor k, tolerance type, bit-exact or not


def main(device=DEVICE):
    """Eager vs torch.compile(fn, backend="stax", fullgraph=True) under strict config; raises on mismatch."""
    from stax.frontend.fuzz.execute import check_case  # registers backend "stax"

    outcome = check_case(globals(), CHECK, SEED, device, raise_errors=True)
    if outcome.status == "fail":
        raise AssertionError(f"{outcome.kind}: {outcome.detail}")
    print(f"{outcome.status}: stax agrees with eager (fallback ops: {outcome.fallback_ops})")


if __name__ == "__main__":
    main()
