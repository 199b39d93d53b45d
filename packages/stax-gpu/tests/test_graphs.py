"""CUDA graph replay (graphs.py): when a graph may replay, and that no output anyone holds
is ever overwritten. On CPU, HostGraphs stands in for CUDA graphs (its capture leaves NaN
in the outputs and keeps their memory, not the tensors; its replay re-reads the inputs);
on cuda a real module replays real graphs."""

import time

import numpy as np
import pytest
import torch
from gpu_testlib import ON_CUDA, config, f32, i0, i1, inp, make_inputs, pw, r0, red
from stax.gpu import compile_schedule
from stax.gpu.compile import why_not_graphed
from stax.gpu.graphs import GraphedCall
from stax.gpu.host_graphs import HostGraphs
from stax.gpu.plan import EXTERN_FORM
from stax.gpu.testing import build_schedule
from stax.ir import Graph, interpret, load, op, outputs


def two_outputs(args):
    x, w = args
    args.clear()
    return (x * 2 + w, (x - w).sum(1))


def reference(x, w):
    return (x * 2 + w, (x - w).sum(1))


def same(got, ref) -> bool:
    return all(torch.equal(g, r) for g, r in zip(got, ref))


@pytest.fixture
def xw():
    torch.manual_seed(0)
    return torch.randn(4, 8), torch.randn(4, 8)


def test_replays_after_one_plain_call_and_reads_what_the_inputs_hold_now(xw):
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs())
    for k in range(5):
        x.copy_(torch.randn(4, 8))
        args = [x, w]
        got = g(args)
        assert args == []
        assert same(got, reference(x, w)), k
        del got
    assert g.stats == {"plain": 1, "captures": 1, "replays": 3}


@pytest.mark.parametrize("gpu_time_scale, captures", [(1.0, 1), (10.0, 0)])
def test_a_timed_plain_call_decides_whether_to_capture(xw, gpu_time_scale, captures):
    """Under PDL (gpu_bound_ratio > 0) the calls after the warm-up are timed: a key whose GPU
    time is >= 2x its host time stays on plain launches, any other is captured next call."""
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(gpu_time_scale=gpu_time_scale), gpu_bound_ratio=2.0)
    for k in range(8):
        x.copy_(torch.randn(4, 8))
        got = g([x, w])
        assert same(got, reference(x, w)), k
        del got
    assert g.stats["captures"] == captures
    assert g.stats["replays"] == (3 if captures else 0)  # warm-up, 3 timed calls, capture, then replays
    assert bool(g.gpu_bound) == (not captures)
    y = x.clone()  # another key is timed afresh
    assert same(g([y, w]), reference(y, w)) and same(g([y, w]), reference(y, w))
    assert len(g.probes) == 1


class _FixedGpuTime(HostGraphs):
    """Every timed call took `gpu` seconds on the 'GPU', whatever the host did."""

    def __init__(self, gpu: float):
        super().__init__()
        self.gpu = gpu

    def seconds(self, start, end) -> float:
        return self.gpu


def test_one_slow_host_call_does_not_decide(xw):
    """A GPU-bound key whose first timed call the host slowed (a page fault, a collector
    pause) still stays on plain launches: the least host time of the timed calls decides."""
    x, w = xw
    slow = [0.2]  # the first timed call sleeps 200 ms: 10 x the GPU time

    def call(args):
        time.sleep(slow.pop() if slow and g.probes else 0.0)
        return two_outputs(args)

    # 20 ms of 'GPU' time: the other calls' host time (~0.1 ms) stays under half of it even on
    # a host busy with parallel test workers (2 ms failed once under pytest -n 8)
    g = GraphedCall(call, "t", backend=_FixedGpuTime(gpu=0.02), gpu_bound_ratio=2.0)
    for k in range(6):
        assert same(g([x, w]), reference(x, w)), k
    assert not slow, "the slow call ran"
    assert g.stats["captures"] == 0 and g.gpu_bound


