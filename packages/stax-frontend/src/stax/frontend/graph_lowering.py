"""ATen FX graph -> stax.ir.Graph: walk the nodes in order, lower each through the table.

Tensors flow as `TensorValue`s (tensor.py): views stay views, pointwise ops stay
lazy expressions, and buffers appear only for inputs, reductions, extern/fallback
calls, graph outputs and the §6.6 materialization rules (materialize.py).
The result also says how to rebuild the FX graph's outputs from the compiled
module's outputs (`OutputSpec`), since aliases of inputs are returned as views.
"""

from __future__ import annotations

import builtins
import keyword
import logging
import operator
from collections import Counter
from dataclasses import dataclass, field

import sympy
import torch
import torch.fx
from stax.ir import (
    ComputedBuffer,
    ExternKernel,
    Graph,
    IndexValue,
    InputBuffer,
    Layout,
    Load,
    Op,
    Pointwise,
    Reduction,
    Scan,
    simplify_index,
    walk,
)
from stax.ir import dtypes as dt
from stax.ir.index import contiguous_strides, pointwise_vars, reduction_vars, var
from torch._subclasses.fake_tensor import unset_fake_temporarily

from . import materialize, read_order
from .config import Config
from .dtypes import to_stax
from .errors import GraphUnsupported
from .extern_calls import ExternItem, is_opaque_val, lower_fallback, opaque_view
from .lowering import conv_layout, is_library_call, lookup
from .lowering.registry import BUFFER, REDUCTION, VIEW
from .routing import CPU
from .strides import same_view
from .sym_ops import SYM_OPS, sym_op
from .symbolic import Symbols, hint_int
from .targets import TARGETS
from .tensor import BufferView, Builder, Lazy, OpaqueView, TensorValue, as_size
from .views import Unsupported

log = logging.getLogger("stax.frontend")


@dataclass(frozen=True)
class OutputSpec:
    """How output k of the FX graph is rebuilt: from graph output `index`, from input
    `index` (a view of it when `view` is set), as a view of graph output `index`, a
    Python constant, or (donation.py) input `value` when graph output `index` was written into it."""

    # 'buffer' | 'input' | 'view_of_output' | 'const' | 'donated' (buffer `index` written into input `value`)
    # | 'size' (`value`: a sympy expression in the size symbols, evaluated at each call)
    kind: str
    index: int = -1
    view: tuple | None = None  # (sizes, strides, offset) in elements
    value: object = None


@dataclass
class LoweredGraph:
    graph: Graph
    input_names: list  # FX placeholder order
    extra_inputs: list  # after the placeholders: ('const', tensor) (get_attr) or ('seed', None)
    outputs: list  # OutputSpec per FX output
    output_is_tuple: bool
    fallback_ops: Counter = field(default_factory=Counter)
    extern_ops: Counter = field(default_factory=Counter)
    materialized: Counter = field(default_factory=Counter)
    # per FX output, the strides the compiled graph really returns (None: not a tensor), reported
    # to AOTAutograd so that the backward graph is compiled for the saved tensors' real layouts
    output_strides: list = field(default_factory=list)
    # placeholders that are opaque values (RNG state for a library call; runtime: a carrier)
    opaque_inputs: frozenset = frozenset()
    # FX nodes of the library calls that read RNG state (attention backward with dropout): the seed a
    # CUDA graph captured would be replayed, so such a module is not graphed
    rng_readers: tuple = ()
    const_nodes: list = field(default_factory=list)  # FX get_attr node of each ('const', tensor) extra, in order
    # per FX placeholder: its value's expressions, for binding the size symbols at call time
    # (('tensor', sizes, strides) | ('int', expr) | ('other', None)); empty for a static graph without
    # SymInt placeholders (a SymInt the guards made constant is still an argument, but no buffer)
    placeholder_exprs: list = field(default_factory=list)
    # per FX placeholder, its graph input (None: a SymInt placeholder, which is no buffer)
    placeholder_inputs: list = field(default_factory=list)

    def placeholder_input(self, k: int) -> InputBuffer | None:
        """The graph input of FX placeholder k (the IR's inputs skip SymInt placeholders)."""
        if not self.placeholder_inputs:
            return self.graph.inputs[k]
        name = self.placeholder_inputs[k]
        return None if name is None else next(i for i in self.graph.inputs if i.name == name)


