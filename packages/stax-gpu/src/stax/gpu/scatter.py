"""Scatter kernels (stax.ir Scatter) on the GPU: an init kernel, then an atomic scatter kernel.

A Scatter needs every init store done before the first scatter store, and a grid has
no barrier, so each 'scatter' kernel of the Schedule becomes two (`split_scatters`,
before planning, like split.py):

  buf1_init = Pointwise(ranges, init)                  an ordinary pointwise kernel
  buf1      = Scatter(.., init=buf1_init[i], ..)       `buf1 = reinterpret(buf1_init); del buf1_init  # reuse`

so the scatter kernel writes into the init buffer's storage and only runs the
scatter pass: one program lane per scattered point, `tl.atomic_add` (mode 'add') or
`tl.store` (mode 'set': duplicates race, as in eager on cuda; Triton's interpreter
runs programs in order, so there the last point wins as on the CPU). Indirect index
values and coordinates that are not provably in range set the error flag
(IndexError) and are clamped to 0. The scatter pass is planned as a pointwise kernel
over the scatter ranges (plan.plan_kernel on a stand-in Pointwise node), so its value
DAG goes through the same Emitter as every kernel; it is never autotuned (a trial
launch would add twice).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy
from stax.ir import (
    ComputedBuffer,
    ExternKernel,
    Graph,
    InputBuffer,
    Layout,
    Load,
    Pointwise,
    Scatter,
    body_roots,
    map_indices,
    walk,
)
from stax.ir import dtypes as dt
from stax.ir.index import pointwise_vars, reduction_vars
from stax.ir.index_printer import parenthesize
from stax.ir.sizevars import provably_equal
from stax.ir.value_ranges import bound_index, bounds_check_needed
from stax.sched import Kernel, MemoryEvent, Schedule
from stax.sched.nodes import EXTERN_NODE
from stax.sched.schedule import ALLOC, EXTERN, POINTWISE, REUSE, SCATTER

from .config import GpuConfig, interpreter_enabled
from .emit import Emitter, ErrorTable, V
from .heuristics import candidates
from .indexing import axes_of, texpr
from .kernels import POINTWISE as POINTWISE_VARIANT
from .kernels import KernelSource, axis_defs, program_offset, render_lines, signature, widen_sizes
from .plan import INT32_LIMIT, KernelPlan, plan_kernel
from .symbolic import is_static, size, symbols_of, upper_bound
from .triton_ops import store_cast

# tl.atomic_add operand types (bool / 8- and 16-bit integers have none)
ATOMIC_ADD_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")


def atomic_add_supported(d: dt.DType, interpret: bool | None = None) -> bool:
    """Whether a Scatter 'add' into dtype `d` compiles (the frontend asks before lowering one)."""
    interpret = interpreter_enabled() if interpret is None else interpret
    return d.name in ATOMIC_ADD_DTYPES and not (interpret and d == dt.bfloat16)


@dataclass(frozen=True)
class ScatterPass:
    """What the scatter kernel evaluates, over the stand-in node's loop variables i0.. (= r0..)."""

    node: ComputedBuffer  # the Scatter node (its layout: where the stores go)
    coords: tuple  # one coordinate per output dim, in i0.. and the indirect symbols
    indirect: tuple  # ((symbol, value over i0.., bound), ...)
    value: object  # the scattered value over i0..
    mode: str


# ---- the Schedule rewrite -------------------------------------------------------------------


def _unique(name: str, taken: set) -> str:
    k, out = 0, name
    while out in taken:
        k += 1
        out = f"{name}{k}"
    taken.add(out)
    return out


