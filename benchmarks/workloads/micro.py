"""Micro workloads (the stax-cpu issue's list): one fusion pattern each, memory bound.

Full size: 8192 x 1024 float32 rows (32 MiB, larger than the last-level cache), so
they measure memory traffic; --quick: 1024 x 256 (1 MiB), a smoke test.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import Case, Workload


def _rc(quick: bool) -> tuple[int, int]:
    return (1024, 256) if quick else (8192, 1024)


def _gen(device: str):
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)

    return randn


def softmax(x):
    return torch.softmax(x, -1)


def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def silu(x):
    return F.silu(x)


def bias_gelu_residual(x, b, r):
    return F.gelu(x + b) + r


def div_by_sum(x):
    return x / x.sum(-1, keepdim=True)


def exp_sum_amax(x):
    e = x.exp()
    return e.sum(-1), e.amax(-1)


def transpose_add(x, y):
    return x.t() + y


def log_softmax_nll(x, target):
    return F.nll_loss(F.log_softmax(x, -1), target)


def var_mean(x):
    return torch.var_mean(x, -1)


def cumsum(x):
    return torch.cumsum(x, -1)


def _rows(fn, n_extra=0, extra_shape=None):
    """A Case over one (R, C) matrix plus `n_extra` tensors of `extra_shape(R, C)`."""

    def make(device, quick):
        r, c = _rc(quick)
        randn = _gen(device)
        extra = tuple(randn(*extra_shape(r, c)) for _ in range(n_extra)) if n_extra else ()
        return Case(fn, (randn(r, c), *extra))

    return make


def _div_by_sum(device, quick):
    r, c = _rc(quick)
    return Case(div_by_sum, (_gen(device)(r, c).abs() + 0.5,))


def _bias_gelu_residual(device, quick):
    r, c = _rc(quick)
    randn = _gen(device)
    return Case(bias_gelu_residual, (randn(r, c), randn(c), randn(r, c)))


def _transpose_add(device, quick):
    r, c = (512, 1024) if quick else (2048, 4096)
    randn = _gen(device)
    return Case(transpose_add, (randn(c, r), randn(r, c)))


def _log_softmax_nll(device, quick):
    r, c = _rc(quick)
    g = torch.Generator().manual_seed(1)
    return Case(log_softmax_nll, (_gen(device)(r, c), torch.randint(0, c, (r,), generator=g).to(device)))


class MLP(torch.nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _mlp(quick: bool, device: str) -> MLP:
    torch.manual_seed(0)
    return MLP(*((128, 512) if quick else (512, 2048))).to(device)


def _mlp_forward(device, quick):
    m = _mlp(quick, device).eval()

    def mlp_forward(x):
        with torch.no_grad():
            return m(x)

    return Case(mlp_forward, (_gen(device)(256 if quick else 1024, m.fc1.in_features),), tuple(m.parameters()))


def _mlp_train(device, quick):
    m = _mlp(quick, device)

    def mlp_train_step(x, y):
        for p in m.parameters():
            p.grad = None
        loss = F.mse_loss(m(x), y)
        loss.backward()
        return loss.detach()

    randn = _gen(device)
    n, d = (256 if quick else 1024), m.fc1.in_features
    return Case(mlp_train_step, (randn(n, d), randn(n, d)), tuple(m.parameters()), training=True)


def _same(r, c):
    return (c,)


WORKLOADS = [
    Workload("softmax", _rows(softmax), quick=True),
    Workload("layernorm", _rows(layernorm, 2, _same), quick=True),
    Workload("rmsnorm", _rows(rmsnorm, 1, _same)),
    Workload("silu", _rows(silu)),
    Workload("bias+gelu+residual", _bias_gelu_residual),
    Workload("x/x.sum(-1)", _div_by_sum),
    Workload("exp->sum&amax", _rows(exp_sum_amax), quick=True, notes="§7 Example 7.2"),
    Workload("transpose+add", _transpose_add),
    Workload("log_softmax+nll", _log_softmax_nll),
    Workload("var_mean", _rows(var_mean)),
    Workload("cumsum", _rows(cumsum)),
    Workload("MLP forward", _mlp_forward, memory_bound=False),
    Workload("MLP training step", _mlp_train, memory_bound=False, quick=True),
]
