"""Dynamic shapes (issue 23, frontend, CPU): graphs with symbolic sizes compile once and run at every size.

Each case runs with `dynamic=True` (one graph for all sizes) and with automatic dynamic (the first call
static, the second recompiles with symbolic sizes, later sizes reuse it: two graphs), compares every
result with eager at fp32 tolerances, and asserts that no graph ran eagerly (the conftest's strict mode
raises on a failed compile; graphs_failed stays 0). The kernel counts of a dynamic compile equal the
static compile's: symbolic sizes do not change fusion.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from stax.frontend import config, metrics

SIZES = [(8, 16), (5, 33), (64, 128)]


def _inputs(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _run(fn, args_per_call, dynamic):
    """fn compiled with stax (dynamic=True, or None: automatic dynamic), called on each argument tuple."""
    compiled = torch.compile(fn, backend="stax", dynamic=dynamic)
    for args in args_per_call:
        assert_same(compiled(*args), fn(*args))
    m = metrics.snapshot()
    assert m.graphs_failed == 0
    return m


def _kernels_per_graph(m) -> list[int]:
    return [t.kernels for t in m.graph_times]


# Packed weights (conv_fusion.py, linear_fusion.py) rewrite static CPU inference graphs only: the
# static-vs-symbolic kernel comparisons below compile both without them.
UNPACKED = {"conv_prepack": False, "linear_prepack": False}


def _check_dynamic(fn, make_args, sizes=SIZES):
    """dynamic=True: one graph for every size; automatic dynamic: two graphs (static, then symbolic)."""
    calls = [make_args(s, k) for k, s in enumerate(sizes)]
    m = _run(fn, calls, dynamic=True)
    assert m.graphs_compiled == 1, m.graphs_compiled
    torch._dynamo.reset()
    metrics.reset()
    with config.patch(**UNPACKED):
        m = _run(fn, calls, dynamic=None)
    assert m.graphs_compiled == 2, m.graphs_compiled
    k_static, k_dynamic = _kernels_per_graph(m)
    assert k_static == k_dynamic  # fusion is unaffected by symbolic sizes
    return k_dynamic


def _one(shape, k):
    return (_inputs(shape, k),)


def test_pointwise():
    _check_dynamic(lambda x: torch.sin(x) * 2 + x.exp().neg(), _one)


def test_sum_reduction():
    _check_dynamic(lambda x: (x.sum(-1), x.sum(0), x.sum()), _one)


def _schedules(monkeypatch) -> list:
    """The stax.sched Schedules the backend makes (aot.py imports `schedule` at each compile)."""
    import stax.sched

    got = []
    original = stax.sched.schedule

    def spy(*args, **kwargs):
        got.append(original(*args, **kwargs))
        return got[-1]

    monkeypatch.setattr(stax.sched, "schedule", spy)
    return got


def _shape_of(sched) -> tuple:
    """A schedule without its sizes: kernels (kind, node type, nodes, outer depth) and fusion decisions."""
    return (tuple((k.kind, k.node_type, k.nodes, k.outer_depth) for k in sched.kernels),
            tuple((r.round, r.a, r.b, r.fused, r.reason) for r in sched.fusion_log))


def _same_schedule_as_static(monkeypatch, f, args):
    """A dynamic compile's schedule equals the static compile's at the same size, up to the sizes."""
    got = _schedules(monkeypatch)
    _run(f, [args], dynamic=True)
    torch._dynamo.reset()
    _run(f, [args], dynamic=False)
    dynamic, static = got
    assert dynamic.graph.size_vars and not static.graph.size_vars
    assert _shape_of(dynamic) == _shape_of(static)
    return dynamic


def test_softmax_same_kernels_as_static(monkeypatch):
    def f(x):
        return torch.softmax(x, -1)

    assert _check_dynamic(f, _one) == 1  # max, exp, sum, divide: one outer-loop fused kernel
    for k, shape in enumerate(SIZES):
        torch._dynamo.reset()
        monkeypatch.undo()
        sched = _same_schedule_as_static(monkeypatch, f, _one(shape, k))
        assert len(sched.kernels) == 1 and sched.fusion_log


def test_layer_norm_same_kernels_as_static(monkeypatch):
    w, b = torch.randn(48), torch.randn(48)

    def f(x):
        return F.layer_norm(x, (48,), w, b)

    def args(shape, k):
        return (_inputs((shape[0], shape[1] % 7 + 2, 48), k),)

    _check_dynamic(f, args)
    torch._dynamo.reset()
    sched = _same_schedule_as_static(monkeypatch, f, args(SIZES[1], 0))
    assert len(sched.kernels) == _kernels_per_graph(metrics.snapshot())[0]


def test_example_7_1_normalize_rows():
    """x / x.sum(-1, keepdim=True): positive inputs (a row sum near 0 makes the quotient ill-conditioned)."""
    def args(shape, k):
        return (_inputs(shape, k).abs() + 0.1,)

    assert _check_dynamic(lambda x: x / x.sum(-1, keepdim=True), args) == 1


def test_matmul_bias_gelu():
    lin = torch.nn.Linear(64, 32)

    def f(x):
        return F.gelu(lin(x))

    with torch.no_grad():
        _check_dynamic(f, lambda shape, k: (_inputs((shape[0], 64), k),))
    assert metrics.snapshot().extern_ops["addmm.default"] >= 1


def test_mlp_training_step():
    """Forward (compiled, symbolic batch), backward (compiled), SGD step: grads and params as eager's."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model.load_state_dict(ref.state_dict())
    compiled = torch.compile(model, backend="stax", dynamic=True)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for k, batch in enumerate([6, 17, 40]):
        x, y = _inputs((batch, 32), k), _inputs((batch, 8), k + 10)
        for fwd, o in ((ref, opt_ref), (compiled, opt)):
            o.zero_grad()
            loss = F.mse_loss(fwd(x), y)
            loss.backward()
            o.step()
        for p_ref, p in zip(ref.parameters(), model.parameters()):
            assert_same(p.grad, p_ref.grad)
            assert_same(p.detach(), p_ref.detach())
    m = metrics.snapshot()
    assert m.graphs_failed == 0
    assert m.graphs_compiled == 2  # one forward, one backward, for every batch size


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic"])
def test_bert_sequence_lengths(dynamic):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=256, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    compiled = torch.compile(model, backend="stax", dynamic=dynamic)
    with torch.no_grad(), config.patch(**UNPACKED):
        for k, seq in enumerate([16, 33, 64, 128]):
            ids = torch.randint(0, cfg.vocab_size, (2, seq), generator=torch.Generator().manual_seed(k))
            want = model(input_ids=ids)
            got = compiled(input_ids=ids)
            assert_same(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)
            assert_same(got.pooler_output, want.pooler_output, rtol=1e-4, atol=1e-4)
    m = metrics.snapshot()
    assert m.graphs_failed == 0
    assert m.graphs_compiled == (1 if dynamic else 2)
    if not dynamic:  # the static graph (length 16) and the symbolic one: the same kernels and library calls
        k_static, k_dynamic = _kernels_per_graph(m)
        assert k_static == k_dynamic
        assert m.extern_ops["addmm.default"] == 2 * 13 and m.fallback_calls == 0


