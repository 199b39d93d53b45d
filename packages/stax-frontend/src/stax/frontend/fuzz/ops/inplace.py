"""In-place rows: add_ / mul_ / div_ / copy_ / clamp_ / fill_ ..., assignments into
slices, selects, boolean masks and advanced indices (index_put_), masked_fill_, scatter_,
index_add_, and in-place ops through transposed / diagonal views. The target is
argument 0 (a graph input that does not require grad, or an intermediate); AOTAutograd
functionalizes them, so these test its mutation handling and Stax's lowering of the
scatters it produces."""

from __future__ import annotations

from .base import Aux, Emit, Row, add_aux, broadcast_shape, float_literal, partner_operand, same_shape_partner

INPLACE = frozenset({"inplace"})


def _binary_(r, ms):
    m = ms[0]
    aux: list = []
    ops = ["add_", "mul_", "copy_", "sub_"] + (["div_", "lerp_"] if m.is_float else [])
    if m.is_bool:
        ops = ["copy_", "mul_"]
    op = r.choice(ops)
    other = "{1}" if len(ms) > 1 else partner_operand(r, m, aux, scalar=op not in ("copy_", "lerp_"))
    if op == "lerp_":
        if len(ms) > 1 and ms[1].dtype != m.dtype:
            return None
        if len(ms) == 1:
            aux.clear()
            other = add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
        return Emit("{0}", pre=(f"{{0}}.lerp_({other}, 0.3)",), aux=tuple(aux), inplace=True, exact=False)
    alpha = f", alpha={r.choice([2, -1])}" if op in ("add_", "sub_") and r.random() < 0.3 else ""
    exact = True if op == "copy_" else ("int" if op != "div_" else False)
    return Emit("{0}", pre=(f"{{0}}.{op}({other}{alpha})",), aux=tuple(aux), inplace=True, exact=exact)


def _unary_(r, ms):
    m = ms[0]
    forms = ["fill_", "zero_"]
    if not m.is_bool:
        forms += ["clamp_", "relu_", "neg_", "abs_"]
    if m.is_float:
        forms += ["exp_", "sigmoid_", "tanh_"]
    f = r.choice(forms)
    if f == "fill_":
        v = float_literal(r) if m.is_float else ("True" if m.is_bool else "4")
        return Emit("{0}", pre=(f"{{0}}.fill_({v})",), inplace=True, exact=True)
    if f == "clamp_":
        lo, hi = (-0.5, 0.75) if m.is_float else (-2, 3)
        return Emit("{0}", pre=(f"{{0}}.clamp_({lo}, {hi})",), inplace=True, exact=True)
    transcendental = f in ("exp_", "sigmoid_", "tanh_")
    return Emit("{0}", pre=(f"{{0}}.{f}()",), inplace=True, exact=not transcendental,
                cost=2.0 if transcendental else 0.0, special=f == "exp_")


def _value_literal(r, m):
    return float_literal(r) if m.is_float else ("True" if m.is_bool else str(r.choice([1, -3, 7])))


def _assign(r, ms):
    """x[...] = v / x[...] op= v through a slice, a select or a boolean mask."""
    m = ms[0]
    aux: list = []
    d = r.randrange(m.ndim)
    n = m.shape[d]
    u = r.random()
    lead = ":, " * d
    if u < 0.3:
        a = r.randint(0, max(0, n - 1))
        part = f"{lead}{a}:{r.randint(a, n)}" + (":2" if r.random() < 0.3 else "")
        op = r.choice(["=", "=", "+=", "*="]) if not m.is_bool else "="
        return Emit("{0}", pre=(f"{{0}}[{part}] {op} {_value_literal(r, m)}",), inplace=True,
                    exact="int" if op != "=" else True)
    if u < 0.55 and n > 0:
        i = r.randrange(-n, n)
        shape = tuple(s for k, s in enumerate(m.shape) if k != d)
        v = add_aux(aux, Aux("data", broadcast_shape(r, shape), m.dtype))
        op = "=" if m.is_bool or r.random() < 0.6 else "+="
        return Emit("{0}", pre=(f"{{0}}[{lead}{i}] {op} {v}",), aux=tuple(aux), inplace=True,
                    exact=True if op == "=" else "int")
    k = r.randint(1, m.ndim)
    mask = add_aux(aux, Aux("mask", tuple(m.shape[:k]), "b"))
    if r.random() < 0.5:
        return Emit("{0}", pre=(f"{{0}}[{mask}] = {_value_literal(r, m)}",), aux=tuple(aux), inplace=True, exact=True)
    mask = add_aux(aux, Aux("mask", broadcast_shape(r, m.shape), "b"))
    return Emit("{0}", pre=(f"{{0}}.masked_fill_({mask}, {_value_literal(r, m)})",), aux=tuple(aux), inplace=True,
                exact=True)


