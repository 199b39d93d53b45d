"""Dynamic shapes on the GPU route (issue 23, stax.gpu): symbolic-size graphs compile to Triton once, run at any size.

CPU tensors go to stax.gpu through Triton's interpreter (config.device_override='gpu', TRITON_INTERPRET=1
from the conftest). Each case runs with `dynamic=True` (one graph for every size) and with automatic dynamic
(the first call static, the second recompiles with symbolic sizes, later sizes reuse it); every result is
compared with eager at the conftest's float32 tolerances, every graph must have gone through stax.gpu
(graphs_failed 0, graphs_gpu == graphs_compiled: no eager run) and no call may have left the assumptions.
Sizes stay small: the interpreter runs every program instance in Python.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from stax.frontend import config, metrics, runtime

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") in ("", "0") or runtime.gpu_unavailable_reason() is not None,
    reason="needs stax.gpu with TRITON_INTERPRET=1 (CPU tensors through Triton's interpreter)",
)

SIZES = [(4, 16), (3, 33), (9, 70)]  # (rows, cols): the first is the hint, the others ragged and larger


@pytest.fixture(autouse=True)
def _gpu_route():
    with config.patch(device_override="gpu"):
        yield


def _inputs(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _all_on_gpu(m, graphs: int):
    assert m.graphs_failed == 0 and m.graphs_no_backend == 0, m
    assert m.graphs_compiled == graphs and m.graphs_gpu == graphs, m
    assert m.calls_outside_assumptions == 0, m


def _check(fn, make_args, sizes=SIZES):
    """dynamic=True: one stax.gpu graph for every size; automatic dynamic: two (static, then symbolic)."""
    calls = [make_args(s, k) for k, s in enumerate(sizes)]
    for dynamic, graphs in ((True, 1), (None, 2)):
        torch._dynamo.reset()
        metrics.reset()
        compiled = torch.compile(fn, backend="stax", dynamic=dynamic)
        for args in calls:
            assert_same(compiled(*args), fn(*args))
        _all_on_gpu(metrics.snapshot(), graphs)


def _one(shape, k):
    return (_inputs(shape, k),)


def test_pointwise():
    _check(lambda x: torch.sin(x) * 2 + x.exp().neg(), _one)


def test_pointwise_broadcast_and_transpose():
    _check(lambda x, b: (x + b).t().exp() * x.t(), lambda s, k: (_inputs(s, k), _inputs((s[1],), k + 5)))


def test_reductions():
    """Row sums over a symbolic length, column sums over symbolic rows, a whole-tensor sum and a mean."""
    _check(lambda x: (x.sum(-1), x.amax(0), x.sum(), x.mean(-1)), _one)


def test_softmax():
    _check(lambda x: torch.softmax(x, -1), _one)


def test_layer_norm_symbolic_rows():
    w, b = torch.randn(48), torch.randn(48)
    _check(lambda x: F.layer_norm(x, (48,), w, b), lambda s, k: (_inputs((s[0], s[1] % 5 + 5, 48), k),))


def test_layer_norm_symbolic_hidden():
    _check(lambda x: F.layer_norm(x, x.shape[-1:]), _one)


def test_example_7_1_normalize_rows():
    """x / x.sum(-1, keepdim=True): positive inputs (a row sum near 0 makes the quotient ill-conditioned)."""
    _check(lambda x: x / x.sum(-1, keepdim=True), lambda s, k: (_inputs(s, k).abs() + 0.1,))


def test_mark_dynamic_compiles_once():
    """torch._dynamo.mark_dynamic on the batch dim: the first compile is already symbolic, one graph."""
    f = lambda x: torch.softmax(x * 2, -1)  # noqa: E731
    compiled = torch.compile(f, backend="stax")
    for k, rows in enumerate([5, 12, 3]):
        x = _inputs((rows, 24), k)
        torch._dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), f(x))
    _all_on_gpu(metrics.snapshot(), 1)


def test_training_step():
    """Forward (symbolic batch) and backward compiled by stax.gpu, SGD: grads and parameters as eager's.
    The model has no matmul (a matmul-free MLP: scale, shift, GELU, softmax) so that every node is a
    Triton kernel."""
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(16))
            self.b = torch.nn.Parameter(torch.randn(16))

        def forward(self, x):
            return torch.softmax(F.gelu(x * self.w + self.b), -1)

    ref, model = Net(), Net()
    model.load_state_dict(ref.state_dict())
    compiled = torch.compile(model, backend="stax", dynamic=True)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for k, batch in enumerate([6, 17, 3]):
        x, y = _inputs((batch, 16), k), _inputs((batch, 16), k + 10).softmax(-1)
        for fwd, o in ((ref, opt_ref), (compiled, opt)):
            o.zero_grad()
            loss = F.mse_loss(fwd(x), y)
            loss.backward()
            o.step()
        for p_ref, p in zip(ref.parameters(), model.parameters()):
            assert_same(p.grad, p_ref.grad)
            assert_same(p.detach(), p_ref.detach())
    _all_on_gpu(metrics.snapshot(), 2)  # one forward, one backward, for every batch size


def test_linear_layer_calls_its_extern_at_each_size():
    """addmm (an extern call) in a symbolic graph: its constants are bound at each call's sizes."""
    lin = torch.nn.Linear(24, 8)

    def f(x):
        return F.gelu(lin(x))

    with torch.no_grad():
        _check(f, lambda s, k: (_inputs((s[0], 24), k),))
    assert metrics.snapshot().extern_ops["addmm.default"] >= 1