def test_aten_fallback_with_symbolic_sizes():
    """An op Stax does not lower (sort: two outputs) runs as an ATen call whose sizes are bound per call,
    counted as a fallback as with static shapes; the kernels around it stay Stax's."""
    def f(x):
        values, indices = torch.sort(x * 2, dim=-1)
        return values + 1, indices

    _check_dynamic(f, _one)
    assert metrics.snapshot().fallback_ops["sort.default"] == 2  # the automatic-dynamic run: static + symbolic


def test_views_with_symbolic_products():
    """Flatten, split into heads and back, a slice to a symbolic end and a select: strides, not copies."""
    def f(x, y):
        b, s, _ = x.shape
        heads = x.view(b, s, 4, 8).transpose(1, 2)  # [b, 4, s, 8]
        flat = heads.reshape(b * 4, s, 8).sum(-1)
        return flat, x.flatten(0, 1) @ y, x[:, 1:].mean(1), x[:, 0] * 3

    def args(shape, k):
        return _inputs((shape[0], shape[1], 32), k), _inputs((32, 5), k + 1)

    _check_dynamic(f, args)


def test_pad_by_a_symbolic_amount():
    """On cuda the memory-efficient sdpa pads its bias to a multiple of 8 and slices it back: a pad of
    `8 - s % 8` columns. It failed the graph on cuda (a symbolic comparison in constant_pad), so dynamic
    GPT-2 ran eagerly there."""
    def f(x):
        n = x.shape[-1]
        bias = F.pad(x, (0, 8 - n % 8))[..., :n]  # the sdpa pattern
        return bias * 2 + F.pad(x, (n % 3, 1), value=-1.0)[..., 1:n + 1] + F.pad(x, (0, -(n % 2)))[..., :1]

    _check_dynamic(f, lambda shape, k: _one((3, shape[0], shape[1] + 1), k))


