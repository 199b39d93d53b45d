"""Run a suite: for each workload, compile every backend (cold, then warm), check it
against eager, time all backends interleaved, and measure bandwidth and memory.

A failure (building, compiling, a wrong result, a crash while timing) is recorded in
that workload/backend's row and the run goes on. One dict per (workload, backend).

The real suite (workloads/real.py) adds to this: a case that can reset its model (a training
step with an SGD update changes the weights: eager's reference and each backend's first call
start from the same ones), the accuracy rule with a float64 reference (accuracy.py), the
cold-compiled wrappers timed directly (no second, warm compile: real models take long to
compile), and a profile of every backend: measured peak memory and the per-call breakdown
(breakdown.py). `Options.real(...)` sets that up.
"""

from __future__ import annotations

import gc
import os
import platform
import shutil
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass

import torch
import torch._dynamo

from ..workloads import Workload, min_bytes, suite
from . import accuracy
from . import backends as bk
from .bandwidth import COPY, achieved, big_copy, copy_bandwidth
from .breakdown import profile_backend
from .memory import cuda_peak, stax_plan
from .progress import Progress
from .timing import Stats, calibrate, interleaved, sync_for


@dataclass(frozen=True)
class Options:
    suite: str = "micro"
    backends: tuple = ("stax", "inductor", "eager")
    device: str = "cpu"
    quick: bool = False
    rounds: int = 25
    min_sample_s: float = 0.02
    only: tuple = ()
    report_dir: str | None = None  # keep each workload's Stax reports under this directory
    copy_bytes: int = 256 << 20
    rtol: float = 2e-3
    atol: float = 2e-3
    warm_compile: bool = True  # compile again with warm caches (False: time the cold-compiled wrappers)
    memory_plan: bool = True  # CPU: one more stax compile with reports, for the plan's peak and M*
    profile: bool = False  # per backend: measured peak memory and the per-call breakdown (breakdown.py)
    profile_s: float = 0.5  # profile about this long per backend (at least 2 calls, at most 10)
    variant: object = None  # the real suite's workloads.real.Variant
    deadline_s: float | None = None  # start no workload after this many seconds (the rest: skipped)

    @staticmethod
    def quick_defaults(**kw) -> Options:
        return Options(quick=True, rounds=8, min_sample_s=0.005, copy_bytes=64 << 20, **kw)

    @staticmethod
    def real(variant, quick: bool = False, **kw) -> Options:
        """The real suite: fewer rounds (a call takes 10 ms to seconds), no warm compile, no plan, profiles."""
        base = dict(suite="real", variant=variant, quick=quick, rounds=5 if quick else 10, min_sample_s=0.02,
                    copy_bytes=64 << 20, warm_compile=False, memory_plan=False, profile=True,
                    profile_s=0.2 if quick else 0.5)
        return Options(**{**base, **kw})


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def _tensors(x) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _tensors(y)]
    if isinstance(x, dict):
        return [t for y in x.values() for t in _tensors(y)]
    return []


def _grads(case) -> list:
    return [p.grad.detach().clone() for p in case.params if isinstance(p, torch.Tensor) and p.grad is not None]


def _compare(out, grads, ref_out, ref_grads, rtol, atol) -> tuple[bool, float, str]:
    """(close?, max abs error, what differs) for outputs and (training) parameter gradients."""
    pairs = list(zip(_tensors(out), _tensors(ref_out))) + list(zip(grads, ref_grads))
    if len(_tensors(out)) != len(_tensors(ref_out)) or len(grads) != len(ref_grads):
        return False, float("nan"), "different number of outputs / gradients"
    worst, ok, what = 0.0, True, ""
    for k, (a, b) in enumerate(pairs):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, float("nan"), f"tensor {k}: {a.dtype}{list(a.shape)} vs eager {b.dtype}{list(b.shape)}"
        if a.numel() == 0:
            continue
        af, bf = a.detach().double().cpu(), b.detach().double().cpu()
        err = (af - bf).abs().nan_to_num(nan=float("inf"), posinf=float("inf"))
        both_nan = af.isnan() & bf.isnan()
        err = torch.where(both_nan | (af == bf), torch.zeros_like(err), err)
        worst = max(worst, float(err.max()))
        if not torch.allclose(af, bf, rtol=rtol, atol=atol, equal_nan=True):
            ok, what = False, what or f"tensor {k} differs from eager (max abs error {float(err.max()):.3g})"
    return ok, worst, what


