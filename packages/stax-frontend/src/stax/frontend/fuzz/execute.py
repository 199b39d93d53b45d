"""Run one case: eager, then torch.compile(backend="stax", fullgraph=True) under strict
config on fresh dynamo state, forward and (when differentiable) backward with a seeded
random cotangent; compare outputs, input gradients and inputs after the call
(`compare.py`). Reproducers call `check_case` too, so they fail exactly as the fuzzer saw.

Failure kinds: compile-error, runtime-error (raised by Stax while compiling / running),
{fwd,bwd,mut}-{dtype,shape,exact,nonfinite,value,structure,autograd}, decomp-<kind> (the
ATen graph Stax compiled, run eagerly, has the same difference), flaky-<kind> (a second run
does not repeat it); the runner adds hang and crash. A program eager rejects, or that torch's
own aot_eager backend fails, is 'invalid' (the generator's problem, not Stax's). ATen
fallbacks are counted, not failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import traceback
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
import torch._dynamo
from functorch.compile import make_boxed_func
from stax.frontend import config, metrics, register
from stax.frontend.decompositions import decomposition_table
from torch._dynamo.backends.common import aot_autograd

from . import compare
from .generate import GenConfig, generate
from .ops.base import coarsest
from .program import Program
from .resolve import NAMES, TORCH_DTYPES, Concrete, mix, resolve
from .source import load


@dataclass
class Outcome:
    status: str  # 'pass' | 'fail' | 'invalid'
    kind: str = ""
    detail: str = ""
    exc: str = ""  # exception type, for error kinds (the shrinker keeps it)
    labels: list = field(default_factory=list)
    fallback_ops: dict = field(default_factory=dict)
    backward: bool = False
    stride_mismatches: int = 0
    note: str = ""  # a mismatch with eager that torch's own aot_eager shares (info, not failure)
    seconds: float = 0.0
    program: str = ""  # the program's JSON

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> Outcome:
        return Outcome(**json.loads(text))

    def same_failure(self, other: Outcome) -> bool:
        return self.status == other.status == "fail" and self.kind == other.kind and self.exc == other.exc


def check_spec(c: Concrete) -> dict:
    """What `check_case` needs to know about a resolved program (a plain dict: reproducers embed it)."""
    def meta(m, name, **kw):
        return {"name": name, "k": round(m.k, 3), "tol": m.tol, "exact": m.exact, "dtype": m.dtype, **kw}

    return {
        "backward": c.backward,
        "outputs": [meta(m, n) for m, n in zip(c.out_meta, c.outputs)],
        "inputs": [meta(m, p.name, grad=p.requires_grad) for m, p in zip(c.in_meta, c.params)],
        "grad": {"k": round(c.grad_k, 3), "tol": c.grad_tol},
    }


def cotangents(outs, seed: int, device: str, dtypes=None):
    """A seeded random cotangent per output that requires grad (None for the others), drawn in
    the output's dtype (or `dtypes[j]`, the original dtype when this is the reference run)."""
    cots = []
    for j, o in enumerate(outs):
        if not (isinstance(o, torch.Tensor) and o.requires_grad):
            cots.append(None)
            continue
        g = torch.Generator().manual_seed(mix(seed, "cot", j))
        dt = o.dtype if dtypes is None else dtypes[j]
        cots.append(torch.randn(o.shape, generator=g, dtype=torch.float64).to(dt).to(device, o.dtype))
    return cots


def backward_of(outs, ins, wrt_mask, seed: int, device: str, dtypes=None):
    """Gradients of the inputs that required grad before the call (an input written in place with
    a value that requires grad requires grad afterwards, but is no leaf of the graph); None when
    nothing is differentiable."""
    cots = cotangents(outs, seed, device, dtypes)
    diff = [(o, ct) for o, ct in zip(outs, cots) if ct is not None]
    wrt = [x for x, w in zip(ins, wrt_mask) if w]
    if not diff or not wrt:
        return None
    grads = torch.autograd.grad([o for o, _ in diff], wrt, [ct for _, ct in diff], allow_unused=True,
                                materialize_grads=True)
    return list(grads)