def test_a_library_call_sees_a_padded_view_as_eager_does():
    """cuda's memory-efficient sdpa needs its bias's row strides a multiple of 4 floats: torch pads the
    bias to a multiple of 8 columns and passes a view. Its traced strides (`Max(1, n - n % 8 + 8)` in
    torch's spelling) are the realized ones, so the call gets that view, not a dense copy (the dense
    copy made dynamic GPT-2 fail on cuda: "attn_bias is not correctly aligned")."""
    seen = []

    @torch.library.custom_op("stax_test::row_strides", mutates_args=())
    def row_strides(x: torch.Tensor) -> torch.Tensor:
        seen.append(x.stride())
        return x.sum(-1)

    row_strides.register_fake(lambda x: x.new_empty(x.shape[:-1]))

    def f(x):
        n = x.shape[-1]
        return row_strides(F.pad(x * 2, (0, 8 - n % 8))[..., :n])

    for n in (17, 30):
        x = _inputs((2, 3, n, n), n)
        ref = f(x)
        want = seen.pop()
        assert_same(torch.compile(f, backend="stax", dynamic=True)(x), ref)
        assert seen.pop() == want  # (2, 3, n, n) with rows of n - n % 8 + 8
    assert metrics.snapshot().graphs_failed == 0


def _capture_compiled(monkeypatch):
    """The CompiledGraph objects the backend returns to AOTAutograd."""
    from stax.frontend import aot

    got = []
    original = aot.compile_graph

    def spy(*args, **kwargs):
        got.append(original(*args, **kwargs))
        return got[-1]

    monkeypatch.setattr(aot, "compile_graph", spy)
    return got


def test_size_below_stax_assumption_runs_eagerly(monkeypatch):
    """Stax assumes every size symbol >= 2 (dynamo's ranges start there). A call that breaks it — only
    possible when something calls the compiled graph around dynamo's guards — runs eagerly, counted."""
    got = _capture_compiled(monkeypatch)
    f = torch.compile(lambda x: torch.softmax(x, -1) * 2, backend="stax", dynamic=True)
    f(_inputs((4, 16), 0))
    (graph,) = got
    x = _inputs((1, 16), 1)
    (out,) = graph([1, 16, x])
    assert_same(out, torch.softmax(x, -1) * 2)
    assert metrics.snapshot().calls_outside_assumptions == 1
    with pytest.raises(ValueError, match="has shape"):  # sizes that disagree with the tensors: a clear error
        graph([5, 16, _inputs((4, 16), 2)])


def test_group_norm_over_a_symbolic_channel_count(monkeypatch):
    """Group norm views C channels as (groups, C // groups): the guards make C a multiple of the groups,
    and Stax spells C as 2*q so that the view is provable (no ATen fallback), forward and backward, with
    one graph for every channel count. A call around dynamo's guards with C odd is outside what the
    graph assumes: it runs eagerly (counted), where the traced view raises as it would without Stax."""
    def f(x, w, b):
        return F.group_norm(x, 2, w, b).sin()

    def args(c, k):
        x, w, b = _inputs((3, c, 5), k), _inputs((c,), k + 1), _inputs((c,), k + 2)
        return x.requires_grad_(), w.requires_grad_(), b.requires_grad_()

    got = _capture_compiled(monkeypatch)
    compiled = torch.compile(f, backend="stax", dynamic=True)
    for k, c in enumerate((6, 8, 14)):
        xs, ref = args(c, k), args(c, k)
        out, want = compiled(*xs), f(*ref)
        assert_same(out, want)
        out.sum().backward()
        want.sum().backward()
        for a, r in zip(xs, ref):
            assert_same(a.grad, r.grad)
    m = metrics.snapshot()
    assert m.graphs_failed == 0 and m.fallback_calls == 0, dict(m.fallback_ops)
    assert m.graphs_compiled == 2  # forward and backward, once for all three channel counts
    x, w, b = (t.detach() for t in args(7, 9))
    with torch.no_grad(), pytest.raises(RuntimeError, match="invalid for input"):  # (the traced graph's own error)
        got[0]([3, 7, 5, x, w, b])
    assert metrics.snapshot().calls_outside_assumptions == 1


