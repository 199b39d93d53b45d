"""The wrapper function `call(args)` (Listing 8.1 on the GPU): guards, the memory plan,
kernel launches in schedule order, frees, the error-flag check, the outputs.

Memory events are followed as planned (alloc / reuse / free, §7.5, in stax.sched.plan_walk's
order), with two GPU twists: a buffer that lives only in a kernel's registers is never
allocated (its alloc becomes a comment), and an extern kernel allocates its own result. A reuse
reinterprets the dead buffer's storage: `buf5 = reinterpret(buf2, ...)  # reuse`, and `del buf2`
follows that step's kernel (in place, §7.5: the kernel reads buf2 and writes buf5, one storage).

Symbolic shapes: `call(args, sizes)` takes the size symbols' values in `size_vars` row order (the
frontend binds them from the inputs), checks the finite ends of their ranges (32-bit index proofs
rest on them), and evaluates every layout, allocation and element count from them; kernels whose
code uses a size get its value as an argument, and extern calls get `sizes=`.
"""

from __future__ import annotations

from stax.ir.index import as_int
from stax.ir.index_printer import to_python
from stax.sched.plan_walk import donors, plan_calls
from stax.sched.schedule import ALLOC, FREE, REUSE

from .plan import EXTERN_FORM, KernelPlan
from .runtime import TORCH_DTYPES


def _int(x) -> str:
    """A size as Python source: its value, or its expression in the size symbols (bound in `call`)."""
    return str(as_int(x)) if getattr(x, "is_Integer", True) else to_python(x)


def _tuple(xs) -> str:
    xs = [_int(x) for x in xs]
    return "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"


def _dtype(d) -> str:
    return str(TORCH_DTYPES[d.name])  # 'torch.float32'