def _row(w: Workload, backend: str) -> dict:
    return {"workload": w.name, "backend": backend, "status": "ok", "error": None, "memory_bound": w.memory_bound,
            "cold_compile_s": None, "warm_compile_s": None, "median_s": None, "q1_s": None, "q3_s": None,
            "samples": 0, "inner": 0, "speedup": None, "speedup_lo": None, "speedup_hi": None,
            "min_bytes": None, "gbps": None, "frac_copy": None, "memory": None, "max_abs_err": None}


def steps_per_workload(opts: Options) -> int:
    compiled = [b for b in opts.backends if b != "eager"]
    return (len(compiled) * (2 if opts.warm_compile else 1) + 1
            + (1 if opts.memory_plan and "stax" in compiled and opts.device == "cpu" else 0)
            + (len(opts.backends) if opts.profile else 0))


def _reset(case) -> None:
    reset = getattr(case, "reset", None)
    if reset is not None:
        reset()


def _verdict(case, out, grads, ref_out, ref_grads, opts: Options) -> accuracy.Verdict:
    """Against eager: allclose (the older suites), or for a real-suite case the float64 rule of accuracy.py."""
    reference = getattr(case, "reference", None)
    if reference is None:
        ok, err, what = _compare(out, grads, ref_out, ref_grads, opts.rtol, opts.atol)
        return accuracy.Verdict(ok, err, what)
    n_out = len(_tensors(ref_out))
    if len(_tensors(out)) != n_out:
        return accuracy.Verdict(False, float("nan"), "different number of outputs")

    def fp64():
        o, g = reference()
        return _tensors(o) + list(g)

    return accuracy.check(_tensors(out) + grads, _tensors(ref_out) + ref_grads, fp64,
                          always_fp64=getattr(case, "low_precision", False))


