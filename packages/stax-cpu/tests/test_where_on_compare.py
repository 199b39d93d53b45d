"""where(a <cmp> b, x, y) in the vector form selects on the comparison's own mask when all four
have lanes of one width (no round trip through the char-lane `vbool`, which GCC narrows and widens
lane by lane: ReLU's backward 4x slower). Every comparison, NaN and signed zeros included, against
stax.ir.interpret bit for bit; mixed widths keep the general form."""

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, isa_of, pointwise, run_both
from stax import ir
from stax.cpu.vec_body import COMPARE
from stax.ir import dtypes as dt

(i0,) = ir.pointwise_vars(1)
SPECIAL = [-np.inf, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, np.inf, np.nan]


def _graph(cmp: str, cd: dt.DType, xd: dt.DType, n: int) -> ir.Graph:
    a, b, x, y = (contiguous(k, (n,), d) for k, d in (("a", cd), ("b", cd), ("x", xd), ("y", xd)))
    cond = ir.op(cmp, ir.load("a", i0, cd), ir.load("b", i0, cd))
    out = pointwise("out", (n,), ir.op("where", cond, ir.load("x", i0, xd), ir.load("y", i0, xd)))
    return ir.Graph([a, b, x, y], [out], ["out"])


def _values(d: dt.DType, n: int, rng):
    if d.is_floating:
        grid = np.array(SPECIAL, dtype=d.np)
        return np.repeat(grid, len(grid))[:n], np.tile(grid, len(grid))[:n]
    return rng.integers(-3, 4, n).astype(d.np), rng.integers(-3, 4, n).astype(d.np)


@pytest.mark.parametrize("cmp", ["eq", "ne", "lt", "le", "gt", "ge"])
@pytest.mark.parametrize("cd,xd,fused", [
    (dt.float32, dt.float32, True), (dt.int32, dt.float32, True), (dt.float64, dt.int64, True),
    (dt.float32, dt.float64, False),
])
def test_where_on_a_comparison(cfg, cmp, cd, xd, fused):
    n = 81  # 9 x 9 special pairs; not a multiple of the lanes (the tail too)
    rng = np.random.default_rng(0)
    a, b = _values(cd, n, rng)
    vals = {"a": a, "b": b, "x": rng.standard_normal(n).astype(xd.np), "y": -rng.standard_normal(n).astype(xd.np)}
    vals["x"][:3] = [-0.0, np.nan, np.inf] if xd.is_floating else vals["x"][:3]
    ours, ref, mod = run_both(_graph(cmp, cd, xd, n), vals, cfg)
    assert_close(ours[0], ref[0], xd, what=f"where({cmp})")  # exact, NaN as NaN
    if isa_of(mod) == "none":
        pytest.skip("the code check is about the vector form; the scalar level (STAX_CPU_ISA=none) has none")
    vector_code = mod.source.split("# ---- Python wrapper ----")[0]
    assert ("stax::vec::where(" not in vector_code) == fused
    if fused:
        assert f" {COMPARE[cmp]} " in vector_code and ") ? " in vector_code