def test_scatter_add_and_gather():
    """A scatter kernel (atomic adds into a zero init) and a gather, both over symbolic lengths."""
    def args(s, k):  # (rows 2*s0 + 1: no row count equals a static dim, which dynamo would duck-size)
        n = 2 * s[0] + 1
        return _inputs((n, 5), k), torch.arange(4 * n).reshape(n, 4) % 8

    _check(lambda x, i: torch.zeros(8, 4).scatter_add(0, i, x) + x.gather(0, i % x.shape[0]).sum(0), args)


def test_embedding_training_step():
    """Embedding forward (a gather) and backward (a scatter-add over the symbolic token count), a
    softmax over a symbolic sequence: gradients and parameters as eager's, every graph by stax.gpu."""
    torch.manual_seed(0)
    ref = torch.nn.Embedding(20, 8)
    model = torch.nn.Embedding(20, 8)
    model.load_state_dict(ref.state_dict())
    compiled = torch.compile(lambda ids: torch.softmax(model(ids), 1).sum(-1), backend="stax", dynamic=True)
    for k, (b, t) in enumerate([(2, 5), (3, 9), (4, 3)]):
        ids = torch.randint(0, 20, (b, t), generator=torch.Generator().manual_seed(k))
        w = _inputs((b, t), k)
        for emb, fwd in ((ref, lambda i: torch.softmax(ref(i), 1).sum(-1)), (model, compiled)):
            emb.zero_grad()
            (fwd(ids) * w).sum().backward()
        assert_same(model.weight.grad, ref.weight.grad)
    _all_on_gpu(metrics.snapshot(), 2)


def test_unsupported_symbolic_gpu_graph_runs_eagerly_counted(monkeypatch):
    """What stax.gpu does not compile with symbolic sizes raises its SymbolicUnsupported (here forced: a
    stand-in compile_schedule): the frontend makes it a GraphUnsupported, the graph runs eagerly with a
    StaxEagerWarning naming the cause, counted in graphs_failed; strict mode raises."""
    import stax.gpu
    from stax.frontend import StaxEagerWarning
    from stax.frontend.errors import GraphUnsupported

    def refuse(schedule, **kwargs):
        raise stax.gpu.SymbolicUnsupported("a test's stand-in kernel")

    monkeypatch.setattr(stax.gpu, "compile_schedule", refuse)
    f = lambda x: x.exp() + 1  # noqa: E731
    with config.patch(strict=False), pytest.warns(StaxEagerWarning, match="symbolic sizes is not supported"):
        compiled = torch.compile(f, backend="stax", dynamic=True)
        for k, n in enumerate([5, 7]):
            x = _inputs((n, 3), k)
            assert_same(compiled(x), f(x))
    m = metrics.snapshot()
    assert m.graphs_failed == 1 and m.graphs_gpu == 0
    torch._dynamo.reset()
    with pytest.raises(Exception, match="stand-in kernel with symbolic sizes is not supported") as info:
        torch.compile(f, backend="stax", dynamic=True)(_inputs((5, 3), 0))  # (the conftest's strict mode)
    chain = [info.value, info.value.__cause__, getattr(info.value, "inner_exception", None)]
    assert any(isinstance(e, GraphUnsupported) for e in chain) or "GraphUnsupported" in str(info.value)


def test_bert_sequence_lengths():
    """A transformers BertModel (sdpa attention: softmax over a symbolic key length, layer norms, addmm
    and bmm externs) at three sequence lengths: one stax.gpu graph, results as eager's."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    compiled = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad():
        for k, seq in enumerate([8, 13, 30]):
            ids = torch.randint(0, cfg.vocab_size, (2, seq), generator=torch.Generator().manual_seed(k))
            want, got = model(input_ids=ids), compiled(input_ids=ids)
            assert_same(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)
            assert_same(got.pooler_output, want.pooler_output, rtol=1e-4, atol=1e-4)
    _all_on_gpu(metrics.snapshot(), 1)
