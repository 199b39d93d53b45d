"""Issue 6's op-by-op suite: every natively lowered op, stax vs eager, forward and
(for floating inputs) backward, over two layouts (contiguous and strided) and several
dtypes; each case asserts zero ATen fallbacks in the forward and backward graphs.

A case is a row: (name, fn, input specs, dtypes). Input spec: a shape (random
floats), or ('int', shape, high) for index tensors, or ('bool', shape).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, run_stax, tol
from stax.frontend import metrics

F32 = [torch.float32]


def _put_mask_cols(x, m, y):
    """z[:, m] = one value per (row, column of dim 2), broadcast over the masked dim."""
    z = x * 1
    z[:, m] = y[:, :1] * 2
    return z


HALF = [torch.float32, torch.float16, torch.bfloat16]
S = (4, 6, 8)

CASES = [
    # activations
    ("gelu", lambda x: F.gelu(x), [S], HALF),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [S], F32),
    ("silu", lambda x: F.silu(x), [S], HALF),
    ("hardswish", lambda x: F.hardswish(x), [S], F32),
    ("hardsigmoid", lambda x: F.hardsigmoid(x), [S], F32),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.5), [S], F32),
    ("elu", lambda x: F.elu(x), [S], F32),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1), [S], F32),
    ("softplus", lambda x: F.softplus(x), [S], F32),
    ("mish", lambda x: F.mish(x), [S], F32),
    # normalization and softmax
    ("softmax", lambda x: x.softmax(-1), [S], HALF),
    ("log_softmax", lambda x: x.log_softmax(1), [S], F32),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (8,), w, b), [S, (8,), (8,)], HALF),
    ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), [S, (6,), (6,)], F32),
    ("batch_norm_eval", lambda x, m, v: F.batch_norm(x, m.detach(), v.detach().abs() + 0.5, training=False),
     [S, (6,), (6,)], F32),
    # reductions
    ("var_std", lambda x: (x.var(-1), x.std(0, correction=0)), [S], F32),
    ("logsumexp", lambda x: x.logsumexp(-1), [S], F32),
    ("norm", lambda x: (x.norm(dim=-1), torch.linalg.vector_norm(x, 1, dim=1)), [S], F32),
    ("prod", lambda x: x.prod(-1), [S], F32),
    ("cumsum", lambda x: x.cumsum(1), [S], F32),
    ("cumprod", lambda x: x.cumprod(-1), [S], F32),
    ("cummax_cummin", lambda x: (*x.cummax(1), *x.cummin(-1)), [S], F32),
    ("logcumsumexp", lambda x: x.logcumsumexp(2), [S], F32),
    ("var_mean", lambda x: torch.var_mean(x, (0, 2), correction=0), [S], HALF),
    # pointwise ops the IR gained
    ("erfinv_erfc", lambda x: ((x * 0.3).erfinv(), torch.erfc(x)), [S], F32),
    ("logaddexp", lambda x, y: torch.logaddexp(x, y), [S, S], F32),
    ("argmax_any", lambda x: (x.argmax(-1), (x > 1).any(1), (x > -2).all()), [S], F32),
    # shape ops
    ("cat", lambda x, y: torch.cat([x, y * 2], 1), [S, (4, 3, 8)], HALF),
    ("stack", lambda x, y: torch.stack([x, y], 2), [S, S], F32),
    ("pad", lambda x: F.pad(x, (1, 2, 0, 1)), [S], F32),
    ("pad_crop", lambda x: F.pad(x, (-1, 2)), [S], F32),
    ("flip", lambda x: x.flip(1, 2), [S], F32),
    ("roll", lambda x: (x.roll(3, 2), x.roll(5)), [S], F32),
    ("repeat", lambda x: x.repeat(2, 1, 2), [S], F32),
    ("split_cat", lambda x: torch.cat(x.split([2, 4], 1)[::-1], 1), [S], F32),
    ("tril", lambda x: x.tril(1), [S], F32),
    ("unfold", lambda x: x.unfold(2, 3, 2) * 2, [S], F32),
    # indexing
    ("gather", lambda x, i: x.gather(1, i), [S, ("int", (4, 3, 8), 6)], F32),
    ("index_select", lambda x, i: x.index_select(1, i), [S, ("int", (5,), 6)], F32),
    ("embedding", lambda w, i: F.embedding(i, w), [(10, 8), ("int", (3, 5), 10)], F32),
    ("index_tensor", lambda x, i: x[:, i], [S, ("int", (2, 3), 6)], F32),
    ("slice_scatter", lambda x, y: torch.slice_scatter(x, y * 2, 1, 1, 5, 2), [S, (4, 2, 8)], F32),
    ("select_scatter", lambda x, y: torch.select_scatter(x, y, 2, 3), [S, (4, 6)], F32),
    ("scatter_one_hot", lambda x, i: x.scatter(2, i, 5.0), [S, ("int", (4, 6, 1), 8)], F32),
    # scatters (stax.ir Scatter stores; duplicates: 'add' accumulates, 'set' keeps the last, as eager's CPU loop)
    ("scatter_add", lambda x, i, y: x.scatter_add(1, i, y), [S, ("int", (4, 3, 8), 6), (4, 3, 8)], HALF),
    ("scatter_add_small_index", lambda x, i, y: x.scatter_add(2, i, y), [S, ("int", (3, 6, 5), 8), (3, 6, 5)], F32),
    ("scatter_src", lambda x, i, y: x.scatter(1, i, y), [S, ("int", (4, 3, 8), 6), (4, 3, 8)], F32),
    ("scatter_value", lambda x, i: x.scatter(0, i, -2.0), [S, ("int", (3, 6, 8), 4)], F32),
    ("scatter_reduce_sum", lambda x, i, y: x.scatter_reduce(1, i, y, "sum"), [S, ("int", (4, 3, 8), 6), (4, 3, 8)],
     F32),
    ("index_put_acc", lambda x, i, y: x.index_put((i,), y, accumulate=True), [S, ("int", (5,), 4), (5, 6, 8)], HALF),
    ("index_put_acc_2d", lambda x, i, j, y: x.index_put((i, j - 3), y, accumulate=True),  # j - 3 < 0 wraps
     [S, ("int", (7,), 4), ("int", (7,), 6), (7, 8)], F32),
    ("index_put", lambda x, i, y: x.index_put((i,), y), [S, ("int", (5,), 4), (5, 6, 8)], F32),
    ("index_put_broadcast", lambda x, i, j, y: x.index_put((i, j), y), [S, ("int", (3, 1), 4), ("int", (2,), 6), (8,)],
     F32),
    ("index_add", lambda x, i, y: x.index_add(1, i, y, alpha=2), [S, ("int", (5,), 6), (4, 5, 8)], F32),
    # a boolean mask with values that do not depend on its count: selects (x[m] = v, x[:, m] += row)
    ("index_put_mask", lambda x, m, y: x.index_put((m,), y[0, 0, 0]), [S, ("bool", (4, 6, 8)), S], HALF),
    ("index_put_mask_cols", _put_mask_cols, [S, ("bool", (6,)), (4, 6, 8)], F32),
    ("index_tensor_2", lambda x, i, j: x[i, :, j], [S, ("int", (2, 3), 4), ("int", (3,), 8)], F32),
    ("embedding_padding", lambda w, i: F.embedding(i, w, padding_idx=3), [(10, 8), ("int", (3, 5), 10)], F32),
    # large: the backwards (index_put / scatter_add into 50000 x 64) stay native and linear
    ("embedding_large", lambda w, i: F.embedding(i, w), [(50000, 64), ("int", (4096,), 50000)], F32),
    ("index_select_large", lambda w, i: w.index_select(0, i), [(50000, 64), ("int", (4096,), 50000)], F32),
    ("index_large", lambda w, i: w[i], [(50000, 64), ("int", (64, 64), 50000)], F32),
    ("gather_large", lambda w, i: w.gather(0, i), [(50000, 64), ("int", (4096, 64), 50000)], F32),
    ("masked_fill", lambda x: x.masked_fill(x > 0.5, -1.0), [S], F32),
    ("where_clamp", lambda x, y: torch.where(x > y, x.clamp(-1, 1), y), [S, S], HALF),
    # losses
    ("mse", lambda x, y: F.mse_loss(x, y), [S, S], F32),
    ("bce", lambda x, y: F.binary_cross_entropy(x.sigmoid(), y.sigmoid()), [S, S], F32),
    ("cross_entropy", lambda x, t: F.cross_entropy(x, t), [(12, 8), ("int", (12,), 8)], F32),
    ("nll", lambda x, t: F.nll_loss(x.log_softmax(-1), t), [(12, 8), ("int", (12,), 8)], F32),
    # pooling
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [(2, 3, 8, 8)], F32),
    ("max_pool2d_pad", lambda x: F.max_pool2d(x, 3, 2, 1), [(2, 3, 9, 9)], F32),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1), [(2, 3, 9, 9)], F32),
    ("adaptive_avg_pool", lambda x: F.adaptive_avg_pool2d(x, 1), [(2, 3, 8, 8)], F32),
]


def _make(spec, dtype, strided: bool, seed: int):
    g = torch.Generator().manual_seed(seed)
    if isinstance(spec, tuple) and spec and spec[0] == "int":
        return torch.randint(0, spec[2], spec[1], generator=g)
    if isinstance(spec, tuple) and spec and spec[0] == "bool":
        return torch.rand(spec[1], generator=g) > 0.5
    shape = tuple(spec)
    if strided and len(shape) >= 2:  # a transposed (non-contiguous) view with the same shape
        base = torch.randn(shape[:-2] + (shape[-1], shape[-2]), generator=g).to(dtype)
        return base.transpose(-1, -2)
    return torch.randn(shape, generator=g).to(dtype)


def _ids():
    return [c[0] for c in CASES]


def _run(fn, inputs, grad: bool):
    if grad:
        inputs = [t.detach().requires_grad_() if t.is_floating_point() else t for t in inputs]
    out = fn(*inputs)
    return inputs, out


def check_case(fn, inputs, dtype, strided: bool = False, device: str = "cpu"):
    """fn compiled equals eager; for float32, so do the input gradients of a random weighting of its outputs."""
    grad = dtype == torch.float32
    ref_in, expected = _run(fn, [t.clone() for t in inputs], grad)
    got_in, actual = _run(lambda *a: run_stax(fn, *a), inputs, grad)
    # strided inputs: decompositions may choose other (equally valid) output strides than eager's kernels
    assert_same(actual, expected, check_stride=not strided)
    if not grad:
        return
    outs = expected if isinstance(expected, tuple) else (expected,)
    got = actual if isinstance(actual, tuple) else (actual,)
    diff = [(o, a) for o, a in zip(outs, got) if o.requires_grad]
    if diff:
        ws = [torch.randn(o.shape, generator=torch.Generator().manual_seed(9)).to(device) for o, _ in diff]
        sum((o * w).sum() for (o, _), w in zip(diff, ws)).backward()
        sum((a * w).sum() for (_, a), w in zip(diff, ws)).backward()
        r, a = tol(torch.float32)
        for ti, tg in zip(ref_in, got_in):
            if ti.requires_grad:
                assert_same(tg.grad, ti.grad, rtol=r, atol=a, check_stride=False)


@pytest.mark.parametrize("strided", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_forward_and_backward(case, strided):
    name, fn, specs, dtypes = case
    for dtype in dtypes if not strided else dtypes[:1]:
        torch._dynamo.reset()
        metrics.reset()
        check_case(fn, [_make(s, dtype, strided, k) for k, s in enumerate(specs)], dtype, strided)
        m = metrics.snapshot()
        assert m.graphs_failed == 0
        assert m.fallback_calls == 0, f"{name} ({dtype}): fallback ops {dict(m.fallback_ops)}"
