"""Foundation: building IR values and graphs, their text form, equality and content hashes."""

import os
import subprocess
import sys
import textwrap

import pytest
import sympy
from stax.ir import (
    ComputedBuffer,
    Constant,
    ExternKernel,
    Graph,
    IndexValue,
    InputBuffer,
    Layout,
    Op,
    Pointwise,
    Reduction,
    Scan,
    cast,
    const,
    format_value,
    index_value,
    load,
    loads,
    op,
    pointwise_vars,
    reduction_vars,
    walk,
)
from stax.ir import dtypes as dt
from stax.ir.examples import example_7_1

i0, i1 = pointwise_vars(2)
(r0,) = reduction_vars(1)


# ---- dtypes


@pytest.mark.parametrize(
    "a, b, want",
    [  # torch.promote_types, as documented for these pairs
        (dt.uint8, dt.int8, dt.int16), (dt.float16, dt.bfloat16, dt.float32), (dt.bool_, dt.int32, dt.int32),
        (dt.int64, dt.float16, dt.float16), (dt.int32, dt.int64, dt.int64), (dt.float32, dt.float64, dt.float64),
        (dt.uint8, dt.int64, dt.int64), (dt.bool_, dt.bool_, dt.bool_), (dt.uint8, dt.bool_, dt.uint8),
    ],
)
def test_promote_types(a, b, want):
    assert dt.promote_types(a, b) == want
    assert dt.promote_types(b, a) == want


def test_dtype_lookup_and_properties():
    assert dt.dtype("bfloat16") is dt.bfloat16
    assert dt.bfloat16.np == dt.float32.np  # bf16 values live in float32 arrays, rounded
    assert dt.compute_dtype(dt.float16) == dt.float32 and dt.compute_dtype(dt.int8) == dt.int8
    assert dt.int8.is_integer and dt.int8.is_signed and not dt.uint8.is_signed and dt.bool_.is_bool
    with pytest.raises(ValueError, match="unknown stax dtype"):
        dt.dtype("complex64")


# ---- values


def test_op_infers_dtypes_and_rejects_bad_operands():
    a = load("a", i0, dt.float32)
    assert op("add", a, a).dtype == dt.float32
    assert op("lt", a, a).dtype == dt.bool_
    assert op("where", op("lt", a, a), a, a).dtype == dt.float32
    assert op("rand", const(1, dt.int64), index_value(i0)).dtype == dt.float32
    with pytest.raises(TypeError, match="share one dtype"):
        op("add", a, load("b", i0, dt.float64))
    with pytest.raises(TypeError, match="takes 2 operands"):
        op("add", a)
    with pytest.raises(TypeError, match="floating"):
        op("exp", load("c", i0, dt.int32))
    with pytest.raises(TypeError, match="integer or bool"):
        op("bitwise_and", a, a)
    with pytest.raises(TypeError, match="condition must be bool"):
        op("where", a, a, a)
    with pytest.raises(TypeError, match="int64"):
        op("rand", const(1, dt.int32), const(2, dt.int32))
    with pytest.raises(ValueError, match="unknown stax op"):
        op("frobnicate", a)


def test_cast_and_const():
    a = load("a", i0, dt.float32)
    assert cast(a, dt.float32) is a
    assert cast(a, dt.int32) == Op("to_dtype", (a,), dt.int32)
    assert cast(const(2.5, dt.float32), dt.int64) == Constant(2, dt.int64)
    assert const(1, dt.bool_).value is True and isinstance(const(3, dt.float16).value, float)


def test_structural_equality_and_hash():
    def build():
        x = load("x", 4 * i0 + i1, dt.float32)
        return op("mul", op("exp", x), const(float("nan"), dt.float32))

    a, b = build(), build()
    assert a == b and hash(a) == hash(b) and a is not b
    assert Constant(float("nan"), dt.float32) == Constant(float("nan"), dt.float32)  # by repr: nan == nan
    assert Constant(0.0, dt.float32) != Constant(-0.0, dt.float32)
    assert Constant(1, dt.int32) != Constant(1, dt.int64)
    assert load("x", i0, dt.float32) != load("x", i1, dt.float32)
    m = op("lt", index_value(i0), const(3, dt.int64))
    masked = load("x", i0, dt.float32, mask=m)
    assert masked != load("x", i0, dt.float32) and masked == load("x", i0, dt.float32, mask=m, other=0)
    assert masked != load("x", i0, dt.float32, mask=m, other=1.0)
    assert len({a, b, masked}) == 2


def test_walk_is_post_order_and_visits_shared_nodes_once():
    x = load("x", i0, dt.float32)
    e = op("exp", x)
    root = op("add", e, e)
    order = list(walk(root))
    assert order == [x, e, root]
    m = op("lt", index_value(i0), const(3, dt.int64))
    ml = load("y", i0, dt.float32, mask=m)
    assert m in list(walk(ml)) and loads(op("add", ml, x)) == [ml, x]


