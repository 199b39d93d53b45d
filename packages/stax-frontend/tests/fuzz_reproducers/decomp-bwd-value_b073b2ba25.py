"""Stax differential-fuzzer reproducer: decomp-bwd-value.

the decomposed ATen graph run eagerly agrees with Stax, aot_eager with eager: grad of x0: 1/85
values out of tolerance (k=32.5, rtol=1.3e-06, atol=1e-05); worst at (0, 15, 0): stax
0.5646664500236511 eager 0.5959164500236511 ref 0.5959164497502822; first at (0, 15, 0)

Found by `python -m stax.frontend.fuzz` (seed 7 graph 2359); shrunk to 4 op(s): pow_scalar:pow@f32, group_norm@f32, i0_safe:i0@f32, prod@f32.
Forward and backward; ATen fallbacks: {'i0.default': 1, 'special_i1.default': 1}.
Run: python <this file>  (raises while the bug is present)
Program: {"seed": 105664784, "inputs": [{"id": 0, "shape": [5, 17, 1], "dtype": "f32", "layout": "step", "requires_grad": true, "special": false, "scale": 1000.0}], "nodes": [{"id": 11, "row": "pow_scalar", "args": [0], "salt": 1465412830}, {"id": 12, "row": "group_norm", "args": [0], "salt": 183356785}, {"id": 13, "row": "i0_safe", "args": [12], "salt": 299241580}, {"id": 14, "row": "prod", "args": [13], "salt": 605043154}], "outputs": [0, 11, 14], "backward": true, "device": "cpu", "origin": "seed 7 graph 2359"}
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
        _input((5, 17, 1), torch.float32, 'step', 1988295226, device, scale=1000.0, requires_grad=True, upcast=upcast),  # x0
        _input((17,), torch.float32, 'contig', 1269768786, device, requires_grad=True, upcast=upcast),  # a12_0
        _input((17,), torch.float32, 'contig', 2123997742, device, upcast=upcast),  # a12_1
    ]


def fn(x0, a12_0, a12_1):
    v11 = torch.pow(x0, -2)
    v12 = F.group_norm(x0, 17, a12_0, a12_1)
    v13 = torch.i0(v12.clamp(-5, 5))
    v14 = torch.prod(v13, 0, keepdim=False)
    return (x0, v11, v14,)


SEED = 105664784  # seeds the cotangents
DEVICE = 'cpu'
CHECK = {'backward': True, 'outputs': [{'name': 'x0', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f32'}, {'name': 'v11', 'k': 3.0, 'tol': 'f32', 'exact': False, 'dtype': 'f32'}, {'name': 'v14', 'k': 14.236, 'tol': 'f32', 'exact': False, 'dtype': 'f32'}], 'inputs': [{'name': 'x0', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'f32', 'grad': True}, {'name': 'a12_0', 'k': 16.236, 'tol': 'f32', 'exact': False, 'dtype': 'f32', 'grad': True}, {'name': 'a12_1', 'k': 16.236, 'tol': 'f32', 'exact': False, 'dtype': 'f32', 'grad': False}], 'grad': {'k': 32.472, 'tol': 'f32'}}  # per output / input: error factor k, tolerance type, bit-exact or not


def main(device=DEVICE):
    """Eager vs torch.compile(fn, backend="stax", fullgraph=True) under strict config; raises on mismatch."""
    from stax.frontend.fuzz.execute import check_case  # registers backend "stax"

    outcome = check_case(globals(), CHECK, SEED, device, raise_errors=True)
    if outcome.status == "fail":
        raise AssertionError(f"{outcome.kind}: {outcome.detail}")
    print(f"{outcome.status}: stax agrees with eager (fallback ops: {outcome.fallback_ops})")


if __name__ == "__main__":
    main()