def test_outputs_someone_holds_are_never_overwritten(xw):
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), instances=2)
    kept = []
    for _ in range(5):
        x.copy_(torch.randn(4, 8))
        kept.append((g([x, w]), reference(x, w)))
    assert all(same(got, ref) for got, ref in kept)
    assert g.stats == {"plain": 3, "captures": 2, "replays": 0}  # warm-up, A, B, then both busy


@pytest.mark.parametrize("hold", ["view", "detach", "tensor", "second output"])
def test_any_alias_of_an_output_keeps_its_instance_busy(xw, hold):
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), instances=1)
    g([x, w])  # warm-up
    got = g([x, w])  # captured
    held = {"view": lambda o: o[0][1:], "detach": lambda o: o[0].detach(), "tensor": lambda o: o[0],
            "second output": lambda o: o[1]}[hold](got)
    before = held.clone()
    del got
    x.add_(1)
    got = g([x, w])
    assert same(got, reference(x, w))
    assert torch.equal(held, before)
    assert g.stats["replays"] == 0
    del got, held
    assert same(g([x, w]), reference(x, w))
    assert g.stats["replays"] == 1


class _Keep(torch.autograd.Function):
    """Saves its second argument for backward, as an autograd graph does with activations."""

    @staticmethod
    def forward(ctx, a, kept):
        ctx.save_for_backward(kept)
        return a.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def test_outputs_saved_for_backward_keep_their_instance_busy(xw):
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), instances=1)
    g([x, w])  # warm-up
    got = g([x, w])  # captured
    expect = got[0].clone()
    y = _Keep.apply(torch.ones(1, requires_grad=True), got[0])
    del got  # only autograd holds the output now
    x.add_(1)
    assert same(g([x, w]), reference(x, w))
    assert g.stats["replays"] == 0
    assert torch.equal(y.grad_fn.saved_tensors[0], expect)
    del y
    assert same(g([x, w]), reference(x, w))
    assert g.stats["replays"] == 1


def test_new_addresses_run_plainly_and_keys_are_bounded(xw):
    """(stage_bytes=0: these small inputs would be copied into staged buffers otherwise, next test)"""
    _, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), keys=2, stage_bytes=0)
    fresh = [torch.randn(4, 8) for _ in range(4)]  # all alive: four distinct addresses
    for x in fresh:
        assert same(g([x, w]), reference(x, w))
    assert g.stats == {"plain": 4, "captures": 0, "replays": 0}
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), keys=2, stage_bytes=0)
    xs = [torch.randn(4, 8) for _ in range(3)]
    for _ in range(3):
        for x in xs:
            assert same(g([x, w]), reference(x, w))
    # round 1 warms up; round 2 captures all three (the third evicts the first key);
    # round 3 warms the first up again and replays the other two
    assert len(g.entries) == 2
    assert g.stats == {"plain": 4, "captures": 3, "replays": 2}


def test_small_inputs_that_move_each_call_are_staged(xw, caplog):
    """A backward's loss gradient is fresh each step: a small input whose address changes is copied into
    a buffer of the graph's own, keyed without it, so the graph replays; a larger one keeps the key."""
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), stage_bytes=w.nbytes)
    with caplog.at_level("INFO", "stax.gpu"):
        for k in range(5):
            w_k = torch.randn(4, 8)  # fresh each call, kept alive: a new address every time
            got = g([x, w_k])
            assert same(got, reference(x, w_k)), k
            del got
            kept = w_k  # noqa: F841 - (the next w_k cannot take this address)
    assert g.staged == {1} and "inputs [1] move each call (128 bytes)" in caplog.text
    # call 1 plain; call 2 learns the staging and warms the new key up; 3 captures; 4-5 replay
    assert g.stats == {"plain": 2, "captures": 1, "replays": 2}
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), stage_bytes=w.nbytes - 1)
    ws = [torch.randn(4, 8) for _ in range(5)]
    for w_k in ws:
        assert same(g([x, w_k]), reference(x, w_k))
    assert not g.staged and g.stats == {"plain": 5, "captures": 0, "replays": 0}