def _detached(ins):
    return [x.detach() if isinstance(x, torch.Tensor) else x for x in ins]


def _run_fn(fn, ins, backward: bool, seed: int, device: str, dtypes=None):
    """(outputs, input gradients or None)."""
    wrt_mask = [x.requires_grad for x in ins]
    torch.manual_seed(0)
    outs = fn(*ins)
    return outs, (backward_of(outs, ins, wrt_mask, seed, device, dtypes) if backward else None)


def _stax_frames(exc: BaseException) -> tuple[bool, str]:
    """(raised while compiling, 'Type@stax/pkg/file.py:function' of the innermost exception and
    the innermost Stax frame raising it) over the cause/context chain: errors with the same
    origin are one bug."""
    compiling, inner, where, seen = False, type(exc).__name__, "", set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        inner = type(e).__name__
        for fr in traceback.extract_tb(e.__traceback__):
            path = fr.filename.replace("\\", "/")
            if fr.name == "compile_graph" and path.endswith("stax/frontend/aot.py"):
                compiling = True
            if "/stax/" in path and "/stax/frontend/fuzz/" not in path:
                where = path[path.rindex("/stax/") + 1:] + ":" + fr.name
        if type(e).__name__ == "BackendCompilerFailed":
            compiling = True
        e = e.__cause__ or e.__context__
    return compiling, inner + (f"@{where}" if where else "")


@contextlib.contextmanager
def _rebound(ns: dict, **values):
    old = {k: ns.get(k) for k in values}
    ns.update(values)
    try:
        yield
    finally:
        ns.update(old)


def _floats_as(dtype):
    return SimpleNamespace(f32=dtype, f64=dtype, f16=dtype, bf16=dtype, i32=torch.int32, i64=torch.int64, b=torch.bool)


def _fail(kind: str, detail: str, **kw) -> Outcome:
    return Outcome("fail", kind=kind, detail=detail, **kw)


def check_case(ns: dict, spec: dict, seed: int, device: str = "cpu", raise_errors: bool = False) -> Outcome:
    """Eager vs stax for the case in namespace `ns` (fn, make_inputs, D). `raise_errors`:
    let Stax's exceptions propagate (reproducers) instead of classifying them."""
    register()  # backend "stax" also from a source tree (no installed entry point)
    fn, make_inputs = ns["fn"], ns["make_inputs"]
    backward, no_grad = spec["backward"], False
    try:
        ins_e = make_inputs(device)
        outs_e, grads_e = _run_fn(fn, ins_e, False, seed, device)
    except Exception as e:  # noqa: BLE001
        return Outcome("invalid", detail=f"eager forward: {type(e).__name__}: {e}")
    if backward:
        try:
            ins_e = make_inputs(device)
            outs_e, grads_e = _run_fn(fn, ins_e, True, seed, device)
        except Exception as e:  # noqa: BLE001
            if "inplace" in str(e):
                return Outcome("invalid", detail=f"eager backward: {e}")
            backward = False  # an op without a derivative: forward only
            no_grad = True
        backward = backward and grads_e is not None
    base = Outcome("pass", backward=backward)
    ins_s = make_inputs(device)
    if no_grad:  # stax would build a joint graph eager cannot differentiate either: both run the forward alone
        ins_s = _detached(ins_s)
        ins_e = _detached(make_inputs(device))
        outs_e, grads_e = _run_fn(fn, ins_e, False, seed, device)
    torch._dynamo.reset()
    metrics.reset()
    phase = "forward"
    try:
        with config.patch(strict=True):
            compiled = torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)
            torch.manual_seed(0)
            outs_s = compiled(*ins_s)
            grads_s = None
            if backward:
                phase = "backward"
                diff_s = [isinstance(o, torch.Tensor) and o.requires_grad for o in outs_s]
                diff_e = [isinstance(o, torch.Tensor) and o.requires_grad for o in outs_e]
                if diff_s != diff_e:
                    return _fail("fwd-autograd", f"outputs requiring grad: {diff_s}, eager {diff_e}", backward=True)
                grads_s = backward_of(outs_s, ins_s, [m["grad"] for m in spec["inputs"]], seed, device)
    except Exception as e:  # noqa: BLE001
        if raise_errors:
            raise
        return _classify(base, e, phase, fn, make_inputs, backward, seed, device)
    finally:
        base.fallback_ops = dict(metrics.snapshot().fallback_ops)
        torch._dynamo.reset()
    res = _compare(base, ns, spec, seed, device, backward, outs_e, grads_e, ins_e, outs_s, grads_s, ins_s)
    if res.status == "fail":
        return _second_opinion(res, base, ns, spec, seed, device, backward, outs_s, grads_s, ins_s)
    return res