def split_scatters(schedule: Schedule) -> Schedule:
    """Each 'scatter' kernel -> a pointwise init kernel, then the scatter kernel writing into
    the init buffer's storage (a reuse event); later memory events move one step on."""
    if not any(k.kind == SCATTER for k in schedule.kernels):
        return schedule
    graph = schedule.graph
    taken = {b.name for b in (*graph.inputs, *graph.nodes)}
    nodes, kernels = list(graph.nodes), []
    new_step: dict[int, tuple[int, int]] = {}  # old step -> (init step, scatter step)
    init_of: dict[str, str] = {}
    for k, kern in enumerate(schedule.kernels):
        if kern.kind != SCATTER:
            new_step[k] = (len(kernels), len(kernels))
            kernels.append(kern)
            continue
        (name,) = kern.nodes
        node = graph.node(name)
        body = node.body
        init_name = init_of[name] = _unique(f"{name}_init", taken)
        init = ComputedBuffer(init_name, node.layout, Pointwise(body.ranges, body.init), node.origins)
        reread = Load(init_name, node.write_index(), body.dtype)
        scatter = ComputedBuffer(name, node.layout, replace(body, init=reread), node.origins)
        at = nodes.index(node)
        nodes[at: at + 1] = [init, scatter]
        group = (kern.group[0], ())
        new_step[k] = (len(kernels), len(kernels) + 1)
        kernels.append(Kernel(f"{kern.name}_init", POINTWISE, (init_name,), group, kern.node_type, 0, (group,)))
        kernels.append(kern)
    events = []
    for e in schedule.memory.events:
        first, last = new_step[e.step]
        if e.buffer in init_of and e.kind in (ALLOC, REUSE):
            init_name = init_of[e.buffer]
            events.append(replace(e, step=first, buffer=init_name))
            events.append(MemoryEvent(last, REUSE, e.buffer, init_name))
        else:
            events.append(replace(e, step=first if e.kind in (ALLOC, REUSE) else last))
    new_graph = Graph(graph.inputs, tuple(nodes), graph.outputs, graph.size_vars)
    return Schedule(new_graph, tuple(kernels), replace(schedule.memory, events=tuple(events)), schedule.fusion_log)


# ---- planning -------------------------------------------------------------------------------


def _reads(node: ComputedBuffer) -> tuple:
    out: list = []
    for root in body_roots(node.body):
        for n in walk(root):
            if isinstance(n, Load) and n.buffer not in out:
                out.append(n.buffer)
    return tuple(out)


def _rename(root, mapping: dict):
    """`root` with every index expression rewritten by `mapping` (r0.. -> i0..)."""
    return map_indices(root, lambda e: e.xreplace(mapping))


def plan_scatter(schedule: Schedule, k: int, config: GpuConfig) -> tuple[KernelPlan, ScatterPass]:
    """The scatter pass of kernel k as a pointwise plan over its scatter ranges."""
    kern = schedule.kernels[k]
    (name,) = kern.nodes
    graph = schedule.graph
    node = graph.node(name)
    body: Scatter = node.body
    if body.mode == "add" and not atomic_add_supported(body.dtype, config.interpret):
        where = "Triton's interpreter has" if body.dtype.name in ATOMIC_ADD_DTYPES else "Triton has"
        raise NotImplementedError(f"stax-gpu: {name}: {where} no atomic add for {body.dtype} (scatter mode 'add')")
    sizes = tuple(size(s) for s in body.scatter_ranges)  # (symbolic shapes: size expressions)
    to_i = dict(zip(reduction_vars(len(sizes)), pointwise_vars(len(sizes))))
    sp = ScatterPass(
        node,
        tuple(sympy.sympify(c).xreplace(to_i) for c in body.index),
        tuple((s, _rename(v, to_i), b) for s, v, b in body.indirect),
        _rename(body.value, to_i),
        body.mode,
    )
    if not (isinstance(body.init, Load) and not body.init.indirect and body.init.index == node.write_index()
            and graph.buffer_layout(body.init.buffer) == node.layout):
        raise ValueError(f"stax-gpu: {name}: the scatter kernel expects its init in place (run split_scatters first)")
    stand_in = ComputedBuffer(name, Layout.contiguous(sizes, body.dtype, node.layout.device),
                              Pointwise(sizes, sp.value))
    pass_reads = [ld.buffer for root in body_roots(body)[1:] for ld in walk(root) if isinstance(ld, Load)]
    reads = tuple(dict.fromkeys(pass_reads))
    ins = tuple(InputBuffer(b, graph.buffer_layout(b)) for b in reads)
    one = Schedule(Graph(ins, (stand_in,), (name,), graph.size_vars),
                   (Kernel(kern.name, POINTWISE, (name,), (sizes, ())),))
    plan = plan_kernel(one, 0, replace(config, tile_2d=False))
    plan.index, plan.stores, plan.loads = k, (name,), reads
    if upper_bound(node.layout.storage_size_expr(), plan.size_ranges) > INT32_LIMIT:
        plan.index_dtype = "int64"
    # the sizes the written index and the bounds print are arguments too
    extra = symbols_of([*node.layout.sizes, *node.layout.strides, node.layout.offset,
                        *(b for _, _, b in body.indirect)])
    plan.size_args = tuple(sorted(set(plan.size_args) | {s.name for s in extra}, key=lambda n: (len(n), n)))
    return plan, sp


