"""KernelPlan -> Triton kernel source, in one of four forms.

  triton_poi_fused_K  pointwise, 1-D blocks of XBLOCK elements
  triton_poi_fused_K  pointwise, 2-D [YBLOCK, XBLOCK] tiles (transposes)
  triton_per_fused_K  persistent reduction: a whole row in one R0_BLOCK (Listing 7.2)
  triton_red_fused_K  looped reduction: an R0_BLOCK loop with per-lane accumulators

Nodes run in schedule order inside one program instance; each node's result is
kept in registers for later nodes and stored only if the plan says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stax.ir import Load, Reduction, Scan, reduction_def, walk

from .config import GpuConfig
from .emit import Emitter, ErrorTable, Scope
from .plan import REDUCTION, SCAN, TILED_FORM, XR, KernelPlan, X, contiguous_dim
from .reductions import LoopAccumulators, persistent_reduction, persistent_scan
from .symbolic import hint, is_static
from .triton_ops import compute_triton_dtype, literal

PERSISTENT, LOOPED, POINTWISE, TILED = "persistent", "looped", "pointwise", "tiled"


@dataclass(frozen=True)
class KernelSource:
    """One generated @triton.jit function and how to launch it."""

    name: str
    variant: str
    src: str
    args: tuple  # buffer names bound to the pointer parameters, in order
    uses_err: bool
    numels: tuple  # (name, value) of the element-count parameters, in order (values: int or size expression)
    blocks: tuple  # tunable constexpr block names, in order
    r0_block: int | None = None  # R0_BLOCK of a persistent reduction (a row sized per call: at the hint)
    full: frozenset = frozenset()  # axes whose mask is all-true (every launch config divides the size)
    swap: bool = False  # tiled: program_id(0) walks y tiles (grid (y, x)) instead of x tiles
    size_args: tuple = ()  # size symbols taken as int parameters after the numels (symbolic shapes)
    flat: bool = False  # tiled: one program_id walks every tile (a 1-D grid: symbolic tile counts)
    r0_max: int | None = None  # a persistent form whose R0_BLOCK is a launch argument: rows up to this

    @property
    def symbolic(self) -> bool:
        """Are element counts or sizes call-time values (symbolic shapes)? Then the caller passes them."""
        return bool(self.size_args) or not all(is_static(v) for _, v in self.numels)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def render_lines(scope_lines: list, indent: str, r_numel: int | str | None = None) -> list[str]:
    """Kernel body lines; an r-loop runs to the literal `r_numel`: a trip count known when
    Triton compiles lets it unroll the loop and keep both halves' loads in flight (a symbolic
    row length: to the `r0_numel` argument)."""
    out = []
    for item in scope_lines:
        if isinstance(item, Scope):
            assert r_numel is not None, "an r-loop needs its trip count"
            out += [indent + ln for ln in item.pre]
            out.append(indent + f"for r0_offset in range(0, {r_numel}, R0_BLOCK):")
            out += render_lines(item.lines, indent + "    ", r_numel)
        else:
            out.append(indent + item)
    return out


def signature(name: str, em: Emitter, numels: tuple, blocks: tuple, size_args: tuple = ()) -> str:
    """The kernel's header. Call-time sizes (symbolic numels, size symbols) are not specialized:
    Triton would otherwise compile one binary per divisibility-by-16 pattern of their values."""
    params = [em.args[b] for b in em.args] + (["err_ptr"] if em.uses_err else [])
    params += [n for n, _ in numels] + list(size_args) + [f"{b}: tl.constexpr" for b in blocks]
    dyn = [n for n, v in numels if not is_static(v)] + list(size_args)
    deco = f"@triton.jit(do_not_specialize={dyn!r})" if dyn else "@triton.jit"
    return f"{deco}\ndef {name}({', '.join(params)}):"


def widen_sizes(plan: KernelPlan) -> list[str]:
    """Head lines of a 64-bit kernel: its size arguments as int64 (Triton passes values below 2^31 as
    int32, and a product of sizes alone, `s0*s1`, would be computed in 32 bits)."""
    if plan.index_dtype != "int64":
        return []
    return [f"{s} = {s}.to(tl.int64)" for s in plan.size_args]


def _trip_count(rn):
    return rn if is_static(rn) else "r0_numel"


def axis_defs(plan: KernelPlan, axis: str) -> list[str]:
    return [f"{v.name} = {v.definition()}" for v in plan.axis_vars if v.axis == axis]


def program_offset(axis: str, pid: int, block: str, int64: bool) -> str:
    pid_s = f"tl.program_id({pid})" + (".to(tl.int64)" if int64 else "")
    return f"{axis}offset = {pid_s} * {block}"


def _mask_line(axis: str, cond: str, shape: str, full: frozenset) -> str:
    """`xmask = xindex < xnumel`, or an all-true constant when every block divides the size
    (as Inductor does): Triton then drops the predicate from loads and stores."""
    name = "r0_mask" if axis == "r" else f"{axis}mask"
    return f"{name} = tl.full({shape}, True, tl.int1)" if axis in full else f"{name} = {cond}"


def _stores_along_y(plan: KernelPlan) -> bool:
    """Does the tile's first store walk memory with stride 1 along y? Then program_id(0) walks y
    tiles, so neighbouring programs write adjacent tiles."""
    ys = [v.symbol for v in plan.axis_vars if v.axis == "y"]
    for p in plan.nodes:
        if p.node.name in plan.stores:
            return contiguous_dim(plan.simplify(p.node.write_index().xreplace(p.subs)), ys) is not None
    return False


def write_pointwise(plan: KernelPlan, config: GpuConfig, errors: ErrorTable, name: str,
                    full: frozenset = frozenset()) -> KernelSource:
    tiled = plan.form == TILED_FORM
    em = Emitter(plan, config, errors, {"x": "xmask", "y": "ymask"}, "[1, 1]" if tiled else "[1]")
    for p in plan.nodes:
        v = em.value(p.node.body.value, p)
        em.scope.produced[p.node.name] = em.rounded(v, p.node.layout.dtype)
        if p.node.name in plan.stores:
            em.store(p, v)
    int64 = plan.index_dtype == "int64"
    head = []
    swap = False
    flat = tiled and plan.symbolic
    if flat:
        numels, blocks = (("ynumel", plan.ynumel), ("xnumel", plan.xnumel)), ("YBLOCK", "XBLOCK")
        swap = config.tile_store_major and _stores_along_y(plan)
        head += flat_tile_offsets(int64, swap)
        head += ["yindex = yoffset + tl.arange(0, YBLOCK)[:, None]",
                 _mask_line("y", "yindex < ynumel", "[YBLOCK, 1]", full),
                 "xindex = xoffset + tl.arange(0, XBLOCK)[None, :]",
                 _mask_line("x", "xindex < xnumel", "[1, XBLOCK]", full)]
        head += axis_defs(plan, "y")
    elif tiled:
        numels, blocks = (("ynumel", plan.ynumel), ("xnumel", plan.xnumel)), ("YBLOCK", "XBLOCK")
        swap = config.tile_store_major and _stores_along_y(plan) and plan.xnumel <= 65535 * 16
        head += [program_offset("y", 0 if swap else 1, "YBLOCK", int64),
                 "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]",
                 _mask_line("y", "yindex < ynumel", "[YBLOCK, 1]", full)]
        head += [program_offset("x", 1 if swap else 0, "XBLOCK", int64),
                 "xindex = xoffset + tl.arange(0, XBLOCK)[None, :]",
                 _mask_line("x", "xindex < xnumel", "[1, XBLOCK]", full)]
        head += axis_defs(plan, "y")
    else:
        numels, blocks = (("xnumel", plan.xnumel),), ("XBLOCK",)
        head += [program_offset("x", 0, "XBLOCK", int64), "xindex = xoffset + tl.arange(0, XBLOCK)[:]",
                 _mask_line("x", "xindex < xnumel", "[XBLOCK]", full)]
    head = widen_sizes(plan) + head + axis_defs(plan, "x")
    body = render_lines(em.top.lines, "    ")
    src = "\n".join([signature(name, em, numels, blocks, plan.size_args)] + ["    " + h for h in head] + body) + "\n"
    return KernelSource(name, TILED if tiled else POINTWISE, src, tuple(em.args), em.uses_err, numels, blocks, None,
                        full, tiled and swap, plan.size_args, flat)


def flat_tile_offsets(int64: bool, swap: bool) -> list[str]:
    """Tile offsets from one program id (a 1-D grid of every tile: symbolic tile counts have no bound
    to check against the y grid's 65535). Neighbouring programs walk x tiles, or y tiles with `swap`
    (the store runs along y), as the 2-D grid's axis 0 does."""
    pid = "tl.program_id(0)" + (".to(tl.int64)" if int64 else "")
    if swap:
        return [f"pid = {pid}", "ytiles = tl.cdiv(ynumel, YBLOCK)",
                "yoffset = (pid % ytiles) * YBLOCK", "xoffset = (pid // ytiles) * XBLOCK"]
    return [f"pid = {pid}", "xtiles = tl.cdiv(xnumel, XBLOCK)",
            "yoffset = (pid // xtiles) * YBLOCK", "xoffset = (pid % xtiles) * XBLOCK"]


def write_reduction(plan: KernelPlan, config: GpuConfig, errors: ErrorTable, name: str, looped: bool,
                    full: frozenset = frozenset()) -> KernelSource:
    rn = plan.rnumel
    r0_block = None if looped else persistent_block(plan)
    needs_rmask = looped or r0_block != rn
    em = Emitter(plan, config, errors, {"x": "xmask", "r": "r0_mask" if needs_rmask else None}, "[1, 1]")
    # a persistent kernel that also writes a full (x, r) output (layernorm) is slower with its
    # read-once loads marked evict_first; row results only (Listing 7.2, exp -> sum & amax) keep the mark
    em.evict_first_ok = looped or not any(p.role == XR and p.node.name in plan.stores for p in plan.nodes)
    if looped:
        _looped_body(plan, em)
    else:
        _persistent_body(plan, em)
    int64 = plan.index_dtype == "int64"
    cast64 = ".to(tl.int64)" if int64 else ""
    head = [program_offset("x", 0, "XBLOCK", int64), "xindex = xoffset + tl.arange(0, XBLOCK)[:, None]",
            _mask_line("x", "xindex < xnumel", "[XBLOCK, 1]", full)]
    rdefs = axis_defs(plan, "r")
    if looped:
        head.append(f"r0_base = tl.arange(0, R0_BLOCK)[None, :]{cast64}")
        head += axis_defs(plan, "x")
        body = []
        for item in em.top.lines:
            if isinstance(item, Scope):
                item.lines[:0] = ["r0_index = r0_offset + r0_base",
                                  _mask_line("r", "r0_index < r0_numel", "[1, R0_BLOCK]", full)] + rdefs
        body = render_lines(em.top.lines, "    ", _trip_count(rn))
        blocks = ("XBLOCK", "R0_BLOCK")
    else:
        blocks = ("XBLOCK",)
        if is_static(rn):
            head.insert(0, f"R0_BLOCK: tl.constexpr = {r0_block}")
        else:  # a symbolic row: each call's R0_BLOCK fits its rows (SizedLauncher's row buckets)
            blocks = ("XBLOCK", "R0_BLOCK")
        head.append(f"r0_index = tl.arange(0, R0_BLOCK)[None, :]{cast64}")
        if needs_rmask:
            head.append("r0_mask = r0_index < r0_numel")
        head += axis_defs(plan, "x") + rdefs
        body = render_lines(em.top.lines, "    ")
    numels = (("xnumel", plan.xnumel), ("r0_numel", rn))
    head = widen_sizes(plan) + head
    src = "\n".join([signature(name, em, numels, blocks, plan.size_args)] + ["    " + h for h in head] + body) + "\n"
    r0_max = None if looped or is_static(rn) else persistent_limit(plan, config)
    return KernelSource(name, LOOPED if looped else PERSISTENT, src, tuple(em.args), em.uses_err, numels, blocks,
                        r0_block, full, False, plan.size_args, r0_max=r0_max)


def _finish_node(plan: KernelPlan, em: Emitter, p, v) -> None:
    em.scope.produced[p.node.name] = em.rounded(v, p.node.layout.dtype)
    if p.node.name in plan.stores:
        em.store(p, v)


def _empty_reduction(em: Emitter, body: Reduction):
    """A reduction over zero elements: its empty value, without touching memory."""
    rdef = reduction_def(body.reduction_type)
    value = 0 if body.reduction_type in ("argmax", "argmin") else (rdef.empty or rdef.identity)(body.value.dtype)
    d = body.dtype
    return em.new(f"tl.full([XBLOCK, 1], {literal(value, d)}, {compute_triton_dtype(d)})", d, frozenset({"x"}))


def _hoist_loads(plan: KernelPlan, em: Emitter) -> None:
    """Issue every plain global load up front, so loads used after a reduction (layernorm's
    weight and bias) overlap the row's load instead of waiting behind the reductions.
    Later uses find them through the emitter's CSE; gathers and masked loads stay put."""
    for p in plan.nodes:
        if plan.rnumel == 0 and p.role != X:
            continue
        for n in walk(p.node.body.value):
            if isinstance(n, Load) and not n.indirect and n.mask is None and plan.producer(n.buffer) is None:
                em.load(n, p, {})


def _persistent_body(plan: KernelPlan, em: Emitter) -> None:
    if em.config.hoist_loads:
        _hoist_loads(plan, em)
    for p in plan.nodes:
        if plan.rnumel == 0 and p.role != X:
            if p.role == REDUCTION:  # nothing to read; r-level nodes have no elements at all
                _finish_node(plan, em, p, _empty_reduction(em, p.node.body))
            continue
        v = em.value(p.node.body.value, p)
        if p.role == REDUCTION:
            v = persistent_reduction(em, p.node.body, v)
        elif p.role == SCAN:
            v = persistent_scan(em, p.node.body, v)
        _finish_node(plan, em, p, v)


def segments(plan: KernelPlan) -> list[tuple[str, list]]:
    """Split the nodes of a looped kernel into r-loops and row-level stretches.

    A node that reads a reduction of the open loop must wait for the loop to end:
    r-level nodes start a new loop, row-level ('x') nodes go after it. Row-level nodes
    that need nothing from the open loop run before it.
    """
    segs: list[list] = []  # [kind, nodes, reductions-in-loop]
    open_loop = None
    for p in plan.nodes:
        blocked = open_loop is not None and bool(p.reads & open_loop[2])
        if p.role == X:
            if blocked:
                open_loop = None
                segs.append(["top", [p], set()])
            elif open_loop is not None:
                k = segs.index(open_loop)
                if k > 0 and segs[k - 1][0] == "top":
                    segs[k - 1][1].append(p)
                else:
                    segs.insert(k, ["top", [p], set()])
            elif segs and segs[-1][0] == "top":
                segs[-1][1].append(p)
            else:
                segs.append(["top", [p], set()])
            continue
        if open_loop is None or blocked:
            open_loop = ["loop", [], set()]
            segs.append(open_loop)
        open_loop[1].append(p)
        if p.role == REDUCTION:  # a scan's value exists per element inside the loop
            open_loop[2].add(p.node.name)
    return [(kind, nodes) for kind, nodes, _ in segs]


def _looped_body(plan: KernelPlan, em: Emitter) -> None:
    segs = segments(plan)
    last_reader: dict[str, int] = {}
    for k, (_, nodes) in enumerate(segs):
        for p in nodes:
            for b in _transitive_reads(plan, p):
                last_reader[b] = k
    for k, (kind, nodes) in enumerate(segs):
        # a buffer read again by a later loop should stay in L2: evict_last until its last reader
        em.evict_last = {b for b, last in last_reader.items() if last > k}
        if kind == "top":
            for p in nodes:
                _finish_node(plan, em, p, em.value(p.node.body.value, p))
            continue
        loop = em.open_loop()
        em.top.lines.append(loop)
        acc = LoopAccumulators(em)
        for p in nodes:
            v = em.value(p.node.body.value, p)
            if isinstance(p.node.body, Reduction):
                acc.reduction(p, p.node.body, v)
            elif isinstance(p.node.body, Scan):
                _finish_node(plan, em, p, acc.scan(p, p.node.body, v))
            else:
                _finish_node(plan, em, p, v)
        em.close_loop()
        for p, r in acc.finish():
            _finish_node(plan, em, p, r)


def _transitive_reads(plan: KernelPlan, p) -> set:
    """Buffers loaded from memory when p's value is computed (recomputed producers included)."""
    out, todo = set(), [p]
    while todo:
        q = todo.pop()
        for b in q.reads:
            prod = plan.producer(b)
            if prod is None:
                out.add(b)
            elif prod.role == XR:
                todo.append(prod)
    return out


def write_kernel(plan: KernelPlan, config: GpuConfig, errors: ErrorTable, variant: str,
                 full: frozenset = frozenset()) -> KernelSource:
    """Generate one variant of a planned kernel; `full`: axes ('x', 'y', 'r') whose masks
    are all-true because every launch config's block divides that size."""
    k = plan.index
    if variant in (POINTWISE, TILED):
        return write_pointwise(plan, config, errors, f"triton_poi_fused_{k}", full)
    if variant == PERSISTENT:
        return write_reduction(plan, config, errors, f"triton_per_fused_{k}", looped=False, full=full)
    if variant == LOOPED:
        return write_reduction(plan, config, errors, f"triton_red_fused_{k}", looped=True, full=full)
    raise ValueError(f"unknown kernel variant {variant!r}")


PDL_PROLOGUE = ("    triton_helpers.gdc_wait()", "    triton_helpers.gdc_launch_dependents()")


def with_pdl(ks: KernelSource) -> KernelSource:
    """`ks` for a programmatic dependent launch (GpuConfig.pdl): its first statements wait
    for the previous grid in the stream (every read and write follows, so it needs no
    analysis of what that grid touched) and then let the next grid launch."""
    head, sep, body = ks.src.partition("):\n")
    if not sep or not head.startswith("@triton.jit"):
        raise ValueError(f"stax-gpu: unexpected kernel header in {ks.name}")
    return replace(ks, src=head + sep + "\n".join(PDL_PROLOGUE) + "\n" + body)


def persistent_block(plan: KernelPlan) -> int:
    """R0_BLOCK of the persistent form: the row padded to a power of two (a symbolic row: at its hint;
    that form then serves the calls whose rows fit, `SizedLauncher`'s size bucket)."""
    return next_pow2(max(hint(plan.rnumel, plan.size_hints), 1))


def persistent_limit(plan: KernelPlan, config: GpuConfig) -> int:
    """The largest padded row a persistent form holds whole (an outer reduction's rows are strided: less)."""
    return config.persistent_reduction_max if not plan.outer else min(config.persistent_reduction_max, 1024)


def variants(plan: KernelPlan, config: GpuConfig) -> list[str]:
    """Which forms to generate: persistent when the row fits, looped otherwise, both
    (raced by the autotuner) in between. A symbolic row gets both: the persistent form, its
    R0_BLOCK sized per call, for calls whose rows fit persistent_limit, the looped one for longer rows."""
    if plan.form != "reduction":
        return [TILED if plan.form == TILED_FORM else POINTWISE]
    limit = persistent_limit(plan, config)
    if not is_static(plan.rnumel):
        return [PERSISTENT, LOOPED] if persistent_block(plan) <= limit else [LOOPED]
    r = next_pow2(max(plan.rnumel, 1))
    if r > limit:
        return [LOOPED]
    if config.autotune and r > config.dual_variant_min:
        return [PERSISTENT, LOOPED]
    return [PERSISTENT]


__all__ = ["KernelSource", "axis_defs", "next_pow2", "program_offset", "render_lines", "signature", "variants",
           "write_kernel", "XR"]
