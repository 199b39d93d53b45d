"""nn rows: layer / rms / group / batch norm (eval, and training with running stats that
are mutated inputs), normalize, matmul / mm / bmm / addmm / baddbmm / linear (extern
kernels), conv2d, max / avg pooling, interpolate, losses, attention, and tensor factories."""

from __future__ import annotations

import math

from .base import CODE, Aux, Emit, Row, add_aux, both, float_literal, is_float, nonempty, rank_at_least, reduction_cost


def _norm_cost(n):
    return 4.0 + 2 * reduction_cost(n)


def _layer_norm(r, ms):
    m = ms[0]
    k = r.randint(1, min(2, m.ndim))
    ns = tuple(m.shape[-k:])
    n = math.prod(ns)
    aux: list = []
    w = add_aux(aux, Aux("data", ns, m.dtype)) if r.random() < 0.6 else "None"
    if r.random() < 0.4:
        eps = r.choice(["", ", eps=1e-5", ", eps=1e-2"])
        return Emit(f"F.rms_norm({{0}}, {ns}, {w}{eps})", aux=tuple(aux), cost=_norm_cost(n), special=n == 0)
    b = add_aux(aux, Aux("data", ns, m.dtype)) if r.random() < 0.6 else "None"
    return Emit(f"F.layer_norm({{0}}, {ns}, {w}, {b}, eps={r.choice(['1e-5', '1e-3'])})", aux=tuple(aux),
                cost=_norm_cost(n), special=n == 0)


def _group_norm(r, ms):
    m = ms[0]
    c = m.shape[1]
    if c == 0 or m.numel == 0:
        return None
    g = r.choice([d for d in range(1, c + 1) if c % d == 0])
    aux: list = []
    affine = r.random() < 0.6
    w = add_aux(aux, Aux("data", (c,), m.dtype)) if affine else "None"
    b = add_aux(aux, Aux("data", (c,), m.dtype)) if affine else "None"
    n = m.numel // (m.shape[0] * g)
    return Emit(f"F.group_norm({{0}}, {g}, {w}, {b})", aux=tuple(aux), cost=_norm_cost(n))


def _batch_norm(r, ms):
    m = ms[0]
    c = m.shape[1]
    if m.ndim > 5 or c == 0:
        return None
    aux: list = []
    stats_dtype = m.dtype if m.dtype not in ("f16", "bf16") or r.random() < 0.5 else "f32"
    mean = add_aux(aux, Aux("data", (c,), stats_dtype, grad=False))
    var = add_aux(aux, Aux("positive", (c,), stats_dtype, grad=False))
    affine = r.random() < 0.6
    w = add_aux(aux, Aux("data", (c,), m.dtype)) if affine else "None"
    b = add_aux(aux, Aux("data", (c,), m.dtype)) if affine else "None"
    per_channel = m.numel // c if c else 0
    train = per_channel > 1 and r.random() < 0.4
    return Emit(f"F.batch_norm({{0}}, {mean}, {var}, {w}, {b}, training={train}, momentum=0.1, eps=1e-5)",
                aux=tuple(aux), cost=_norm_cost(per_channel))


def _normalize(r, ms):
    m = ms[0]
    d = r.randrange(m.ndim)
    if r.random() < 0.5:
        return Emit(f"F.normalize({{0}}, p={r.choice([2.0, 1.0])}, dim={d})", cost=_norm_cost(m.shape[d]))
    aux: list = []
    o = add_aux(aux, Aux("data", m.shape, m.dtype))
    return Emit(f"F.cosine_similarity({{0}}, {o}, dim={d})", aux=tuple(aux), cost=_norm_cost(m.shape[d]))


