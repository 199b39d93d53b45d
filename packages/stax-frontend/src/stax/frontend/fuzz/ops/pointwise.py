"""Pointwise rows: unary math (raw and domain-guarded), rounding, casts, activations,
binary arithmetic / comparisons / bitwise ops (partner: another value, a scalar or a new
input), where / lerp / addcmul / masked_fill / clamp, dropout in eval."""

from __future__ import annotations

from ..program import FLOATS
from .base import (
    CODE,
    Aux,
    Emit,
    Row,
    add_aux,
    both,
    broadcast_shape,
    float_literal,
    is_float,
    is_intlike,
    not_bool,
    partner_operand,
    same_shape_partner,
    scalar_for,
)

# fn: (guard applied in the *_safe row, or None; the raw form may create NaN/inf)
TRANSCENDENTAL = {
    "exp": None, "exp2": None, "expm1": None, "sin": None, "cos": None, "atan": None, "tanh": None,
    "asinh": None, "erf": None, "erfc": None, "sigmoid": None, "sinh": None, "cosh": None, "tan": None,
    "log": "{0}.abs() + 0.5", "log2": "{0}.abs() + 0.5", "log10": "{0}.abs() + 0.5", "log1p": "{0}.abs()",
    "sqrt": "{0}.abs()", "rsqrt": "{0}.abs() + 0.5", "reciprocal": "{0}.abs() + 0.5",
    "asin": "{0}.clamp(-0.9, 0.9)", "acos": "{0}.clamp(-0.9, 0.9)", "atanh": "{0}.clamp(-0.9, 0.9)",
    "erfinv": "{0}.clamp(-0.9, 0.9)", "acosh": "{0}.abs() + 1", "lgamma": "{0}.abs() + 0.5",
    "digamma": "{0}.abs() + 0.5",  # no IR op: an ATen fallback
    "i0": "{0}.clamp(-5, 5)",  # no IR op: an ATen fallback
}
CHEAP = {"sqrt", "rsqrt", "reciprocal"}
BOUNDED = {"sin", "cos", "atan", "tanh", "asinh", "erf", "erfc", "sigmoid"}  # finite for finite inputs


def _unary(fn: str, guard: str | None):
    cost = 1.0 if fn in CHEAP else 2.0

    def build(r, ms):
        arg = guard if guard else "{0}"
        return Emit(f"torch.{fn}({arg})", cost=cost, special=guard is None and fn not in BOUNDED)

    return build


def _simple(expr: str, **kw):
    return lambda r, ms: Emit(expr, **kw)


def _round(r, ms):
    if ms[0].is_float and r.random() < 0.2:
        return Emit(f"torch.round({{0}}, decimals={r.choice([1, 2, -1])})")  # decimals: an ATen fallback
    return Emit(f"torch.{r.choice(['floor', 'ceil', 'round', 'trunc'])}({{0}})")


def _pow_scalar(r, ms):
    m = ms[0]
    choices = [2, 3, 1, 0] if not m.is_float else [2, 3, 0.5, -1, 1, 1.7, -2, 0.0]
    e = r.choice(choices)
    return Emit(f"torch.pow({{0}}, {e!r})", cost=1.0 if e in (0, 1, 2, 3) else 2.0,
                special=m.is_float and e not in (1, 2, 3, 0))


def _clamp(r, ms):
    m = ms[0]
    lo, hi = (sorted([r.uniform(-2, 2), r.uniform(-2, 2)]) if m.is_float
              else sorted([r.randint(-4, 4), r.randint(-4, 4)]))
    lo, hi = (round(lo, 3), round(hi, 3)) if m.is_float else (lo, hi)
    u = r.random()
    if u < 0.15:
        lo, hi = hi, lo  # min > max: eager gives max everywhere
    if u < 0.4:
        return Emit(f"torch.clamp({{0}}, min={lo!r}, max={hi!r})")
    if u < 0.6:
        return Emit(f"torch.clamp_min({{0}}, {lo!r})")
    if u < 0.8:
        return Emit(f"torch.clamp_max({{0}}, {hi!r})")
    aux: list = []
    a = add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
    b = add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
    return Emit(f"torch.clamp({{0}}, {a}, {b})", aux=tuple(aux))


