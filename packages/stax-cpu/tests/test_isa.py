"""ISA levels (§8.1): the probe picks the widest level that runs; every level this machine
supports gives the same results; $STAX_CPU_ISA / CpuConfig.isa force one."""

import logging
from dataclasses import replace

import numpy as np
import pytest
from cpu_harness import F32, assert_close, contiguous, pointwise, run_both, supported_levels
from stax import ir
from stax.cpu import CpuConfig, compile_schedule
from stax.cpu import isa as isa_mod
from stax.cpu.toolchain import Toolchain, open_cache
from stax.ir import dtypes as dt
from stax.ir.examples import example_7_1
from stax.sched import schedule as make_schedule
from test_kernels import outer_fused_schedule


def _levels(cache_dir):
    return supported_levels(cache_dir)


def test_probe_is_cached_and_ordered(cache_dir):
    levels = _levels(cache_dir)
    assert levels[-1] == "none" and levels == [lv for lv in ("avx512", "avx2", "none") if lv in levels]
    assert list((cache_dir / "cpu").glob("isa-*.txt"))


@pytest.mark.parametrize("level", ["avx512", "avx2", "none"])
def test_every_supported_level_matches_reference(level, cache_dir):
    if level not in _levels(cache_dir):
        pytest.skip(f"{level} not supported on this machine")
    cfg = CpuConfig(cache_dir=str(cache_dir), isa=level)
    g = example_7_1()
    x = np.random.default_rng(0).random((64, 128)) + 0.5
    ours, ref, mod = run_both(g, {"primals_1": x}, cfg, sched=outer_fused_schedule(g))
    assert f"// ---- C++ ({level}," in mod.source
    assert_close(ours[0], ref[0], F32, rtol=1e-6)
    # a mixed-dtype body: half conversions and transcendental math at this level
    n = 101
    h = contiguous("h", (n,), dt.float16)
    i0 = ir.pointwise_vars(1)[0]
    v = ir.op("tanh", ir.op("mul", ir.load("h", i0, dt.float16), ir.const(0.75, dt.float16)))
    g2 = ir.Graph([h], [pointwise("o", (n,), v)], ["o"])
    ours, ref, _ = run_both(g2, {"h": np.linspace(-4, 4, n)}, cfg)
    assert_close(ours[0], ref[0], dt.float16, rtol=2e-3, atol=1e-4)


LISTING_7_1 = """
#pragma omp parallel for num_threads(P)
for (int64_t x0 = 0; x0 < 64; x0 += 1) {
    stax::vec::vfloat tmp_acc0_vec = stax::vec::bcast<stax::vec::vfloat>(0.0f);
    float tmp_acc0 = 0.0f;
    for (int64_t x1 = 0; x1 < 128; x1 += W) {
        const stax::vec::vfloat tmp1 = stax::vec::loadu<stax::vec::vfloat>(in_ptr0 + (128*x0 + x1));
        tmp_acc0_vec = tmp_acc0_vec + tmp1;
    }
    tmp_acc0 = tmp_acc0 + stax::vec::vec_reduce_all(stax::vec::op_add{}, tmp_acc0_vec);
    out_ptr0[x0] = tmp_acc0;
    const float tmp3 = out_ptr0[x0];
    const stax::vec::vfloat tmp4 = stax::vec::bcast<stax::vec::vfloat>(tmp3);
    for (int64_t x1 = 0; x1 < 128; x1 += W) {
        const stax::vec::vfloat tmp2 = stax::vec::loadu<stax::vec::vfloat>(in_ptr0 + (128*x0 + x1));
        const stax::vec::vfloat tmp5 = tmp2 / tmp4;
        stax::vec::storeu(out_ptr1 + (128*x0 + x1), tmp5);
    }
}
"""


@pytest.mark.parametrize("level,lanes", [("avx512", 16), ("avx2", 8)])
def test_example_7_1_comes_out_as_listing_7_1(level, lanes, cache_dir):
    """Golden: the outer-loop-fused kernel of Example 7.1 is Listing 7.1 (vector row sum into a vector
    accumulator, vec_reduce_all, store, then the vectorized row divide, all inside one x0 iteration).
    One deviation from the listing: the row sum's load and broadcast, invariant in the divide loop,
    are computed once before it (GCC does not hoist them out of an OpenMP-outlined loop)."""
    if level not in _levels(cache_dir):
        pytest.skip(f"{level} not supported on this machine")
    cfg = CpuConfig(cache_dir=str(cache_dir), isa=level, num_threads=2)
    g = example_7_1()
    mod = compile_schedule(outer_fused_schedule(g), config=cfg)
    src = mod.source[mod.source.index("    #pragma omp parallel for"):mod.source.index("    return (int)err[0];")]
    got = "\n".join(line[4:] for line in src.splitlines())
    assert got.strip() == LISTING_7_1.replace("W)", f"{lanes})").replace("(P)", "(2)").strip()