def _second_opinion(res, base, ns, spec, seed, device, backward, outs_s, grads_s, ins_s) -> Outcome:
    """Whose difference is it? If the ATen graphs Stax compiled, run eagerly, give Stax's answer,
    Stax's lowering is not at fault: when torch's own aot_eager (no decompositions) gives it too,
    AOTAutograd / dynamo differ from eager (a torch matter: passed, with a note); otherwise
    Stax's decomposition table makes the difference (kind 'decomp-...')."""
    fn, make_inputs = ns["fn"], ns["make_inputs"]

    def agrees(backend) -> bool:
        got = _run_backend(fn, make_inputs, backward, seed, device, backend)
        return got is not None and _compare(dataclasses.replace(base), ns, spec, seed, device, backward, *got, outs_s,
                                            grads_s, ins_s).status == "pass"

    if not agrees(_decomposed_backend()):
        return res
    if agrees("aot_eager"):
        return dataclasses.replace(base, note=f"{res.kind}: torch's aot_eager differs from eager the same way: "
                                              f"{res.detail}")
    return dataclasses.replace(res, kind="decomp-" + res.kind,
                               detail=f"the decomposed ATen graph run eagerly agrees with Stax, aot_eager with eager: "
                                      f"{res.detail}")


def _decomposed_backend():
    """AOTAutograd with Stax's decomposition table, every ATen graph run eagerly: what Stax
    computes if its lowering is exact."""
    def run_eagerly(gm, example_inputs):
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=run_eagerly, bw_compiler=run_eagerly, decompositions=decomposition_table())


def _run_backend(fn, make_inputs, backward, seed, device, backend):
    """(outputs, grads, inputs after the call) through torch.compile(backend), or None if it raises."""
    torch._dynamo.reset()
    try:
        ins = make_inputs(device)
        outs, grads = _run_fn(torch.compile(fn, backend=backend, fullgraph=True, dynamic=False), ins, backward, seed,
                              device)
        return outs, grads, ins
    except Exception:  # noqa: BLE001 - no second opinion
        return None
    finally:
        torch._dynamo.reset()


def _classify(base, e, phase, fn, make_inputs, backward, seed, device) -> Outcome:
    """A Stax exception; 'invalid' when torch's own aot_eager backend fails too."""
    compiling, inner = _stax_frames(e)
    torch._dynamo.reset()
    try:
        _run_fn(torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=False), make_inputs(device), backward,
                seed, device)
    except Exception as e2:  # noqa: BLE001
        return dataclasses.replace(base, status="invalid", detail=f"aot_eager fails too: {type(e2).__name__}: {e2}")
    finally:
        torch._dynamo.reset()
    msg = str(e).strip().splitlines()
    return dataclasses.replace(base, status="fail", kind="compile-error" if compiling else "runtime-error", exc=inner,
                               detail=f"{phase}: {type(e).__name__}: {' | '.join(msg[:6])[:800]}")


def _reference(ns, spec, seed, device, backward, dtype):
    """The same graph with every float type -> `dtype` (fp64: the reference; fp32: the probe
    that estimates fp64's own error), on the inputs upcast after rounding."""
    default = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)  # int -> float promotions and factories follow the reference type too
        with _rebound(ns, D=_floats_as(dtype)):
            ins = ns["make_inputs"](device, upcast=dtype)
            dtypes = [TORCH_DTYPES[o["dtype"]] for o in spec["outputs"]]
            outs, grads = _run_fn(ns["fn"], ins, backward, seed, device, dtypes)
    except Exception:  # noqa: BLE001 - no reference: the direct comparison stands
        return None
    finally:
        torch.set_default_dtype(default)

    def host(ts):
        return None if ts is None else [t.detach().cpu() if isinstance(t, torch.Tensor) else None for t in ts]

    return {"out": host(outs), "grads": host(grads), "ins": host(ins)}


