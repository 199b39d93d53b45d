"""compile_schedule in two steps (artifact.py, load.py): `generate_artifact` makes plain data that
pickles, `load_artifact` makes of it, in a fresh generated module, the module compile_schedule
returns: same source, same kernels, same results, checked against the numpy interpreter as every
test here is. What a whole-graph cache needs of it: nothing but builtins and stax's dataclasses
inside, no planning or code generation at load, decisions (autotune choices) kept."""

import dataclasses
import io
import pickle

import numpy as np
import pytest
import torch
from error_model import gamma
from gpu_testlib import AOT, as_numpy, check_outputs, config, f32, i0, i1, inp, lay, make_inputs, pw, run
from stax.gpu import GpuArtifact, artifact_of, compile_schedule, generate_artifact, load_artifact, with_choices
from stax.gpu.compile import generated_module
from stax.gpu.testing import build_schedule
from stax.ir import ExternKernel, Graph, const, interpret, load, op, outputs
from test_indirect import embedding_graph
from test_reduction import softmax_graph
from test_wrapper import two_kernel_graph

pytestmark = pytest.mark.skipif(AOT, reason="runs the modules")


class _PlainOnly(pickle.Unpickler):
    """What the frontend's whole-graph cache accepts: builtins and stax's own dataclasses."""

    def find_class(self, module, name):
        if module == "builtins" and name in ("frozenset", "set", "slice", "range", "complex"):
            return super().find_class(module, name)
        cls = super().find_class(module, name) if module.startswith("stax.") else None
        if isinstance(cls, type) and dataclasses.is_dataclass(cls):
            return cls
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def _round_trip(artifact: GpuArtifact) -> GpuArtifact:
    return _PlainOnly(io.BytesIO(pickle.dumps(artifact))).load()


def _mm(a, b, alpha):
    return alpha * (a @ b)


def _mm_bound(a, b, alpha):
    """alpha (a @ b) in float64 and the dot-product bound (test_wrapper's)."""
    (xa, ea), (xb, eb) = a, b
    err = abs(alpha) * (gamma(xa.shape[-1], f32) * (abs(xa) @ abs(xb)) + ea @ abs(xb) + abs(xa) @ eb)
    return alpha * (xa @ xb), err


def extern_graph(n=6):
    mm = ExternKernel("buf0", lay((n, n)), "aten.mm_s", ("a", "b"), (("alpha", 2.0),))
    post = pw("buf1", (n, n), op("add", load("buf0", n * i0 + i1, f32), const(1.0, f32)))
    return Graph((inp("a", (n, n)), inp("b", (n, n))), (mm, post), ("buf1",))


CASES = {
    "two-kernels": (two_kernel_graph, None, {}),
    "softmax": (lambda: softmax_graph(8, 40), None, {}),
    "gather-with-error-flag": (embedding_graph, None, {"idx": (0, 10)}),
    "extern": (extern_graph, [["buf0"], ["buf1"]], {}),
}


@pytest.mark.parametrize("case", CASES)
def test_loaded_artifact_runs_as_compile_schedule(case):
    """generate -> pickle -> load: the module of a fresh import, bit-equal to compile_schedule's
    outputs and within the interpreter's tolerance of the numpy reference."""
    make, groups, ranges = CASES[case]
    graph = make()
    extern = {"aten.mm_s": _mm}
    cfg = config()
    direct = compile_schedule(build_schedule(graph, groups), extern_kernels=extern, config=cfg)
    artifact = _round_trip(generate_artifact(build_schedule(graph, groups), extern_kernels=extern, config=cfg))
    loaded = load_artifact(artifact, extern_kernels=extern, config=cfg)
    assert generated_module(loaded) is not generated_module(direct)
    assert loaded.source == direct.source and loaded.kernel_names == direct.kernel_names
    assert artifact == artifact_of(direct)
    flats, tensors = make_inputs(graph, **ranges)
    want = [as_numpy(t) for t in direct.call(list(tensors))]
    got = [as_numpy(t) for t in loaded.call(list(tensors))]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np_extern = {"aten.mm_s": _mm}
    ref = outputs(graph, interpret(graph, flats, np_extern))
    tol = dict(rtol=1e-5, atol=1e-5) if case == "extern" else None
    check_outputs(graph, flats, got, ref, cfg.math, tol, np_extern, {"aten.mm_s": _mm_bound})


