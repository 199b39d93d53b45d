"""Model workloads built from code with random init (no downloads): MLP, a small CNN
with batch norm, a transformer encoder block, a small GPT-style decoder.

Each model is seeded, so every backend sees the same weights and inputs. Training
variants run forward + backward of a loss (no optimizer step, so repeated calls
compute the same thing); batch norm in training mode also updates running stats.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import Case, Workload


class MLP(nn.Module):
    def __init__(self, d: int, h: int, depth: int = 3):
        super().__init__()
        dims = [d] + [h] * (depth - 1) + [d]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        for k, lin in enumerate(self.layers):
            x = lin(x)
            if k < len(self.layers) - 1:
                x = F.gelu(x)
        return x


class SmallCNN(nn.Module):
    """conv-bn-relu x 3 with a stride-2 conv, global average pool, linear head."""

    def __init__(self, c: int = 32, classes: int = 10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, 2 * c, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(2 * c), nn.ReLU(),
        )
        self.head = nn.Linear(2 * c, classes)

    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads
        self.causal = causal

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d: int, heads: int, causal: bool):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, causal)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embeddings, causal blocks, final norm, tied LM head."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int, ctx: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads, causal=True) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()


def _seeded(build, device):
    torch.manual_seed(0)
    return build().to(device)


def _state(m: nn.Module) -> tuple:
    return tuple(m.parameters()) + tuple(m.buffers())


def _inference(m: nn.Module, name: str):
    m.eval()

    def f(*xs):
        with torch.no_grad():
            return m(*xs)

    f.__name__ = name
    return f


def _train_step(m: nn.Module, loss_fn, name: str):
    m.train()

    def step(*xs):
        for p in m.parameters():
            p.grad = None
        loss = loss_fn(m, *xs)
        loss.backward()
        return loss.detach()

    step.__name__ = name
    return step


def _mlp_train(device, quick):
    d, h, n = (128, 256, 128) if quick else (512, 2048, 1024)
    m = _seeded(lambda: MLP(d, h), device)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(n, d, generator=g).to(device), torch.randn(n, d, generator=g).to(device)
    return Case(_train_step(m, lambda m, x, y: F.mse_loss(m(x), y), "mlp_train"), (x, y), _state(m), training=True)


def _cnn(device, quick, train: bool):
    c, batch, hw = (8, 4, 16) if quick else (32, 16, 32)
    m = _seeded(lambda: SmallCNN(c), device)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, hw, hw, generator=g).to(device)
    if not train:
        return Case(_inference(m, "cnn_eval"), (x,), _state(m))
    y = torch.randint(0, 10, (batch,), generator=g).to(device)
    return Case(_train_step(m, lambda m, x, y: F.cross_entropy(m(x), y), "cnn_train"), (x, y), _state(m), training=True)


def _encoder(device, quick):
    d, heads, b, t = (64, 4, 2, 32) if quick else (256, 8, 8, 128)
    m = _seeded(lambda: Block(d, heads, causal=False), device)
    x = torch.randn(b, t, d, generator=torch.Generator().manual_seed(1)).to(device)
    return Case(_inference(m, "encoder_eval"), (x,), _state(m))


def _gpt_model(device, quick):
    cfg = (dict(vocab=256, d=64, heads=4, layers=2, ctx=32) if quick
           else dict(vocab=2048, d=256, heads=8, layers=4, ctx=128))
    return _seeded(lambda: GPT(**cfg), device), cfg


def _gpt(device, quick, train: bool):
    m, cfg = _gpt_model(device, quick)
    b = 2 if quick else 8
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, cfg["vocab"], (b, cfg["ctx"]), generator=g).to(device)
    if not train:
        return Case(_inference(m, "gpt_eval"), (idx,), _state(m))
    tgt = torch.randint(0, cfg["vocab"], (b, cfg["ctx"]), generator=g).to(device)
    loss = lambda m, idx, tgt: F.cross_entropy(m(idx).flatten(0, 1), tgt.flatten())  # noqa: E731
    return Case(_train_step(m, loss, "gpt_train"), (idx, tgt), _state(m), training=True)


WORKLOADS = [
    Workload("MLP training step", _mlp_train, memory_bound=False, quick=True),
    Workload("CNN+BN eval", lambda d, q: _cnn(d, q, False), memory_bound=False),
    Workload("CNN+BN training step", lambda d, q: _cnn(d, q, True), memory_bound=False),
    Workload("encoder block eval", _encoder, memory_bound=False),
    Workload("GPT eval", lambda d, q: _gpt(d, q, False), memory_bound=False, quick=True),
    Workload("GPT training step", lambda d, q: _gpt(d, q, True), memory_bound=False),
]