class _Wrapper:
    def __init__(self, schedule, plans: list[KernelPlan], kernels: dict, has_errors: bool):
        self.graph = schedule.graph
        self.schedule = schedule
        self.plans = plans
        self.kernels = kernels
        self.has_errors = has_errors
        self.lines: list[str] = []
        self.bound: set[str] = {i.name for i in self.graph.inputs}
        self.materialized = {b for p in plans for b in p.stores}
        self.extern_outputs = {p.extern.name for p in plans if p.form == EXTERN_FORM}
        self.outputs = set(self.graph.outputs)
        # a freed buffer whose storage a later buffer reuses stays bound until the reuse line
        self.reused = donors(schedule.memory)
        self.released: list[str] = []  # reuse sources still bound until the step's kernel has run
        self.size_names = [r.symbol.name for r in self.graph.size_vars.rows]

    def release(self) -> None:
        """`del` the buffers whose storage a reuse handed on before this step's kernel."""
        if self.released:
            self.emit(f"del {', '.join(self.released)}")
            self.bound.difference_update(self.released)
            self.released.clear()

    def emit(self, text: str) -> None:
        self.lines.append("    " + text)

    def alloc_line(self, name: str) -> str:
        lay = self.graph.buffer_layout(name)
        return f"{name} = empty_strided({_tuple(lay.sizes)}, {_tuple(lay.strides)}, {_dtype(lay.dtype)}, DEVICE)"

    def event(self, ev) -> None:
        b = ev.buffer
        if ev.kind == ALLOC:
            if b in self.extern_outputs:
                return
            if b in self.materialized:
                self.emit(self.alloc_line(b))
                self.bound.add(b)
            else:
                self.emit(f"# {b} stays in registers")
        elif ev.kind == REUSE:
            src = ev.reuses
            if src not in self.bound:
                self.event(type(ev)(ev.step, ALLOC, b))
                return
            if b in self.materialized and b not in self.extern_outputs:
                lay = self.graph.buffer_layout(b)
                self.emit(f"{b} = reinterpret({src}, {_tuple(lay.sizes)}, {_tuple(lay.strides)})  # reuse")
                self.bound.add(b)
            elif b not in self.extern_outputs:
                self.emit(f"{b} = {src}  # storage kept for later reuse")
                self.bound.add(b)
            # (`del src` after this step's kernel: an in-place reuse's kernel reads src and writes b)
            self.released.append(src)
        elif ev.kind == FREE:
            if b in self.bound and b not in self.outputs and b not in self.reused:
                self.emit(f"del {b}")
                self.bound.discard(b)

    def kernel(self, plan: KernelPlan) -> None:
        if plan.form == EXTERN_FORM:
            node = plan.extern
            for b in node.inputs:
                self._need(b, node.name)
            lay = node.layout
            ins = ", ".join(node.inputs) + ("," if len(node.inputs) == 1 else "")
            sized = ", sizes" if self.size_names else ""  # its constants may hold size expressions
            self.emit(
                f"{node.name} = extern_call(EXTERN_{plan.index}, ({ins}), CONSTANTS_{plan.index}, "
                f"{_tuple(lay.sizes)}, {_tuple(lay.strides)}, {_dtype(lay.dtype)}, DEVICE{sized})  # {node.kernel}"
            )
            self.bound.add(node.name)
            return
        for b in plan.stores:
            if b not in self.bound:  # the plan had no alloc for a buffer the kernel writes
                self.emit(self.alloc_line(b))
                self.bound.add(b)
        if plan.empty:
            self.emit(f"# {plan.name}: no elements to compute ({', '.join(plan.stores)})")
            return
        variants = self.kernels[plan.index]
        ks = variants[0]
        for b in ks.args:
            self._need(b, ks.name)
        args = list(ks.args) + (["err"] if any(v.uses_err for v in variants) else [])
        if ks.symbolic:  # this call's element counts and sizes
            args += [_int(v) for _, v in ks.numels] + list(ks.size_args)
        names = " / ".join(v.name for v in variants)
        self.emit(f"launch_{plan.index}({', '.join(args)})  # {names}")

    def _need(self, b: str, user: str) -> None:
        if b not in self.bound:
            raise RuntimeError(f"stax-gpu: {user} reads {b}, which is not available at that point of the schedule")

    def build(self) -> str:
        g = self.graph
        out = ["def call(args, sizes=None):" if self.size_names else "def call(args):"]
        names = [i.name for i in g.inputs]
        if names:
            self.emit(", ".join(names) + (", = args" if len(names) == 1 else " = args"))
        self.emit("args.clear()")
        if self.size_names:
            self.bind_sizes()
        if names:
            lays = [i.layout for i in g.inputs]
            self.emit(
                f"check_inputs(({', '.join(names)},), {tuple(names)!r}, "
                f"({', '.join(_tuple(lay.sizes) for lay in lays)},), "
                f"({', '.join(_tuple(lay.strides) for lay in lays)},), "
                f"({', '.join(_dtype(lay.dtype) for lay in lays)},), DEVICE)"
            )
        if self.has_errors:
            self.emit("err = ERRORS.begin()")
        for call in plan_calls(self.schedule):
            for ev in call.before:
                self.event(ev)
            self.kernel(self.plans[call.steps.start])
            self.release()
            for ev in call.after:
                self.event(ev)
        if self.has_errors:
            self.emit("ERRORS.end()")
        for o in g.outputs:
            self._need(o, "the graph output")
        outs = ", ".join(g.outputs) + ("," if len(g.outputs) == 1 else "")
        self.emit(f"return ({outs})")
        return "\n".join(out + self.lines) + "\n"

    def bind_sizes(self) -> None:
        """`s0, s1, = sizes`, then the finite ends of their ranges checked."""
        names = self.size_names
        self.emit("if sizes is None:")
        msg = f"symbolic-shape module: call(args, sizes) with sizes = the values of {tuple(names)}"
        self.emit(f"    raise TypeError({msg!r})")
        self.emit(f"{', '.join(names)}, = sizes")
        for r in self.graph.size_vars.rows:
            bad = ([f"{r.symbol.name} < {r.lo}"] if r.lo > 1 else []) + (
                [f"{r.symbol.name} > {r.hi}"] if r.hi != float("inf") else [])
            if bad:
                self.emit(f"if {' or '.join(bad)}:")
                self.emit(f"    raise ValueError(f'stax-gpu: size {r.symbol.name} = {{{r.symbol.name}}} is outside "
                          f"the range [{r.lo}, {r.hi}] the kernels were compiled for')")


def generate_wrapper(schedule, plans: list[KernelPlan], kernels: dict, has_errors: bool) -> str:
    """Python source of `call(args)` for a planned schedule."""
    return _Wrapper(schedule, plans, kernels, has_errors).build()