def test_inputs_at_new_addresses_most_calls_turn_graphs_off(xw):
    """Each new address costs a capture; a module whose captures are not repaid by replays (fewer
    than REPLAYS_PER_CAPTURE each, once it has captured 4 x its keys) runs plainly from then on."""
    from stax.gpu.graphs import REPLAYS_PER_CAPTURE

    x, _ = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), keys=1, stage_bytes=0)
    ws = [torch.randn(4, 8) for _ in range(6)]
    for w in ws:  # each address twice: a warm-up, then a capture
        for _ in range(2):
            assert same(g([x, w]), reference(x, w))
    assert g.stats["captures"] == 4 and g.stats["replays"] == 0
    assert g.disabled == "input addresses keep changing (4 captures, 0 replays)"
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(), keys=1, stage_bytes=0)
    for w in ws:  # each address repaid: its capture replays REPLAYS_PER_CAPTURE times
        for _ in range(2 + REPLAYS_PER_CAPTURE):
            assert same(g([x, w]), reference(x, w))
    assert not g.disabled and g.stats["captures"] == 6


def test_an_output_written_into_a_staged_input_turns_graphs_off(xw):
    """A staged input's graph reads a copy: an output written into it would not be the caller's tensor."""
    x, _ = xw
    g = GraphedCall(in_place, "t", backend=HostGraphs())
    expect = x.clone()
    for _ in range(4):
        w = torch.randn(4, 8)
        x_k = x.clone()  # a fresh x each call: staged, and the step is written into it
        got = g([x_k, w])
        assert torch.equal(got[1], x_k + 0) and torch.equal(x_k, expect + w)
        assert got[1].data_ptr() == x_k.data_ptr()
        held = (x_k, w)  # noqa: F841
    assert g.disabled == "an output is written into a staged input (a copy of the caller's)"


def test_another_layout_at_the_same_address_runs_plainly():
    def double(args):
        (x,) = args
        args.clear()
        return (x * 2,)

    x = torch.randn(32)
    g = GraphedCall(double, "t", backend=HostGraphs())
    for _ in range(3):
        g([x.view(4, 8)])
    got = g([x.view(8, 4)])
    assert got[0].shape == (8, 4) and torch.equal(got[0], x.view(8, 4) * 2)
    assert g.stats == {"plain": 2, "captures": 1, "replays": 1}


def test_sizes_are_part_of_the_key():
    """A symbolic-shape module's call takes its sizes too: a graph captured at one sizes tuple never
    replays for another at the same input addresses."""
    def scaled(args, sizes):
        (x,) = args
        args.clear()
        return (x * sizes[0],)

    x = torch.randn(4, 8)
    g = GraphedCall(scaled, "t", backend=HostGraphs())
    for s in (2, 2, 2, 3, 3, 3, 2):
        got = g([x], (s,))
        assert torch.equal(got[0], x * s), s
        del got
    assert g.stats == {"plain": 2, "captures": 2, "replays": 3}


def test_a_symbolic_module_is_graphed_per_sizes(monkeypatch):
    """A generated symbolic-shape module is graphed (dynamic-shape inference replays CUDA graphs): each
    sizes tuple warms up, captures, then replays, and every call matches the interpreter at its sizes."""
    import stax.gpu.graphs
    from stax.ir import bind_graph
    from test_symbolic import pointwise_graph, sized

    on = "cuda" if ON_CUDA else "cpu"
    monkeypatch.setattr(stax.gpu.graphs, "BACKEND", HostGraphs(device_type=on))
    g = sized(pointwise_graph())
    m = compile_schedule(build_schedule(g), config=config())
    assert isinstance(m.call, GraphedCall)
    for values in ((8, 16), (3, 5)):
        bound = bind_graph(g, dict(zip(("s0", "s1"), values)))
        flats, tensors = make_inputs(bound, seed=1)
        ref = outputs(bound, interpret(bound, flats))
        for _ in range(3):
            got = m.call(list(tensors), values)
            np.testing.assert_allclose(got[0].cpu().numpy(), ref[0], rtol=1e-5, atol=1e-6)
            del got
    assert m.call.stats == {"plain": 2, "captures": 2, "replays": 2}


