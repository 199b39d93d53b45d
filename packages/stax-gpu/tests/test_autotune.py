"""Launch heuristics and autotuning. The interpreter has no GPU timer, so the
benchmarking path runs here with an injected timer (deterministic fake timings);
on the H200 the same code runs with CUDA events."""

import json
import os

import pytest
from gpu_testlib import config, f32, i0, inp, r0, red, run
from stax.gpu.autotune import AutotuneCache, BenchmarkAutotuner, FirstChoice, autotune_key, default_autotuner
from stax.gpu.heuristics import candidates
from stax.gpu.kernels import LOOPED, PERSISTENT, variants, write_kernel
from stax.gpu.plan import plan_kernels
from stax.gpu.testing import build_schedule
from stax.ir import Graph, load, op


class FakeTimer:
    """Runs the candidate once (so it must work), then reports times(key, k) for the k-th
    timed candidate: deterministic timings that do not depend on the candidate set."""

    def __init__(self, times):
        self.times = times
        self.calls = []

    def __call__(self, fn):
        fn()
        key = self.current
        self.calls.append(key)
        return self.times(key, len(self.calls) - 1)


class Recording(BenchmarkAutotuner):
    def __init__(self, cache, timer):
        super().__init__(cache, self._timer)
        self.fake = timer

    def select(self, key, cands, run):
        def run_and_mark(c):
            self.fake.current = c.key()
            return run(c)

        return super().select(key, cands, run_and_mark)

    def _timer(self, fn):
        return self.fake(fn)


def softmax_rows(n, m):
    mx = red("buf0", (n,), (m,), "max", load("x", m * i0 + r0, f32))
    s = red("buf1", (n,), (m,), "sum", op("exp", op("sub", load("x", m * i0 + r0, f32), load("buf0", i0, f32))))
    return Graph((inp("x", (n, m)),), (mx, s), ("buf1",))


def test_candidate_sets_are_small_and_start_with_the_heuristic():
    gpu = config(interpret=False, autotune=True, math="libdevice")
    for graph in (softmax_rows(16384, 4096), softmax_rows(64, 128), softmax_rows(8, 30000)):
        (plan,) = plan_kernels(build_schedule(graph), gpu)
        for v in variants(plan, gpu):
            ks = write_kernel(plan, gpu, __import__("stax.gpu.emit", fromlist=["ErrorTable"]).ErrorTable(), v)
            cands = candidates(plan, ks, gpu)
            assert 1 <= len(cands) <= gpu.max_autotune_configs
            assert len({c.key() for c in cands}) == len(cands)
    (plan,) = plan_kernels(build_schedule(softmax_rows(16384, 4096)), gpu)
    assert variants(plan, gpu) == [PERSISTENT, LOOPED]  # 4096 fits a block: race both forms
    assert variants(plan, config()) == [PERSISTENT]  # interpreter: heuristics only
    (plan,) = plan_kernels(build_schedule(softmax_rows(8, 30000)), gpu)
    assert variants(plan, gpu) == [LOOPED]


def test_benchmark_autotuner_picks_the_fastest_and_caches_it(tmp_path):
    cache = AutotuneCache(str(tmp_path))
    timer = FakeTimer(lambda key, k: 10.0 - k)  # the last candidate timed is the fastest
    tuner = Recording(cache, timer)
    cfg = config(autotune=True, autotune_min_elements=0, autotuner=tuner, dual_variant_min=16, xblock_cap=8)
    run(softmax_rows(12, 40), cfg=cfg)
    assert len(timer.calls) >= 2
    files = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs]
    assert len(files) == 1
    entry = json.load(open(files[0]))
    assert entry["choice"] == timer.calls[-1] and len(entry["timings_ms"]) == len(timer.calls)
    # A second process (a fresh autotuner on the same directory) does not time anything.
    timer2 = FakeTimer(lambda key, k: 0.0)
    run(softmax_rows(12, 40), cfg=config(autotune=True, autotune_min_elements=0,
                                         autotuner=Recording(AutotuneCache(str(tmp_path)), timer2),
                                         dual_variant_min=16, xblock_cap=8))
    assert timer2.calls == []


def test_failing_configs_are_skipped(tmp_path):
    def times(key, k):
        if k == 0:
            raise RuntimeError("out of resources")
        return 2.0

    timer = FakeTimer(times)
    tuner = Recording(AutotuneCache(str(tmp_path)), timer)
    run(softmax_rows(6, 20), cfg=config(autotune=True, autotune_min_elements=0, autotuner=tuner, dual_variant_min=16))
    entry = json.load(open(next(os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs)))
    assert entry["choice"] != timer.calls[0] and timer.calls[0] not in entry["timings_ms"]