def test_str_names_shared_subexpressions_once():
    v = load("x", i0, dt.float32)
    for _ in range(60):  # a DAG of 60 levels, each using the previous node twice: 2^60 tree paths
        v = op("add", v, v)
    text = format_value(v)
    assert text.count("load(") == 1 and len(text) < 60 * 40
    assert str(v) == text


def test_str_of_values():
    m = op("lt", index_value(i1), const(100, dt.int64))
    v = op("where", m, load("x", 128 * i0 + i1, dt.float32, mask=m, other=-1.0), const(0.5, dt.float32))
    assert str(v) == (
        "tmp0 = index(i1) : int64; tmp1 = lt(tmp0, 100:int64) : bool; "
        "tmp2 = load(x, 128*i0 + i1, mask=tmp1, other=-1.0) : float32; "
        "tmp3 = where(tmp1, tmp2, 0.5:float32) : float32; -> tmp3"
    )
    t = sympy.Symbol("t0", integer=True)
    g = load("w", 16 * t + i1, dt.float32, indirect=((t, load("idx", i0, dt.int64), 10),))
    assert "tmp1 = load(w, i1 + 16*t0, t0=tmp0<10) : float32" in str(g)


# ---- graphs


def test_example_7_1_text_form():
    assert str(example_7_1()) == textwrap.dedent(
        """\
        graph(
          input primals_1: cpu float32[64, 128] strides=[128, 1]
          buf1: cpu float32[64, 1] strides=[1, 1] = Reduction(ranges=[64, 1], reduction_ranges=[128], sum)
              tmp0 = load(primals_1, 128*i0 + r0) : float32
              -> tmp0
          buf2: cpu float32[64, 128] strides=[128, 1] = Pointwise(ranges=[64, 128])
              tmp0 = load(primals_1, 128*i0 + i1) : float32
              tmp1 = load(buf1, i0) : float32
              tmp2 = truediv(tmp0, tmp1) : float32
              -> tmp2
          return (buf2)
        )"""
    )


def test_content_hash_is_deterministic_across_processes():
    code = "from stax.ir.examples import example_7_1; print(example_7_1().content_hash())"
    hashes = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        hashes.add(r.stdout.strip())
    assert hashes == {example_7_1().content_hash()}


def test_content_hash_sees_every_change():
    g = example_7_1()
    x, b1, b2 = g.inputs[0], g.nodes[0], g.nodes[1]
    variants = [
        Graph((x,), (b1, b2), ("buf1", "buf2")),
        Graph((InputBuffer("primals_1", Layout("cpu", dt.float32, (64, 128), (1, 64))),), (b1, b2), ("buf2",)),
        Graph((x,), (ComputedBuffer("buf1", b1.layout, Reduction((64, 1), (128,), "max", b1.body.value)), b2),
              ("buf2",)),
        Graph((x,), (b1, ComputedBuffer("buf2", b2.layout, Pointwise((64, 128), op("mul", *b2.body.value.args)))),
              ("buf2",)),
    ]
    hashes = {v.content_hash() for v in variants} | {g.content_hash()}
    assert len(hashes) == len(variants) + 1
    assert hash(g.nodes[1].body.value) == hash(example_7_1().nodes[1].body.value)


def test_graph_and_buffer_validation():
    g = example_7_1()
    with pytest.raises(ValueError, match="duplicate"):
        Graph(g.inputs, g.nodes + (g.nodes[0],), ("buf2",))
    with pytest.raises(ValueError, match="not a buffer"):
        Graph(g.inputs, g.nodes, ("nope",))
    with pytest.raises(ValueError, match="do not match layout sizes"):
        ComputedBuffer("b", Layout.contiguous((4,), dt.float32), Pointwise((5,), load("x", i0, dt.float32)))
    with pytest.raises(TypeError, match="stores"):
        ComputedBuffer("b", Layout.contiguous((4,), dt.float64), Pointwise((4,), load("x", i0, dt.float32)))
    with pytest.raises(ValueError, match="unknown stax reduction"):
        Reduction((4,), (4,), "median", load("x", i0, dt.float32))
    with pytest.raises(ValueError, match="unknown stax scan"):
        Scan((4,), 0, "cumfoo", load("x", i0, dt.float32))
    with pytest.raises(ValueError, match="axis"):
        Scan((4,), 1, "cumsum", load("x", i0, dt.float32))
    assert g.buffer_layout("buf1").sizes == (64, 1) and g.node("buf2").name == "buf2"
    assert g.buffer_layout(g.inputs[0].name) == g.inputs[0].layout  # inputs have layouts, not nodes
    for missing in (g.inputs[0].name, "nope"):
        with pytest.raises(KeyError):
            g.node(missing)
    with pytest.raises(KeyError):
        g.buffer_layout("nope")
    # reductions and scans know their result dtypes
    assert Reduction((4,), (3,), "argmax", load("x", i0, dt.float32)).dtype == dt.int64
    assert Reduction((4,), (3,), "any", load("x", i0, dt.float32)).dtype == dt.bool_
    assert Scan((4,), 0, "cummax_index", load("x", i0, dt.float32)).dtype == dt.int64
    assert Scan((4,), 0, "cumsum", load("x", i0, dt.float32)).dtype == dt.float32