def _matmul(r, ms):
    m = ms[0]
    k = m.shape[-1]
    n = r.choice([1, 3, 8, 17])
    aux: list = []
    cost = 1.0 + math.sqrt(max(k, 1))
    u = r.random()
    if m.ndim == 2 and u < 0.5:
        w = add_aux(aux, Aux("data", (k, n), m.dtype))
        if r.random() < 0.5:
            return Emit(f"torch.mm({{0}}, {w})", aux=tuple(aux), cost=cost)
        b = add_aux(aux, Aux("data", (n,) if r.random() < 0.7 else (m.shape[0], n), m.dtype))
        return Emit(f"torch.addmm({b}, {{0}}, {w}, beta={r.choice([1, 0.5])}, alpha={r.choice([1, 2.0])})",
                    aux=tuple(aux), cost=cost)
    if m.ndim == 3 and u < 0.5:
        w = add_aux(aux, Aux("data", (m.shape[0], k, n), m.dtype))
        if r.random() < 0.5:
            return Emit(f"torch.bmm({{0}}, {w})", aux=tuple(aux), cost=cost)
        b = add_aux(aux, Aux("data", (m.shape[0], m.shape[1], n), m.dtype))
        return Emit(f"torch.baddbmm({b}, {{0}}, {w}, alpha=0.5)", aux=tuple(aux), cost=cost)
    if u < 0.75:
        w = add_aux(aux, Aux("data", (n, k), m.dtype))
        b = add_aux(aux, Aux("data", (n,), m.dtype)) if r.random() < 0.6 else "None"
        return Emit(f"F.linear({{0}}, {w}, {b})", aux=tuple(aux), cost=cost)
    w = add_aux(aux, Aux("data", (k,) if r.random() < 0.2 else (k, n), m.dtype))
    return Emit(f"torch.matmul({{0}}, {w})", aux=tuple(aux), cost=cost)


