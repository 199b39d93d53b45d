"""Schedule -> the Python source of `call(args)` (Listing 8.1).

The wrapper checks input layouts, clears `args` so inputs can be released early,
then walks the kernels in order applying the memory plan (stax.sched.plan_walk's calls):
allocations before a kernel, `bufB = bufA; del bufA  # reuse` lines, kernel calls with data
pointers, an error check, and `del` after a buffer's last use. It is generated as text so it
can be read and dumped; `compile_schedule` exec's it in a namespace of runtime hooks.

A symbolic-shape graph's sizes come from `call(args, sizes=(s0, s1, ...))` (values in `size_vars` row
order: a caller that binds them itself, or a size that is no input's dimension) or are read from the
inputs at each call (`s0 = size_of(x, 0, 2, 'x')`, the first input dim that is exactly the symbol);
`call` checks them against their ranges; they are used in the layout checks, the allocations, as the
kernels' size arguments, and passed to every extern call as `sizes=` (its constants may hold them).
"""

from __future__ import annotations

from stax.ir import ExternKernel, Graph, Layout
from stax.ir.index import as_int
from stax.ir.index_printer import to_python
from stax.sched.plan_walk import donors, plan_calls
from stax.sched.schedule import ALLOC, EXTERN, REUSE, Schedule


def _ints(xs) -> tuple:
    return tuple(as_int(x) for x in xs)


def _tuple(xs) -> str:
    xs = _ints(xs) if all(x.is_Integer for x in xs) else tuple(to_python(x) for x in xs)
    return "(" + ", ".join(map(str, xs)) + ("," if len(xs) == 1 else "") + ")"



def _layouts_source(g: Graph, hoisted: dict) -> list[str]:
    """`_layouts(sizes)`: every size-dependent tuple of call_unchecked (allocation and view layouts),
    computed once per sizes seen. Each call would otherwise evaluate them all in Python: +0.1 ms
    per call of a 4-layer GPT-2 at 1 x 17 tokens over the static wrapper's literals."""
    names = [r.symbol.name for r in g.size_vars.rows]
    items = sorted(hoisted, key=hoisted.get)
    return ["_LAYOUTS = {}", "", "",
            "def _layouts(sizes):",
            "    hit = _LAYOUTS.get(sizes)",
            "    if hit is None:",
            f"        {', '.join(names)}, = sizes",
            "        if len(_LAYOUTS) >= 64:  # a bounded memo",
            "            _LAYOUTS.clear()",
            "        hit = _LAYOUTS[sizes] = (" + ", ".join(items) + ",)",
            "    return hit", "", ""]


def _same_layout(a: Layout, b: Layout) -> bool:
    if not all(x.is_Integer for x in (*a.sizes, *a.strides, *b.sizes, *b.strides)):
        return a.dtype == b.dtype and a.sizes == b.sizes and a.strides == b.strides
    return a.dtype == b.dtype and _ints(a.sizes) == _ints(b.sizes) and _ints(a.strides) == _ints(b.strides)


def _size_sources(g: Graph) -> list[tuple[str, str | None, int, int]]:
    """(symbol, input, dim, ndim) for each size symbol: the first input dim that is exactly it
    (input None: no input has it as a dim; the caller must pass `sizes`)."""
    out = []
    for r in g.size_vars.rows:
        src = next(((i.name, d, len(i.layout.sizes)) for i in g.inputs for d, s in enumerate(i.layout.sizes)
                    if s == r.symbol), (None, -1, 0))
        out.append((r.symbol.name, *src))
    return out


def _bind_sizes(g: Graph, L: list, check: bool) -> None:
    """Lines binding the size symbols: from `sizes` (the values in `size_vars` row order) when the
    caller passes it, else read from the inputs; with `check`, their range checks."""
    rows = {r.symbol.name: r for r in g.size_vars.rows}
    names = [r.symbol.name for r in g.size_vars.rows]
    sources = _size_sources(g)
    L.append("    if sizes is not None:")
    L.append(f"        {', '.join(names)}, = sizes")
    L.append("    else:")
    for name, inp, d, ndim in sources:
        if inp is None:
            msg = f"size {name} is no input's dimension: pass sizes= (the values of {tuple(names)})"
            L.append(f"        raise TypeError({msg!r})")
            break
        L.append(f"        {name} = size_of({inp}, {d}, {ndim}, {inp!r})")
    L.append(f"    sizes = ({', '.join(names)},)")
    if check:
        for name, inp, d, _ in sources:
            r = rows[name]
            hi = r.hi if r.hi != float("inf") else "float('inf')"
            where = f"{inp} dim {d}" if inp is not None else "sizes"
            L.append(f"    check_size_range({name!r}, {name}, {r.lo}, {hi}, {where!r})")


