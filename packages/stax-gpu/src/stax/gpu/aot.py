"""Ahead-of-time compile checks: build every generated kernel for a GPU target
without a GPU (Triton's compiler and ptxas run on any host).

The interpreter runs kernels with numpy semantics and would accept code the real
compiler rejects (libdevice calls, layout conversions, dtype mismatches); this
catches those on a CPU-only machine. Needs TRITON_INTERPRET unset.
"""

from __future__ import annotations

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

_PTR = {
    "bool": "*i1", "uint8": "*u8", "int8": "*i8", "int16": "*i16", "int32": "*i32", "int64": "*i64",
    "float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64",
}


def _int_type(v: int) -> str:
    return "i32" if -(2**31) <= v < 2**31 else "i64"


def compile_module(compiled, graph, arch: int = 90, all_configs: bool = False, ptx: list | None = None) -> list[str]:
    """Compile each kernel variant of a CompiledModule for sm_<arch>; returns 'name config' lines
    (and appends each kernel's PTX to `ptx` when given)."""
    from .compile import generated_module

    module = generated_module(compiled)
    graph = getattr(module, "GRAPH", None) or graph  # the graph as compiled (with split partials)
    done = []
    for name in sorted(n for n in vars(module) if n.startswith("launch_")):
        launcher = getattr(module, name)
        if launcher.options.get("launch_pdl") and arch < 90:
            raise ValueError(f"stax-gpu: {launcher.name} uses programmatic dependent launch (sm90+); "
                             f"compile it with GpuConfig(pdl=False) for sm_{arch}")
        seen = set()
        for cfg in launcher.candidates:
            if cfg.variant in seen and not all_configs:
                continue
            seen.add(cfg.variant)
            ks, fn = launcher.variants[cfg.variant]
            sig = {}
            for buf in ks.args:
                sig[f"p{len(sig)}"] = _PTR[graph.buffer_layout(buf).dtype.name]
            if ks.uses_err:
                sig["err_ptr"] = "*i32"
            params = list(fn.arg_names)
            signature = dict(zip(params, list(sig.values()) + [_int_type(v) for _, v in ks.numels]))
            constexprs = cfg.kwargs()
            for b in constexprs:
                signature[b] = "constexpr"
            src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
            kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                                    options={"num_warps": cfg.num_warps, **launcher.options})
            if ptx is not None:
                ptx.append(kernel.asm["ptx"])
            done.append(f"{ks.name} {cfg.key()}")
    return done