def _compare(base, ns, spec, seed, device, backward, outs_e, grads_e, ins_e, outs_s, grads_s, ins_s) -> Outcome:
    refs: dict = {}

    def ref_for(part: str, j: int, tol):
        def get():
            probe = tol == "f64"
            if probe not in refs:
                refs[probe] = _reference(ns, spec, seed, device, backward, torch.float32 if probe else torch.float64)
            got = refs[probe]
            if got is None or got[part] is None or j >= len(got[part]) or got[part][j] is None:
                return None
            return got[part][j], probe

        return get

    if not isinstance(outs_s, tuple) or len(outs_s) != len(outs_e):
        return dataclasses.replace(base, status="fail", kind="fwd-structure",
                                   detail=f"stax returned {type(outs_s).__name__} of {len(outs_s)}")
    checks = [("fwd", f"output {j} ({m['name']})", s, e, m, "out", j)
              for j, (s, e, m) in enumerate(zip(outs_s, outs_e, spec["outputs"]))]
    checks += [("mut", f"input {m['name']} after the call", s, e, m, "ins", j)
               for j, (s, e, m) in enumerate(zip(ins_s, ins_e, spec["inputs"])) if not m["grad"]]
    if backward:
        names = [m["name"] for m in spec["inputs"] if m["grad"]]
        g = {"k": spec["grad"]["k"], "tol": spec["grad"]["tol"], "exact": False}
        checks += [("bwd", f"grad of {names[j]}", s, e, g, "grads", j)
                   for j, (s, e) in enumerate(zip(grads_s, grads_e))]
    for phase, what, s, e, m, part, j in checks:
        if phase == "fwd" and isinstance(s, torch.Tensor) and s.requires_grad != e.requires_grad:
            return dataclasses.replace(base, status="fail", kind="fwd-autograd",
                                       detail=f"{what}: requires_grad {s.requires_grad}, eager {e.requires_grad}")
        tol = coarsest(m["tol"], NAMES.get(e.dtype)) if isinstance(e, torch.Tensor) else None
        mm = compare.compare_tensor(s, e, m["k"], ref_for(part, j, tol), tol=tol, exact=m["exact"])
        if mm is not None:
            return dataclasses.replace(base, status="fail", kind=f"{phase}-{mm.what}", detail=f"{what}: {mm.detail}")
    base.stride_mismatches = sum(_strides_differ(s, e) for s, e in zip(outs_s, outs_e))
    return base


def _strides_differ(s, e) -> bool:
    if not isinstance(s, torch.Tensor) or e.numel() <= 1 or s.shape != e.shape:
        return False
    sig = [(n, st) for n, st in zip(e.shape, e.stride()) if n != 1]
    got = [(n, st) for n, st in zip(s.shape, s.stride()) if n != 1]
    return sig != got


def run_program(program: Program) -> Outcome:
    """Resolve, load and check one program (warnings silenced)."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            c = resolve(program)
            ns = load(c)
        except Exception as e:  # noqa: BLE001 - a generator bug: report it, never crash the run
            out = Outcome("invalid", detail=f"resolve: {type(e).__name__}: {e}")
        else:
            spec = check_spec(c)
            out = check_case(ns, spec, program.seed, program.device)
            if out.status == "fail" and not check_case(ns, spec, program.seed, program.device).same_failure(out):
                out.kind = "flaky-" + out.kind  # the second run disagrees: nondeterminism somewhere
            out.labels = list(c.labels)
    out.seconds = time.perf_counter() - t0
    out.program = program.to_json()
    return out


def run_index(seed: int, index: int, cfg: GenConfig, attempts: int = 8, on_start=None) -> Outcome:
    """The first program of (seed, index) that eager accepts, run; `on_start(program)` before each."""
    out = None
    for attempt in range(attempts):
        program = generate(seed, index, attempt, cfg)
        if on_start is not None:
            on_start(program)
        out = run_program(program)
        if out.status != "invalid":
            return out
    return out
