"""Stax differential-fuzzer reproducer: decomp-bwd-value.

the decomposed ATen graph run eagerly agrees with Stax, aot_eager with eager: grad of a4_0: 1/2
values out of tolerance (k=1, rtol=0.001, atol=1e-05); worst at (0, 0): stax -0.0029296875 eager
-0.001953125 ref -0.002034216527219801; first at (0, 0)

Found by `python -m stax.frontend.fuzz` (seed 2026 graph 491); shrunk to 9 op(s): add:sub@f16, binary_:copy_@f16, layer_norm@f16, tri:triu@f16, layer_norm@f16, slice:getitem@f16, expand@f16, index:getitem@f16, matmul@f16.
Forward and backward; ATen fallbacks: none.
Run: python <this file>  (raises while the bug is present)
Program: {"seed": 449628853, "inputs": [{"id": 0, "shape": [3, 2], "dtype": "f16", "layout": "contig", "requires_grad": false, "special": false, "scale": 10.0}], "nodes": [{"id": 3, "row": "add", "args": [0], "salt": 2110048574}, {"id": 4, "row": "binary_", "args": [3], "salt": 336308695}, {"id": 5, "row": "layer_norm", "args": [4], "salt": 723593754}, {"id": 6, "row": "tri", "args": [5], "salt": 1953486110}, {"id": 7, "row": "layer_norm", "args": [6], "salt": 381086314}, {"id": 10, "row": "slice", "args": [0], "salt": 772433733}, {"id": 15, "row": "expand", "args": [0], "salt": 1858105518}, {"id": 16, "row": "index", "args": [7], "salt": 1774796982}, {"id": 17, "row": "matmul", "args": [16], "salt": 755110582}], "outputs": [10, 6, 0, 15, 17], "backward": true, "device": "cpu", "origin": "seed 2026 graph 491"}
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
        pos = torch.randint(0, flat.numel(), (max(1, flat.numel() // 16),), generator=g)
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
        _input((3, 2), torch.float16, 'contig', 683395736, device, scale=10.0, upcast=upcast),  # x0
        _input((), torch.float16, 'contig', 936447450, device, requires_grad=True, upcast=upcast),  # a3_0
        _input((1, 2), torch.float64, 'contig', 749418680, device, requires_grad=True, upcast=upcast),  # a4_0
        _input((3, 2), torch.float16, 'contig', 706999616, device, requires_grad=True, upcast=upcast),  # a5_0
        _input((3, 2), torch.float16, 'contig', 1757656933, device, requires_grad=True, upcast=upcast),  # a5_1
        _input((3, 2), torch.float16, 'contig', 1451816126, device, requires_grad=True, upcast=upcast),  # a7_0
        _input((3, 2), torch.float16, 'contig', 1470273958, device, upcast=upcast),  # a7_1
        _input((1,), torch.int64, 'contig', 248779113, device, kind='index', low=-3, high=3, upcast=upcast),  # a16_0
        _input((1,), torch.int64, 'contig', 1372369518, device, kind='index', low=-2, high=2, upcast=upcast),  # a16_1
        _input((1, 3), torch.float16, 'contig', 1747937965, device, upcast=upcast),  # a17_0
    ]


def fn(x0, a3_0, a4_0, a5_0, a5_1, a7_0, a7_1, a16_0, a16_1, a17_0):
    v3 = torch.sub(x0, a3_0, alpha=-0.25)
    v3.copy_(a4_0)
    v4 = v3
    v5 = F.layer_norm(v4, (3, 2), a5_0, a5_1, eps=1e-3)
    v6 = torch.triu(v5, -1)
    v7 = F.layer_norm(v6, (3, 2), a7_0, a7_1, eps=1e-3)
    v10 = x0[:, 0:2:3]
    v15 = x0.expand((2, 3, 2))
    v16 = v7[a16_0, a16_1]
    v17 = torch.matmul(v16, a17_0)
    return (v10, v6, x0, v15, v17,)


SEED = 449628853  # seeds the cotangents
DEVICE = 'cpu'
CHECK = {'backward': True, 'outputs': [{'name': 'v10', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f16'}, {'name': 'v6', 'k': 11.899, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}, {'name': 'x0', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f16'}, {'name': 'v15', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f16'}, {'name': 'v17', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}], 'inputs': [{'name': 'x0', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f16', 'grad': False}, {'name': 'a3_0', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a4_0', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f64', 'grad': True}, {'name': 'a5_0', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a5_1', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a7_0', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a7_1', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': False}, {'name': 'a16_0', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'i64', 'grad': False}, {'name': 'a16_1', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'i64', 'grad': False}, {'name': 'a17_0', 'k': 24.798, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': False}], 'grad': {'k': 49.596, 'tol': 'f16'}}  # per output / input: error factor k, tolerance type, bit-exact or not


def main(device=DEVICE):
    """Eager vs torch.compile(fn, backend="stax", fullgraph=True) under strict config; raises on mismatch."""
    from stax.frontend.fuzz.execute import check_case  # registers backend "stax"

    outcome = check_case(globals(), CHECK, SEED, device, raise_errors=True)
    if outcome.status == "fail":
        raise AssertionError(f"{outcome.kind}: {outcome.detail}")
    print(f"{outcome.status}: stax agrees with eager (fallback ops: {outcome.fallback_ops})")


if __name__ == "__main__":
    main()