def _cast(r, ms):
    m = ms[0]
    target = r.choice(["f32", "f64", "f16", "bf16", "i32", "i64", "b", "f32", "f16"])
    if m.is_float and target not in FLOATS and (not m.exact or m.special):
        target = r.choice(FLOATS)  # float -> int is discontinuous (and UB for NaN): exact finite values only
    if target == m.dtype:
        target = "f32" if m.dtype != "f32" else "f64"
    if target in ("i32", "i64", "b") and r.random() < 0.4:
        return Emit({"i32": "{0}.int()", "i64": "{0}.long()", "b": "{0}.bool()"}[target])
    return Emit(f"{{0}}.to({CODE[target]})")


def _nan_to_num(r, ms):
    if r.random() < 0.5:
        return Emit("torch.nan_to_num({0})")
    return Emit(f"torch.nan_to_num({{0}}, nan={float_literal(r)}, posinf={float_literal(r)}, "
                f"neginf={float_literal(r)})")


ACTIVATIONS = {
    "gelu": ["F.gelu({0})", "F.gelu({0}, approximate='tanh')"],
    "silu": ["F.silu({0})"],
    "softplus": ["F.softplus({0})", "F.softplus({0}, beta=2.0, threshold=5.0)"],
    "mish": ["F.mish({0})"],
    "hardswish": ["F.hardswish({0})"],
    "hardsigmoid": ["F.hardsigmoid({0})"],
    "hardtanh": ["F.hardtanh({0}, -0.5, 1.5)", "F.relu6({0})"],
    "leaky_relu": ["F.leaky_relu({0}, 0.1)"],
    "elu": ["F.elu({0})", "F.selu({0})", "F.celu({0}, alpha=0.5)"],
    "logsigmoid": ["F.logsigmoid({0})"],
    "softsign": ["F.softsign({0})", "F.tanhshrink({0})", "F.softshrink({0}, 0.5)"],
    "threshold": ["F.threshold({0}, 0.1, -2.0)", "F.hardshrink({0}, 0.5)"],
}


def _activation(forms):
    return lambda r, ms: Emit(r.choice(forms), cost=2.0)


def _dropout(r, ms):
    return Emit(r.choice(["F.dropout({0}, p=0.3, training=False)", "F.dropout({0}, p=0.0, training=True)",
                          "F.alpha_dropout({0}, 0.5, training=False)",
                          "torch.nn.functional.dropout1d({0}.unsqueeze(0), 0.5, False)[0]"]))


# ---- binary ----------------------------------------------------------------------------


def _binary(template: str, dtypes=None, scalar=True, int_nonzero=False, special=False, cost=1.0, same_dtype=False):
    """template over {0} and {1}; the partner is arg 1 when given, else chosen here."""

    def build(r, ms):
        aux: list = []
        m = ms[0]
        if len(ms) > 1:
            other = "{1}"
            if same_dtype and ms[1].dtype != m.dtype:
                return None
            if int_nonzero and not ms[1].is_float:
                return None  # an integer divisor from the program may be 0
        elif int_nonzero and not m.is_float:
            other = (str(r.choice([1, 2, 3, -2, 5])) if r.random() < 0.5 else
                     add_aux(aux, Aux("index", broadcast_shape(r, m.shape), m.dtype, low=1, high=6)))
        else:
            other = partner_operand(r, m, aux, dtypes=[m.dtype] if same_dtype else dtypes, scalar=scalar)
        return Emit(template.format("{0}", other), aux=tuple(aux), cost=cost, special=special)

    return build


