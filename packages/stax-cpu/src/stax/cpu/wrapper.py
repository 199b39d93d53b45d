"""Schedule -> the Python source of `call(args)` (Listing 8.1).

The wrapper checks input layouts, clears `args` so inputs can be released early,
then walks the kernels in order applying the memory plan: allocations before a
kernel, `bufB = bufA; del bufA  # reuse` lines, kernel calls with data pointers,
an error check, and `del` after a buffer's last use. It is generated as text so it
can be read and dumped; `compile_schedule` exec's it in a namespace of runtime hooks.
"""

from __future__ import annotations

from stax.ir import ExternKernel, Graph, Layout
from stax.ir.index import as_int
from stax.sched.schedule import ALLOC, EXTERN, FREE, REUSE, Schedule


def _ints(xs) -> tuple:
    return tuple(as_int(x) for x in xs)


def _tuple(xs) -> str:
    xs = _ints(xs)
    return "(" + ", ".join(map(str, xs)) + ("," if len(xs) == 1 else "") + ")"


def _same_layout(a: Layout, b: Layout) -> bool:
    return a.dtype == b.dtype and _ints(a.sizes) == _ints(b.sizes) and _ints(a.strides) == _ints(b.strides)


def _dt(layout: Layout) -> str:
    return f"dt_{layout.dtype.name}"


def wrapper_source(schedule: Schedule, kernel_params: dict, externs: dict, local: set = frozenset()) -> str:
    """`kernel_params`: kernel name -> buffer names in argument order; `externs`: node -> ns name;
    `local`: buffers that live inside their kernel (no allocation, no frees)."""
    g: Graph = schedule.graph
    inputs = [i.name for i in g.inputs]
    outputs = set(g.outputs)
    # buffers that must be real objects with their own layout (not just storage for a pointer)
    needs_object = set(outputs)
    for n in g.nodes:
        if isinstance(n, ExternKernel):
            needs_object.update(n.inputs)
    events: dict = {}
    donors = {e.reuses for e in schedule.memory.events if e.kind == REUSE}  # their `del` is the reuse line
    for e in schedule.memory.events:
        if e.buffer in local and e.kind != REUSE:
            continue
        events.setdefault((e.step, e.kind == FREE), []).append(e)

    L = ["def call(args):"]
    L.append(f"    if len(args) != {len(inputs)}:")
    msg = f"compiled graph takes {len(inputs)} inputs {tuple(inputs)}, got %d"
    L.append(f"        raise TypeError({msg!r} % len(args))")
    if inputs:
        L.append(f"    {', '.join(inputs)}{',' if len(inputs) == 1 else ''} = args")
    for inp in g.inputs:
        lay = inp.layout
        L.append(f"    check_input({inp.name}, {_tuple(lay.sizes)}, {_tuple(lay.strides)}, {_dt(lay)}, {inp.name!r})")
    L.append("    args.clear()")
    L.append("    err = new_err()")
    L.append("    errp = addressof(err)")
    live = set(inputs)

    def alloc(name: str) -> None:
        lay = g.buffer_layout(name)
        if as_int(lay.offset) != 0:
            raise NotImplementedError(f"{name}: computed buffers with a storage offset are not supported")
        L.append(f"    {name} = empty_strided({_tuple(lay.sizes)}, {_tuple(lay.strides)}, {_dt(lay)})")
        live.add(name)

    for step, k in enumerate(schedule.kernels):
        node0 = g.node(k.nodes[0])
        for e in events.get((step, False), []):
            if e.kind == ALLOC:
                if not isinstance(g.node(e.buffer), ExternKernel):
                    alloc(e.buffer)
            elif e.kind == REUSE:
                lay, old = g.buffer_layout(e.buffer), g.buffer_layout(e.reuses)
                if e.buffer in local:  # lives inside its kernel: the donor's storage is just released
                    if e.reuses in live:
                        L.append(f"    del {e.reuses}  # {e.buffer} is kernel-local")
                        live.discard(e.reuses)
                    continue
                if e.reuses not in live or isinstance(g.node(e.buffer), ExternKernel):
                    if e.reuses in live:
                        L.append(f"    del {e.reuses}  # reuse not applied: extern kernels return their own buffer")
                        live.discard(e.reuses)
                    continue
                if lay.nbytes() > old.nbytes():
                    alloc(e.buffer)
                    L.append(f"    del {e.reuses}  # reuse refused: {e.reuses} is smaller")
                elif _same_layout(lay, old) or e.buffer not in needs_object:
                    L.append(f"    {e.buffer} = {e.reuses}; del {e.reuses}  # reuse")
                    live.add(e.buffer)
                else:
                    L.append(
                        f"    {e.buffer} = as_strided({e.reuses}, {_tuple(lay.sizes)}, {_tuple(lay.strides)}, "
                        f"{_dt(lay)}); del {e.reuses}  # reuse"
                    )
                    live.add(e.buffer)
                live.discard(e.reuses)
        if k.kind == EXTERN:
            assert isinstance(node0, ExternKernel)
            lay = node0.layout
            args = ", ".join(node0.inputs)
            L.append(
                f"    {node0.name} = fix_layout({externs[node0.name]}({args}{', ' if args else ''}**consts_{node0.name}), "
                f"{_tuple(lay.sizes)}, {_tuple(lay.strides)}, {_dt(lay)}, {node0.name!r}, {node0.kernel!r})"
            )
            live.add(node0.name)
        else:
            for name in k.nodes:  # defensive: a plan without an alloc for a computed buffer
                if name not in live and name not in local:
                    alloc(name)
            ptrs = ", ".join(f"data_ptr({b})" for b in kernel_params[k.name])
            L.append(f"    if k_{k.name}({ptrs}{', ' if ptrs else ''}errp):")
            L.append(f"        raise_error(err, {k.name!r})")
        for e in events.get((step, True), []):
            if e.buffer in live and e.buffer not in outputs and e.buffer not in donors:
                L.append(f"    del {e.buffer}")
                live.discard(e.buffer)
    outs = ", ".join(g.outputs)
    L.append(f"    return ({outs}{',' if len(g.outputs) == 1 else ''})")
    return "\n".join(L) + "\n"