def _dt(layout: Layout) -> str:
    return f"dt_{layout.dtype.name}"


def wrapper_source(schedule: Schedule, kernel_params: dict, externs: dict, local: set = frozenset(),
                   regions: dict | None = None, bound: set = frozenset()) -> str:
    """`kernel_params`: function name -> buffer names in argument order; `externs`: node -> ns name;
    `local`: buffers that live inside their kernel (no allocation, no frees); `regions`: function
    name -> the consecutive schedule kernels it runs (one call: the allocations of all of them
    before it, their releases after it); `bound`: extern nodes whose callable already holds its
    constants (called with the buffers only, not `**consts_<node>`)."""
    g: Graph = schedule.graph
    step_of = {k.name: s for s, k in enumerate(schedule.kernels)}
    region_of = {step_of[ks[0]]: (fn, len(ks)) for fn, ks in (regions or {}).items()}
    inputs = [i.name for i in g.inputs]
    outputs = set(g.outputs)
    # buffers that must be real objects with their own layout (not just storage for a pointer)
    needs_object = set(outputs)
    for n in g.nodes:
        if isinstance(n, ExternKernel):
            needs_object.update(n.inputs)
    reused = donors(schedule.memory)  # their `del` is the reuse line

    sig = "args, sizes=None" if g.size_vars else "args"
    L = [f"def call({sig}):"]
    L.append(f"    if len(args) != {len(inputs)}:")
    msg = f"compiled graph takes {len(inputs)} inputs {tuple(inputs)}, got %d"
    L.append(f"        raise TypeError({msg!r} % len(args))")
    if inputs:
        L.append(f"    {', '.join(inputs)}{',' if len(inputs) == 1 else ''} = args")
    if g.size_vars:
        _bind_sizes(g, L, check=True)
    for inp in g.inputs:
        lay = inp.layout
        L.append(f"    check_input({inp.name}, {_tuple(lay.sizes)}, {_tuple(lay.strides)}, {_dt(lay)}, {inp.name!r})")
    L.append(f"    return call_unchecked(args{', sizes' if g.size_vars else ''})")
    L.append("")
    L.append("")
    L.append(f"def call_unchecked({sig}):")
    if inputs:
        L.append(f"    {', '.join(inputs)}{',' if len(inputs) == 1 else ''} = args")
    if g.size_vars:
        _bind_sizes(g, L, check=False)
    hoist_at = len(L)  # `_L = _layouts(sizes)` goes here when a tuple depends on the sizes
    hoisted: dict[str, int] = {}

    def tup(xs) -> str:
        """call_unchecked's tuples: a symbolic one is looked up in `_layouts`, not computed per call."""
        text = _tuple(xs)
        if all(x.is_Integer for x in xs):
            return text
        return f"_L[{hoisted.setdefault(text, len(hoisted))}]"

    L.append("    args.clear()")
    L.append("    err = new_err()")
    L.append("    errp = addressof(err)")
    live = set(inputs)

    def nbytes(name: str) -> int:  # at the size hints when symbolic (the header comment only)
        return g.size_vars.nbytes(g.buffer_layout(name))

    held = [sum(nbytes(b) for b in inputs), 0]  # bytes now, at the fullest

    def hold(name: str, sign: int) -> None:
        held[0] += sign * nbytes(name)
        held[1] = max(held[1], held[0])

    # the layout of the tensor object each name is bound to: a reuse that binds only the donor's
    # storage (`buf4 = buf1`) keeps the donor's object, so a later reuse of it must not assume the
    # declared layout (a 0-d output returned as the (3, 1) tensor it reused)
    object_layout: dict[str, object] = {}

    def alloc(name: str) -> None:
        lay = g.buffer_layout(name)
        if lay.offset != 0:
            raise NotImplementedError(f"{name}: computed buffers with a storage offset are not supported")
        L.append(f"    {name} = empty_strided({tup(lay.sizes)}, {tup(lay.strides)}, {_dt(lay)})")
        object_layout[name] = lay
        live.add(name)
        hold(name, 1)

    def drop(name: str) -> None:
        live.discard(name)
        hold(name, -1)

    held[1] = held[0]
    kernels = schedule.kernels
    for call in plan_calls(schedule, {s: c for s, (_, c) in region_of.items()}):
        steps, count = call.steps, len(call.steps)
        k = kernels[steps.start]
        fn = region_of[steps.start][0] if steps.start in region_of else k.name
        node0 = g.node(k.nodes[0])
        # a kernel (or a region's later kernel) may still read a donor its buffer reuses (in place):
        # the donor's `del` waits for the call
        needed = set(kernel_params.get(fn, ())) if k.kind != EXTERN else set()
        after: list[str] = []

        def release(donor: str, line: str, note: str, needed=needed, after=after, fn=fn) -> None:
            """`line` (may be empty) then `del donor`, now or after the region's call."""
            if donor in needed:
                if line:
                    L.append(f"    {line}  # {note}; {donor} is released after {fn}")
                after.append(donor)
            else:
                L.append(f"    {line + '; ' if line else ''}del {donor}  # {note}")
                drop(donor)

        for e in call.before:
            if e.buffer in local and e.kind != REUSE:
                continue
            if e.kind == ALLOC:
                if not isinstance(g.node(e.buffer), ExternKernel):
                    alloc(e.buffer)
            elif e.kind == REUSE:
                lay, old = g.buffer_layout(e.buffer), g.buffer_layout(e.reuses)
                if e.reuses not in live:
                    continue
                if e.buffer in local:  # lives inside its kernel: the donor's storage is just released
                    release(e.reuses, "", f"{e.buffer} is kernel-local")
                    continue
                if isinstance(g.node(e.buffer), ExternKernel):
                    release(e.reuses, "", "reuse not applied: extern kernels return their own buffer")
                    continue
                if nbytes(e.buffer) > nbytes(e.reuses):
                    alloc(e.buffer)
                    release(e.reuses, "", f"reuse refused: {e.reuses} is smaller")
                    continue
                if _same_layout(lay, object_layout.get(e.reuses, old)) or e.buffer not in needs_object:
                    line = f"{e.buffer} = {e.reuses}"
                    object_layout[e.buffer] = object_layout.get(e.reuses, old)
                else:
                    line = (f"{e.buffer} = as_strided({e.reuses}, {tup(lay.sizes)}, {tup(lay.strides)}, "
                            f"{_dt(lay)})")
                    object_layout[e.buffer] = lay
                if e.reuses in needed:  # one storage, counted under its new name
                    release(e.reuses, line, "reuse")
                else:
                    L.append(f"    {line}; del {e.reuses}  # reuse")
                live.discard(e.reuses)
                live.add(e.buffer)
                hold(e.reuses, -1)
                hold(e.buffer, 1)
        if k.kind == EXTERN:
            assert isinstance(node0, ExternKernel)
            lay = node0.layout
            args = ", ".join(node0.inputs)
            if node0.name not in bound:
                args += f"{', ' if args else ''}**consts_{node0.name}"
            if g.size_vars:  # its constants may hold size expressions: the call's values, in row order
                args += f"{', ' if args else ''}sizes=sizes"
            L.append(
                f"    {node0.name} = fix_layout({externs[node0.name]}({args}), "
                f"{tup(lay.sizes)}, {tup(lay.strides)}, {_dt(lay)}, {node0.name!r}, {node0.kernel!r})"
            )
            if node0.name not in live:
                live.add(node0.name)
                hold(node0.name, 1)
        else:
            # defensive: a plan without an alloc. A donor whose storage a region's later buffer took
            # (released after the call) is not one: allocating it anew undid the reuse
            for name in (b for s in steps for b in kernels[s].nodes):
                if name not in live and name not in local and name not in after:
                    alloc(name)
            sizes = {r.symbol.name for r in g.size_vars.rows}
            ptrs = ", ".join(b if b in sizes else f"data_ptr({b})" for b in kernel_params[fn])
            if count > 1:
                L.append(f"    # {fn}: {', '.join(kernels[s].name for s in steps)} in one parallel region")
            L.append(f"    if k_{fn}({ptrs}{', ' if ptrs else ''}errp):")
            L.append(f"        raise_error(err, {fn!r})")
        for donor in after:
            L.append(f"    del {donor}")
            if donor in live:
                drop(donor)
        for e in call.after:
            if e.buffer in live and e.buffer not in local and e.buffer not in outputs and e.buffer not in reused:
                L.append(f"    del {e.buffer}")
                drop(e.buffer)
    plan = schedule.memory
    gone = sorted(b for b in local if any(e.buffer == b for e in plan.events))
    L.insert(1, f"    # memory: plan peak {plan.peak_bytes} B (M* {plan.lower_bound_bytes} B); "
                f"this wrapper holds at most "
                f"{held[1]} B" + (f" ({', '.join(gone)} never allocated: kernel-local)" if gone else ""))
    outs = ", ".join(g.outputs)
    L.append(f"    return ({outs}{',' if len(g.outputs) == 1 else ''})")
    if hoisted:
        L.insert(hoist_at + 1, "    _L = _layouts(sizes)")  # (+1: the memory comment inserted at 1)
        L[:0] = _layouts_source(g, hoisted)
    return "\n".join(L) + "\n"