def plan_with_scatters(schedule: Schedule, config: GpuConfig, plan_kernels) -> tuple[list, dict]:
    """`plan_kernels(schedule, config)`, each scatter kernel planned by plan_scatter: (plans,
    {kernel index: ScatterPass}). The others are planned against a stand-in graph where a
    Scatter is an extern call reading what it reads, so producers store what it needs."""
    at = [k for k, kern in enumerate(schedule.kernels) if kern.kind == SCATTER]
    if not at:
        return plan_kernels(schedule, config), {}
    graph = schedule.graph
    nodes = tuple(
        ExternKernel(n.name, n.layout, "stax.scatter", _reads(n))
        if isinstance(n, ComputedBuffer) and isinstance(n.body, Scatter) else n
        for n in graph.nodes
    )
    kernels = tuple(replace(kern, kind=EXTERN, node_type=EXTERN_NODE) if kern.kind == SCATTER else kern
                    for kern in schedule.kernels)
    plans = plan_kernels(Schedule(Graph(graph.inputs, nodes, graph.outputs, graph.size_vars), kernels,
                                  schedule.memory), config)
    passes = {}
    for k in at:
        plans[k], passes[k] = plan_scatter(schedule, k, config)
    return plans, passes


# ---- the Triton kernel ----------------------------------------------------------------------


def _checked(em: Emitter, v: V, bound, message: str, in_range: list, poisoned: bool) -> str:
    """The index value `v` flagged where it is outside [0, bound), then clamped to 0 there;
    its in-range condition is appended to `in_range` (a poisoned scatter adds NaN where any fails).
    `bound`: an int, or a size expression (symbolic shapes: the kernel's size arguments)."""
    bound = str(bound) if is_static(bound) else parenthesize(texpr(bound))
    v = em.tensor(v)
    if em.config.bounds_check == "flag":
        em.flag(f"({v.src} < 0) | ({v.src} >= {bound})", v.axes, "IndexError", message, poisoned=poisoned)
    ok = f"({v.src} >= 0) & ({v.src} < {bound})"
    in_range.append(ok)
    v = em.new(f"tl.where({ok}, {v.src}, 0)", v.dtype, v.axes)
    em.axis_of[v.src] = set(v.axes)
    return v.src


