"""Stax differential-fuzzer reproducer: decomp-bwd-value.

the decomposed ATen graph run eagerly agrees with Stax, aot_eager with eager: grad of a18_0: 1/1
values out of tolerance (k=52.5, rtol=1.3e-06, atol=1e-05); worst at (0, 0, 0): stax 0.07421875
eager 0.015625 ref -4.3655745685100555e-11; first at (0, 0, 0)

Found by `python -m stax.frontend.fuzz` (seed 2026 graph 2619); shrunk to 6 op(s): unary_:fill_@b, cos@f32, batch_norm@f32, pow@f32, group_norm@f32, matmul:bmm@f32.
Forward and backward; ATen fallbacks: none.
Run: python <this file>  (raises while the bug is present)
Program: {"seed": 782540984, "inputs": [{"id": 0, "shape": [], "dtype": "i64", "layout": "contig", "requires_grad": false, "special": false, "scale": 1.0}, {"id": 1, "shape": [], "dtype": "i64", "layout": "contig", "requires_grad": false, "special": false, "scale": 1.0}, {"id": 2, "shape": [2, 1, 2], "dtype": "b", "layout": "contig", "requires_grad": false, "special": false, "scale": 1.0}], "nodes": [{"id": 4, "row": "unary_", "args": [2], "salt": 1060063013}, {"id": 6, "row": "cos", "args": [4], "salt": 1255996384}, {"id": 17, "row": "batch_norm", "args": [6], "salt": 252243882}, {"id": 18, "row": "pow", "args": [17], "salt": 449068948}, {"id": 24, "row": "group_norm", "args": [18], "salt": 1361419555}, {"id": 25, "row": "matmul", "args": [24], "salt": 1920049339}], "outputs": [0, 2, 4, 1, 25], "backward": true, "device": "cpu", "origin": "seed 2026 graph 2619"}
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
        _input((), torch.int64, 'contig', 2035801944, device, upcast=upcast),  # x0
        _input((), torch.int64, 'contig', 1290251164, device, upcast=upcast),  # x1
        _input((2, 1, 2), torch.bool, 'contig', 461614519, device, upcast=upcast),  # x2
        _input((1,), torch.float32, 'contig', 1288350754, device, upcast=upcast),  # a17_0
        _input((1,), torch.float32, 'contig', 1430204770, device, kind='positive', upcast=upcast),  # a17_1
        _input((1, 1, 1), torch.float32, 'contig', 1361967402, device, requires_grad=True, upcast=upcast),  # a18_0
        _input((2, 2, 3), torch.float32, 'contig', 717111511, device, requires_grad=True, upcast=upcast),  # a25_0
    ]


def fn(x0, x1, x2, a17_0, a17_1, a18_0, a25_0):
    x2.fill_(True)
    v4 = x2
    v6 = torch.cos(v4)
    v17 = F.batch_norm(v6, a17_0, a17_1, None, None, training=False, momentum=0.1, eps=1e-5)
    v18 = torch.pow(v17, a18_0)
    v24 = F.group_norm(v18, 1, None, None)
    v25 = torch.bmm(v24, a25_0)
    return (x0, x2, v4, x1, v25,)


SEED = 782540984  # seeds the cotangents
DEVICE = 'cpu'
CHECK = {'backward': True, 'outputs': [{'name': 'x0', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'i64'}, {'name': 'x2', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'b'}, {'name': 'v4', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'b'}, {'name': 'x1', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'i64'}, {'name': 'v25', 'k': 26.243, 'tol': 'f32', 'exact': False, 'dtype': 'f32'}], 'inputs': [{'name': 'x0', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'i64', 'grad': False}, {'name': 'x1', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'i64', 'grad': False}, {'name': 'x2', 'k': 1.0, 'tol': None, 'exact': True, 'dtype': 'b', 'grad': False}, {'name': 'a17_0', 'k': 26.243, 'tol': 'f32', 'exact': False, 'dtype': 'f32', 'grad': False}, {'name': 'a17_1', 'k': 26.243, 'tol': 'f32', 'exact': False, 'dtype': 'f32', 'grad': False}, {'name': 'a18_0', 'k': 26.243, 'tol': 'f32', 'exact': False, 'dtype': 'f32', 'grad': True}, {'name': 'a25_0', 'k': 26.243, 'tol': 'f32', 'exact': False, 'dtype': 'f32', 'grad': True}], 'grad': {'k': 52.485, 'tol': 'f32'}}  # per output / input: error factor k, tolerance type, bit-exact or not


def main(device=DEVICE):
    """Eager vs torch.compile(fn, backend="stax", fullgraph=True) under strict config; raises on mismatch."""
    from stax.frontend.fuzz.execute import check_case  # registers backend "stax"

    outcome = check_case(globals(), CHECK, SEED, device, raise_errors=True)
    if outcome.status == "fail":
        raise AssertionError(f"{outcome.kind}: {outcome.detail}")
    print(f"{outcome.status}: stax agrees with eager (fallback ops: {outcome.fallback_ops})")


if __name__ == "__main__":
    main()