def test_env_var_forces_level(cache_dir, monkeypatch):
    monkeypatch.setenv("STAX_CPU_ISA", "none")
    x = contiguous("x", (3,))
    g = ir.Graph([x], [pointwise("y", (3,), ir.op("neg", ir.load("x", ir.pointwise_vars(1)[0], F32)))], ["y"])
    mod = compile_schedule(make_schedule(g), config=CpuConfig(cache_dir=str(cache_dir)))
    assert "// ---- C++ (none," in mod.source
    monkeypatch.setenv("STAX_CPU_ISA", "sse9")
    with pytest.raises(ValueError, match="sse9"):
        compile_schedule(make_schedule(g), config=CpuConfig(cache_dir=str(cache_dir)))
    with pytest.raises(ValueError, match="unknown ISA"):
        CpuConfig(isa="neon")


@pytest.mark.parametrize("level", ["avx512", "avx2", "none"])
def test_max_min_propagate_nan_at_every_level(level, cache_dir):
    """maximum / minimum and amax / amin rows have ISA-specific vector forms (a masked vmaxps on
    AVX-512): NaN in either operand, in any lane, and +-inf / +-0 give the reference's answer."""
    if level not in _levels(cache_dir):
        pytest.skip(f"{level} not supported on this machine")
    from test_reductions import reduction_node

    cfg = CpuConfig(cache_dir=str(cache_dir), isa=level)
    special = np.array([np.nan, 1.0, -1.0, np.inf, -np.inf, 0.0, -0.0, 3.5], np.float32)
    a = np.repeat(special, special.size)
    b = np.tile(special, special.size)  # every (a, b) pair of special values, 64 lanes
    n = a.size
    i0 = ir.pointwise_vars(1)[0]
    xa, xb = contiguous("a", (n,)), contiguous("b", (n,))
    for name in ("maximum", "minimum"):
        v = ir.op(name, ir.load("a", i0, F32), ir.load("b", i0, F32))
        ours, ref, _ = run_both(ir.Graph([xa, xb], [pointwise("o", (n,), v)], ["o"]), {"a": a, "b": b}, cfg)
        assert_close(ours[0], ref[0], F32, what=f"{name} at {level}")
    rows = np.random.default_rng(0).standard_normal((8, 67)).astype(np.float32)
    rows[1, 5] = rows[3, 66] = rows[6, 0] = np.nan  # NaN in a vector lane, in the tail, in the first lane
    rows[4, 10] = np.inf
    x = contiguous("x", rows.shape)
    for rtype in ("max", "min"):
        g = ir.Graph([x], [reduction_node("r", x, rtype, (1,), False)], ["r"])
        ours, ref, _ = run_both(g, {"x": rows}, cfg)
        assert_close(ours[0], ref[0], F32, what=f"row {rtype} at {level}")
        assert np.isnan(ours[0][[1, 3, 6]]).all()


AVX2_ONLY = isa_mod.REQUIRED_FLAGS["avx2"] | {"sse2", "sse4_2"}  # an AVX2 machine: no avx512*


def test_cached_probe_is_checked_against_the_cpu_flags(tmp_path, monkeypatch, caplog):
    """A probe cache claiming AVX-512 on a CPU whose flags lack it (a cache copied from another machine)
    is not trusted: its kernels would die of SIGILL. With a compiler the probe re-runs within what the
    flags allow; without one the level is downgraded; forcing AVX-512 is a clear error. The CPU is
    simulated through isa.cpu_flags."""
    monkeypatch.delenv("STAX_CPU_ISA", raising=False)
    real = isa_mod.allowed_levels()
    monkeypatch.setattr(isa_mod, "cpu_flags", lambda: AVX2_ONLY)
    expect = "avx2" if "avx2" in real else "none"
    tc, cache = Toolchain.from_config(CpuConfig()), open_cache(tmp_path)
    for name in (isa_mod.probe_cache_name(tc), isa_mod.probe_cache_name(replace(tc, cxx=None))):
        (tmp_path / "cpu" / name).write_text("avx512")  # the lie, with and without a compiler
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        assert isa_mod.select(tc, cache, None).name == expect
    assert "says avx512 but this CPU lacks avx512bw avx512dq avx512f avx512vl: re-probing" in caplog.text
    assert (tmp_path / "cpu" / isa_mod.probe_cache_name(tc)).read_text() == expect  # the re-probe's answer
    with pytest.raises(RuntimeError, match="'avx512' was forced"):
        isa_mod.select(tc, cache, "avx512")
    caplog.clear()
    (tmp_path / "cpu" / isa_mod.probe_cache_name(tc)).write_text("avx512")
    no_cxx = replace(tc, cxx=None, identity=None, missing="no compiler here")
    (tmp_path / "cpu" / isa_mod.probe_cache_name(no_cxx)).write_text("avx512")
    with caplog.at_level(logging.WARNING, logger="stax.cpu"):
        assert isa_mod.select(no_cxx, cache, None).name == "avx2"
    assert "using avx2 (no compiler to re-probe)" in caplog.text
    # end to end: the generated code is for the level the flags allow
    mod = compile_schedule(make_schedule(_neg_graph()), config=CpuConfig(cache_dir=str(tmp_path)))
    assert mod.source.startswith(f"// ---- C++ ({expect},")


def _neg_graph():
    x = contiguous("x", (3,))
    return ir.Graph([x], [pointwise("y", (3,), ir.op("neg", ir.load("x", ir.pointwise_vars(1)[0], F32)))], ["y"])