def test_loaded_gather_raises_its_error():
    """The error table travels in the artifact: an out-of-range index raises the same message."""
    graph = embedding_graph()
    artifact = _round_trip(generate_artifact(build_schedule(graph), config=config(error_sync=True)))
    loaded = load_artifact(artifact, config=config(error_sync=True))
    _, (table, _) = make_inputs(graph)
    idx = torch.tensor([0, 3, 10, 1, 2, 1, 0]).to(table.device)
    with pytest.raises(IndexError, match="out of bounds reading table"):
        loaded.call([table, idx])


def test_load_plans_and_generates_nothing(monkeypatch):
    """Loading makes no planning or code-generation decision again: those steps are not called."""
    import stax.gpu.compile as compile_mod

    artifact = generate_artifact(build_schedule(two_kernel_graph()), config=config())

    def refuse(*a, **k):
        raise AssertionError("planned or generated at load")

    for name in ("plan_kernels", "write_kernel", "generate_wrapper", "split_reductions", "kernel_set"):
        monkeypatch.setattr(compile_mod, name, refuse)
    m = load_artifact(artifact, config=config())
    flats, tensors = make_inputs(two_kernel_graph())
    (got,) = m.call(list(tensors))
    (ref,) = outputs(two_kernel_graph(), interpret(two_kernel_graph(), flats))
    np.testing.assert_allclose(as_numpy(got), ref, rtol=2e-6, atol=1e-6)


def test_artifact_for_another_target_is_refused():
    artifact = generate_artifact(build_schedule(two_kernel_graph()), config=config())
    other = dataclasses.replace(artifact, identity="NVIDIA H200 sm90 132SM; triton 0.0")
    with pytest.raises(ValueError, match="generated for"):
        load_artifact(other, config=config())


def test_missing_extern_kernel_is_named_at_load():
    artifact = generate_artifact(build_schedule(extern_graph(), [["buf0"], ["buf1"]]), config=config())
    with pytest.raises(KeyError, match="aten.mm_s"):
        load_artifact(artifact, config=config())


class _Counting:
    """An autotuner that picks the last candidate and counts how often it is asked."""

    def __init__(self):
        self.asked = 0

    def select(self, key, candidates, run):
        self.asked += 1
        return candidates[-1]


def test_autotune_choices_are_kept_by_the_artifact():
    """with_choices records what a run chose; a module loaded from it launches that config without
    asking the autotuner (a cache hit never re-tunes)."""
    graph = softmax_graph(8, 40)
    tuner = _Counting()
    cfg = config(autotune=True, autotune_min_elements=0, autotuner=tuner, dual_variant_min=16)
    first = run(graph, cfg=cfg)
    asked = tuner.asked
    assert asked > 0
    artifact = _round_trip(with_choices(artifact_of(first), first))
    (k,) = artifact.kernels
    assert len(k.candidates) > 1 and dict(k.choices)[""] == k.candidates[-1]
    loaded = load_artifact(artifact, config=cfg)
    flats, tensors = make_inputs(graph)
    (got,) = loaded.call(list(tensors))
    assert tuner.asked == asked
    assert generated_module(loaded).launch_0.choice == k.candidates[-1]
    check_outputs(graph, flats, [as_numpy(got)], outputs(graph, interpret(graph, flats)), cfg.math)


def test_unwritable_cache_directory_loads_from_a_private_one(tmp_path):
    """A cache directory under a regular file: the module is written elsewhere and still runs."""
    (tmp_path / "file").write_text("in the way")
    cfg = config(cache_dir=str(tmp_path / "file" / "gpu"))
    m = compile_schedule(build_schedule(two_kernel_graph()), config=cfg)
    flats, tensors = make_inputs(two_kernel_graph())
    (got,) = m.call(list(tensors))
    (ref,) = outputs(two_kernel_graph(), interpret(two_kernel_graph(), flats))
    np.testing.assert_allclose(as_numpy(got), ref, rtol=2e-6, atol=1e-6)