def _host_value(node: torch.fx.Node, example: torch.Tensor) -> bool:
    """A 0-dim integer input that only library calls read, as eager passes it (cuda attention's
    philox seed and offset, CPU tensors in a cuda graph): an opaque value handed over as it is.
    As a buffer of the graph's device it was copied there each call, a copy that synchronizes."""
    if example.dim() != 0 or example.dtype not in (torch.int64, torch.int32) or not node.users:
        return False
    return all(u.op == "call_function" and is_library_call(u.target) for u in node.users)


def _has_opaque(a) -> bool:
    if isinstance(a, OpaqueView):
        return True
    if isinstance(a, (list, tuple)):
        return any(_has_opaque(x) for x in a)
    if isinstance(a, dict):
        return any(_has_opaque(x) for x in a.values())
    return False


class GraphLowering:
    """One FX graph's lowering context, handed to every lowering function as `ctx`.

    `device` is the stax.ir device of the code ('cpu' for stax.cpu, 'cuda' for stax.gpu:
    it picks the §6.6 cost table); `tensor_device` is where the runtime tensors live
    (cpu for the GPU target only under config.device_override='gpu')."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs, cfg: Config, target: str = CPU,
                 tensor_device: torch.device | None = None, kind: str | None = None, input_strides=None):
        self.gm = gm
        # per placeholder, strides to compile for instead of the example's (None: the example's)
        self.input_strides = list(input_strides) if input_strides is not None else [None] * len(example_inputs)
        self.kind = kind  # 'inference' | 'forward' | 'backward' (AOTAutograd's graph kind), None if unknown
        self.saved_positions: range = range(0)  # output positions only the backward graph reads (any layout will do)
        self.saved_nodes: set = set()  # the values at those positions, unless also returned elsewhere
        self.example_inputs = list(example_inputs)
        self.cfg = cfg
        self.target = target
        self.target_info = TARGETS[target]  # what the target can do (targets.py)
        self.device = self.target_info.ir_device
        self.tensor_device = tensor_device if tensor_device is not None else torch.device("cpu")
        self.builder = Builder()
        self.inputs: list[InputBuffer] = []
        self.nodes: list = []
        self.env: dict[torch.fx.Node, object] = {}
        self.fallback_ops: Counter = Counter()
        self.extern_ops: Counter = Counter()
        self.materialized: Counter = Counter()
        self._count = 0
        self._indirect = 0
        self._streams = 0
        self.extra_inputs: list = []  # ('const', tensor) | ('seed', None), in graph input order
        self.const_nodes: list[str] = []  # the get_attr node of each ('const', tensor), in order
        self.opaque: set[str] = set()  # buffers holding opaque values (tensor.OpaqueView)
        self.rng_readers: list[str] = []  # library calls that read opaque RNG state (extern_calls.reads_rng_state)
        self.current: torch.fx.Node | None = None
        self.symbols = Symbols()  # ShapeEnv symbols -> stax.ir size symbols (dynamic shapes)
        self.placeholder_exprs: list = []
        self.placeholder_of: dict[str, int] = {}  # graph input name -> its FX placeholder's position
        self.placeholder_inputs: list = []  # per FX placeholder: its graph input's name, None for a SymInt

    # ---- buffers -------------------------------------------------------------
    def new_name(self) -> str:
        self._count += 1
        return f"buf{self._count}"

    SEED = "stax_seed"

    def seed_value(self):
        """The per-call random seed (an int64 graph input the wrapper draws from torch's generator)."""
        if not any(i.name == self.SEED for i in self.inputs):
            lay = Layout(self.device, dt.int64, (), ())
            self.inputs.append(InputBuffer(self.SEED, lay))
            self.extra_inputs.append(("seed", None))
        return self.builder.load(self.SEED, 0, dt.int64)

    def new_random_stream(self) -> int:
        self._streams += 1
        return self._streams

    def new_indirect_symbol(self) -> sympy.Symbol:
        """A fresh symbol for an indirect (data-dependent) index: t0, t1, ..."""
        self._indirect += 1
        return var("t", self._indirect - 1)

    def _origins(self) -> tuple:
        return (self.current.name,) if self.current is not None else ()

    def simplify_value(self, value, ranges: dict):
        """Rebuild `value` with simplified Load / IndexValue indices (§6.8, stax.ir.simplify_index:
        range-aware FloorDiv / ModularIndexing folding; size-1 loop variables become 0)."""
        memo: dict[int, object] = {}
        b = self.builder
        for n in walk(value):
            if isinstance(n, Load):
                ind = tuple((s, memo[id(v)], bnd) for s, v, bnd in n.indirect)
                new = b.load(n.buffer, simplify_index(n.index, ranges), n.dtype, ind)
            elif isinstance(n, IndexValue):
                new = b.index_value(simplify_index(n.index, ranges), n.dtype)
            elif isinstance(n, Op):
                new = b.intern(Op(n.name, tuple(memo[id(a)] for a in n.args), n.dtype))
            else:
                new = n
            memo[id(n)] = new
        return memo[id(value)]

    def add_computed(self, body, layout: Layout) -> BufferView:
        name = self.new_name()
        self.nodes.append(ComputedBuffer(name, layout, body, self._origins()))
        return BufferView(self.builder, name, layout, layout)

    def pointwise_buffer(self, tv: TensorValue, strides=None, follow_reads: bool = False) -> BufferView:
        """`tv` written to a new buffer: with `strides`, else in its reads' memory order when
        `follow_reads` (read_order.py), else row-major."""
        sizes = tv.sizes
        ivars = pointwise_vars(len(sizes))
        value = self.simplify_value(tv.load(ivars), dict(zip(ivars, sizes)))
        if strides is None and follow_reads:
            strides = read_order.strides_following_reads(value, ivars, sizes)
        strides = tuple(strides) if strides is not None else contiguous_strides(sizes)
        layout = Layout(tv.device, tv.dtype, sizes, strides)
        return self.add_computed(Pointwise(sizes, value), layout)

    def reduction_buffer(self, sizes, reduction_sizes, reduction_type, value, strides=None) -> BufferView:
        ivars, rvars = pointwise_vars(len(sizes)), reduction_vars(len(reduction_sizes))
        ranges = dict(zip(ivars, sizes)) | dict(zip(rvars, reduction_sizes))
        value = self.simplify_value(value, ranges)
        body = Reduction(tuple(sizes), tuple(reduction_sizes), reduction_type, value)
        strides = tuple(strides) if strides is not None else contiguous_strides(sizes)
        return self.add_computed(body, Layout(self.device, body.dtype, tuple(sizes), strides))

    def strides_in_order_of(self, tv: TensorValue, sizes) -> tuple | None:
        """Strides for a result of `sizes` (same rank as `tv`) in the memory order `tv` is read
        in (read_order.py): a pooling of NHWC activations stays NHWC, as in eager. None: row-major."""
        ivars = pointwise_vars(tv.ndim)
        follow = read_order.strides_following_reads(tv.load(ivars), ivars, tv.sizes)
        if follow is None:
            return None
        order = sorted(range(tv.ndim), key=lambda k: (-follow[k], k))  # outermost first
        strides, step = [0] * tv.ndim, 1
        for k in reversed(order):
            strides[k] = step
            step *= int(sizes[k])
        return tuple(strides)

    def scan_buffer(self, sizes, axis: int, scan_type: str, value, out_dtype=None) -> BufferView:
        """A Scan buffer (inclusive prefix combine along `axis`); `value` uses i0.. over `sizes`
        and is the accumulator; `out_dtype`: the stored type (default the accumulator's)."""
        ivars = pointwise_vars(len(sizes))
        value = self.simplify_value(value, dict(zip(ivars, sizes)))
        body = Scan(tuple(sizes), axis, scan_type, value, out_dtype)
        return self.add_computed(body, Layout.contiguous(tuple(sizes), body.dtype, self.device))

    def realize(self, tv: TensorValue, reason: str = "buffer", strides=None, follow_reads: bool = False) -> BufferView:
        """`tv` in memory: a BufferView as is, else a new buffer (counted by reason)."""
        if isinstance(tv, BufferView) and (strides is None or same_view(tv.sizes, tv.strides, tv.sizes, strides)):
            return tv
        self.materialized[reason] += 1
        return self.pointwise_buffer(tv, strides, follow_reads)

    def add_extern(self, kernel: str, layout: Layout, inputs, constants, fallback: bool) -> str:
        name = self.new_name()
        self.nodes.append(ExternKernel(name, layout, kernel, tuple(inputs), tuple(constants), fallback,
                                       self._origins()))
        return name

    # ---- nodes ---------------------------------------------------------------
    def users(self, node: torch.fx.Node) -> list[tuple[str, torch.fx.Node]]:
        """(kind, user) for each consumer of `node`, looking through getitem and views (a view
        nobody uses counts as a pointwise user), for the cost model."""
        out = []
        for u in node.users:
            if u.op == "output":
                out.append(("output", u))
                continue
            if u.op != "call_function":
                out.append(("buffer", u))
                continue
            if u.target is operator.getitem:
                out.extend(self.users(u))
                continue
            low = lookup(u.target)
            if low is None or low.kind == BUFFER:
                out.append(("buffer", u))
            elif low.kind == VIEW:
                out.extend(self.users(u) or [("pointwise", u)])
            else:
                out.append(("reduction" if low.kind == REDUCTION else "pointwise", u))
        return out

    def _placeholder(self, node, example, strides=None):
        if isinstance(example, torch.SymInt):  # a symbolic int input (a size dynamo or AOTAutograd passes)
            e = self.symbols.expr(example)
            self.placeholder_exprs.append(("int", e))
            self.placeholder_inputs.append(None)
            return e
        if not isinstance(example, torch.Tensor):
            raise GraphUnsupported(f"non-tensor graph input {node.name}={example!r}")
        name = self.input_name(node.name)
        self.placeholder_of[name] = len(self.placeholder_inputs)
        self.placeholder_inputs.append(name)
        if is_opaque_val(example) or _host_value(node, example):  # RNG state saved for a library call
            self.placeholder_exprs.append(("other", None))
            view = opaque_view(self, name)
            self.inputs.append(InputBuffer(name, view.layout))
            return view
        if example.device != self.tensor_device and not (example.device.type == "cpu" and example.dim() == 0):
            raise GraphUnsupported(f"input {node.name} is on {example.device}; the graph runs on {self.tensor_device}")
        sizes = self.symbols.exprs(example.shape)
        strides = self.symbols.exprs(example.stride()) if strides is None else tuple(strides)
        self.placeholder_exprs.append(("tensor", sizes, strides))
        lay = Layout(self.device, to_stax(example.dtype), sizes, strides)
        self.inputs.append(InputBuffer(name, lay))
        return BufferView(self.builder, name, lay, lay)

    def input_name(self, fx_name: str) -> str:
        """The IR name of a graph input: its FX name, unless that would shadow a name the target's
        generated wrapper binds or a Python keyword/builtin (a backward's saved `as_strided`)."""
        names, prefixes = self.target_info.wrapper_names()
        if fx_name in names or fx_name.startswith(prefixes) or keyword.iskeyword(fx_name) or hasattr(builtins, fx_name):
            return f"in_{fx_name}"
        return fx_name

    @staticmethod
    def _check_static(t: torch.Tensor):
        for s in (*t.shape, *t.stride()):
            if not isinstance(s, int):
                raise GraphUnsupported("symbolic shapes are not supported yet (Part Four)", cause="symbolic shapes")

    def check_device(self, device) -> None:
        """A tensor created or moved to `device` inside the graph must stay on the graph's device, except
        a 0-dim CPU tensor that only feeds ops whose results are on the graph's device: a scalar operand,
        as eager allows (the backward of `x[m] = 0.1` makes `zeros([], device=cpu)` for index_put)."""
        if device is None or torch.device(device).type == self.tensor_device.type:
            return
        if torch.device(device).type == "cpu" and self._cpu_scalar_operand(self.current):
            return
        raise GraphUnsupported(f"a tensor moves to {device} in a graph on {self.tensor_device}")

    def _cpu_scalar_operand(self, node) -> bool:
        """`node` is a 0-dim tensor every user of which computes on the graph's device."""
        val = node.meta.get("val") if node is not None else None
        if not isinstance(val, torch.Tensor) or val.dim() != 0 or not node.users:
            return False
        for user in node.users:
            out = user.meta.get("val")
            outs = out if isinstance(out, (list, tuple)) else [out]
            if user.op != "call_function" or not all(
                    isinstance(o, torch.Tensor) and o.device.type == self.tensor_device.type for o in outs):
                return False
        return True

    def _get_attr(self, node):
        value = getattr(self.gm, node.target)
        if not isinstance(value, torch.Tensor):
            return value
        name = "const_" + node.name
        self._check_static(value)
        value = constant_tensor(self.gm, node, self.tensor_device)
        lay = Layout(self.device, to_stax(value.dtype), tuple(value.shape), tuple(value.stride()))
        self.inputs.append(InputBuffer(name, lay))
        self.extra_inputs.append(("const", value))
        self.const_nodes.append(node.name)
        return BufferView(self.builder, name, lay, lay)

    def _map_args(self, a):
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, torch.SymInt):  # a size the trace left as a literal: its expression
            return self.symbols.expr(a)
        if isinstance(a, (list, tuple)):
            return type(a)(self._map_args(x) for x in a)
        if isinstance(a, dict):
            return {k: self._map_args(v) for k, v in a.items()}
        return a

    def _call(self, node):
        args = self._map_args(node.args)
        kwargs = self._map_args(node.kwargs)
        if node.target in SYM_OPS:  # arithmetic on sizes (sym_size, operator.mul, ...): an expression
            return sym_op(self, node, args, kwargs)
        if node.target is operator.getitem:
            item = args[0][args[1]]
            return item.get() if isinstance(item, ExternItem) else item
        low = lookup(node.target)
        if low is not None and low.kind != BUFFER and _has_opaque((args, kwargs)):
            low = None  # no Stax kernel reads an opaque value: the op runs as an ATen call
        if low is not None:
            try:
                return low.fn(self, node, *args, **kwargs)
            except Unsupported as e:  # includes UnsupportedDType
                log.debug("lowering %s fell back: %s", node.target, e)
        return lower_fallback(self, node, args, kwargs)

    def _after(self, node, value):
        """Apply the §6.6 rules to a freshly lowered value."""
        if isinstance(value, Lazy):
            users = self.users(node)
            # (element counts at the example's sizes: the cost model estimates, it proves nothing)
            outs = [hint_int(u.meta["val"].numel()) for kind, u in users
                    if kind == "reduction" and isinstance(u.meta.get("val"), torch.Tensor)]
            numels = [hint_int(u.meta["val"].numel()) if isinstance(u.meta.get("val"), torch.Tensor) else 0
                      for _, u in users]
            reason = materialize.decide(value, [k for k, _ in users], self.cfg, min(outs, default=None), numels,
                                        self.symbols.hint(value.numel()) if self.symbols else None)
            if reason is not None:
                val = node.meta.get("val")
                strides = conv_layout.preferred_strides(self, node)  # channels-last convolutions' input
                follow = strides is None and self.cfg.follow_read_order and read_order.may_follow_reads(self, node)
                if strides is None and not follow and reason == "rule0:output" and isinstance(val, torch.Tensor):
                    strides = self.symbols.meta_strides(val)
                return self.realize(value, reason, strides, follow_reads=follow)
        return value

    def run(self) -> LoweredGraph:
        examples = iter(zip(self.example_inputs, self.input_strides))
        out_node = None
        last = next(iter(reversed(self.gm.graph.nodes)), None)
        if last is not None and last.op == "output":  # outputs only the backward graph reads
            items = last.args[0] if isinstance(last.args[0], (list, tuple)) else [last.args[0]]
            self.saved_positions = conv_layout.saved_outputs(self, len(items))
            also_user = {n for k, n in enumerate(items) if k not in self.saved_positions}  # returned to the user too
            self.saved_nodes = {items[k] for k in self.saved_positions} - also_user
        for node in self.gm.graph.nodes:
            self.current = node
            if node.op == "placeholder":
                self.env[node] = self._placeholder(node, *next(examples))
            elif node.op == "get_attr":
                self.env[node] = self._get_attr(node)
            elif node.op == "call_function":
                self.env[node] = self._after(node, self._call(node))
            elif node.op == "output":
                out_node = node
            else:
                raise GraphUnsupported(f"FX node kind {node.op} ({node.target})")
        self.current = None
        return self._outputs(out_node)

    # ---- outputs -------------------------------------------------------------
    def _outputs(self, out_node) -> LoweredGraph:
        result = out_node.args[0]
        is_tuple = isinstance(result, (list, tuple))
        items = list(result) if is_tuple else [result]
        input_pos = {i.name: k for k, i in enumerate(self.inputs)}
        graph_outputs: list[str] = []
        specs: list[OutputSpec] = []
        views: list[tuple[int, tuple]] = []  # (spec position, (buffer name, view)) to resolve later

        def out_index(name):
            if name not in graph_outputs:
                graph_outputs.append(name)
            return graph_outputs.index(name)

        for k, item in enumerate(items):
            if not isinstance(item, torch.fx.Node):
                specs.append(OutputSpec("const", value=item))
                continue
            tv = self.env[item]
            val = item.meta.get("val")
            if isinstance(tv, sympy.Basic) and not tv.is_Integer:  # a symbolic int: its value at each call
                specs.append(OutputSpec("size", value=tv))
                continue
            if not isinstance(tv, TensorValue):
                specs.append(OutputSpec("const", value=tv))
                continue
            want = self.symbols.meta_strides(val) if isinstance(val, torch.Tensor) else None
            if k in self.saved_positions and isinstance(tv, BufferView) and tv.is_whole_buffer() \
                    and tv.buffer not in input_pos \
                    and want is not None and not same_view(tv.sizes, tv.strides, tv.sizes, want):
                want = None  # a channels-last activation saved as it is (its real strides are reported)
            if isinstance(tv, BufferView):
                view = (tv.sizes,
                        want if want is not None and same_view(tv.sizes, tv.strides, tv.sizes, want) else tv.strides,
                        tv.offset)
                pos = input_pos.get(tv.buffer)
                if pos is not None and tv.buffer in self.placeholder_of:
                    whole = tv.is_whole_buffer()
                    specs.append(OutputSpec("input", self.placeholder_of[tv.buffer], None if whole else view))
                    continue
                if tv.is_whole_buffer() and (want is None or same_view(tv.sizes, tv.strides, tv.sizes, want)):
                    specs.append(OutputSpec("buffer", out_index(tv.buffer)))
                    continue
                if pos is None and (want is None or view[1] == want or same_view(tv.sizes, view[1], tv.sizes, want)):
                    specs.append(None)
                    views.append((len(specs) - 1, (tv.buffer, view)))
                    continue
            self.current = item
            self.materialized["rule0:output"] += 1
            buf = self.pointwise_buffer(tv, want)
            specs.append(OutputSpec("buffer", out_index(buf.buffer)))
        for pos, (name, view) in views:
            specs[pos] = OutputSpec("view_of_output", out_index(name), view)
        self.current = None
        graph = Graph(tuple(self.inputs), tuple(self.nodes), tuple(graph_outputs), self.symbols.size_vars())
        return LoweredGraph(
            graph, [n.name for n in self.gm.graph.nodes if n.op == "placeholder"], self.extra_inputs, specs,
            is_tuple, self.fallback_ops, self.extern_ops, self.materialized,
            output_strides=[self._real_strides(graph, spec) for spec in specs],
            opaque_inputs=frozenset(self.opaque & {i.name for i in self.inputs}), const_nodes=list(self.const_nodes),
            rng_readers=tuple(self.rng_readers),
            placeholder_exprs=list(self.placeholder_exprs) if self.symbols or None in self.placeholder_inputs else [],
            placeholder_inputs=list(self.placeholder_inputs) if None in self.placeholder_inputs else [],
        )

    def _real_strides(self, graph: Graph, spec: OutputSpec) -> tuple | None:
        """The strides output `spec` has at run time (None: not a tensor); symbolic shapes: expressions
        (aot.report_output_strides hands them to AOTAutograd as SymInts)."""
        if spec.kind in ("const", "size") or (spec.kind == "buffer" and graph.outputs[spec.index] in self.opaque):
            return None
        if spec.view is not None:
            strides = spec.view[1]
        elif spec.kind == "input":
            name = self.placeholder_inputs[spec.index]
            strides = next(i for i in self.inputs if i.name == name).layout.strides
        else:
            strides = graph.buffer_layout(graph.outputs[spec.index]).strides
        return tuple(as_size(s) for s in strides)