def write_scatter(plan: KernelPlan, sp: ScatterPass, config: GpuConfig, errors: ErrorTable) -> KernelSource:
    """triton_sca_fused_K: one lane per scattered point, XBLOCK points per program."""
    em = Emitter(plan, config, errors, {"x": "xmask"}, "[1]")
    p = plan.nodes[0]
    layout = sp.node.layout
    sizes = [size(s) for s in layout.sizes]
    ranges = {**plan.size_ranges,
              **{v: size(s) for v, s in zip(pointwise_vars(len(p.node.body.ranges)), p.node.body.ranges)}}
    subs = {}
    # a float 'add' whose index is out of range adds NaN at the clamped place instead of its
    # value: the result is never silently wrong, so the flag may be read a call later (as a
    # float gather's); a 'set' could be overwritten by a racing store, an integer holds no NaN
    poisoned = sp.mode == "add" and layout.dtype.is_floating
    in_range: list[str] = []
    for sym, v, bound in sp.indirect:
        iv = em.tensor(em.value(v, p))
        name = iv.src
        if bounds_check_needed(v, bound, ranges):
            name = _checked(em, iv, size(bound),
                            f"scatter index out of bounds writing {sp.node.name}: not in [0, {bound})",
                            in_range, poisoned)
        em.axis_of[name] = set(iv.axes)
        subs[sym] = sympy.Symbol(name, integer=True, nonnegative=True)
        ranges[sym] = size(bound)
    checked_against = {sym: bound for sym, _, bound in sp.indirect}
    coords = []
    for d, (c, n) in enumerate(zip(sp.coords, sizes)):
        e = plan.simplify(c.xreplace(p.subs)).xreplace(subs)
        # 0 <= c < n over the ranges (a symbolic n: n - 1 - c >= 0 at every size, or c is an index checked
        # against n itself)
        inside = (c in checked_against and provably_equal(checked_against[c], n)) or (
            bound_index(c, ranges).lo >= 0 and bound_index(sympy.sympify(n) - 1 - c, ranges).lo >= 0)
        if not inside:
            cv = em.new(texpr(e), dt.int64, frozenset(axes_of(e, em.axis_of)))
            msg = f"scatter coordinate {d} out of bounds writing {sp.node.name}: not in [0, {n})"
            e = sympy.Symbol(_checked(em, cv, n, msg, in_range, poisoned), integer=True, nonnegative=True)
        coords.append(e)
    idx = layout.index(coords)
    v = em.tensor(em.value(sp.value, p))
    val = store_cast(v.src, v.dtype, layout.dtype, config.math)
    if poisoned and in_range and config.bounds_check == "flag":
        val = f"tl.where({' & '.join(f'({c})' for c in in_range)}, {val}, float('nan'))"
    ptr = f"{em.args[sp.node.name]} + {parenthesize(texpr(idx))}"
    if "x" not in axes_of(idx, em.axis_of):
        ptr = f"{em.args[sp.node.name]} + ({texpr(idx)} + tl.zeros([XBLOCK], tl.int32))"
    if "x" not in v.axes:
        val = f"tl.broadcast_to({val}, [XBLOCK])"
    if sp.mode == "add":
        em.line(f"tl.atomic_add({ptr}, {val}, mask=xmask, sem='relaxed')")
    else:
        em.line(f"tl.store({ptr}, {val}, mask=xmask)")
    name = f"triton_sca_fused_{plan.index}"
    head = widen_sizes(plan) + [program_offset("x", 0, "XBLOCK", plan.index_dtype == "int64"),
                                "xindex = xoffset + tl.arange(0, XBLOCK)[:]", "xmask = xindex < xnumel"]
    head += axis_defs(plan, "x")
    numels, blocks = (("xnumel", plan.xnumel),), ("XBLOCK",)
    src = "\n".join([signature(name, em, numels, blocks, plan.size_args)] + ["    " + h for h in head]
                    + render_lines(em.top.lines, "    "))
    return KernelSource(name, POINTWISE_VARIANT, src + "\n", tuple(em.args), em.uses_err, numels, blocks,
                        size_args=plan.size_args)


def scatter_kernel_set(plan: KernelPlan, sp: ScatterPass, config: GpuConfig, errors: ErrorTable) -> tuple[list, list]:
    """compile.kernel_set for a scatter kernel: one variant, one launch config (never raced:
    a trial launch would add twice)."""
    ks = write_scatter(plan, sp, config, errors)
    return [ks], candidates(plan, ks, config)[:1]


__all__ = ["ATOMIC_ADD_DTYPES", "atomic_add_supported", "ScatterPass", "plan_scatter", "plan_with_scatters",
           "scatter_kernel_set", "split_scatters", "write_scatter"]