def run_workload(w: Workload, opts: Options, copy_bw: float, progress: Progress) -> list[dict]:
    rows = {b: _row(w, b) for b in opts.backends}
    sync = sync_for(opts.device)
    compiled = [b for b in opts.backends if b != "eager"]
    try:
        case = w.make(opts.device, opts.quick)
        _reset(case)
        ref_out = case.fn(*case.inputs)
        ref_grads = _grads(case)
        sync()
        if getattr(case, "info", None):  # the real suite: model, shape, preset, variant
            for r in rows.values():
                r["case"] = dict(case.info)
    except Exception as e:  # noqa: BLE001 - report, never abort the run
        for r in rows.values():
            r.update(status="error", error="building the workload failed: " + _error(e))
        for _ in range(steps_per_workload(opts)):
            progress.step(f"{w.name}: skipped")
        return list(rows.values())
    nbytes = min_bytes(case, ref_out)

    def attempt(backend: str, stage: str, fn):
        row = rows[backend]
        if row["status"] == "error":
            return None
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            row.update(status="error", error=f"{stage}: {_error(e)}")
            if os.environ.get("STAX_BENCH_TRACEBACK"):
                traceback.print_exc()
            return None

    fns = {}
    torch._dynamo.reset()
    for b in compiled:  # cold: empty on-disk caches (a fresh cache dir per run), empty dynamo cache
        progress.step(f"{w.name}: {b} cold compile")

        def cold(b=b):
            if opts.warm_compile:  # (else the wrappers are timed: a reset would make them compile again)
                torch._dynamo.reset()
            if b == "stax":
                bk.reset_stax_counters()
            _reset(case)
            f, out, t = bk.first_call(b, case.fn, case.inputs, sync)
            v = _verdict(case, out, _grads(case), ref_out, ref_grads, opts)
            rows[b].update(cold_compile_s=t, max_abs_err=v.max_abs_err)
            if v.worst_ratio is not None or v.fp64_checked:
                rows[b]["accuracy"] = {"worst_rmse_ratio": v.worst_ratio, "fp64_checked": v.fp64_checked}
            if not v.ok:
                rows[b].update(status="mismatch", error=v.what)
            if b == "stax":
                rows[b]["stax"] = bk.stax_counters()
            if not opts.warm_compile:
                fns[b] = (lambda f=f: f(*case.inputs))

        attempt(b, "compile", cold)

    if opts.memory_plan and "stax" in compiled and opts.device == "cpu":  # the plan, from the per-graph reports
        progress.step(f"{w.name}: stax memory plan")

        def plan():
            from stax.frontend import config

            keep = os.path.join(opts.report_dir, _slug(w.name)) if opts.report_dir else None
            d = keep or tempfile.mkdtemp(prefix="stax-report-")
            try:
                torch._dynamo.reset()
                with config.patch(report=True, report_dir=d):
                    bk.first_call("stax", case.fn, case.inputs, sync)
                mem = stax_plan(d)
            finally:
                if keep is None:
                    shutil.rmtree(d, ignore_errors=True)
            rows["stax"]["memory"] = mem
            if mem and "eager" in rows:
                rows["eager"]["memory"] = {"kind": "eager_estimate", "peak_bytes": mem["eager_estimate_bytes"]}

        attempt("stax", "memory plan", plan)

    if opts.warm_compile:
        torch._dynamo.reset()  # warm: caches filled by the cold compile; wrappers of all backends coexist
    for b in compiled if opts.warm_compile else ():
        progress.step(f"{w.name}: {b} warm compile")

        def warm(b=b):
            f, _, t = bk.first_call(b, case.fn, case.inputs, sync)
            rows[b]["warm_compile_s"] = t
            return f

        f = attempt(b, "warm compile", warm)
        if f is not None:
            fns[b] = (lambda f=f: f(*case.inputs))
    if "eager" in rows:
        fns["eager"] = lambda: case.fn(*case.inputs)
    copy_fn = big_copy(opts.copy_bytes, opts.device) if w.memory_bound and fns else None
    if copy_fn is not None:  # the reference, timed in the same rounds: noise hits it like the backends
        fns[COPY] = copy_fn
        rows[COPY] = _row(w, COPY)

    progress.step(f"{w.name}: timing {', '.join(fns)}")
    if opts.device.startswith("cuda"):
        for b in list(fns):
            peak = attempt(b, "memory", lambda b=b: cuda_peak(fns[b], opts.device, sync))
            if peak is not None:
                rows[b]["memory"] = {"kind": "cuda_max_memory_allocated", "peak_bytes": peak}
    samples = _time(fns, rows, opts, sync)
    rows.pop(COPY, None)
    copy_s = Stats.of(samples.pop(COPY)).median if COPY in samples else None
    for b, xs in samples.items():
        s = Stats.of(xs)
        rows[b].update(median_s=s.median, q1_s=s.q1, q3_s=s.q3, samples=s.n, min_bytes=nbytes)
        gbps = achieved(nbytes, s.median) / 1e9
        if copy_s:  # against the copy bandwidth of the same rounds
            copy_gbps = achieved(2 * opts.copy_bytes, copy_s) / 1e9
            rows[b].update(gbps=gbps, frac_copy=gbps / copy_gbps, copy_gbps=copy_gbps)
        else:
            rows[b].update(gbps=gbps, frac_copy=gbps * 1e9 / copy_bw if copy_bw else None)
    if opts.profile:
        _profile(fns, rows, opts, sync, progress, w.name)
    eager = rows.get("eager")
    if eager and eager["median_s"]:
        for r in rows.values():
            if r["median_s"]:
                r["speedup"] = eager["median_s"] / r["median_s"]
                r["speedup_lo"] = eager["q1_s"] / r["q3_s"]
                r["speedup_hi"] = eager["q3_s"] / r["q1_s"]
    torch._dynamo.reset()
    gc.collect()
    return list(rows.values())


def _profile(fns: dict, rows: dict, opts: Options, sync, progress: Progress, name: str) -> None:
    """Each backend under torch.profiler: the per-call breakdown and (CPU) the measured tensor peak."""
    for b in opts.backends:
        progress.step(f"{name}: {b} profile")
        if b not in fns or rows[b]["median_s"] is None:
            continue
        calls = max(2, min(10, int(opts.profile_s / max(rows[b]["median_s"], 1e-6))))
        fallback = (rows[b].get("stax") or {}).get("fallback_ops", {})
        try:
            p = profile_backend(b, fns[b], calls, opts.device, sync, fallback)
        except Exception as e:  # noqa: BLE001 - a profile is extra information: never fail the row for it
            rows[b]["breakdown"] = {"error": _error(e)}
            continue
        rows[b]["breakdown"] = p["breakdown"]
        if p["peak_bytes"] is not None:
            rows[b]["memory"] = {"kind": "cpu_tensor_peak", "peak_bytes": p["peak_bytes"]}