def in_place(args):
    """An optimizer step's shape: the new x written into x's memory (a donated input), and a graph-owned output."""
    x, w = args
    args.clear()
    return (w * 3, x.add_(w), x.view(-1)[4:12].view(2, 4))


def test_an_output_in_an_input_s_memory_is_replayed_as_a_view_of_that_input(xw):
    x, w = xw
    g = GraphedCall(in_place, "t", backend=HostGraphs())
    expect = x.clone()
    held = []
    for k in range(5):
        expect += w
        got = g([x, w])
        assert torch.equal(got[0], w * 3) and torch.equal(got[1], expect), k
        assert got[1].data_ptr() == x.data_ptr() and got[2].data_ptr() == x.data_ptr() + 4 * x.element_size()
        assert torch.equal(got[2], expect.view(-1)[4:12].view(2, 4))
        held.append(got[1])  # holding the views of x keeps no instance busy: they are not the graph's memory
        del got
    assert g.disabled == ""
    assert g.stats == {"plain": 1, "captures": 1, "replays": 3}


def test_an_output_outside_its_input_s_extent_turns_graphs_off(xw):
    """The key holds an input's address and layout, not its storage's: an output in the input's storage
    but outside its view could be another tensor's memory at a later call with the same address."""
    def before_the_input(args):
        x, w = args
        args.clear()
        base = torch.empty(0).set_(x.untyped_storage(), 0, (8,), (1,))
        return (base.add_(w[0]),)

    x, w = xw
    g = GraphedCall(before_the_input, "t", backend=HostGraphs())
    ref = x.clone()
    for _ in range(3):
        ref[0] += w[0]
        assert torch.equal(g([x[1:], w])[0], ref[0])
    assert g.disabled == "output 0 reaches outside input 0, whose memory it shares"


def test_an_input_on_the_host_turns_graphs_off(xw):
    """A host tensor among a module's inputs (cuda attention's philox seed, a CPU scalar) is read
    by the host at launch: a replay would reuse its first value, so the module is never captured."""
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(device_type="meta"))  # every CPU tensor is "on the host"
    for _ in range(3):
        x.copy_(torch.randn(4, 8))
        assert same(g([x, w]), reference(x, w))
    assert g.disabled == "inputs [0, 1] are on the host (a graph would keep their first values)"
    assert g.stats == {"plain": 3, "captures": 0, "replays": 0}


def test_a_failed_capture_turns_graphs_off_and_the_call_still_runs(xw):
    x, w = xw
    g = GraphedCall(two_outputs, "t", backend=HostGraphs(fail="operation not permitted when stream is capturing"))
    for _ in range(3):
        assert same(g([x, w]), reference(x, w))
    assert g.disabled.startswith("capture failed (RuntimeError: operation not permitted")
    assert g.stats == {"plain": 3, "captures": 0, "replays": 0}


def test_inside_a_user_s_capture_the_call_runs_plainly(xw):
    x, w = xw
    backend = HostGraphs()
    backend.in_capture = True
    g = GraphedCall(two_outputs, "t", backend=backend)
    for _ in range(3):
        assert same(g([x, w]), reference(x, w))
    assert g.stats == {"plain": 3, "captures": 0, "replays": 0}


class Flag:
    """The ErrorFlag protocol: begin() raises what an earlier call flagged, once."""

    def __init__(self):
        self.code = 0

    def begin(self):
        if self.code:
            self.code = 0
            raise IndexError("stax-gpu: index out of bounds (in an earlier call)")


