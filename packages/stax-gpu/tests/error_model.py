"""The tolerance model for GPU results: a float64 reference with an error bound per element.

A first-order running error analysis. Every value of the graph is carried as (x, e):
x the exact mathematics of the graph on the given inputs (evaluated in float64), e a
bound on |computed - x| for ANY implementation whose ops meet the budgets below: the
numpy float32 interpreter, a GPU kernel with its own summation order, FMA contraction
and libdevice. A result passes when |result - x| <= e; NaN must match NaN, inf must
match inf, integer and bool results must be exact unless the bound says a near-tie
or a rounding across an integer may flip them.

  inputs, constants     e = 0 (the same float32 inputs are given to both sides)
  op f(a, b, ..)        e = spread + own.  spread = max |f(corner) - f(x)| over the
                        corners a +- e_a, b +- e_b, .. : the op's conditioning applied
                        to its operands' errors (sin passes exp's error through: the
                        H200's sin(exp(x)) deviation is ~1 ulp of exp(x), not of sin).
                        own = the op's budget at its result (BUDGETS):
                          exact ops (neg abs max floor fmod compare where ..): 0
                          correctly rounded (+ - * div_rn reciprocal): the rounding of
                            the exact result (0 when representable), 0.5 ulp once an
                            operand is inexact
                          library functions: (k + 0.5) ulp where k is libdevice's
                            maximum error in ulp from the correctly rounded result (CUDA
                            C++ Programming Guide, "Mathematical Functions"); +tiny,
                            since libdevice flushes subnormals. Under TRITON_INTERPRET
                            (portable math) numpy's error and the helper formulas' stated
                            error (rel, abs) instead.
                          half dtypes: + the rounding to the half type (the reference
                            rounds every op, a GPU only at casts and stores: both fit).
                        FMA contraction (a*b + c rounded once) only drops a*b's rounding.
  sum of n terms        sum e_i + gamma_n * sum |x_i|, gamma_n = n u / (1 - n u): any
                        summation order (Higham, Accuracy and Stability, sec. 4.2); u is
                        the accumulator's unit roundoff (float32 for half types).
  prod                  prod(|x_i| + e_i) (1 + gamma_n) - prod |x_i|
  max / min             max e_i;  argmax / argmin / any / all: exact, or any answer
                        where the values are tied within their bounds
  welford mean / m2     mean e_i + gamma_8n max|x_i|;  sum 2|x_i - mean| e_i +
                        gamma_8n sqrt(m2) ||x||_2 (Chan, Golub & LeVeque 1983: the
                        updating algorithm's error is O(n u kappa m2), kappa = ||x||/sqrt(m2))
  scans                 the prefix forms (cumsum: gamma_k sum_{i<=k} |x_i|; logcumsumexp:
                        max_{i<=k} e_i + gamma_4k (M_k + 2), M_k the largest |partial|)
  float64 graphs        the reference has errors of the same kind: budgets double.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from graph_eval import evaluate_graph, output_planes
from stax.ir import Op
from stax.ir import dtypes as dt
from stax.ir.ops import op_def, reduction_def, scan_def

F64 = np.float64
_U = {"float32": 2.0**-24, "float64": 2.0**-53}
_TINY = {"float32": float(np.finfo(np.float32).tiny), "float64": float(np.finfo(np.float64).tiny)}


@dataclass(frozen=True)
class Budget:
    """An op's own error: 'exact', 'rounded' (IEEE correctly rounded) or 'ulps':
    (ulps + 0.5) ulp of the result (ulps from the correctly rounded result, as CUDA
    states them), plus rel * |result| + abs (a helper formula's stated error).
    `ftz`: a subnormal result may be flushed to zero (libdevice is built with FTZ)."""

    kind: str
    ulps: float = 0.0
    rel: float = 0.0
    abs: float = 0.0
    ftz: bool = False


EXACT = Budget("exact")
ROUNDED = Budget("rounded")
EXACT_FTZ = Budget("exact", ftz=True)  # libdevice.nextafter(0, 1) may flush the smallest subnormal


def _ulps(k, rel=0.0, abs_=0.0) -> Budget:
    return Budget("ulps", k, rel, abs_, ftz=True)


_EXACT_OPS = (
    "neg abs maximum minimum fmax fmin sign relu floor ceil round trunc frac fmod copysign "
    "signbit isnan isinf isfinite eq ne lt le gt ge logical_and logical_or logical_xor "
    "logical_not bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift "
    "where rand"
).split()
_ROUNDED_OPS = "add sub mul truediv reciprocal square remainder".split()
# float32 libdevice: max ulp from the correctly rounded result (CUDA C++ Programming Guide,
# Mathematical Functions, single precision; lgamma outside -10.001 .. -2.264). sqrt is 0
# with -prec-sqrt=true and 1 otherwise: 1 here.
LIBDEVICE_ULPS = {
    "exp": 2,
    "exp2": 2,
    "expm1": 1,
    "log": 1,
    "log2": 1,
    "log10": 2,
    "log1p": 1,
    "sqrt": 1,
    "rsqrt": 2,
    "sin": 2,
    "cos": 2,
    "tan": 4,
    "asin": 2,
    "acos": 2,
    "atan": 2,
    "atan2": 3,
    "sinh": 3,
    "cosh": 2,
    "tanh": 2,
    "asinh": 3,
    "acosh": 4,
    "atanh": 3,
    "hypot": 3,
    "pow": 4,
    "erf": 2,
    "erfc": 4,
    "erfinv": 2,
    "lgamma": 6,
}
LIBDEVICE_ULPS_F64 = {**LIBDEVICE_ULPS, "erfc": 5, "erfinv": 5}  # double precision: the larger of the two tables
# tl.randn: Box-Muller with the approximate tl.log/tl.cos: radius <= sqrt(-2 ln 1e-7) = 5.7 times
# cos.approx's absolute error 2^-20.5 (3.9e-6), plus the approximate lg2/sqrt on the radius.
RANDN = Budget("ulps", 2, 0.0, 2.0**-17, ftz=True)
# Python float //: the exact floor of a/b, rounded once it exceeds 2^24 (via fmod and a
# correctly rounded divide, numpy and triton_helpers.floordiv_fmod alike): 1 ulp.
FLOORDIV = Budget("ulps", 1)  # no FTZ: integers
# Under TRITON_INTERPRET: tl.* math is numpy (float32 SIMD exp/log/sin: < 4 ulp); the helper
# formulas of triton_helpers have the errors their test tolerances state (test_op_table).
NUMPY_ULPS = 4
FORMULA = dict(rel=1e-5, abs_=1e-6)
LOOSE = dict(rel=2e-5, abs_=2e-5)
PORTABLE_FORMULAS = {
    **{
        k: FORMULA
        for k in (
            "expm1",
            "log1p",
            "log10",
            "tan",
            "asin",
            "acos",
            "atan",
            "atan2",
            "sinh",
            "cosh",
            "tanh",
            "asinh",
            "acosh",
            "atanh",
            "pow",
            "hypot",
        )
    },
    **{k: LOOSE for k in ("lgamma", "erfc", "erfinv", "erf")},
}

# Ops the backends build from others: the error is that of the composition (values keep the
# op's own semantics). Each takes (apply, const, *operands); apply(name, *operands).
COMPOSITES = {
    "sigmoid": lambda ap, c, x: ap("reciprocal", ap("add", c(1.0), ap("exp", ap("neg", x)))),
    "logaddexp": lambda ap, c, a, b: ap(
        "where",
        ap("eq", a, b),
        ap("add", a, c(0.6931471805599453)),
        ap("add", ap("maximum", a, b), ap("log1p", ap("exp", ap("neg", ap("abs", ap("sub", a, b)))))),
    ),
    "truncdiv": lambda ap, c, a, b: ap("trunc", ap("truediv", a, b)),
}
DTYPE_SENSITIVE = {"nextafter"}  # defined by the bits of the compute dtype: evaluated in it


def budget(name: str, math: str, d: dt.DType) -> Budget:
    """The own-error budget of op `name` on dtype `d` under `math`: 'libdevice' (a GPU),
    'portable' (the Triton interpreter) or 'perturb' (the Triton interpreter's portable
    kernels shifted by simulated libdevice errors: libdevice's budget plus the formulas')."""
    if name in _EXACT_OPS:
        return EXACT
    if name == "nextafter":
        return EXACT_FTZ
    if name in _ROUNDED_OPS or (name == "sqrt" and math == "portable"):  # portable sqrt is sqrt_rn
        return ROUNDED
    if name == "randn":
        return RANDN
    if name == "floordiv":
        return FLOORDIV
    k = (LIBDEVICE_ULPS_F64 if d == dt.float64 else LIBDEVICE_ULPS)[name]
    if math == "portable":
        return _ulps(max(k, NUMPY_ULPS), **PORTABLE_FORMULAS.get(name, {}))
    if math == "perturb" and name in PORTABLE_FORMULAS:
        return _ulps(k + NUMPY_ULPS, **PORTABLE_FORMULAS[name])
    return _ulps(k)


def ulp(x, d: dt.DType) -> np.ndarray:
    """The spacing of dtype d at |x| (inf where |x| is not finite in d)."""
    a = np.abs(np.asarray(x, dtype=F64))
    with np.errstate(over="ignore", invalid="ignore"):
        if d == dt.bfloat16:
            s = np.spacing(a.astype(np.float32)).astype(F64) * 65536.0
        else:
            s = np.spacing(a.astype(d.np)).astype(F64)
    return np.where(np.isfinite(s), np.abs(s), np.inf)


def rounding(x, prop, d: dt.DType) -> np.ndarray:
    """Error added by rounding to d a value within `prop` of the exact x: the exact
    rounding error when prop == 0, else half an ulp at |x| + prop."""
    x = np.asarray(x, dtype=F64)
    with np.errstate(all="ignore"):
        exact = np.abs(np.asarray(dt.round_to(x, d), dtype=F64) - x)
        r = np.where(np.asarray(prop) > 0, 0.5 * ulp(np.abs(x) + prop, d), exact)
    return np.where(np.isfinite(x), r, 0.0)


def gamma(n, d: dt.DType):
    """gamma_n = n u / (1 - n u) for the compute dtype of d."""
    nu = np.asarray(n, dtype=F64) * _U[dt.compute_dtype(d).name]
    return np.where(nu < 0.5, nu / (1.0 - nu), np.inf)


def own_error(b: Budget, x, prop, d: dt.DType) -> np.ndarray:
    """The op's own error at exact result x whose operands carry error `prop`."""
    cd = dt.compute_dtype(d)
    if b.kind == "exact":
        e = np.zeros(np.shape(x), dtype=F64)
    else:
        mag = np.abs(x) + prop
        if b.kind == "rounded":
            e = rounding(x, prop, cd)
        else:
            with np.errstate(invalid="ignore"):
                e = (b.ulps + 0.5) * ulp(mag, cd) + b.rel * mag + b.abs
        if cd == dt.float64:
            e = 2 * e  # the float64 reference errs by as much as the result does
    if b.ftz:
        e = e + _TINY[cd.name]
    if cd != d:  # half types: the reference rounds every op to d
        e = e + rounding(x, prop + e, d)
    return e


def _overflow(x, e, d: dt.DType):
    """Results beyond d's range are +-inf there (as the float32/half computation gives)."""
    if d == dt.float64:
        return x, e
    with np.errstate(over="ignore", invalid="ignore"):
        big = np.isfinite(x) & np.isinf(np.asarray(dt.round_to(x, d), dtype=F64))
    if not np.any(big):
        return x, e
    with np.errstate(invalid="ignore"):
        return np.where(big, np.sign(x) * np.inf, x), np.where(big, 0.0, e)


def _alternatives(v, e):
    """Per-operand values to try: v -+ e (floats), v -+ ceil(e) (ints), not v (bools)."""
    if v.dtype == bool:
        return [np.where(e > 0, ~v, v)]
    if v.dtype.kind in "iu":
        k = np.where(np.isfinite(e), np.ceil(e), 0).astype(v.dtype)
        return [v - k, v + k]
    return [v - e, v + e]


def _diff(a, b):
    """|a - b| per element where both are finite; 0 where they agree as non-finite
    values (NaN and NaN, inf and inf), inf where they disagree."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == bool or b.dtype == bool:
        return (a != b).astype(F64)
    a, b = a.astype(F64), b.astype(F64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b)
    return np.where(same, 0.0, np.where(np.isfinite(d), d, np.inf))


class BoundArith:
    """Values are (x, e): x exact (float64 for floating dtypes, the integer or bool value
    otherwise), e >= 0 its error bound (float64; inf: anything goes)."""

    def __init__(self, math: str, extern_bounds=None):
        self.math = math
        self.extern_bounds = extern_bounds or {}

    # ---- leaves and storage
    def _repr(self, x, d: dt.DType):
        x = np.asarray(x)
        return x.astype(F64) if d.is_floating else x.astype(dt.compute_dtype(d).np)

    def input(self, flat, d):
        return self._repr(flat, d), np.zeros(flat.shape, F64)

    def constant(self, value, d):
        return self._repr(dt.round_to(np.asarray(value), d), d), np.zeros((), F64)

    def index_value(self, ints, d):
        x = self._repr(ints, d)
        return x, (rounding(x, 0.0, d) if d.is_floating else np.zeros((), F64))

    def exact_ints(self, planes, what):
        x, e = planes
        if np.any(e > 0):
            raise NotImplementedError(f"error model: an inexact {what} is not modelled")
        return x

    def store(self, planes, computed, storage):
        x, e = planes
        if storage.is_floating:
            x = x.astype(F64)
            # half types, and a value computed wider than its buffer (Scan.out_dtype), round here
            if dt.compute_dtype(storage) != storage or dt.compute_dtype(computed) != storage:
                e = e + rounding(x, e, storage)
            x, e = _overflow(x, e, storage)
            return x, e
        return np.asarray(dt.round_to(x, storage)), e

    def extern(self, node, args):
        fn = self.extern_bounds.get(node.kernel)
        if fn is None:
            raise KeyError(f"error model: no bound given for extern kernel {node.kernel!r} (extern_bounds=)")
        x, e = fn(*args, **dict(node.constants))
        return np.asarray(x, F64), np.asarray(e, F64)

    # ---- ops
    def op(self, node: Op, args):
        if node.name == "to_dtype":
            return self._cast(args[0], node.args[0].dtype, node.dtype)
        d = node.dtype
        comp = COMPOSITES.get(node.name) if d.is_floating else None
        if comp is None:
            return self._apply(node.name, d, args, budget(node.name, self.math, d) if d.is_floating else EXACT)
        _, e = comp(
            lambda name, *xs: self._apply(name, dt.bool_ if name == "eq" else d, xs, budget(name, self.math, d)),
            lambda c: self.constant(c, d),
            *args,
        )
        x, _ = self._apply(node.name, d, args, EXACT)
        e = e + _TINY[dt.compute_dtype(d).name]  # an intermediate may over- or underflow (sigmoid(-100) = 0)
        return x, np.where(np.isfinite(x), e, np.where(np.isinf(e), np.inf, 0.0))

    def _call(self, name, d, vals):
        fn = op_def(name)
        if name in DTYPE_SENSITIVE:
            vals = [np.asarray(v).astype(dt.compute_dtype(d).np) for v in vals]
        with np.errstate(all="ignore"):
            r = fn.numpy(*vals, dtype=d) if fn.dtype_arg else fn.numpy(*vals)
        return self._repr(r, d)

    def _spread(self, name, d, vals, errs, x):
        """max |f(corner) - f(x)| over the corners of the inexact operands."""
        loose = [k for k, e in enumerate(errs) if np.any(e > 0)]
        spread = np.zeros(np.shape(x), F64)
        if not loose:
            return spread
        options = [_alternatives(np.asarray(vals[k]), np.asarray(errs[k])) for k in loose]
        for pick in np.ndindex(*[len(o) for o in options]):
            corner = list(vals)
            for k, opt, p in zip(loose, options, pick):
                corner[k] = opt[p]
            try:
                spread = np.maximum(spread, _diff(self._call(name, d, corner), x))
            except (ZeroDivisionError, ValueError):  # an integer corner divides by zero: anything goes
                return np.full(np.shape(x), np.inf)
        for k in loose:  # inexact integer operands with an unbounded error
            if not np.asarray(vals[k]).dtype.kind == "f":
                spread = np.where(np.isinf(errs[k]), np.inf, spread)
        return spread

    def _apply(self, name, d, args, b: Budget):
        vals = [a[0] for a in args]
        errs = [a[1] for a in args]
        x = self._call(name, d, vals)
        spread = self._spread(name, d, vals, errs, x)
        if not d.is_floating:
            return x, spread
        e = spread + own_error(b, x, spread, d)
        x, e = _overflow(x, e, dt.compute_dtype(d))
        return x, np.where(np.isfinite(x), e, np.where(np.isinf(spread), np.inf, 0.0))

    def _cast(self, a, src: dt.DType, dst: dt.DType):
        x, e = a
        if dst.is_floating:
            y = np.asarray(x).astype(F64)
            return _overflow(y, e + rounding(y, e, dst), dst)

        def conv(v):
            return np.asarray(dt.round_to(v, dst)).astype(dt.compute_dtype(dst).np)

        y = conv(x)
        if not np.any(e > 0):
            return y, np.zeros(np.shape(y), F64)
        spread = np.zeros(np.shape(y), F64)
        for alt in _alternatives(np.asarray(x), np.asarray(e)):
            spread = np.maximum(spread, _diff(conv(alt), y))
        return y, spread

    # ---- reductions and scans
    def reduce(self, body, planes):
        x, e = planes
        rt, d = body.reduction_type, body.value.dtype
        n = x.shape[-1]
        if not d.is_floating or rt in ("any", "all"):
            return self._reduce_exact(rt, d, x, e)
        twice = 2.0 if dt.compute_dtype(d) == dt.float64 else 1.0
        ax = np.abs(x)
        with np.errstate(all="ignore"):
            if rt == "sum":
                r = np.sum(x, -1)
                err = np.sum(e, -1) + twice * gamma(n, d) * np.sum(ax, -1)
            elif rt == "prod":
                r = np.prod(x, -1)
                err = np.prod(ax + e, -1) * (1 + twice * gamma(n, d)) - np.prod(ax, -1)
            elif rt in ("max", "min"):
                r = reduction_def(rt).numpy(x, x.ndim - 1)
                err = np.max(e, -1)
            elif rt in ("argmax", "argmin"):
                r = reduction_def(rt).numpy(x, x.ndim - 1)
                err = np.where(_near_tie(x, e, r, rt == "argmax"), np.inf, 0.0)
                return r, err
            elif rt == "welford_mean":
                r = np.mean(x, -1)
                err = np.mean(e, -1) + twice * gamma(8 * n, d) * np.max(ax, -1)
            elif rt == "welford_m2":
                dev = x - np.mean(x, -1, keepdims=True)
                r = np.sum(dev * dev, -1)
                err = np.sum(2 * np.abs(dev) * e + e * e, -1) + twice * gamma(8 * n, d) * np.sqrt(r) * np.sqrt(
                    np.sum(x * x, -1)
                )
            elif rt == "welford_count":
                return np.full(x.shape[:-1], float(n)), np.zeros(x.shape[:-1], F64)
            else:
                raise NotImplementedError(f"error model: reduction {rt}")
            r, err = _overflow(r, err, dt.compute_dtype(d))
        return r, np.where(np.isfinite(r), err, 0.0)

    def _reduce_exact(self, rt, d, x, e):
        """Integer and bool reductions (and any/all of floats): exact unless an input is uncertain."""
        r = np.asarray(reduction_def(rt).numpy(x, x.ndim - 1))
        if rt in ("any", "all"):
            with np.errstate(invalid="ignore"):
                certain = (x != 0) & ~(e >= np.abs(x.astype(F64)))  # NaN counts as true, as numpy's any
                possible = (x != 0) | (e > 0)
            f = np.any if rt == "any" else np.all
            flip = f(certain, -1) != f(possible, -1)
            return r, np.where(flip, np.inf, 0.0)
        return r, np.where(np.any(e > 0, -1), np.inf, 0.0)

    def scan(self, body, planes):
        x, e = (np.moveaxis(p, body.axis, -1) for p in planes)
        st, d = body.scan_type, body.value.dtype
        r = np.asarray(scan_def(st).numpy(np.ascontiguousarray(x), x.ndim - 1))
        if not d.is_floating:
            err = np.where(np.maximum.accumulate(e, -1) > 0, np.inf, 0.0)
        else:
            k = np.arange(1, x.shape[-1] + 1)
            twice = 2.0 if dt.compute_dtype(d) == dt.float64 else 1.0
            ax = np.abs(x)
            with np.errstate(all="ignore"):
                if st == "cumsum":
                    err = np.cumsum(e, -1) + twice * gamma(k, d) * np.cumsum(ax, -1)
                elif st == "cumprod":
                    err = np.cumprod(ax + e, -1) * (1 + twice * gamma(k, d)) - np.cumprod(ax, -1)
                elif st in ("cummax", "cummin"):
                    err = np.maximum.accumulate(e, -1)
                elif st in ("cummax_index", "cummin_index"):
                    err = np.where(_near_tie_prefix(x, e, r, st == "cummax_index"), np.inf, 0.0)
                elif st == "logcumsumexp":
                    big = np.maximum(
                        np.maximum.accumulate(np.where(np.isfinite(x), ax, 0.0), -1),
                        np.where(np.isfinite(r), np.abs(r), 0.0),
                    )
                    err = np.maximum.accumulate(e, -1) + twice * gamma(4 * k, d) * (big + 2.0)
                else:
                    raise NotImplementedError(f"error model: scan {st}")
            if st not in ("cummax_index", "cummin_index"):
                r = r.astype(F64)
                err = np.where(np.isfinite(r), err, 0.0)
        return np.moveaxis(r, -1, body.axis), np.moveaxis(err, -1, body.axis)


def _near_tie(x, e, idx, larger: bool):
    """Rows whose arg-extreme could be another element given the error bounds."""
    best = np.take_along_axis(x, idx[..., None], -1)
    ebest = np.take_along_axis(e, idx[..., None], -1)
    other = np.arange(x.shape[-1]) != idx[..., None]
    with np.errstate(invalid="ignore"):
        reach = (x + e >= best - ebest) if larger else (x - e <= best + ebest)
    tie = other & reach & ((e + ebest) > 0)
    return np.any(tie, -1) & ~np.any(np.isnan(x), -1)


def _near_tie_prefix(x, e, idx, larger: bool):
    """Per prefix position k: could the running extreme's index be another j <= k?"""
    n = x.shape[-1]
    best = np.take_along_axis(x, idx, -1)[..., :, None]  # (..., k, 1)
    ebest = np.take_along_axis(e, idx, -1)[..., :, None]
    xj, ej = x[..., None, :], e[..., None, :]  # (..., 1, j)
    prefix = np.arange(n)[None, :] <= np.arange(n)[:, None]
    other = np.arange(n)[None, :] != idx[..., :, None]
    with np.errstate(invalid="ignore"):
        reach = (xj + ej >= best - ebest) if larger else (xj - ej <= best + ebest)
    tie = prefix & other & reach & ((ej + ebest) > 0)
    return np.any(tie, -1) & ~np.any(np.isnan(x), -1, keepdims=True)


def reference_with_bounds(graph, inputs: dict, math: str, extern_bounds=None) -> list[tuple]:
    """[(exact value, error bound)] for each graph output, as strided arrays."""
    return output_planes(graph, evaluate_graph(graph, inputs, BoundArith(math, extern_bounds)))


def violations(actual, x, e, d: dt.DType) -> np.ndarray:
    """Elements where `actual` is outside the bound (x, e) — a bool array."""
    a = np.asarray(actual)
    if d.is_floating:
        a = a.astype(F64)
        same = (a == x) | (np.isnan(a) & np.isnan(x))
        with np.errstate(invalid="ignore"):
            inside = np.abs(a - x) <= e * (1 + 2.0**-20)
        return ~(same | inside | np.isinf(e))
    return ~((a == x) | np.isinf(e) | (np.abs(a.astype(F64) - x.astype(F64)) <= e))


def assert_within(actual, x, e, d: dt.DType, name: str = "") -> None:
    bad = violations(actual, x, e, d)
    if not np.any(bad):
        return
    a = np.asarray(actual).astype(F64)
    xs = np.asarray(x).astype(F64)
    with np.errstate(all="ignore"):
        excess = np.where(bad, np.abs(a - xs) / np.maximum(e, 1e-300), 0)
    k = np.unravel_index(int(np.nanargmax(np.where(np.isnan(excess), np.inf, excess))), bad.shape)
    raise AssertionError(
        f"{name}: {int(bad.sum())}/{bad.size} elements outside the error model; worst at {k}: "
        f"got {a[k]!r}, exact {xs[k]!r}, |diff| {abs(a[k] - xs[k]):.3g} > bound {float(e[k]):.3g}"
    )