def test_unsupported_symbolic_graph_fails_loudly():
    """A size made by an irrational function of sizes (`int(math.sqrt(n))`: a `_sym_sqrt` node Stax does
    not lower): the graph runs eagerly, counted in graphs_failed, with a StaxEagerWarning (strict mode raises)."""
    from stax.frontend import StaxEagerWarning, config

    def f(x):
        return x.view(-1)[: int(math.sqrt(x.numel()))] * 2

    with config.patch(strict=False), pytest.warns(StaxEagerWarning, match="sqrt"):
        compiled = torch.compile(f, backend="stax", dynamic=True)
        for k, n in enumerate([6, 9]):
            x = _inputs((n, 3), k)
            assert_same(compiled(x), f(x))
    assert metrics.snapshot().graphs_failed >= 1


def test_sizes_from_float_arithmetic():
    """`int(n * 0.5)` and `math.ceil(n / 3)` (padding code) are exact integer quotients of sizes
    (FloorDiv / CeilDiv): one graph for every n, the slices to them are views, not fallbacks."""
    def f(x, y):
        half = x[: int(x.shape[0] * 0.5)] * 2
        blocks = (x * y)[: math.ceil(x.shape[0] / 3)]
        return half.sum(0), blocks.exp()

    def args(shape, k):
        return _inputs((shape[1], 4), k), _inputs((shape[1], 4), k + 1)

    _check_dynamic(f, args)
    assert metrics.snapshot().fallback_calls == 0


def test_int_arguments_are_symbols():
    """An int argument made dynamic (automatic dynamic after a second value, or dynamic=True) is a size
    symbol like a tensor's dim: one graph for its values >= 2 (Stax's minimum size), used as a multiplier
    and as a narrow length. Values the guards allow below that (1, 0, negative: dynamo's range for an int
    is [-oo, oo]) run that call eagerly, counted; a first example below it (dynamic=True) too."""
    def scale(x, n):
        return (x * n + x[:, :-1].sum(-1, keepdim=True)).relu()

    def narrow(x, n):
        return x.narrow(1, 0, n) * 2

    for fn, ns, outside in ((scale, (2, 3, 4, 1, 0, -3, 7), 3), (narrow, (2, 3, 5, 6), 0)):
        torch._dynamo.reset()
        metrics.reset()
        compiled = torch.compile(fn, backend="stax")
        for k, n in enumerate(ns):
            x = _inputs((4, 8), k)
            assert_same(compiled(x, n), fn(x, n))
        m = metrics.snapshot()
        assert m.graphs_compiled == 2 and m.graphs_failed == 0  # static n = 2, then one symbolic graph
        assert m.calls_outside_assumptions == outside
    torch._dynamo.reset()
    metrics.reset()
    compiled = torch.compile(scale, backend="stax", dynamic=True)
    for k, n in enumerate((1, 5, 9)):
        x = _inputs((4, 8), k)
        assert_same(compiled(x, n), scale(x, n))
    m = metrics.snapshot()
    assert (m.graphs_compiled, m.graphs_failed, m.calls_outside_assumptions) == (1, 0, 1)


def test_interpreter_runtime_binds_the_sizes():
    """config.runtime='interpret': the numpy interpreter runs the graph bound at each call's sizes."""
    from stax.frontend import config

    with config.patch(runtime="interpret"):
        _run(lambda x: torch.softmax(x, -1), [_one(s, k) for k, s in enumerate(SIZES)], dynamic=True)