def test_flagged_errors_are_raised_before_capture_and_before_replay(xw):
    x, w = xw
    flag = Flag()
    g = GraphedCall(two_outputs, "t", errors=flag, backend=HostGraphs())
    g([x, w])
    flag.code = 1  # the warm-up call's kernels flagged an error
    with pytest.raises(IndexError, match="earlier call"):
        g([x, w])  # would capture: raises first, like a plain call
    g([x, w])  # captures
    flag.code = 1
    with pytest.raises(IndexError, match="earlier call"):
        g([x, w])  # would replay
    assert same(g([x, w]), reference(x, w))
    assert g.stats["captures"] == 1 and g.stats["replays"] == 1


@pytest.mark.skipif(ON_CUDA, reason="the interpreter's flag: on cuda test_cuda runs models with integer gathers")
def test_a_synchronously_flagged_module_is_graphed_and_raises_after_a_replay(monkeypatch):
    """An integer gather's bounds check cannot poison its lanes, so its module reads the error flag
    at the end of each call (a host sync). Graphed, the capture holds that read and GraphedCall
    reads the flag after each replay: in-range calls replay, an out-of-range index raises in the
    call that read it, and the module replays again afterwards."""
    import stax.gpu.graphs
    from stax.gpu.compile import generated_module
    from test_indirect import compile_embedding

    monkeypatch.setattr(stax.gpu.graphs, "BACKEND", HostGraphs())
    m = compile_embedding(torch_i64())
    assert generated_module(m).ERRORS.sync and isinstance(m.call, GraphedCall)
    table = torch.arange(40, dtype=torch.int64).reshape(10, 4)
    idx = torch.tensor([0, 3, 9, 4, 2, 1, 0])
    for _ in range(3):
        assert torch.equal(m.call([table, idx])[0], table[idx])
    idx[3] = 10
    with pytest.raises(IndexError, match="out of bounds reading table"):
        m.call([table, idx])
    idx[3] = 5
    assert torch.equal(m.call([table, idx])[0], table[idx])
    assert m.call.stats == {"plain": 1, "captures": 1, "replays": 3}


@pytest.mark.skipif(not ON_CUDA, reason="a real CUDA graph capture")
def test_a_failed_capture_leaves_eager_random_ops_working():
    """A host read inside the capture (an .item()) makes the capture fail: the call runs plainly,
    graphs go off for the module, and eager random ops still work afterwards (a failed capture
    left torch's generator 'capturing': "Offset increment outside graph capture")."""
    x = torch.randn(4, 8, device="cuda")

    def reads_host(args):
        (a,) = args
        args.clear()
        return (a * float(a.sum().item()),)

    g = GraphedCall(reads_host, "t")
    for _ in range(3):
        torch.testing.assert_close(g([x])[0], x * float(x.sum()))
    assert g.disabled.startswith("capture failed")
    torch.randn(3, device="cuda")
    torch.nn.functional.dropout(x, 0.5, training=True)


def torch_i64():
    from stax.ir import dtypes as dt

    return dt.int64


def wrapper_graph(n=8, m=16):
    b0 = pw("buf0", (n, m), op("mul", load("x", m * i0 + i1, f32), load("x", m * i0 + i1, f32)))
    b1 = red("buf1", (n,), (m,), "sum", load("buf0", m * i0 + r0, f32))
    b2 = pw("buf2", (n, m), op("sub", load("x", m * i0 + i1, f32), load("buf1", i0, f32)))
    return Graph((inp("x", (n, m)),), (b0, b1, b2), ("buf1", "buf2"))