def _conv(r, ms):
    m = ms[0]
    cin, h, w = m.shape[-3:]
    if cin == 0 or m.numel == 0:
        return None
    groups = r.choice([g for g in (1, 2, 3) if cin % g == 0])
    cout = groups * r.choice([1, 2, 3])
    kh, kw = r.choice([1, 3]), r.choice([1, 2, 3])
    pad = r.choice([0, 1])
    stride, dil = r.choice([1, 2]), r.choice([1, 1, 2])
    if h + 2 * pad < dil * (kh - 1) + 1 or w + 2 * pad < dil * (kw - 1) + 1:
        return None
    aux: list = []
    wt = add_aux(aux, Aux("data", (cout, cin // groups, kh, kw), m.dtype))
    b = add_aux(aux, Aux("data", (cout,), m.dtype)) if r.random() < 0.5 else "None"
    return Emit(f"F.conv2d({{0}}, {wt}, {b}, stride={stride}, padding={pad}, dilation={dil}, groups={groups})",
                aux=tuple(aux), cost=1.0 + math.sqrt(cin * kh * kw))


def _pool(r, ms):
    m = ms[0]
    h, w = m.shape[-2:]
    k = r.choice([1, 2, 3])
    if h < k or w < k or m.numel == 0:
        return None
    s = r.choice([None, 1, 2])
    p = r.randint(0, k // 2)
    ceil = r.random() < 0.3
    stride = "" if s is None else f", stride={s}"
    u = r.random()
    if u < 0.45:
        dil = r.choice([1, 1, 2])
        if h < dil * (k - 1) + 1 or w < dil * (k - 1) + 1:
            dil = 1
        return Emit(f"F.max_pool2d({{0}}, {k}{stride}, padding={p}, dilation={dil}, ceil_mode={ceil})", exact=True)
    if u < 0.85:
        cip = r.random() < 0.5
        return Emit(f"F.avg_pool2d({{0}}, {k}{stride}, padding={p}, ceil_mode={ceil}, count_include_pad={cip})",
                    cost=2.0)
    return Emit(f"F.adaptive_avg_pool2d({{0}}, {(max(1, h // 2), r.choice([1, w]))})", cost=2.0)


def _interpolate(r, ms):
    mode = r.choice(["nearest", "bilinear", "bilinear"])
    align = ", align_corners=False" if mode == "bilinear" else ""
    return Emit(f"F.interpolate({{0}}, scale_factor={r.choice([2, 0.5, 1.5])}, mode={mode!r}{align})", cost=2.0)


def _loss(r, ms):
    m = ms[0]
    aux: list = []
    red = r.choice(["mean", "sum", "none"])
    u = r.random()
    n = m.numel
    cost = 4.0 + 2 * reduction_cost(n)
    if u < 0.3:
        t = add_aux(aux, Aux("data", m.shape, m.dtype))
        fn = r.choice(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
        return Emit(f"F.{fn}({{0}}, {t}, reduction={red!r})", aux=tuple(aux), cost=cost, special=n == 0)
    if u < 0.5:
        t = add_aux(aux, Aux("unit", m.shape, m.dtype))
        return Emit(f"F.binary_cross_entropy_with_logits({{0}}, {t}, reduction={red!r})", aux=tuple(aux), cost=cost,
                    special=n == 0)
    if u < 0.6:
        t = add_aux(aux, Aux("unit", m.shape, m.dtype))
        return Emit(f"F.binary_cross_entropy(torch.sigmoid({{0}}), {t}, reduction={red!r})", aux=tuple(aux), cost=cost,
                    special=True)
    if m.ndim < 1 or m.ndim > 4 or m.shape[min(1, m.ndim - 1)] == 0 or n == 0:
        return None
    cdim = 1 if m.ndim >= 2 else 0
    c = m.shape[cdim]
    tshape = tuple(s for k, s in enumerate(m.shape) if k != cdim)
    t = add_aux(aux, Aux("index", tshape, "i64", low=0, high=c))
    if u < 0.85:
        ls = f", label_smoothing={r.choice([0.0, 0.1])}" if r.random() < 0.5 else ""
        return Emit(f"F.cross_entropy({{0}}, {t}, reduction={red!r}{ls})", aux=tuple(aux), cost=cost)
    return Emit(f"F.nll_loss(F.log_softmax({{0}}, {cdim}), {t}, reduction={red!r})", aux=tuple(aux), cost=cost)


def _attention(r, ms):
    m = ms[0]
    b, h, length, e = m.shape
    if m.numel == 0:
        return None
    s = r.choice([length, 3, 8])
    aux: list = []
    k = add_aux(aux, Aux("data", (b, h, s, e), m.dtype))
    v = add_aux(aux, Aux("data", (b, h, s, r.choice([e, 4])), m.dtype))
    causal = r.random() < 0.3 and s == length
    return Emit(f"F.scaled_dot_product_attention({{0}}, {k}, {v}, is_causal={causal})", aux=tuple(aux),
                cost=6.0 + 3 * reduction_cost(s * e))


def _factory(r, ms):
    """Factories inside the graph: shaped like, or combined with, argument 0."""
    m = ms[0]
    u = r.random()
    if u < 0.3 and m.ndim:
        n = m.shape[-1]
        dt = CODE[m.dtype] if not m.is_bool else CODE["i64"]
        ar = f"torch.arange({n}, dtype={dt}, device={{0}}.device)"
        return Emit(f"{{0}} + {ar}" if not m.is_bool else f"{ar} + {{0}}",
                    exact="int")
    if u < 0.45:
        return Emit(f"torch.full_like({{0}}, {float_literal(r) if m.is_float else 2 if not m.is_bool else True})")
    if u < 0.6:
        if m.is_bool:
            return Emit("torch.ones_like({0})")
        return Emit(f"torch.{r.choice(['zeros_like', 'ones_like'])}({{0}}) + {{0}}", exact="int")
    if u < 0.7 and m.is_float:
        return Emit("torch.empty_like({0}).fill_(0.5) * {0}", exact="int")
    if u < 0.8 and m.ndim:
        n = m.shape[-1]
        if m.is_float:
            return Emit(f"{{0}} * torch.linspace(-1.0, 1.0, {n}, dtype={CODE[m.dtype]}, device={{0}}.device)",
                        exact=False)
        return Emit(f"{{0}} * {{0}}.new_ones(({n},))")
    if u < 0.9 and m.ndim >= 2 and m.is_float:
        return Emit(f"{{0}} + torch.eye({m.shape[-2]}, {m.shape[-1]}, dtype={CODE[m.dtype]}, device={{0}}.device)",
                    exact=False)
    if m.is_float:
        return Emit("{0} + 0.25 * torch.rand_like({0})", exact=False)  # an ATen fallback; same RNG stream as eager
    return Emit("torch.zeros_like({0})")


ROWS = [
    Row("layer_norm", "nn", _layer_norm, accepts=both(is_float, rank_at_least(1))),
    Row("group_norm", "nn", _group_norm, accepts=both(is_float, rank_at_least(2)), weight=0.4),
    Row("batch_norm", "nn", _batch_norm, accepts=both(is_float, rank_at_least(2)), weight=0.6),
    Row("normalize", "nn", _normalize, accepts=both(is_float, rank_at_least(1)), weight=0.4),
    Row("matmul", "extern", _matmul, accepts=both(is_float, rank_at_least(1)), weight=1.0),
    Row("conv2d", "extern", _conv, accepts=both(is_float, lambda m: m.ndim in (3, 4)), weight=0.4),
    Row("pool2d", "nn", _pool, accepts=both(is_float, lambda m: m.ndim in (3, 4)), exact=False, weight=0.5),
    Row("interpolate", "nn", _interpolate, accepts=both(is_float, nonempty, lambda m: m.ndim == 4), weight=0.2),
    Row("loss", "nn", _loss, accepts=is_float, weight=0.6),
    Row("attention", "extern", _attention, accepts=both(is_float, lambda m: m.ndim == 4), weight=0.3),
    Row("factory", "creation", _factory, exact=True, weight=0.5),
]
