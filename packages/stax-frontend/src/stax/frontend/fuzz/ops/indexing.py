"""Indexing rows: gather, take_along_dim, index_select, advanced indexing (x[i], x[:, i],
x[i, j], non-adjacent), scatter (distinct indices), scatter_add, scatter_reduce, index_put
(distinct, or accumulating), index_add, index_fill, embedding, one_hot."""

from __future__ import annotations

from .base import Aux, Emit, Row, add_aux, both, is_float, nonempty, rank_at_least, sized_dim


def _index_shape(r, m, d):
    """An index shape for gather-like ops along d: other dims at most x's, any length along d."""
    return tuple(r.randint(0, n) if k != d and r.random() < 0.3 else (r.randint(1, 5) if k == d else n)
                 for k, n in enumerate(m.shape))


def _gather(r, ms):
    m = ms[0]
    d = r.randrange(m.ndim)
    n = m.shape[d]
    shape = _index_shape(r, m, d)
    if n == 0:
        return None
    aux: list = []
    i = add_aux(aux, Aux("index", shape, "i64", low=0, high=n))
    dd = d - m.ndim if r.random() < 0.3 else d
    if r.random() < 0.2:
        return Emit(f"torch.take_along_dim({{0}}, {i}, dim={dd})", aux=tuple(aux))
    return Emit(f"torch.gather({{0}}, {dd}, {i})", aux=tuple(aux))


def _index_select(r, ms):
    m = ms[0]
    if (dn := sized_dim(r, m)) is None:
        return None
    d, n = dn
    aux: list = []
    i = add_aux(aux, Aux("index", (r.randint(0, 6),), r.choice(["i64", "i64", "i32"]), low=0, high=n))
    return Emit(f"torch.index_select({{0}}, {d}, {i})", aux=tuple(aux))


def _advanced(r, ms):
    """x[i] forms: negative indices wrap; two index tensors broadcast; a non-adjacent pair
    moves the indexed dims to the front (torch's rule)."""
    m = ms[0]
    aux: list = []

    def idx(d, shape):
        n = m.shape[d]
        return add_aux(aux, Aux("index", shape, r.choice(["i64", "i64", "i32"]), low=-n, high=n))

    if any(n == 0 for n in m.shape):
        return None
    shape = tuple(r.randint(1, 4) for _ in range(r.choice([1, 1, 2])))
    u = r.random()
    if u < 0.35 or m.ndim == 1:
        return Emit(f"{{0}}[{idx(0, shape)}]", aux=tuple(aux))
    if u < 0.55:
        return Emit(f"{{0}}[:, {idx(1, shape)}]", aux=tuple(aux))
    if u < 0.7:
        return Emit(f"{{0}}[..., {idx(m.ndim - 1, shape)}]", aux=tuple(aux))
    if u < 0.85 or m.ndim < 3:
        a = idx(0, shape)
        b = idx(1, shape[-1:] if r.random() < 0.5 else shape)
        return Emit(f"{{0}}[{a}, {b}]", aux=tuple(aux))
    a = idx(0, shape)
    b = idx(2, shape)
    return Emit(f"{{0}}[{a}, :, {b}]", aux=tuple(aux))


def _scatter_shape(r, m, d, cap_d):
    return tuple(r.randint(1, cap_d) if k == d else (r.randint(0, n) if r.random() < 0.3 else n)
                 for k, n in enumerate(m.shape))