def _add(r, ms):
    aux: list = []
    m = ms[0]
    other = "{1}" if len(ms) > 1 else partner_operand(r, m, aux)
    op = r.choice(["torch.add", "torch.sub"]) if not m.is_bool and (len(ms) == 1 or not ms[1].is_bool) else "torch.add"
    alpha = ""
    if r.random() < 0.25:
        alpha = f", alpha={r.choice([2, -1, 3])}" if not m.is_float else f", alpha={float_literal(r)}"
        if m.is_bool:
            alpha = ""
    return Emit(f"{op}({{0}}, {other}{alpha})", aux=tuple(aux))


def _div(r, ms):
    m = ms[0]
    aux: list = []
    mode = r.choice([None, None, "floor", "trunc"])
    if len(ms) > 1:
        other = "{1}"
        if mode and (not ms[0].exact or not ms[1].exact):
            mode = None
        if mode and not (m.is_float or ms[1].is_float):
            return None  # integer division by a program value that may be 0
    elif mode and not m.is_float:
        other = str(r.choice([2, 3, -2, 7])) if r.random() < 0.5 else add_aux(
            aux, Aux("index", broadcast_shape(r, m.shape), m.dtype, low=1, high=6))
    else:
        other = partner_operand(r, m, aux)
    if mode and not m.exact:
        mode = None
    rm = f", rounding_mode={mode!r}" if mode else ""
    return Emit(f"torch.div({{0}}, {other}{rm})", aux=tuple(aux), special=True, exact=False if mode is None else None)


def _comparison(r, ms):
    op = r.choice(["eq", "ne", "lt", "le", "gt", "ge"])
    aux: list = []
    other = "{1}" if len(ms) > 1 else partner_operand(r, ms[0], aux)
    return Emit(f"torch.{op}({{0}}, {other})", aux=tuple(aux), grad=False)


def _where(r, ms):
    m = ms[0]
    aux: list = []
    if m.exact and not m.is_bool and r.random() < 0.4:
        cond = "{0} > 0"
    else:
        cond = add_aux(aux, Aux("mask", broadcast_shape(r, m.shape), "b"))
    other = "{1}" if len(ms) > 1 else partner_operand(r, m, aux)
    if r.random() < 0.5:
        return Emit(f"torch.where({cond}, {{0}}, {other})", aux=tuple(aux))
    return Emit(f"torch.where({cond}, {other}, {{0}})", aux=tuple(aux))


def _masked_fill(r, ms):
    m = ms[0]
    aux: list = []
    if m.exact and not m.is_bool and r.random() < 0.4:
        mask = "({0} < 0)"
    else:
        mask = add_aux(aux, Aux("mask", broadcast_shape(r, m.shape), "b"))
    value = (scalar_for(r, m.dtype, allow_float=False) if not m.is_float
             else r.choice([float_literal(r), "float('-inf')", "0.0"]))
    return Emit(f"{{0}}.masked_fill({mask}, {value})", aux=tuple(aux), special="inf" in value)


def _lerp(r, ms):
    m = ms[0]
    aux: list = []
    if len(ms) > 1:
        if ms[1].dtype != m.dtype:
            return None
        end = "{1}"
    else:
        end = add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
    w = float_literal(r) if r.random() < 0.5 else add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
    return Emit(f"torch.lerp({{0}}, {end}, {w})", aux=tuple(aux))


def _addc(r, ms):
    m = ms[0]
    aux: list = []
    a = add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
    b = add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
    v = float_literal(r)
    if r.random() < 0.5:
        return Emit(f"torch.addcmul({{0}}, {a}, {b}, value={v})", aux=tuple(aux))
    return Emit(f"torch.addcdiv({{0}}, {a}, {b}.abs() + 0.5, value={v})", aux=tuple(aux))


def _shift(r, ms):
    m = ms[0]
    aux: list = []
    amount = (str(r.randint(0, 5)) if r.random() < 0.5
              else add_aux(aux, Aux("index", broadcast_shape(r, m.shape), m.dtype, low=0, high=6)))
    if r.random() < 0.5:
        return Emit(f"torch.bitwise_right_shift({{0}}, {amount})", aux=tuple(aux))
    return Emit(f"torch.bitwise_left_shift({{0}}.abs(), {amount})", aux=tuple(aux))  # nonnegative: no UB