def _index_put_(r, ms):
    m = ms[0]
    n = m.shape[0]
    if n == 0:
        return None
    aux: list = []
    u = r.random()
    if u < 0.4:
        k = r.randint(1, n)
        i = add_aux(aux, Aux("unique", (k,), "i64", high=n))
        v = add_aux(aux, Aux("data", broadcast_shape(r, (k,) + tuple(m.shape[1:])), m.dtype))
        op = "=" if m.is_bool or r.random() < 0.6 else "+="  # x[i] += v with distinct i: no read-after-write race
        return Emit("{0}", pre=(f"{{0}}[{i}] {op} {v}",), aux=tuple(aux), inplace=True,
                    exact=True if op == "=" else "int")
    if u < 0.7:
        k = r.randint(1, 6)
        i = add_aux(aux, Aux("index", (k,), "i64", low=-n, high=n))
        v = add_aux(aux, Aux("data", broadcast_shape(r, (k,) + tuple(m.shape[1:])), m.dtype))
        return Emit("{0}", pre=(f"{{0}}.index_put_(({i},), {v}, accumulate=True)",), aux=tuple(aux), inplace=True,
                    exact="int")
    d = r.randrange(m.ndim)
    nd = m.shape[d]
    if nd == 0:
        return None
    shape = tuple(r.randint(1, nd) if j == d else s for j, s in enumerate(m.shape))
    if r.random() < 0.5:
        i = add_aux(aux, Aux("unique", shape, "i64", high=nd, dim=d))
        src = add_aux(aux, Aux("data", shape, m.dtype))
        return Emit("{0}", pre=(f"{{0}}.scatter_({d}, {i}, {src})",), aux=tuple(aux), inplace=True, exact=True)
    k = r.randint(1, 5)
    i = add_aux(aux, Aux("index", (k,), "i64", low=0, high=nd))
    sshape = list(m.shape)
    sshape[d] = k
    src = add_aux(aux, Aux("data", tuple(sshape), m.dtype))
    return Emit("{0}", pre=(f"{{0}}.index_add_({d}, {i}, {src})",), aux=tuple(aux), inplace=True, exact="int")


def _through_view(r, ms):
    m = ms[0]
    v = r.choice(["{0}.transpose(0, -1)", "{0}.diagonal()", "{0}[::2]", "{0}.select(0, -1)", "{0}.view(-1)"])
    if m.ndim < 2 and ("diagonal" in v or "transpose" in v):
        v = "{0}[::2]"
    op = r.choice(["mul_(2)", "add_(1)", "zero_()"]) if not m.is_bool else "zero_()"
    return Emit("{0}", pre=(f"{v}.{op}",), inplace=True, exact="int" if op == "add_(1)" else True)


def _writable(m):
    return m.writable


ROWS = [
    Row("binary_", "inplace", _binary_, arity=2, optional=1, accepts=_writable, partner=same_shape_partner,
        exact=True, weight=1.2, tags=INPLACE),
    Row("unary_", "inplace", _unary_, accepts=_writable, exact=True, weight=0.6, tags=INPLACE),
    Row("assign", "inplace", _assign, accepts=lambda m: m.writable and m.ndim >= 1, exact=True, tags=INPLACE),
    Row("index_put_", "inplace", _index_put_, accepts=lambda m: m.writable and m.ndim >= 1, exact=True, weight=0.8,
        tags=INPLACE),
    Row("through_view", "inplace", _through_view, accepts=lambda m: m.writable and m.ndim >= 1 and m.numel > 0,
        exact=True, weight=0.5, tags=INPLACE),
]