def test_layout():
    lay = Layout("cpu", dt.float32, (3, 4), (1, 3), 5)
    assert lay.index() == i0 + 3 * i1 + 5
    assert lay.numel() == 12 and lay.storage_size() == 5 + 2 * 1 + 3 * 3 + 1 and lay.nbytes() == 17 * 4
    assert not lay.is_contiguous() and Layout.contiguous((3, 4), dt.float32).is_contiguous()
    assert Layout.contiguous((0, 4), dt.float32).storage_size() == 0
    assert str(lay) == "cpu float32[3, 4] strides=[1, 3], offset=5"
    with pytest.raises(ValueError, match="strides"):
        Layout("cpu", dt.float32, (3, 4), (1,))


def test_extern_kernel_text():
    e = ExternKernel("buf3", Layout.contiguous((4, 4), dt.float32), "aten.mm", ("a", "b"), (("alpha", 1),))
    assert str(e) == "buf3: cpu float32[4, 4] strides=[4, 1] = ExternKernel aten.mm(a, b, alpha=1)"
    assert "FallbackKernel" in str(ExternKernel("b", e.layout, "aten.foo", ("a",), fallback=True))


def test_scan_text():
    s = Scan((4, 8), 1, "cumsum", load("x", 8 * i0 + i1, dt.float32))
    assert str(s).startswith("Scan(ranges=[4, 8], axis=1, cumsum)")
    assert s.out_dtype is None and s.acc_dtype == s.dtype == dt.float32
    assert IndexValue(i0, dt.int64) == index_value(i0)


def test_scan_out_dtype_is_the_stored_type_of_a_wider_accumulator():
    """A float32 cumsum accumulating in float64 stores float32 (Scan.out_dtype): the body's dtype is
    the stored one, the value's the accumulator's; one spelling per body (equal to the value's: None)."""
    acc = cast(load("x", 8 * i0 + i1, dt.float32), dt.float64)
    s = Scan((4, 8), 1, "cumsum", acc, dt.float32)
    assert s.dtype == dt.float32 and s.acc_dtype == dt.float64 and s.out_dtype == dt.float32
    assert str(s).startswith("Scan(ranges=[4, 8], axis=1, cumsum, out_dtype=float32)")
    ComputedBuffer("s", Layout.contiguous((4, 8), dt.float32), s)  # the layout stores the out dtype
    with pytest.raises(TypeError, match="computes float32"):
        ComputedBuffer("s", Layout.contiguous((4, 8), dt.float64), s)
    plain = Scan((4, 8), 1, "cumsum", acc)
    same = Scan((4, 8), 1, "cumsum", acc, dt.float64)
    assert same.out_dtype is None and same == plain and str(same) == str(plain)
    assert same.content_hash() == plain.content_hash() != s.content_hash()
    with pytest.raises(ValueError, match="out_dtype"):
        Scan((4, 8), 1, "cummax_index", acc, dt.float32)


def test_map_indices_rewrites_every_index_and_keeps_masks_indirects_and_sharing():
    from stax.ir import map_indices, walk
    from stax.ir.expr import Load

    i0, t = sympy.Symbol("i0", integer=True, nonnegative=True), sympy.Symbol("t0", integer=True)
    f32, i64 = dt.float32, dt.int64
    idx = load("ix", i0, i64)
    gathered = load("x", 4 * i0 + t, f32, indirect=((t, idx, 4),), mask=op("lt", index_value(i0), const(3, i64)))
    shared = op("exp", load("y", i0, f32))
    root = op("add", op("mul", shared, shared), op("add", gathered, cast(index_value(i0 + 1), f32)))
    out = map_indices(root, lambda e: e.xreplace({i0: i0 + 2}))
    got = {n.buffer: n for n in walk(out) if isinstance(n, Load)}
    assert got["y"].index == i0 + 2 and got["ix"].index == i0 + 2
    assert got["x"].index == 4 * i0 + 8 + t and got["x"].indirect[0][1] is got["ix"]
    assert str(got["x"].mask) == str(op("lt", index_value(i0 + 2), const(3, i64)))
    assert {n.index for n in walk(out) if isinstance(n, IndexValue)} == {i0 + 2, i0 + 3}
    assert out.args[0].args[0] is out.args[0].args[1]  # the shared exp stays one node
    assert map_indices(root, lambda e: e) == root