def test_gpt2_sequence_lengths():
    """A decoder: causal mask built from aranges and a cat over symbolic lengths, position embeddings
    sliced to the sequence."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=512, n_positions=256, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    compiled = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad():
        for k, seq in enumerate([16, 33, 64]):
            ids = torch.randint(0, cfg.vocab_size, (2, seq), generator=torch.Generator().manual_seed(k))
            assert_same(compiled(input_ids=ids).logits, model(input_ids=ids).logits, rtol=1e-4, atol=1e-4)
    m = metrics.snapshot()
    assert m.graphs_failed == 0 and m.graphs_compiled == 1


def test_cnn_symbolic_batch_and_image():
    """Convolutions (channels-last, extern calls with symbolic sizes), batch norm, pooling."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 4, 3), torch.nn.AdaptiveAvgPool2d(1)).eval()
    with torch.no_grad():
        _check_dynamic(net, lambda shape, k: (_inputs((shape[0] % 5 + 2, 3, shape[1] % 20 + 8, 12), k),))


def test_bert_training_sequence_lengths():
    """Forward and backward graphs over a symbolic sequence length: the forward reports its outputs'
    real strides to AOTAutograd as SymInts (an expand saved for the backward is stored dense), so the
    backward is compiled for them; every parameter's gradient as eager's."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=256, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, attn_implementation="sdpa")
    torch.manual_seed(0)
    ref = transformers.BertModel(cfg, add_pooling_layer=False).train()  # (the pooler gets no gradient)
    model = transformers.BertModel(cfg, add_pooling_layer=False).train()
    model.load_state_dict(ref.state_dict())
    compiled = torch.compile(model, backend="stax", dynamic=True)
    for k, seq in enumerate([16, 33, 48]):
        ids = torch.randint(0, cfg.vocab_size, (2, seq), generator=torch.Generator().manual_seed(k))
        for m, fwd in ((ref, ref), (model, compiled)):
            m.zero_grad()
            fwd(input_ids=ids).last_hidden_state.square().mean().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-4, check_stride=False)
    m = metrics.snapshot()
    assert m.graphs_failed == 0 and m.graphs_compiled == 2


def test_sizes_the_guards_made_constant():
    """`view(60, 4)` makes dynamo's guards fix every size: the graph keeps its SymInt arguments (now
    constants, checked at each call) but has no size symbol, and compiles as a static graph."""
    x = _inputs((6, 10, 4), 0)

    def f(a):
        return (a * 2).view(60, 4), (a - 1).view(6, 5, 2, 4).sum(2)

    m = _run(f, [(x,)], dynamic=True)
    assert m.graphs_compiled == 1


def test_report_of_a_symbolic_graph(tmp_path):
    """The per-graph report of a symbolic graph: its IR with the size table, byte counts at the hints."""
    import glob

    from stax.frontend import config, report

    with config.patch(report=True, report_dir=str(tmp_path)):
        _run(lambda x: torch.cumsum(x, -1) * 2, [_one((8, 16), 0)], dynamic=True)
    (page,) = [p for p in glob.glob(str(tmp_path / "*.html")) if not p.endswith("index.html")]
    data = report.load(page)
    assert data["error"] is None
    assert "size s" in data["ir_before"] and data["memory"]["peak_bytes"] > 0


def test_sizes_a_guard_made_equal_broadcast():
    """A pooled tensor times one of its size, under automatic dynamic shapes: the ShapeEnv keeps
    `Eq((s0 - 1) // 2 + 1, s1)` and `Eq((s2 - 1) // 2 + 1, 8)` as guards without replacements (it solves
    no floor); Symbols spells each symbol (and expression) as what the guard equates it to, so the two
    shapes broadcast instead of failing the graph."""
    def f(x, g):
        return torch.nn.functional.max_pool2d(x, 3, 2, 1) * g

    calls = []
    for k, shape in enumerate(((2, 8, 16, 16), (2, 8, 15, 17), (2, 8, 16, 21))):
        x = _inputs(shape, k)
        calls.append((x, _inputs(torch.nn.functional.max_pool2d(x, 3, 2, 1).shape, 10 + k)))
    m = _run(f, calls, dynamic=None)
    assert m.graphs_compiled == 2  # the static first call, then one symbolic graph for the rest
