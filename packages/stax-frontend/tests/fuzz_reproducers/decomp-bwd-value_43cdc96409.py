"""Stax differential-fuzzer reproducer: decomp-bwd-value.

the decomposed ATen graph run eagerly agrees with Stax, aot_eager with eager: grad of a26_1: 1/1
values out of tolerance (k=1, rtol=0.001, atol=1e-05); worst at (0,): stax 0.03955078125 eager
0.00830078125 ref 0.0; first at (0,)

Found by `python -m stax.frontend.fuzz` (seed 2026 graph 483); shrunk to 9 op(s): reshape:flatten@f16, div@f16, log1p@f16, atan2@f16, matmul:linear@f16, tri:tril@f16, atan2@f16, where@f16, layer_norm@f16.
Forward and backward; ATen fallbacks: none.
Run: python <this file>  (raises while the bug is present)
Program: {"seed": 678003358, "inputs": [{"id": 0, "shape": [3, 1], "dtype": "f16", "layout": "contig", "requires_grad": true, "special": false, "scale": 1.0}], "nodes": [{"id": 1, "row": "reshape", "args": [0], "salt": 82418183}, {"id": 4, "row": "div", "args": [1], "salt": 491447015}, {"id": 5, "row": "log1p", "args": [1], "salt": 612276763}, {"id": 6, "row": "atan2", "args": [5, 5], "salt": 1639835466}, {"id": 13, "row": "matmul", "args": [4], "salt": 301497666}, {"id": 14, "row": "tri", "args": [0], "salt": 538648641}, {"id": 25, "row": "atan2", "args": [14], "salt": 48038808}, {"id": 26, "row": "where", "args": [13, 6], "salt": 634758034}, {"id": 27, "row": "layer_norm", "args": [26], "salt": 653794232}], "outputs": [14, 4, 6, 13, 25, 27], "backward": true, "device": "cpu", "origin": "seed 2026 graph 483"}
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
        _input((3, 1), torch.float16, 'contig', 918677610, device, requires_grad=True, upcast=upcast),  # x0
        _input((17, 3), torch.float16, 'contig', 870124253, device, upcast=upcast),  # a13_0
        _input((17,), torch.float16, 'contig', 847348201, device, requires_grad=True, upcast=upcast),  # a13_1
        _input((3, 1), torch.float16, 'contig', 1364668274, device, requires_grad=True, upcast=upcast),  # a25_0
        _input((), torch.bool, 'contig', 854822249, device, kind='mask', upcast=upcast),  # a26_0
        _input((1,), torch.float16, 'contig', 666915238, device, requires_grad=True, upcast=upcast),  # a26_1
        _input((17,), torch.float16, 'contig', 325318983, device, requires_grad=True, upcast=upcast),  # a27_0
        _input((17,), torch.float16, 'contig', 750374665, device, requires_grad=True, upcast=upcast),  # a27_1
    ]


def fn(x0, a13_0, a13_1, a25_0, a26_0, a26_1, a27_0, a27_1):
    v1 = torch.flatten(x0, 0, 1)
    v4 = torch.div(v1, -0.25, rounding_mode='trunc')
    v5 = torch.log1p(v1)
    v6 = torch.atan2(v5, v5)
    v13 = F.linear(v4, a13_0, a13_1)
    v14 = torch.tril(x0, -1)
    v25 = torch.atan2(v14, a25_0)
    v26 = torch.where(a26_0, a26_1, v13)
    v27 = F.layer_norm(v26, (17,), a27_0, a27_1, eps=1e-3)
    return (v14, v4, v6, v13, v25, v27,)


SEED = 678003358  # seeds the cotangents
DEVICE = 'cpu'
CHECK = {'backward': True, 'outputs': [{'name': 'v14', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f16'}, {'name': 'v4', 'k': 1.0, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}, {'name': 'v6', 'k': 5.0, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}, {'name': 'v13', 'k': 3.732, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}, {'name': 'v25', 'k': 3.0, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}, {'name': 'v27', 'k': 17.978, 'tol': 'f16', 'exact': False, 'dtype': 'f16'}], 'inputs': [{'name': 'x0', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f16', 'grad': True}, {'name': 'a13_0', 'k': 23.978, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': False}, {'name': 'a13_1', 'k': 23.978, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a25_0', 'k': 23.978, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a26_0', 'k': 23.978, 'tol': 'f16', 'exact': False, 'dtype': 'b', 'grad': False}, {'name': 'a26_1', 'k': 23.978, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a27_0', 'k': 23.978, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}, {'name': 'a27_1', 'k': 23.978, 'tol': 'f16', 'exact': False, 'dtype': 'f16', 'grad': True}], 'grad': {'k': 47.957, 'tol': 'f16'}}  # per output / input: error factor k, tolerance type, bit-exact or not


def main(device=DEVICE):
    """Eager vs torch.compile(fn, backend="stax", fullgraph=True) under strict config; raises on mismatch."""
    from stax.frontend.fuzz.execute import check_case  # registers backend "stax"

    outcome = check_case(globals(), CHECK, SEED, device, raise_errors=True)
    if outcome.status == "fail":
        raise AssertionError(f"{outcome.kind}: {outcome.detail}")
    print(f"{outcome.status}: stax agrees with eager (fallback ops: {outcome.fallback_ops})")


if __name__ == "__main__":
    main()