def _nextafter(r, ms):
    m = ms[0]
    if m.dtype not in ("f32", "f64"):
        return None
    aux: list = []
    other = "{1}.detach()" if len(ms) > 1 else add_aux(aux, Aux("data", broadcast_shape(r, m.shape), m.dtype))
    if len(ms) > 1 and ms[1].dtype != m.dtype:
        return None
    return Emit(f"torch.nextafter({{0}}.detach(), {other})", aux=tuple(aux), grad=False)


def _float_partner(m0, m1):
    return same_shape_partner(m0, m1) and m1.is_float


def _int_partner(m0, m1):
    return same_shape_partner(m0, m1) and is_intlike(m1)


def _any_partner(m0, m1):
    return same_shape_partner(m0, m1)


def _nb_partner(m0, m1):
    return same_shape_partner(m0, m1) and not m1.is_bool


def _exact_partner(m0, m1):
    return same_shape_partner(m0, m1) and m1.exact


ROWS = [
    *[Row(fn, "unary", _unary(fn, None), accepts=not_bool if fn in ("i0",) else (lambda m: True), weight=0.4)
      for fn in TRANSCENDENTAL],
    *[Row(fn + "_safe", "unary", _unary(fn, g), accepts=is_float if "clamp" in g else not_bool, weight=0.4)
      for fn, g in TRANSCENDENTAL.items() if g],
    Row("neg", "unary", _simple("torch.neg({0})"), accepts=not_bool, exact=True),
    Row("abs", "unary", _simple("torch.abs({0})"), accepts=not_bool, exact=True),
    Row("relu", "unary", _simple("torch.relu({0})"), accepts=not_bool, exact=True),
    Row("sign", "unary", _simple("torch.sign({0})", grad=False), exact=True, needs_exact=True),
    Row("rounding", "unary", _round, accepts=not_bool, exact=True, needs_exact=True),
    Row("frac", "unary", _simple("torch.frac({0})"), accepts=is_float, exact=True, needs_exact=True, weight=0.3),
    Row("bitwise_not", "unary", _simple("torch.bitwise_not({0})"), accepts=is_intlike, exact=True),
    Row("logical_not", "unary", _simple("torch.logical_not({0})", grad=False), exact=True, needs_exact=True),
    Row("isnan", "unary",
        lambda r, ms: Emit(f"torch.{r.choice(['isnan', 'isinf', 'isfinite', 'isposinf', 'isneginf'])}({{0}})",
                           grad=False), exact=True, needs_exact=True),
    Row("signbit", "unary", _simple("torch.signbit({0})", grad=False), accepts=is_float, exact=True, needs_exact=True,
        weight=0.3),
    Row("nan_to_num", "unary", _nan_to_num, accepts=is_float, exact=True, weight=0.5),
    Row("square", "unary", _simple("torch.square({0})"), accepts=not_bool, exact="int"),
    Row("pow_scalar", "unary", _pow_scalar, accepts=not_bool, exact="int"),
    Row("clamp", "unary", _clamp, accepts=not_bool, exact=True),
    Row("cast", "unary", _cast, exact=True),
    *[Row(name, "activation", _activation(forms), accepts=is_float, weight=0.5,
          exact=name in ("hardtanh", "threshold")) for name, forms in ACTIVATIONS.items()],
    Row("dropout_eval", "activation", _dropout, accepts=both(is_float, lambda m: m.ndim >= 1), exact=True, weight=0.4),
    # binary: the partner is another program value (same-or-broadcast shape) or chosen by the row
    Row("add", "binary", _add, arity=2, optional=1, partner=_any_partner, exact="int", weight=2.0),
    Row("mul", "binary", _binary("torch.mul({}, {})"), arity=2, optional=1, partner=_any_partner, exact="int",
        weight=1.5),
    Row("div", "binary", _div, arity=2, optional=1, partner=_any_partner, exact="int"),
    Row("maximum", "binary",
        lambda r, ms: _binary(f"torch.{r.choice(['maximum', 'minimum', 'fmax', 'fmin'])}({{}}, {{}})",
                              scalar=False)(r, ms),
        arity=2, optional=1, accepts=not_bool, partner=_nb_partner, exact=True),
    Row("atan2", "binary", _binary("torch.atan2({}, {})", dtypes=["f32", "f64", "f16", "bf16"], cost=2.0),
        arity=2, optional=1, accepts=is_float, partner=_float_partner),
    Row("logaddexp", "binary", _binary("torch.logaddexp({}, {})", scalar=False, same_dtype=True, cost=2.0),
        arity=2, optional=1, accepts=is_float, partner=_float_partner),
    Row("hypot", "binary", _binary("torch.hypot({}, {})", scalar=False, same_dtype=True, cost=2.0),
        arity=2, optional=1, accepts=is_float, partner=_float_partner, weight=0.5),
    Row("remainder", "binary", lambda r, ms: _binary(f"torch.{r.choice(['remainder', 'fmod'])}({{}}, {{}})",
                                                    int_nonzero=True, special=True)(r, ms),
        arity=2, optional=1, accepts=not_bool, partner=lambda a, b: _exact_partner(a, b) and b.is_float,
        exact="int", needs_exact=True),
    Row("floor_divide", "binary", _binary("torch.floor_divide({}, {})", int_nonzero=True, special=True),
        arity=2, optional=1, accepts=not_bool, partner=lambda a, b: _exact_partner(a, b) and b.is_float,
        exact="int", needs_exact=True, weight=0.5),  # floats not exact: eager's vectorized bf16 floor_divide
    # rounds each step to bf16 (-258 - 1 -> -260), its one-element path does not
    Row("pow", "binary", _binary("torch.pow({}, {})", scalar=False, same_dtype=True, special=True, cost=2.0),
        arity=2, optional=1, accepts=is_float, partner=_float_partner, weight=0.5),
    Row("copysign", "binary", _binary("torch.copysign({}, {})", cost=0.0),
        arity=2, optional=1, accepts=is_float, partner=lambda a, b: _exact_partner(a, b) and b.is_float,
        exact=True, needs_exact=True, weight=0.4),
    Row("nextafter", "binary", _nextafter, arity=2, optional=1, accepts=is_float, partner=_exact_partner,
        exact=True, needs_exact=True, weight=0.3),
    Row("bitwise", "binary", lambda r, ms: _binary(f"torch.bitwise_{r.choice(['and', 'or', 'xor'])}({{}}, {{}})",
                                                  dtypes=[ms[0].dtype])(r, ms),
        arity=2, optional=1, accepts=is_intlike, partner=_int_partner, exact=True),
    Row("shift", "binary", _shift, accepts=lambda m: m.is_int, exact=True, weight=0.5),
    Row("logical", "binary",
        lambda r, ms: _binary(f"torch.logical_{r.choice(['and', 'or', 'xor'])}({{}}, {{}})")(r, ms),
        arity=2, optional=1, partner=_exact_partner, exact=True, needs_exact=True, weight=0.6),
    Row("compare", "binary", _comparison, arity=2, optional=1, partner=_exact_partner, exact=True, needs_exact=True,
        weight=1.5),
    # ternary
    Row("where", "ternary", _where, arity=2, optional=1, partner=_any_partner, exact=True, weight=1.5),
    Row("masked_fill", "ternary", _masked_fill, exact=True),
    Row("lerp", "ternary", _lerp, arity=2, optional=1, accepts=is_float, partner=_float_partner, weight=0.6),
    Row("addcmul", "ternary", _addc, accepts=is_float, weight=0.6),
]
