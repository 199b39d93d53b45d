"""The whole-graph cache's key: what a compiled graph depends on, hashed.

sha256 over: the key format; the versions (torch's, Python's, and the source text of the stax
packages the code comes from, stax.gpu's too for a GPU graph: every package is 0.1.0 while it
changes daily, so a version string alone would load stale code); the build identity of the target
(CPU: what stax.cpu resolved, compiler version, ISA level chosen, threads, flags; GPU: `gpu_identity`,
the device kind, Triton's version and the resolved GpuConfig); the Config (minus where dumps go);
the graph kind and the input layouts a variant is compiled for; the FX graph's code; per node,
its target and the metadata of its value (shape, strides, dtype, device, requires_grad), the
example inputs' as well; the bytes of every constant tensor; and AOTAutograd's split of a
forward graph's outputs (saved for backward).
Anything it cannot describe raises Uncacheable with the reason: that graph is compiled, not cached.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import platform
from pathlib import Path

import torch

from .config import Config
from .symbolic import multiple_of

FORMAT = "stax-graph-cache-v2"  # v2: symbolic sizes in the key (v1 entries are never read)
PACKAGES = ("stax.ir", "stax.sched", "stax.cpu", "stax.frontend")
GPU_PACKAGES = PACKAGES + ("stax.gpu",)


class Uncacheable(Exception):
    """A graph the whole-graph cache does not store or look up; the message is the reason (logged, counted)."""


@functools.cache
def versions(packages: tuple = PACKAGES) -> str:
    """torch, Python and a hash of the stax packages' sources (read once per process, ~1 MB)."""
    import importlib

    h = hashlib.sha256()
    for name in packages:
        root = Path(importlib.import_module(name).__file__).parent
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"torch {torch.__version__} {torch.version.git_version}; python {platform.python_version()}; " \
           f"stax sources {h.hexdigest()}"


def config_text(cfg: Config) -> str:
    """The Config as it affects code (where debug dumps and reports go, and strictness, do not)."""
    return repr(dataclasses.replace(cfg, debug=False, debug_dir="", report=False, report_dir="", strict=False,
                                    graph_cache_dir=None))


def _value_meta(v, symbols: dict) -> str:
    """`v`'s metadata as text; a SymInt as its expression (after the guards' replacements), its symbols'
    facts collected in `symbols` (name -> text) for the key's end."""
    if isinstance(v, torch.SymInt):
        return _sym_text(v, symbols)
    if isinstance(v, torch.Tensor):
        def dims(xs):
            return "(" + ",".join(_value_meta(x, symbols) for x in xs) + ")"
        channels_last = v.is_contiguous(memory_format=torch.channels_last) if v.dim() == 4 else ""
        return (f"T({v.dtype},{v.device},{dims(v.shape)},{dims(v.stride())},"
                f"{_value_meta(v.storage_offset(), symbols)},{v.requires_grad},{channels_last})")
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(_value_meta(x, symbols) for x in v) + ")"
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    if isinstance(v, (torch.SymFloat, torch.SymBool)):
        raise Uncacheable("symbolic values")
    return type(v).__name__


def _sym_text(x: torch.SymInt, symbols: dict) -> str:
    """A symbolic size in the key: its expression over the ShapeEnv's symbols, each of which the key ends
    with: its range and what it is known a multiple of, the facts the compiled code is correct under
    (symbolic.Symbols reads the same). Not the example value: decisions taken at it (fusion scores,
    parallel depth) hold at every size of the range, so a process whose first sizes differ still hits."""
    env = x.node.shape_env
    e = env.replace(x.node.expr)
    for s in sorted(e.free_symbols, key=str):
        vr = env.var_to_range.get(s)
        symbols[str(s)] = f"[{vr.lower if vr else '?'}, {vr.upper if vr else '?'}] multiple of {multiple_of(s, env)}"
    return f"S({e})"


def _constant_bytes(value: torch.Tensor) -> bytes:
    """The constant's data (the backend runs under AOTAutograd's fake mode: leave it to read them)."""
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    if isinstance(value, FakeTensor) or value.device.type == "meta":
        raise Uncacheable("a constant tensor without data at compile time")
    with unset_fake_temporarily():
        t = value.detach().cpu().contiguous()
        return t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _saved_split(kind: str) -> str:
    """AOTAutograd's forward outputs saved for the backward (the lowering lets those keep NHWC)."""
    if kind != "forward":
        return ""
    tc = torch._guards.TracingContext.try_get()
    meta = getattr(tc, "fw_metadata", None) if tc is not None else None
    return repr(getattr(meta, "tensors_saved_for_backwards_slice", None))


def gpu_identity(gpu_config) -> str:
    """What a GPU graph's code depends on beyond the Config: the device kind (GPU name and compute
    capability, or 'interpreter' under TRITON_INTERPRET=1) with Triton's version, and the GpuConfig
    resolved from the environment (STAX_GPU_CONFIG) and config.gpu_options, less where files go
    and how many processes compile them."""
    import stax.gpu

    if gpu_config.autotuner is not None:
        raise Uncacheable("gpu_options.autotuner is an object the key cannot describe")
    code = dataclasses.replace(gpu_config, cache_dir="", compile_workers=None)
    return f"{stax.gpu.target_identity(gpu_config)}; {code!r}"


def graph_key(gm: torch.fx.GraphModule, example_inputs, kind: str, cfg: Config, build_identity: str,
              input_strides=None, packages: tuple = PACKAGES) -> str:
    """The hex sha256 naming this graph's cache entry (raises Uncacheable). `packages`: the stax
    packages whose sources the code comes from (GPU_PACKAGES for a GPU graph)."""
    h = hashlib.sha256()

    def put(text: str) -> None:
        h.update(text.encode())
        h.update(b"\0")

    for part in (FORMAT, versions(packages), build_identity, config_text(cfg), kind, repr(input_strides), gm.code,
                 _saved_split(kind)):
        put(part)
    examples = iter(example_inputs)
    symbols: dict = {}
    for node in gm.graph.nodes:
        put(f"{node.op} {node.name} {node.target}")
        if node.op == "placeholder":
            put(_value_meta(next(examples, None), symbols))
        elif node.op == "get_attr":
            value = getattr(gm, node.target)
            if not isinstance(value, torch.Tensor):
                raise Uncacheable(f"get_attr {node.target} is a {type(value).__name__}")
            put(_value_meta(value, symbols))
            h.update(_constant_bytes(value))
        put(_value_meta(node.meta.get("val"), symbols))
    put("symbols " + "; ".join(f"{k}: {v}" for k, v in sorted(symbols.items())))
    return h.hexdigest()