def run_repeatedly(graph, call, calls=5, keep=False):
    """Call with one input tensor whose contents change; every result against the interpreter."""
    flats, (x,) = make_inputs(graph)
    results = []
    for k in range(calls):
        a = np.random.default_rng(k).standard_normal((8, 16)).astype(np.float32)
        x.copy_(torch.from_numpy(a))
        got = call([x])
        ref = outputs(graph, interpret(graph, {"x": a.reshape(-1)}, {}))
        results.append((got, ref) if keep else ([t.cpu().numpy().copy() for t in got], ref))
        del got
    for got, ref in results:
        for g, r in zip(got, ref):
            np.testing.assert_allclose(np.asarray(g.cpu() if keep else g), r, rtol=2e-5, atol=1e-5)


def test_a_generated_module_under_host_graphs():
    g = wrapper_graph()
    m = compile_schedule(build_schedule(g, [["buf0"], ["buf1"], ["buf2"]]), config=config())
    on = "cuda" if ON_CUDA else "cpu"  # where the stand-in takes inputs to live
    call = GraphedCall(m.call, "t", backend=HostGraphs(device_type=on))
    run_repeatedly(g, call)
    assert call.stats == {"plain": 1, "captures": 1, "replays": 3}
    call = GraphedCall(m.call, "t", backend=HostGraphs(device_type=on))
    run_repeatedly(g, call, keep=True)


class _Plan:
    def __init__(self, form, fallback=False):
        self.form = form
        self.extern = type("Extern", (), {"fallback": fallback})()


def test_which_modules_are_graphed():
    cuda = config(interpret=False, device="cuda")
    assert why_not_graphed(cuda, [_Plan("pointwise")]) is None
    assert why_not_graphed(cuda, [_Plan(EXTERN_FORM)]) is None  # a library call (mm, conv) is captured
    assert why_not_graphed(cuda, [_Plan(EXTERN_FORM, fallback=True)]) == (
        "it calls fallback ATen ops (any of which may synchronize)")
    assert why_not_graphed(cuda.with_(cuda_graphs=False), []) == "off"
    assert why_not_graphed(config(interpret=True, device="cpu"), []) == "not a cuda module"
    assert why_not_graphed(cuda, [], 3 * 2**30) == "it allocates 3072 MiB per call (cuda_graph_max_bytes 1024 MiB)"


def test_modules_that_allocate_much_are_not_graphed(monkeypatch):
    """wrapper_graph allocates 3 buffers (8x16, 8, 8x16 float32: 1056 bytes) per call."""
    import stax.gpu.graphs

    monkeypatch.setattr(stax.gpu.graphs, "BACKEND", HostGraphs())
    sched = build_schedule(wrapper_graph(), [["buf0"], ["buf1"], ["buf2"]])
    assert isinstance(compile_schedule(sched, config=config(cuda_graph_max_bytes=1056)).call, GraphedCall)
    assert not isinstance(compile_schedule(sched, config=config(cuda_graph_max_bytes=1055)).call, GraphedCall)


@pytest.mark.skipif(not ON_CUDA, reason="CUDA graphs need a GPU")
def test_cuda_module_replays_graphs_and_keeps_held_outputs():
    g = wrapper_graph()
    m = compile_schedule(build_schedule(g, [["buf0"], ["buf1"], ["buf2"]]), config=config())
    assert isinstance(m.call, GraphedCall), "cuda modules without externs are graphed"
    run_repeatedly(g, m.call, calls=8)  # warm-up, 3 timed calls (pdl: GPU-bound?), capture, 3 replays
    assert m.call.stats["replays"] >= 3
    run_repeatedly(g, m.call, keep=True)


