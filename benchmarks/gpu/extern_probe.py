"""Which extern calls of a real model's compiled step copy their result, and which inputs are conformed per call.

Wraps stax.gpu's `extern_call` (before the model compiles: generated modules import it at load)
to count, per extern kernel, the calls and the results whose layout differs from the one the graph
expects (each costs a copy kernel and an allocation), the results `aten_runtime._conform` copies
(a multi-output call's items, through getitem), and wraps the frontend's slow input path
(`CompiledGraph._conform_slow`) to name the inputs it re-strides or moves each call. Then a
cProfile of a few steps prints who calls `Tensor.to` and `Tensor.copy_`. Issue 20: host time.

    export PYTHONPATH=$(ls -d packages/*/src | paste -sd:):.
    python3 benchmarks/gpu/extern_probe.py --models vit,resnet18 --train --out DIR
    python3 benchmarks/gpu/extern_probe.py --models vit --train --dry-run   # CPU, Triton's interpreter
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import os
import pstats
import sys
import time

if "--dry-run" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.harness.backends import wrap  # noqa: E402
from benchmarks.workloads import real_models as R  # noqa: E402

CALLS: collections.Counter = collections.Counter()
COPIES: collections.Counter = collections.Counter()
SLOW: collections.Counter = collections.Counter()
CONFORMED: collections.Counter = collections.Counter()  # results aten_runtime._conform copied (tuple items too)


def _same(out, sizes, strides, dtype) -> bool:
    return out.dtype == dtype and (out.numel() <= 1 or all(s == 1 or a == e for s, a, e in
                                                           zip(sizes, out.stride(), strides)))


def instrument() -> None:
    import stax.gpu.runtime as rt
    from stax.frontend import runtime as fr

    original = rt.extern_call

    def extern_call(fn, inputs, constants, sizes, strides, dtype, device, call_sizes=None):
        out = fn(*inputs, **constants) if call_sizes is None else fn(*inputs, **constants, sizes=call_sizes)
        name = str(getattr(fn, "__name__", type(fn).__name__))
        CALLS[name] += 1
        if isinstance(out, torch.Tensor) and not _same(out, sizes, strides, dtype):
            COPIES[(name, tuple(sizes), tuple(out.stride()), tuple(strides), str(out.dtype), str(dtype))] += 1
        return original(lambda *a, **k: out, (), {}, sizes, strides, dtype, device)

    rt.extern_call = extern_call
    slow = fr.CompiledGraph._conform_slow

    def conform_slow(self, inputs, expect=None):
        exp = self._expect if expect is None else expect
        for k, (t, e) in enumerate(zip(inputs, exp)):
            if e is None or not isinstance(t, torch.Tensor):
                continue
            sizes, strides, dtype = e
            if t.device != self.device or t.dtype != dtype or tuple(t.stride()) != tuple(strides):
                SLOW[(self.input_names[k], str(t.device), str(t.dtype), tuple(t.shape), tuple(t.stride()),
                      str(dtype), tuple(strides), k in self._opaque)] += 1
        return slow(self, inputs, expect)

    fr.CompiledGraph._conform_slow = conform_slow

    from stax.frontend import aten_runtime as ar

    conform = ar._conform

    def _conform(t, out, bufs, fresh=False):  # getitem_kernel's and library calls' results (looked up per call)
        r = conform(t, out, bufs, fresh)
        if r is not t:
            caller = sys._getframe(1).f_code.co_name
            CONFORMED[(caller, tuple(t.shape), tuple(t.stride()), tuple(out[1]), str(t.dtype))] += 1
        return r

    ar._conform = _conform


def probe(name: str, train: bool, device: str, sync, steps: int) -> str:
    sample = R.build(name, "cuda" if device == "cuda" else "test", device, torch.float32)
    fn, inputs, _ = R.program(sample, train, device=device)
    torch._dynamo.reset()
    f = wrap("stax", fn)
    f(*inputs)
    for _ in range(2):
        f(*inputs)
    sync()
    for c in (CALLS, COPIES, SLOW, CONFORMED):
        c.clear()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        f(*inputs)
    sync()
    prof.disable()
    lines = [f"## {name} ({'training' if train else 'inference'}, {device}): per step"]
    lines.append(f"extern calls {sum(CALLS.values()) / steps:.0f}: "
                 + ", ".join(f"{k} {v / steps:.0f}" for k, v in CALLS.most_common()))
    lines.append(f"results copied to the expected layout {sum(COPIES.values()) / steps:.0f}:")
    lines += [f"  {v / steps:4.0f}x {k[0]} sizes {k[1]} got strides {k[2]} expected {k[3]} ({k[4]} -> {k[5]})"
              for k, v in COPIES.most_common(60)]
    lines.append(f"results aten_runtime._conform copied {sum(CONFORMED.values()) / steps:.0f} (getitem: tuple items):")
    lines += [f"  {v / steps:4.0f}x {k[0]} sizes {k[1]} got strides {k[2]} expected {k[3]} ({k[4]})"
              for k, v in CONFORMED.most_common(60)]
    lines.append(f"inputs through the slow path {sum(SLOW.values()) / steps:.0f}:")
    lines += [f"  {v / steps:4.0f}x {k[0]}: {k[1]} {k[2]} {k[3]} strides {k[4]}; expected {k[5]} strides {k[6]}"
              f"{' (opaque)' if k[7] else ''}" for k, v in SLOW.most_common(60)]
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_callers(r"method 'to' of|method 'copy_' of|_empty_strided|as_strided|_conform_slow")
    st.sort_stats("cumulative").print_stats(60)
    lines.append(buf.getvalue())
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="vit")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", default=".")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    if a.dry_run:
        from stax.frontend import config

        route = config.patch(device_override="gpu")
        route.__enter__()
    instrument()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    R.ensure_timm()
    names = [m.name for m in R.MODELS if any(m.name.startswith(p) for p in a.models.split(","))]
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"externs-{'train' if a.train else 'infer'}.txt")
    for name in names:
        t = time.perf_counter()
        try:
            text = probe(name, a.train, device, sync, a.steps)
        except Exception as e:  # noqa: BLE001 - one model's failure must not lose the others'
            text = f"## {name}: {type(e).__name__}: {e}"
        print(text[:3000], f"\n({time.perf_counter() - t:.0f} s)", flush=True)
        with open(path, "a") as fh:
            fh.write(text + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
