"""Error behaviour: the error flag after a kernel, input guards, missing pieces. Bad input
gets a clear error naming what was expected, and loses nothing (args are kept on a guard error)."""

import numpy as np
import pytest
from cpu_harness import F32, contiguous, pointwise
from stax import ir
from stax.cpu import InputLayoutError, KernelZeroDivisionError, NegativeIntegerPowerError, compile_schedule
from stax.ir import dtypes as dt
from stax.sched import schedule as make_schedule

(i0,) = ir.pointwise_vars(1)


def _binary(name, d, n=9):
    a, b = contiguous("a", (n,), d), contiguous("b", (n,), d)
    node = pointwise("c", (n,), ir.op(name, ir.load("a", i0, d), ir.load("b", i0, d)))
    return ir.Graph([a, b], [node], ["c"])


@pytest.mark.parametrize("name", ["floordiv", "truncdiv", "remainder", "fmod"])
def test_integer_division_by_zero_raises_like_eager(name, cfg):
    mod = compile_schedule(make_schedule(_binary(name, dt.int32)), config=cfg)
    a = np.arange(9, dtype=np.int32)
    b = np.ones(9, dtype=np.int32)
    mod.call([a, b])  # fine
    b[7] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as info:
        mod.call([a, b])
    assert isinstance(info.value, KernelZeroDivisionError) and isinstance(info.value, ZeroDivisionError)


def test_float_division_by_zero_is_ieee(cfg):
    mod = compile_schedule(make_schedule(_binary("floordiv", F32)), config=cfg)
    (c,) = mod.call([np.array([1, -1, 0, 5, 1, 1, 1, 1, 1], np.float32), np.zeros(9, np.float32)])
    assert np.isinf(c[0]) and np.isinf(c[1]) and np.isnan(c[2])


def test_negative_integer_power(cfg):
    mod = compile_schedule(make_schedule(_binary("pow", dt.int64)), config=cfg)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        mod.call([np.full(9, 2, np.int64), np.array([1, 2, 3, -1, 0, 0, 0, 0, 0], np.int64)])
    assert issubclass(NegativeIntegerPowerError, ValueError)


def test_out_of_range_indirect_index(cfg):
    table = contiguous("table", (10,))
    idx = contiguous("idx", (4,), dt.int64)
    s = ir.var("ind", 0)
    g = ir.Graph([table, idx], [pointwise("out", (4,), ir.load(
        "table", s, F32, indirect=((s, ir.load("idx", i0, dt.int64), 10),)))], ["out"])
    mod = compile_schedule(make_schedule(g), config=cfg)
    t = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(mod.call([t, np.array([9, 0, 3, 3])])[0], [9, 0, 3, 3])
    for bad in (10, -1):
        with pytest.raises(IndexError, match=rf"index {bad} is out of bounds .* size 10 .*table"):
            mod.call([t, np.array([1, bad, 2, 3])])


def test_input_guard_names_input_expected_and_actual(cfg):
    mod = compile_schedule(make_schedule(_binary("add", F32, 12)), config=cfg)
    good = np.zeros(12, np.float32)
    strided = np.zeros(24, np.float32)[::2]
    args = [good, strided]
    with pytest.raises(InputLayoutError, match=r"input b: expected sizes \(12,\) and strides \(1,\), "
                                               r"got sizes \(12,\) and strides \(2,\)"):
        mod.call(args)
    assert args == [good, strided]  # nothing lost
    with pytest.raises(InputLayoutError, match="input a: expected dtype float32, got float64"):
        mod.call([np.zeros(12), good])
    with pytest.raises(TypeError, match="takes 2 inputs"):
        mod.call([good])


def test_call_unchecked_is_call_without_the_input_checks(cfg):
    """The module's second entry (for a caller that checked its inputs): the same results,
    and no layout check (a strided input is read as if contiguous, which is why it is unchecked)."""
    mod = compile_schedule(make_schedule(_binary("add", F32, 12)), config=cfg)
    a, b = np.arange(12, dtype=np.float32), np.ones(12, np.float32)
    np.testing.assert_array_equal(mod.call_unchecked([a, b])[0], mod.call([a, b])[0])
    args = [a, np.zeros(24, np.float32)[::2]]
    with pytest.raises(InputLayoutError):
        mod.call(list(args))
    assert mod.call_unchecked(list(args))[0].shape == (12,)  # no InputLayoutError


def test_missing_extern_kernel_implementation(cfg):
    a = contiguous("a", (2, 2))
    g = ir.Graph([a], [ir.ExternKernel("buf0", a.layout, "aten.foo", ("a",))], ["buf0"])
    with pytest.raises(KeyError, match="aten.foo"):
        compile_schedule(make_schedule(g), config=cfg)


def test_extern_result_with_wrong_sizes(cfg):
    a = contiguous("a", (2, 3))
    g = ir.Graph([a], [ir.ExternKernel("buf0", a.layout, "test.bad", ("a",))], ["buf0"])
    mod = compile_schedule(make_schedule(g), config=cfg, extern_kernels={"test.bad": lambda x: x.T.copy()})
    with pytest.raises(RuntimeError, match=r"test.bad returned sizes \(3, 2\) for buf0, expected \(2, 3\)"):
        mod.call([np.zeros((2, 3), np.float32)])
