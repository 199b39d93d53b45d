"""The per-call launch path: input guards and the direct (compiled-kernel) launch.

DirectLaunch needs a CompiledKernel, which only exists on a GPU; here its launcher,
device and stream queries are injected fakes, so the argument order it hands the
launcher and every fallback to the JIT path are checked on CPU."""

import pytest
import torch
from stax.gpu.runtime import DirectLaunch, KernelLauncher, check_inputs


class FakeKernel:
    function = "fn-handle"
    packed_metadata = "meta"

    def __init__(self):
        self.launches = []

    def run(self, *a):
        self.launches.append(a)


class FakeHooks:
    def __init__(self, enter=None, exit_=None):
        self.launch_enter_hook = enter
        self.launch_exit_hook = exit_


class FakeChain:
    def __init__(self, calls):
        self.calls = calls


class Ptr:
    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p


def _direct(kernel, hooks=None, device=None):
    dev = device or [0]
    return DirectLaunch(kernel, (7,), (100, 64, 8), lambda: dev[0], lambda d: f"stream{d}", hooks or FakeHooks())


def test_direct_launch_argument_order():
    k = FakeKernel()
    a, b = Ptr(4096), Ptr(8192)
    assert _direct(k)((a, b))
    assert k.launches == [(7, 1, 1, "stream0", "fn-handle", "meta", None, None, None, a, b, 100, 64, 8)]


def test_direct_launch_empty_hook_chain_passes_through():
    k = FakeKernel()
    chain = FakeChain([])
    assert _direct(k, FakeHooks(chain, chain))((Ptr(0),))
    assert k.launches[0][7:9] == (chain, chain)


@pytest.mark.parametrize(
    "args, hooks, device",
    [
        ((Ptr(4096), Ptr(4100)), None, 0),  # misaligned pointer: the kernel assumed 16-byte alignment
        ((Ptr(4096),), None, 1),  # another current device than the kernel was loaded on
        ((Ptr(4096),), FakeHooks(enter=print), 0),  # launch hooks want launch metadata
        ((Ptr(4096),), FakeHooks(exit_=FakeChain([print])), 0),
    ],
)
def test_direct_launch_declines(args, hooks, device):
    k = FakeKernel()
    dev = [0]
    d = _direct(k, hooks, dev)
    dev[0] = device
    assert not d(args)
    assert k.launches == []


def test_launcher_falls_back_to_jit_when_direct_declines():
    jit_calls = []
    launcher = KernelLauncher("k", {}, [], None, "key", 1, 1)
    k = FakeKernel()
    launcher._direct = _direct(k)
    launcher._try_direct = False  # as after the first (JIT) launch that built the direct one
    launcher._bound = (lambda *a, **kw: jit_calls.append((a, kw)), (100,), {"XBLOCK": 8})
    launcher(Ptr(16), Ptr(32))
    assert len(k.launches) == 1 and jit_calls == []
    launcher(Ptr(16), Ptr(33))
    assert len(k.launches) == 1 and len(jit_calls) == 1


def test_check_inputs_fast_and_slow_paths():
    dev = torch.device("cpu")
    x = torch.randn(4, 6)
    check_inputs((x,), ("x",), ((4, 6),), ((6, 1),), (torch.float32,), dev)
    col = torch.randn(4, 1)[:, :1]  # stride of a size-1 dim may differ
    check_inputs((col.as_strided((4, 1), (1, 5)),), ("c",), ((4, 1),), ((1, 1),), (torch.float32,), dev)
    with pytest.raises(AssertionError, match="size"):
        check_inputs((x,), ("x",), ((6, 4),), ((4, 1),), (torch.float32,), dev)
    with pytest.raises(AssertionError, match="stride"):
        check_inputs((x.t().contiguous().t(),), ("x",), ((4, 6),), ((6, 1),), (torch.float32,), dev)
    with pytest.raises(AssertionError, match="dtype"):
        check_inputs((x.double(),), ("x",), ((4, 6),), ((6, 1),), (torch.float32,), dev)
    with pytest.raises(TypeError):
        check_inputs((3.0,), ("x",), ((4, 6),), ((6, 1),), (torch.float32,), dev)