@pytest.mark.skipif(not ON_CUDA, reason="needs a GPU")
def test_cuda_timed_call_brackets_its_kernels():
    """Under PDL (GpuConfig.pdl, sm90) the calls after the warm-up are timed between two events
    on the stream: the GPU time it reports covers the kernel (2^26 floats in and out: at least
    512 MB / 5 TB/s), whatever else the host or GPU are doing. What is decided from it is
    tested on CPU (test_a_timed_plain_call_decides_whether_to_capture)."""
    from stax.gpu.graphs import CudaGraphs

    n, m = 1 << 14, 1 << 12
    g = Graph((inp("x", (n, m)),),
              (pw("buf0", (n, m), op("mul", load("x", m * i0 + i1, f32), load("x", m * i0 + i1, f32))),),
              ("buf0",))
    mod = compile_schedule(build_schedule(g, [["buf0"]]), config=config(pdl=True))
    assert isinstance(mod.call, GraphedCall) and mod.call.gpu_bound_ratio > 0, "with pdl, cuda modules time a call"
    x = torch.randn(n, m, device="cuda")
    for _ in range(2):
        (y,) = mod.call([x])
        torch.testing.assert_close(y, x * x, rtol=0, atol=0)
        del y
    (((start, end, host),),) = mod.call.probes.values()  # the first of the key's timed calls
    assert CudaGraphs.seconds(start, end) >= 2 * n * m * 4 / 5e12 and host > 0
    for _ in range(3):  # then graphed or not, by what the timing said: results stay right
        (y,) = mod.call([x])
        torch.testing.assert_close(y, x * x, rtol=0, atol=0)
        del y



# Shared pools (graph_pools.py): instance k of every module captures into pool k; an instance
# replays only while every instance captured after it into its pool is idle.


def _shared(call, registry, **kw):
    return GraphedCall(call, "t", backend=kw.pop("backend"), pools=registry, **kw)


def _plus_one(args):
    (y,) = args
    args.clear()
    return (y + 1, y * 3)


def test_a_later_member_s_held_outputs_block_earlier_replays(xw):
    from stax.gpu.graph_pools import PoolRegistry

    x, w = xw
    backend, registry = HostGraphs(), PoolRegistry()
    a = _shared(two_outputs, registry, backend=backend)
    b = _shared(_plus_one, registry, backend=backend)
    y = torch.randn(4, 8)
    for _ in range(2):  # warm-up, then both captured into pool 0, a first
        del_a = a([x, w])
        del_b = b([y])
        del del_a, del_b
    assert a.stats["captures"] == 1 and b.stats["captures"] == 1
    held = b([y])  # replayed: b's outputs are held now
    before = [h.clone() for h in held]
    x.add_(1)
    got = a([x, w])  # a's instance 0 may write over b's outputs: another instance (pool 1) instead
    assert same(got, reference(x, w))
    assert a.stats["replays"] == 0 and a.stats["captures"] == 2
    assert all(torch.equal(h, e) for h, e in zip(held, before))
    del got, held
    x.add_(1)
    assert same(a([x, w]), reference(x, w))
    assert a.stats["replays"] == 1  # b idle again: instance 0 replays
    assert [len(p.members) for _, p in sorted(registry.pools.items(), key=lambda kv: kv[0][2])] == [2, 1]


def test_a_pool_whose_graphs_are_all_gone_is_replaced(xw):
    """CUDA's allocator counts the graphs captured into a pool and refuses a capture into one whose
    count fell to 0 ("it->second->use_count > 0", the H100's dynamic BERT once a module learned to
    stage its token ids and dropped its graphs): the registry gives that slot a fresh pool."""
    from stax.gpu.graph_pools import PoolRegistry

    x, _ = xw
    backend, registry = HostGraphs(), PoolRegistry()
    a = _shared(two_outputs, registry, backend=backend)
    ws = [torch.randn(4, 8) for _ in range(4)]
    kept = [a([x, ws[0]]), a([x, ws[0]])]  # warm-up, capture into pool 0; its outputs held
    first = registry.pools[(backend, "cpu", 0)]
    for w in ws[1:]:  # w moves: staged, the old key's graph dropped; a warm-up, a capture, a replay
        got = a([x, w])
        assert same(got, reference(x, w))
        del got
    assert a.staged == {1} and not a.disabled, a.disabled
    assert a.stats["captures"] == 2 and a.stats["replays"] == 1
    assert registry.pools[(backend, "cpu", 0)] is not first
    assert all(same(got, reference(x, ws[0])) for got in kept)


