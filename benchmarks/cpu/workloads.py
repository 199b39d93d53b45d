"""The CPU benchmark suite of issue 5: each workload is a function, its inputs, and the
minimum bytes it must move (inputs read once + outputs written once), so achieved
bandwidth can be compared with the machine's copy bandwidth."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class Workload:
    name: str
    fn: Callable
    make_inputs: Callable[[], tuple]
    memory_bound: bool = True
    training: bool = False  # fn runs forward and backward; inputs that require grad are reset per call
    notes: str = ""
    out_bytes: Callable | None = None  # bytes the outputs must write (default: from one eager call)
    extra: dict = field(default_factory=dict)


def nbytes(t) -> int:
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    if isinstance(t, (tuple, list)):
        return sum(nbytes(x) for x in t)
    return 0


R, C = 8192, 1024  # 32 MB of float32: larger than L3


def _x(*shape):
    return lambda: (torch.randn(*shape),)


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


class MLP(torch.nn.Module):
    def __init__(self, d=512, h=2048):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _mlp_forward():
    torch.manual_seed(0)
    m = MLP().eval()

    def f(x):
        with torch.no_grad():
            return m(x)

    return f


def _mlp_train():
    torch.manual_seed(0)
    m = MLP()

    def step(x, y):
        for p in m.parameters():
            p.grad = None
        loss = F.mse_loss(m(x), y)
        loss.backward()
        return loss.detach()

    return step


def suite() -> list[Workload]:
    return [
        Workload("softmax", softmax, _x(R, C)),
        Workload("layernorm", layernorm, lambda: (torch.randn(R, C), torch.randn(C), torch.randn(C))),
        Workload("rmsnorm", rmsnorm, lambda: (torch.randn(R, C), torch.randn(C))),
        Workload("silu", silu, _x(R, C)),
        Workload("bias+gelu+residual", bias_gelu_residual,
                 lambda: (torch.randn(R, C), torch.randn(C), torch.randn(R, C))),
        Workload("x/x.sum(-1)", div_by_sum, lambda: (torch.rand(R, C) + 0.5,)),
        Workload("exp->sum&amax", exp_sum_amax, _x(R, C)),
        Workload("transpose+add", transpose_add, lambda: (torch.randn(2048, 4096), torch.randn(4096, 2048))),
        Workload("log_softmax+nll", log_softmax_nll,
                 lambda: (torch.randn(R, C), torch.randint(0, C, (R,)))),
        Workload("var_mean", var_mean, _x(R, C)),
        Workload("cumsum", cumsum, _x(R, C)),
        Workload("MLP forward", _mlp_forward(), _x(1024, 512), memory_bound=False),
        Workload("MLP training step", _mlp_train(), lambda: (torch.randn(1024, 512), torch.randn(1024, 512)),
                 memory_bound=False, training=True),
    ]