def test_dual_variant_race_under_the_interpreter(tmp_path):
    """persistent vs looped raced by the autotuner: both forms compile and run."""
    timer = FakeTimer(lambda key, k: 1.0 if key.startswith("looped") else 2.0)
    tuner = Recording(AutotuneCache(str(tmp_path)), timer)
    cfg = config(autotune=True, autotune_min_elements=0, autotuner=tuner, dual_variant_min=16, r0_block_cap=16,
                 xblock_cap=4)
    m = run(softmax_rows(5, 50), cfg=cfg)
    assert "triton_per_fused_0" in m.source and "triton_red_fused_0" in m.source
    assert any(c.startswith("persistent") for c in timer.calls) and any(c.startswith("looped") for c in timer.calls)


def test_key_depends_on_source_shapes_and_device():
    k = autotune_key(["src"], (1, 1, 8), "H200", "3.6.0")
    assert k != autotune_key(["src2"], (1, 1, 8), "H200", "3.6.0")
    assert k != autotune_key(["src"], (1, 1, 16), "H200", "3.6.0")
    assert k != autotune_key(["src"], (1, 1, 8), "A100", "3.6.0")
    assert k == autotune_key(["src"], (1, 1, 8), "H200", "3.6.0")


def test_interpreter_default_is_first_choice():
    assert isinstance(default_autotuner(config()), FirstChoice)
    assert isinstance(default_autotuner(config(interpret=False, autotune=True)), BenchmarkAutotuner)


def test_rounds_interleave_candidates_and_take_medians(tmp_path):
    """rounds=3: every round times every candidate, starting one further along; a drift that
    slows whatever runs first in a round does not decide the winner (medians)."""
    from types import SimpleNamespace

    cands = [SimpleNamespace(key=lambda k=k: f"c{k}") for k in range(3)]
    base = {"c0": 1.0, "c1": 0.9, "c2": 1.1}
    order = []

    def timer(fn):
        fn()
        first = len(order) % 3 == 1  # the first timing of each round (fn appended just now)
        return base[order[-1]] + (5.0 if first else 0.0)

    tuner = BenchmarkAutotuner(AutotuneCache(str(tmp_path)), timer, rounds=3)
    best = tuner.select("k" * 16, cands, lambda c: order.append(c.key()))
    assert order == ["c0", "c1", "c2", "c1", "c2", "c0", "c2", "c0", "c1"]
    assert best.key() == "c1"  # fastest by median though it ran first in round 2
    assert AutotuneCache(str(tmp_path)).get("k" * 16)["choice"] == "c1"


@pytest.mark.parametrize("gain,chosen", [(0.003, "c0"), (0.02, "c1")])
def test_margin_keeps_the_first_candidate_on_a_near_tie(tmp_path, gain, chosen):
    """margin=0.005: a candidate 0.3 % faster than the heuristic's first does not replace it
    (below the tuner's resolution); one 2 % faster does."""
    from types import SimpleNamespace

    cands = [SimpleNamespace(key=lambda k=k: f"c{k}") for k in range(3)]
    base = {"c0": 1.0, "c1": 1.0 - gain, "c2": 1.1}
    order = []

    def timer(fn):
        fn()
        return base[order[-1]]

    tuner = BenchmarkAutotuner(AutotuneCache(str(tmp_path)), timer, rounds=3, margin=0.005)
    assert tuner.select("m" * 16, cands, lambda c: order.append(c.key())).key() == chosen


def test_launch_bound_kernels_are_not_raced():
    """Below autotune_min_elements a kernel gets the heuristic's config and only its variant:
    each raced config would be a Triton compile that a launch-bound kernel cannot pay back."""
    from stax.gpu.compile import kernel_set
    from stax.gpu.emit import ErrorTable

    gpu = config(interpret=False, autotune=True, math="libdevice", dual_variant_min=16)
    (small,) = plan_kernels(build_schedule(softmax_rows(64, 128)), gpu)  # 8192 elements
    vs, cands = kernel_set(small, gpu, ErrorTable())
    assert len(cands) == 1 and [ks.variant for ks in vs] == [cands[0].variant]
    vs, cands = kernel_set(small, gpu.with_(autotune_min_elements=8192), ErrorTable())
    assert len(cands) > 1 and [ks.variant for ks in vs] == [PERSISTENT, LOOPED]