def _time(fns: dict, rows: dict, opts: Options, sync) -> dict:
    """Interleaved samples; a backend that crashes while timing is dropped and the rest re-timed."""
    fns = dict(fns)
    while fns:
        try:
            inner = {b: calibrate(f, opts.min_sample_s, sync) for b, f in fns.items()}
            samples = interleaved(fns, opts.rounds, inner, sync)
            for b in fns:
                rows[b]["inner"] = inner[b]
            return samples
        except Exception as e:  # noqa: BLE001 - find the culprit, drop it, go on
            bad = next((b for b, f in fns.items() if _fails(f)), None)
            if bad is None:
                raise
            rows[bad].update(status="error", error="while timing: " + _error(e))
            del fns[bad]
    return {}


def _fails(f) -> bool:
    try:
        f()
        return False
    except Exception:  # noqa: BLE001
        return True


def _loadavg() -> list | None:
    """1/5/15-minute load averages: other work on a shared machine shows up here."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


def warm_up(opts: Options) -> None:
    """One untimed compile per backend, so one-time costs (imports, ISA probe) are not charged to the first workload."""
    x = torch.randn(8, 8, device=opts.device)
    torch._dynamo.reset()
    for b in opts.backends:
        try:
            bk.first_call(b, lambda t: (t * 2).sum(-1), (x,))
        except Exception:  # noqa: BLE001 - the real workloads will report it
            pass
    torch._dynamo.reset()


def machine(opts: Options) -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    # the vector ISA ATen and oneDNN dispatch to (AVX2 / AVX512): this team's machines differ in it
    cpu = f"{cpu} ({torch.backends.cpu.get_cpu_capability()})"
    info = {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform()}
    if opts.device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(opts.device)
    try:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        info["commit"] = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        info["commit"] = None
    return info


def selected(opts: Options) -> list[Workload]:
    if opts.suite == "real":
        from ..workloads import real

        ws = real.workloads(opts.variant or real.Variant())
    else:
        ws = suite(opts.suite)
    if opts.only:
        ws = [w for w in ws if any(w.name.lower().startswith(o.lower()) for o in opts.only)]
    elif opts.quick:
        ws = [w for w in ws if w.quick]
    return ws


def malloc_policy(opts: Options) -> dict:
    """Apply Stax's CPU malloc tuning *before* anything is timed, so every backend (eager and
    Inductor too) allocates under the same process-wide settings; say what they are."""
    if opts.device != "cpu" or "stax" not in opts.backends:
        return {"applied": {}, "reason": "glibc defaults (stax.cpu not benchmarked here)"}
    try:
        import stax.cpu
    except ImportError as e:
        return {"applied": {}, "reason": f"stax.cpu not importable: {e}"}
    t = stax.cpu.tune_malloc()
    return {"applied": dict(t.applied), "reason": t.reason}


def _skipped(w: Workload, opts: Options, why: str) -> list[dict]:
    rows = [_row(w, b) for b in opts.backends]
    for r in rows:
        r.update(status="skipped", error=why)
    return rows


def run(opts: Options, stream=None, on_workload=None) -> dict:
    """The whole suite; returns {'meta': ..., 'results': [row, ...]}. `on_workload(data)` is called
    after every workload with the results so far (to write them out as the run goes)."""
    workloads = selected(opts)
    progress = Progress(2 + len(workloads) * steps_per_workload(opts), stream)
    t0 = time.time()
    load_before = _loadavg()
    malloc = malloc_policy(opts)
    progress.step("copy bandwidth")
    copy_bw = copy_bandwidth(opts.device, opts.copy_bytes)
    progress.step("warm-up compiles")
    warm_up(opts)
    results = []

    def data() -> dict:
        meta = {
            "suite": opts.suite, "device": opts.device, "backends": list(opts.backends), "quick": opts.quick,
            "rounds": opts.rounds, "min_sample_s": opts.min_sample_s, "copy_bandwidth_gbps": copy_bw / 1e9,
            "copy_bytes": opts.copy_bytes, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "wall_s": time.time() - t0, "machine": machine(opts), "malloc": malloc,
            "load_average": {"start": load_before, "end": _loadavg()},
        }
        if opts.variant is not None:
            meta["variant"] = dict(opts.variant.__dict__, label=opts.variant.label)
        return {"meta": meta, "results": list(results)}

    for w in workloads:
        if opts.deadline_s is not None and time.time() - t0 > opts.deadline_s:
            results += _skipped(w, opts, f"skipped: the run's deadline ({opts.deadline_s:.0f} s) had passed")
            for _ in range(steps_per_workload(opts)):
                progress.step(f"{w.name}: skipped (deadline)")
        else:
            results += run_workload(w, opts, copy_bw, progress)
        if on_workload is not None:
            on_workload(data())
    progress.close()
    return data()
