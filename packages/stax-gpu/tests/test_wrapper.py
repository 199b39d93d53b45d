"""The wrapper call(args): guards, the memory plan (alloc / reuse / free), extern
kernels, outputs; and the generated source as a golden text (Listing 8.1's shape)."""

import numpy as np
import pytest
import torch
from error_model import gamma
from gpu_testlib import DEVICE, config, f32, i0, i1, inp, lay, make_inputs, pw, r0, red, run
from stax.gpu import compile_schedule
from stax.gpu.testing import build_schedule
from stax.ir import ExternKernel, Graph, const, load, op
from stax.sched import GpuPolicy, Kernel, MemoryEvent, MemoryPlan, Schedule, SchedulerConfig, schedule


def two_kernel_graph(n=8, m=16):
    b0 = pw("buf0", (n, m), op("mul", load("x", m * i0 + i1, f32), const(2.0, f32)))
    b1 = red("buf1", (n,), (m,), "sum", load("buf0", m * i0 + r0, f32))
    b2 = pw("buf2", (n, m), op("sub", load("x", m * i0 + i1, f32), load("buf1", i0, f32)))
    return Graph((inp("x", (n, m)),), (b0, b1, b2), ("buf2",))


def test_wrapper_source_golden():
    g = two_kernel_graph()
    m = compile_schedule(build_schedule(g, [["buf0"], ["buf1"], ["buf2"]]), config=config())
    wrapper = m.source[m.source.index("def call(args):"):]
    assert wrapper == (
        "def call(args):\n"
        "    x, = args\n"
        "    args.clear()\n"
        "    check_inputs((x,), ('x',), ((8, 16),), ((16, 1),), (torch.float32,), DEVICE)\n"
        "    buf0 = empty_strided((8, 16), (16, 1), torch.float32, DEVICE)\n"
        "    launch_0(x, buf0)  # triton_poi_fused_0\n"
        "    buf1 = empty_strided((8,), (1,), torch.float32, DEVICE)\n"
        "    launch_1(buf0, buf1)  # triton_per_fused_1\n"
        "    del buf0\n"
        "    buf2 = empty_strided((8, 16), (16, 1), torch.float32, DEVICE)\n"
        "    launch_2(x, buf1, buf2)  # triton_poi_fused_2\n"
        "    del x\n"
        "    del buf1\n"
        "    return (buf2,)\n"
    )
    run(g, groups=[["buf0"], ["buf1"], ["buf2"]])


def test_guards_name_the_input_expected_and_actual():
    g = two_kernel_graph()
    m = compile_schedule(build_schedule(g), config=config())
    x = torch.zeros(8, 15, device=DEVICE)
    with pytest.raises(AssertionError, match=r"input x: expected size \(8, 16\), got \(8, 15\)"):
        m.call([x])
    with pytest.raises(AssertionError, match=r"input x: expected stride \(16, 1\), got \(1, 8\)"):
        m.call([torch.zeros(16, 8, device=DEVICE).t()])
    with pytest.raises(AssertionError, match="input x: expected dtype torch.float32, got torch.float64"):
        m.call([torch.zeros(8, 16, dtype=torch.float64, device=DEVICE)])


def test_size_one_dims_accept_any_stride():
    g = Graph((inp("x", (1, 6)),), (pw("buf0", (1, 6), op("neg", load("x", i1, f32))),), ("buf0",))
    m = compile_schedule(build_schedule(g), config=config())
    x = torch.arange(6.0, device=DEVICE).reshape(6, 1).t()  # stride (1, 1)
    assert torch.equal(m.call([x])[0].cpu(), -torch.arange(6.0).reshape(1, 6))


def test_reuse_reinterprets_a_dead_buffer():
    """buf2 takes buf0's storage (same size): `buf2 = reinterpret(buf0, ...)  # reuse`, buf0 deleted after."""
    g = two_kernel_graph()
    m = run(g, groups=[["buf0"], ["buf1"], ["buf2"]], reuse=True)
    assert "buf2 = reinterpret(buf0, (8, 16), (16, 1))  # reuse" in m.source
    assert "buf2 = empty_strided" not in m.source


def test_in_place_reuse_of_a_donated_input():
    """A kernel writing into the donated input it reads at the same index (§7.5 in place, an optimizer
    step's parameter): the input stays bound through that kernel (`del x` after it), and the output
    is the input's storage."""
    g = Graph((inp("x", (8, 16)),), (pw("buf0", (8, 16), op("mul", load("x", 16 * i0 + i1, f32), const(2.0, f32))),),
              ("buf0",))
    sched = schedule(g, GpuPolicy(SchedulerConfig(inplace_reuse=True, donated_inputs=(("x", "buf0"),))))
    m = compile_schedule(sched, config=config())
    src = m.source
    assert "buf0 = reinterpret(x, (8, 16), (16, 1))  # reuse" in src
    assert src.index("# reuse") < src.index("launch_0(x, buf0)") < src.index("del x")
    x = torch.randn(8, 16, device=DEVICE)
    ref = x * 2
    (out,) = m.call([x])
    assert out.data_ptr() == x.data_ptr() and torch.equal(out, ref)


