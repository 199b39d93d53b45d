"""Build a synthetic 1,000-node graph and normalize the index of every access; report ms per node.

The graph mimics lowered programs: pointwise ops over 1-4-d tensors that read other
buffers contiguously, broadcast (size-1 / stride-0 dims), transposed, sliced with a
step, or through reshapes of a permuted tensor (FloorDiv/ModularIndexing), and
keepdim reductions over the last or a middle dimension. Each node's accesses (its
write and every load) are normalized for dependence comparison (§7.1) with
stax.ir.normalize.normalize_index; the range-aware simplifier and loop coalescing of
stax.ir.simplify are timed on the same accesses as further lines.

Usage: PYTHONPATH=packages/stax-ir/src python benchmarks/ir/bench_normalize.py [--nodes 1000] [--seed 0] [--repeat 5]
Goal (issue 3): < 0.2 ms/node. Times are process CPU time (robust to other jobs on the machine), the
median of --repeat passes; before every pass all stax.ir functools caches and sympy's cache are
cleared, so each variant is measured cold (one graph, one pass) and none profits from another.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

from stax.ir import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, Reduction, load, loads, op
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing, pointwise_vars, reduction_vars
from stax.ir.views import View

SIZES = (1, 3, 7, 16, 32, 64, 128, 384, 1024)


def _shape(rnd: random.Random) -> tuple[int, ...]:
    while True:
        s = tuple(rnd.choice(SIZES) for _ in range(rnd.randint(1, 4)))
        n = 1
        for x in s:
            n *= x
        if 8 <= n <= 1 << 22:
            return s


def _same_numel_view(rnd: random.Random, shape) -> View:
    """How a node reads a same-shaped buffer: directly, transposed, or through reshapes of a permutation."""
    nd = len(shape)
    kind = rnd.random()
    if kind < 0.5 or nd < 2:
        return View.contiguous(shape)
    if kind < 0.75:  # the buffer reinterpreted as its transpose (strided, stride != 1 inner)
        return View.contiguous(shape[::-1]).permute(tuple(range(nd))[::-1])
    perm = list(range(nd))
    rnd.shuffle(perm)
    if kind < 0.875:  # a reshape round trip of a permuted buffer: the simplifier folds the digits back
        t = View.contiguous(tuple(shape[p] for p in perm)).permute(tuple(perm.index(k) for k in range(nd)))
        return t.reshape(tuple(reversed(shape))).reshape(shape)
    # x.permute(perm).reshape(x.shape) (a channel shuffle): a gather, FloorDiv / ModularIndexing where dims mix
    return View.contiguous(shape).permute(tuple(perm)).reshape(shape)


def build_graph(n_nodes: int, seed: int) -> Graph:
    rnd = random.Random(seed)
    inputs, nodes, shapes = [], [], {}
    for k in range(8):
        s = _shape(rnd)
        inputs.append(InputBuffer(f"arg{k}", Layout.contiguous(s, dt.float32)))
        shapes[f"arg{k}"] = s
    for k in range(n_nodes):
        out = _shape(rnd) if rnd.random() < 0.3 else shapes[rnd.choice(list(shapes))]
        iv = pointwise_vars(len(out))
        same = [b for b, s in shapes.items() if s == out]
        reads = []  # (buffer, index over iv)
        for _ in range(rnd.randint(1, 3)):
            if same and rnd.random() < 0.75:
                b = rnd.choice(same)
                reads.append((b, _same_numel_view(rnd, out).index_at(iv)))
            elif rnd.random() < 0.7:  # a broadcast input: some dims kept, the others size 1, expanded (stride 0)
                keep = tuple(s if rnd.random() < 0.6 else 1 for s in out)
                b = f"bcast{len(inputs)}"
                inputs.append(InputBuffer(b, Layout.contiguous(keep, dt.float32)))
                reads.append((b, View.contiguous(keep).expand(out).index_at(iv)))
            else:  # every other element of a twice-as-long input along one dim: x[..., 1::2, ...]
                d = rnd.randrange(len(out))
                big = tuple(2 * s if k == d else s for k, s in enumerate(out))
                b = f"strided{len(inputs)}"
                inputs.append(InputBuffer(b, Layout.contiguous(big, dt.float32)))
                reads.append((b, View.contiguous(big).slice(d, 1, None, 2).index_at(iv)))
        fn = rnd.choice(["exp", "tanh", "relu", "neg"])
        if rnd.random() < 0.25 and len(out) >= 2:  # keepdim reduction over the last or a middle dim
            axis = rnd.choice([len(out) - 1, len(out) // 2])
            (r0,) = reduction_vars(1)
            reads = [(b, e.xreplace({iv[axis]: r0})) for b, e in reads]
            ranges = tuple(1 if a == axis else s for a, s in enumerate(out))
            body = Reduction(ranges, (out[axis],), rnd.choice(["sum", "max"]), _combine(fn, reads))
            out = ranges
        else:
            body = Pointwise(out, _combine(fn, reads))
        nodes.append(ComputedBuffer(f"buf{k}", Layout.contiguous(out, dt.float32), body))
        shapes[f"buf{k}"] = out
    return Graph(tuple(inputs), tuple(nodes), (nodes[-1].name,))


def _combine(fn: str, reads):
    v = load(reads[0][0], reads[0][1], dt.float32)
    for b, e in reads[1:]:
        v = op("add", v, load(b, e, dt.float32))
    return op(fn, v)


def accesses(node: ComputedBuffer):
    """(index, [(var, size), ...]) for the write and every load of a node, in loop order."""
    body = node.body
    pv = list(zip(pointwise_vars(len(body.ranges)), body.ranges))
    rv = list(zip(reduction_vars(len(body.reduction_ranges)), body.reduction_ranges))
    out = [(node.write_index(), pv)]
    out += [(ld.index, pv + rv) for ld in loads(body.value)]
    return out


def clear_caches() -> None:
    """Empty every memo a measured pass could reuse: the functools caches of stax.ir and sympy's cache.

    Each variant then starts as cold as a fresh process that has already built its graph.
    """
    import sys

    import sympy.core.cache

    for name, mod in list(sys.modules.items()):
        if name.startswith("stax.ir") and mod is not None:
            for obj in vars(mod).values():
                if callable(getattr(obj, "cache_clear", None)):
                    obj.cache_clear()
    sympy.core.cache.clear_cache()


def run_normalize(acc) -> None:
    from stax.ir.normalize import normalize_index

    for index, pairs in acc:
        normalize_index(index, pairs)


def run_simplify_then_normalize(acc) -> None:
    """Range-aware simplification first, then normalization of the simplified index."""
    from stax.ir.normalize import normalize_index
    from stax.ir.simplify import simplify_index

    for index, pairs in acc:
        normalize_index(simplify_index(index, dict(pairs)), pairs)


def run_simplify(acc) -> None:
    from stax.ir.simplify import coalesce_loops, simplify_index

    for index, pairs in acc:
        vars_ = [v for v, _ in pairs]
        sizes = [s for _, s in pairs]
        coalesce_loops(sizes, [simplify_index(index, dict(pairs))], vars_)


def measure(fn, acc, repeat: int) -> float:
    """Median process CPU seconds of `fn(acc)`, every run starting from empty caches."""
    times = []
    for _ in range(repeat):
        clear_caches()
        gc.collect()
        t = time.process_time()
        fn(acc)
        times.append(time.process_time() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5, help="cold runs per variant (median reported)")
    args = ap.parse_args()
    t = time.process_time()
    g = build_graph(args.nodes, args.seed)
    build = time.process_time() - t
    nn = len(g.nodes)
    t = time.process_time()
    acc = [a for n in g.nodes for a in accesses(n)]  # extracted once: only normalization is timed below
    extract = time.process_time() - t
    digits = sum(1 for e, _ in acc if e.has(FloorDiv, ModularIndexing))
    print(f"graph: {nn} nodes, {len(acc)} accesses ({digits} with FloorDiv/ModularIndexing), "
          f"built in {build * 1e3 / nn:.3f} ms/node, accesses listed in {extract * 1e3 / nn:.3f} ms/node")
    print(f"cold caches, process CPU time, median of {args.repeat} runs:")
    dt_norm = measure(run_normalize, acc, args.repeat)
    print(f"normalize_index (stax.ir.normalize): {dt_norm * 1e3 / nn:.3f} ms/node "
          f"({dt_norm * 1e6 / len(acc):.1f} us/access)")
    dt_both = measure(run_simplify_then_normalize, acc, args.repeat)
    print(f"simplify_index then normalize_index: {dt_both * 1e3 / nn:.3f} ms/node")
    dt_simp = measure(run_simplify, acc, args.repeat)
    print(f"simplify_index + coalesce_loops (stax.ir.simplify): {dt_simp * 1e3 / nn:.3f} ms/node")
    print(f"goal: < 0.2 ms/node -> normalize {'OK' if dt_norm * 1e3 / nn < 0.2 else 'MISSED'}")


if __name__ == "__main__":
    main()