def _scatter(r, ms):
    m = ms[0]
    if (dn := sized_dim(r, m)) is None:
        return None
    d, n = dn
    aux: list = []
    shape = _scatter_shape(r, m, d, n)
    u = r.random()
    if u < 0.45:  # 'set' semantics: distinct indices, or eager's answer is unspecified
        i = add_aux(aux, Aux("unique", shape, "i64", high=n, dim=d))
        if r.random() < 0.3:
            value = "2.5" if m.is_float else "3" if not m.is_bool else "True"
            return Emit(f"torch.scatter({{0}}, {d}, {i}, {value})", aux=tuple(aux))
        src = add_aux(aux, Aux("data", shape, m.dtype))
        return Emit(f"torch.scatter({{0}}, {d}, {i}, {src})", aux=tuple(aux))
    i = add_aux(aux, Aux("index", shape, "i64", low=0, high=n))
    src = add_aux(aux, Aux("data", shape, m.dtype))
    if u < 0.75 or m.is_bool:
        return Emit(f"torch.scatter_add({{0}}, {d}, {i}, {src})", aux=tuple(aux), exact="int")
    reduce = r.choice(["sum", "sum", "prod", "mean", "amax", "amin"])
    if not m.is_float and reduce == "mean":
        reduce = "sum"
    include = r.random() < 0.7
    return Emit(f"torch.scatter_reduce({{0}}, {d}, {i}, {src}, {reduce!r}, include_self={include})", aux=tuple(aux),
                exact=True if reduce in ("amax", "amin") else "int", special=reduce == "prod")


def _index_put(r, ms):
    m = ms[0]
    n = m.shape[0]
    if n == 0:
        return None
    aux: list = []
    acc = r.random() < 0.5
    k = r.randint(1, n) if not acc else r.randint(1, 6)
    i = add_aux(aux, Aux("index", (k,), "i64", low=-n, high=n) if acc else Aux("unique", (k,), "i64", high=n))
    vshape = (k,) + tuple(m.shape[1:])
    vshape = vshape[r.randint(0, len(vshape)):] if r.random() < 0.3 else vshape
    v = add_aux(aux, Aux("data", vshape, m.dtype))
    return Emit(f"torch.index_put({{0}}, ({i},), {v}, accumulate={acc})", aux=tuple(aux), exact="int" if acc else None)


def _index_add(r, ms):
    m = ms[0]
    if (dn := sized_dim(r, m)) is None:
        return None
    d, n = dn
    aux: list = []
    k = r.randint(1, 6)
    i = add_aux(aux, Aux("index", (k,), "i64", low=0, high=n))
    if r.random() < 0.3:
        value = "-1.5" if m.is_float else "2" if not m.is_bool else "True"
        return Emit(f"{{0}}.index_fill({d}, {i}, {value})", aux=tuple(aux))
    shape = list(m.shape)
    shape[d] = k
    src = add_aux(aux, Aux("data", tuple(shape), m.dtype))
    alpha = ", alpha=2" if r.random() < 0.3 and not m.is_bool else ""
    return Emit(f"{{0}}.index_add({d}, {i}, {src}{alpha})", aux=tuple(aux), exact="int")


def _embedding(r, ms):
    m = ms[0]
    rows = m.shape[0]
    if rows == 0:
        return None
    aux: list = []
    shape = tuple(r.randint(1, 5) for _ in range(r.choice([1, 2])))
    i = add_aux(aux, Aux("index", shape, "i64", low=0, high=rows))
    pad = f", padding_idx={r.randrange(rows)}" if r.random() < 0.3 else ""
    return Emit(f"F.embedding({i}, {{0}}{pad})", aux=tuple(aux))


def _one_hot(r, ms):
    n = r.randint(1, 6)
    return Emit(f"F.one_hot({{0}}.long().abs() % {n}, {n})", grad=False)


ROWS = [
    Row("gather", "indexing", _gather, accepts=rank_at_least(1), exact=True),
    Row("index_select", "indexing", _index_select, accepts=rank_at_least(1), exact=True, weight=0.8),
    Row("index", "indexing", _advanced, accepts=both(rank_at_least(1), nonempty), exact=True),
    Row("scatter", "indexing", _scatter, accepts=rank_at_least(1), exact=True),
    Row("index_put", "indexing", _index_put, accepts=rank_at_least(1), exact=True, weight=0.8),
    Row("index_add", "indexing", _index_add, accepts=rank_at_least(1), exact=True, weight=0.6),
    Row("embedding", "indexing", _embedding, accepts=both(is_float, lambda m: m.ndim == 2), exact=True, weight=0.6),
    Row("one_hot", "indexing", _one_hot, accepts=lambda m: m.is_int, exact=True, needs_exact=True, weight=0.2),
]