def test_extern_kernel_with_constants_and_layout_fixup():
    """An ExternKernel calls extern_kernels[kernel](*inputs, **constants); a result with other
    strides is copied into the layout the graph declared."""
    n = 6
    mm = ExternKernel("buf0", lay((n, n)), "aten.mm_t", ("a", "b"), (("alpha", 2.0),))
    post = pw("buf1", (n, n), op("add", load("buf0", n * i0 + i1, f32), const(1.0, f32)))
    g = Graph((inp("a", (n, n)), inp("b", (n, n))), (mm, post), ("buf1", "buf0"))
    calls = []

    def mm_t(a, b, alpha):
        calls.append(alpha)
        return (alpha * (a @ b)).t().contiguous().t()  # column-major result

    def mm_t_bound(a, b, alpha):
        """alpha (a @ b) in float64 and the dot-product bound gamma_n |a| |b| (any order, FMA or not)."""
        (xa, ea), (xb, eb) = a, b
        err = abs(alpha) * (gamma(n, f32) * (abs(xa) @ abs(xb)) + ea @ abs(xb) + abs(xa) @ eb)
        return alpha * (xa @ xb), err

    m = run(g, groups=[["buf0"], ["buf1"]], extern={"aten.mm_t": mm_t}, tol=dict(rtol=1e-5, atol=1e-5),
            extern_bounds={"aten.mm_t": mm_t_bound})
    assert calls[:2] == [2.0, 2.0]  # once by stax-gpu, once by the reference (STAX_TEST_PERTURB: + the simulator)
    assert "extern_call(EXTERN_0, (a, b), CONSTANTS_0" in m.source


def test_an_extern_kernel_with_bind_is_bound_once_and_called_with_buffers_only():
    """`fn.bind(**constants)` (the extern protocol stax.cpu follows) is called once when the module is
    built; each call then passes only the buffers: no constants dict expanded, no plan looked up."""
    n = 4
    mm = ExternKernel("buf0", lay((n, n)), "aten.mm_s", ("a", "b"), (("alpha", 3.0),))
    post = pw("buf1", (n, n), op("add", load("buf0", n * i0 + i1, f32), const(1.0, f32)))
    g = Graph((inp("a", (n, n)), inp("b", (n, n))), (mm, post), ("buf1",))
    binds, calls = [], []

    def mm_s(a, b, alpha):
        return alpha * (a @ b)

    def bind(alpha):
        binds.append(alpha)
        return lambda a, b: calls.append(1) or mm_s(a, b, alpha)

    mm_s.bind = bind
    module = compile_schedule(build_schedule(g, [["buf0"], ["buf1"]]), extern_kernels={"aten.mm_s": mm_s},
                              config=config())
    a, b = (torch.randn(n, n, device=DEVICE) for _ in range(2))
    for _ in range(3):
        (got,) = module.call([a, b])
        torch.testing.assert_close(got, 3.0 * (a @ b) + 1, rtol=1e-5, atol=1e-5)
    assert binds == [3.0] and len(calls) == 3


def test_missing_extern_kernel_is_a_compile_error():
    g = Graph((inp("a", (2, 2)),), (ExternKernel("buf0", lay((2, 2)), "aten.foo", ("a",)),), ("buf0",))
    with pytest.raises(KeyError, match="aten.foo"):
        compile_schedule(build_schedule(g, [["buf0"]]), config=config())


def test_graph_input_returned_as_output_and_multiple_outputs():
    g = Graph((inp("x", (5,)),), (pw("buf0", (5,), op("neg", load("x", i0, f32))),), ("buf0", "x", "buf0"))
    m = compile_schedule(build_schedule(g), config=config())
    x = torch.arange(5.0, device=DEVICE)
    out = m.call([x])
    assert out[1] is x and out[0] is out[2]
    assert torch.equal(out[0].cpu(), -torch.arange(5.0))


def test_hand_built_schedule_without_alloc_events_still_allocates():
    """A plan that forgot an alloc: the wrapper allocates before the kernel writes."""
    g = Graph((inp("x", (4,)),), (pw("buf0", (4,), op("neg", load("x", i0, f32))),), ("buf0",))
    sched = Schedule(g, (Kernel("k0", "pointwise", ("buf0",), ((4,), ())),), MemoryPlan((MemoryEvent(0, "free", "x"),)))
    m = compile_schedule(sched, config=config())
    flats, tensors = make_inputs(g)
    np.testing.assert_array_equal(m.call(tensors)[0].cpu().numpy(), -flats["x"])


def test_allocator_for_cpu_uses_the_fast_path_and_keeps_the_layout():
    import torch
    from stax.gpu.runtime import allocator_for, empty_strided

    alloc = allocator_for(torch.device("cpu"))
    assert alloc is not empty_strided  # torch's C++ _empty_strided_cpu, as Inductor's wrappers
    t = alloc((3, 4), (1, 3), torch.float16, torch.device("cpu"))
    assert (tuple(t.shape), t.stride(), t.dtype, t.device.type) == ((3, 4), (1, 3), torch.float16, "cpu")
    if not torch.cuda.is_available():  # no device to place it on: the generic path
        assert allocator_for(torch.device("cuda")) is empty_strided