def constant_tensor(gm: torch.fx.GraphModule, node: torch.fx.Node, tensor_device: torch.device) -> torch.Tensor:
    """The tensor a get_attr node reads, on the graph's device: a lifted 0-dim CPU scalar (`x[m] = 7`)
    moves to a cuda graph's device, as eager allows; a constant on another device is unsupported."""
    value = getattr(gm, node.target)
    if value.device != tensor_device and value.device.type == "cpu" and value.dim() == 0:
        # a real tensor even when the backend is called under AOTAutograd's fake mode (torch 2.11),
        # never a FakeTensor constant
        with unset_fake_temporarily():
            value = value.to(tensor_device)
    if value.device != tensor_device:
        raise GraphUnsupported(f"constant {node.target} is on {value.device}, the graph on {tensor_device}")
    return value


def lower(gm: torch.fx.GraphModule, example_inputs, cfg: Config, target: str = CPU,
          tensor_device: torch.device | None = None, kind: str | None = None, input_strides=None) -> LoweredGraph:
    """Lower one ATen FX graph into a stax.ir.Graph (plus how to rebuild its outputs)
    for code generation target `target` ('cpu' or 'gpu'); `kind` is AOTAutograd's name
    for the graph ('inference', 'forward', 'backward'), None when unknown; `input_strides`
    (per placeholder, None entries: the example's) compiles for other input layouts."""
    return GraphLowering(gm, example_inputs, cfg, target, tensor_device, kind, input_strides).run()