def test_a_dropped_member_is_minded_until_its_outputs_are_idle(xw):
    from stax.gpu.graph_pools import PoolRegistry

    x, w = xw
    backend, registry = HostGraphs(), PoolRegistry()
    a = _shared(two_outputs, registry, backend=backend, instances=1)
    b = _shared(_plus_one, registry, backend=backend)
    y = torch.randn(4, 8)
    for _ in range(2):
        del_a = a([x, w])
        del del_a
        del_b = b([y])
        del del_b
    held = b([y])
    (pool,) = registry.pools.values()
    member = pool.members[-1]
    del b  # the module is freed, and its graph with it (the pool holds no instance); its outputs are not
    assert member.inst() is None
    got = a([x, w])
    assert a.stats["replays"] == 0 and a.stats["plain"] == 2  # one instance allowed: a plain call
    assert same(got, reference(x, w))
    del got, held
    assert same(a([x, w]), reference(x, w))
    assert a.stats["replays"] == 1
    pool.sweep()
    assert len(pool.members) == 1  # b's outputs are gone: it left the pool


def _loss_and_saved(args):
    x, w = args
    args.clear()
    return ((x * w).sum(), x * w)


def test_a_held_one_element_output_is_a_copy_and_blocks_nothing(xw):
    from stax.gpu.graph_pools import PoolRegistry

    x, w = xw
    g = _shared(_loss_and_saved, PoolRegistry(), backend=HostGraphs(), instances=1)
    g([x, w])
    losses = []
    for _ in range(4):
        x.add_(1)
        loss, saved = g([x, w])
        losses.append((loss, (x * w).sum().clone()))  # a training loop keeps the loss
        torch.testing.assert_close(saved, x * w, rtol=0, atol=0)
        del saved
    assert g.stats == {"plain": 1, "captures": 1, "replays": 3}
    for got, want in losses:
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.skipif(not ON_CUDA, reason="CUDA graphs need a GPU")
def test_cuda_shared_pool_never_overwrites_a_later_graph_s_held_outputs():
    """a's intermediate and b's output share blocks of pool 0 (asserted: the test can fail): a's
    replay would write b's held output, so a captures another instance instead."""
    from stax.gpu.graph_pools import PoolRegistry
    from stax.gpu.graphs import CudaGraphs

    n = 1 << 20
    where = {}

    def call_a(args):
        (x,) = args
        args.clear()
        t = x * 2  # freed at the end of the capture: its blocks go back to the pool
        where["t"] = (t.data_ptr(), t.data_ptr() + t.numel() * 4)  # the last Python run: the capture
        return (t.sum().reshape(1).expand(2).contiguous(),)

    def call_b(args):
        (x,) = args
        args.clear()
        out = x + 1
        where["b"] = out.data_ptr()
        return (out,)

    registry = PoolRegistry()
    a = GraphedCall(call_a, "a", backend=CudaGraphs, pools=registry)
    b = GraphedCall(call_b, "b", backend=CudaGraphs, pools=registry)
    x = torch.randn(n, device="cuda")
    for _ in range(2):
        del_a = a([x])
        del del_a
    ya = a([x])
    del ya
    for _ in range(2):
        hb = b([x])
        del hb
    assert a.stats["captures"] == 1 and b.stats["captures"] == 1
    lo, hi = where["t"]
    assert lo <= where["b"] < hi, "b's output reuses a's freed intermediate (the case under test)"
    (held,) = b([x])  # replayed: b's output at its captured address
    assert held.data_ptr() == where["b"]
    expect = x + 1
    x2 = x  # same address: a's instance 0 would replay and write x * 2 over `held`
    (got,) = a([x2])
    torch.cuda.synchronize()
    torch.testing.assert_close(held, expect, rtol=0, atol=0)
    torch.testing.assert_close(got, (x * 2).sum().expand(2), rtol=1e-5, atol=1e-2)
    assert a.stats["captures"] == 2
