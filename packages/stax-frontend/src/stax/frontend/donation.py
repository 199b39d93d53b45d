"""Graph inputs a compiled graph may overwrite: AOTAutograd's data-mutated inputs.

AOTAutograd (keep_inference_input_mutations off) returns each mutated input's new value as one of
the graph's first outputs and copies it into the input after the call (`p.copy_(new)`): an optimizer
step is nothing else. When the kernel computing the new value writes it into the input's own storage
(stax.sched's in-place reuse of a donated input), that copy finds the same data and returns at once
(ATen's copy_ skips a tensor copied onto itself), so a step reads and writes each parameter once
instead of twice, and allocates nothing for the new values.
"""

from __future__ import annotations

import dataclasses
import logging

import torch
from stax.sched.schedule import REUSE

from .strides import same_view

log = logging.getLogger("stax.frontend")

# AOTAutograd's graphs whose first outputs are the new values of the mutated inputs, in order
KINDS = ("inference", "forward")


def mutated_inputs(kind: str) -> tuple:
    """Runtime input indices whose data (only) the graph being compiled mutates, in the order of
    its first outputs; () outside AOTAutograd or for a graph kind without that convention."""
    tc = torch._guards.TracingContext.try_get()
    meta = getattr(tc, "fw_metadata", None) if tc is not None else None
    if kind not in KINDS or meta is None:
        return ()
    indices = tuple(getattr(meta, "mutated_inp_runtime_indices", ()) or ())
    infos = getattr(meta, "input_info", ())
    for i in indices:
        info = infos[i] if i < len(infos) else None
        if info is None or not info.mutates_data or info.mutates_metadata or getattr(
                info, "mutates_storage_metadata", False):
            return ()  # a metadata mutation (or an unknown input): the first outputs may be views
    return indices


def donated_pairs(lowered, mutated: tuple) -> tuple:
    """(input buffer, output buffer) pairs the scheduler may write in place: the j-th graph output
    is mutated input `mutated[j]`'s new value, a whole buffer of the input's own layout that no
    other output returns (the caller's copy into the input would overwrite that output)."""
    graph, specs = lowered.graph, lowered.outputs
    pairs = []
    for j, i in enumerate(mutated):
        if j >= len(specs) or i >= len(lowered.input_names):
            return ()
        spec = specs[j]
        if spec is None or spec.kind != "buffer" or spec.view is not None:
            continue
        if sum(1 for s in specs if s is not None and s.kind in ("buffer", "view_of_output")
               and s.index == spec.index) != 1:
            continue
        inp, out = lowered.placeholder_input(i), graph.outputs[spec.index]
        if inp is None or inp.name in lowered.opaque_inputs:
            continue
        lay_in, lay_out = inp.layout, graph.buffer_layout(out)
        if lay_in.dtype != lay_out.dtype or not same_view(tuple(lay_in.sizes), tuple(lay_in.strides),
                                                          tuple(lay_out.sizes), tuple(lay_out.strides)):
            continue  # (strides of size-1 dims may differ: the same memory either way)
        pairs.append((inp.name, out))
    if pairs:
        log.debug("donated inputs (written in place): %s", ", ".join(f"{o} -> {i}" for i, o in pairs))
    return tuple(pairs)


def return_inputs(lowered, schedule, mutated: tuple) -> None:
    """Outputs the schedule wrote into their donated input become `donated` OutputSpecs: the call
    returns the input tensor itself (checked per call: same data pointer), so AOTAutograd's
    `copy_` back into it is a tensor copied onto itself, which ATen skips."""
    if schedule is None:
        return
    graph = lowered.graph
    done = {(e.reuses, e.buffer) for e in schedule.memory.events if e.kind == REUSE}
    for j, i in enumerate(mutated):
        spec = lowered.outputs[j] if j < len(lowered.outputs) else None
        if spec is None or spec.kind != "buffer" or i >= len(lowered.input_names):
            continue
        inp = lowered.placeholder_input(i)
        if inp is not None and (inp.name, graph.outputs[spec.index]) in done:
            lowered.outputs[j] = dataclasses.replace(spec, kind="donated", value=i)
