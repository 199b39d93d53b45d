"""Ahead-of-time compile checks: build every generated kernel for a GPU target
without a GPU (Triton's compiler and ptxas run on any host).

The interpreter runs kernels with numpy semantics and would accept code the real
compiler rejects (libdevice calls, layout conversions, dtype mismatches); this
catches those on a CPU-only machine. Needs TRITON_INTERPRET unset.
"""

from __future__ import annotations

from .precompile import build, job_for


def compile_module(compiled, graph, arch: int = 90, all_configs: bool = False, ptx: list | None = None) -> list[str]:
    """Compile each kernel variant of a CompiledModule for sm_<arch>; returns 'name config' lines
    (and appends each kernel's PTX to `ptx` when given). The jobs are the ones the worker
    processes of precompile.py compile on a GPU host."""
    from .compile import generated_module, launchers

    module = generated_module(compiled)
    graph = getattr(module, "GRAPH", None) or graph  # the graph as compiled (with split partials)
    artifact = getattr(module, "ARTIFACT", None)  # its pointer dtypes (a module loaded from a cache has no GRAPH)
    known = {b: d for k in artifact.kernels for b, d in k.arg_dtypes} if artifact is not None else {}
    done = []
    for launcher in launchers(module):
        if launcher.options.get("launch_pdl") and arch < 90:
            raise ValueError(f"stax-gpu: {launcher.name} uses programmatic dependent launch (sm90+); "
                             f"compile it with GpuConfig(pdl=False) for sm_{arch}")
        seen = set()
        for cfg in launcher.candidates:
            if cfg.variant in seen and not all_configs:
                continue
            seen.add(cfg.variant)
            ks, fn = launcher.variants[cfg.variant]
            dtypes = [known[b] if b in known else graph.buffer_layout(b).dtype.name for b in ks.args]
            kernel = build(job_for(ks, fn, dtypes, cfg, launcher.options, ("cuda", arch, 32), module), fn)
            if ptx is not None:
                ptx.append(kernel.asm["ptx"])
            done.append(f"{ks.name} {cfg.key()}")
    return done
