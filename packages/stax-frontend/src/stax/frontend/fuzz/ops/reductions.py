"""Reduction and scan rows: sum / mean / amax / amin / prod / var / std / argmax /
logsumexp / softmax / log_softmax / any / all / norms / max.dim, sort-like fallbacks,
and cumsum / cumprod / cummax / cummin / logcumsumexp."""

from __future__ import annotations

from .base import CODE, Emit, Row, is_float, nonempty, not_bool, pick_dim, pick_dims, prod, reduction_cost


def _dims(r, m):
    """(dims argument text, reduced element count) — sometimes a full reduction (no dims)."""
    if r.random() < 0.2 or m.ndim == 0:
        return None, m.numel
    dims = pick_dims(r, m) if r.random() < 0.4 else [pick_dim(r, m)]
    n = prod(m.shape[d] for d in dims) if m.ndim else 1
    text = str(dims[0]) if len(dims) == 1 else str(tuple(dims))
    return text, n


def _keep(r):
    return r.random() < 0.4


def _sum(r, ms):
    m = ms[0]
    dims, n = _dims(r, m)
    dtype = ""
    if r.random() < 0.2:
        dtype = f", dtype={CODE['f32'] if m.is_float else CODE['i64']}" if not (m.is_float and m.dtype == "f64") else ""
    fn = r.choice(["torch.sum", "torch.sum", "torch.nansum"]) if m.is_float else "torch.sum"
    if dims is None:
        return Emit(f"{fn}({{0}}{dtype})", cost=reduction_cost(n))
    return Emit(f"{fn}({{0}}, {dims}, keepdim={_keep(r)}{dtype})", cost=reduction_cost(n))


def _mean(r, ms):
    m = ms[0]
    dims, n = _dims(r, m)
    dtype = "" if m.is_float else f", dtype={CODE['f32']}"
    fn = "torch.nanmean" if m.is_float and r.random() < 0.15 else "torch.mean"
    if dims is None:
        return Emit(f"{fn}({{0}}{dtype})", cost=reduction_cost(n), special=n == 0)
    return Emit(f"{fn}({{0}}, {dims}, keepdim={_keep(r)}{dtype})", cost=reduction_cost(n), special=n == 0)


def _nonzero_reduce(m, dims_text) -> bool:
    """amax-like reductions need every reduced dim to be non-empty."""
    if dims_text is None:
        return m.numel > 0
    dims = eval(dims_text)  # noqa: S307 - our own literal
    dims = (dims,) if isinstance(dims, int) else dims
    return all(m.shape[d] > 0 for d in dims)


def _minmax(r, ms):
    m = ms[0]
    dims, n = _dims(r, m)
    if not _nonzero_reduce(m, dims):
        return None
    fn = r.choice(["amax", "amin"])
    if dims is None:
        return Emit(f"torch.{r.choice(['max', 'min'])}({{0}})")
    return Emit(f"torch.{fn}({{0}}, {dims}, keepdim={_keep(r)})")


def _prod(r, ms):
    m = ms[0]
    dims, n = _dims(r, m)
    if not m.is_float and n > 6:
        return None  # integer products overflow (signed overflow is UB in C++)
    if dims is None:
        return Emit("torch.prod({0})", cost=reduction_cost(n), special=True)
    d = dims if "(" not in dims else dims.split(",")[0].strip("( ")
    return Emit(f"torch.prod({{0}}, {d}, keepdim={_keep(r)})", cost=reduction_cost(m.shape[int(d)] if m.ndim else 1),
                special=True)


def _var(r, ms):
    m = ms[0]
    dims, n = _dims(r, m)
    corr = r.choice(["", ", correction=0", ", correction=1", ", correction=2", ", unbiased=False"])
    fn = r.choice(["torch.var", "torch.std", "torch.var_mean", "torch.std_mean"])
    pick = f"[{r.randrange(2)}]" if fn.endswith("_mean") else ""
    if dims is None:
        if "correction" in corr:
            return Emit(f"{fn}({{0}}, dim=None{corr}){pick}", cost=2 * reduction_cost(n), special=True)
        return Emit(f"{fn}({{0}}{corr}){pick}", cost=2 * reduction_cost(n), special=True)
    return Emit(f"{fn}({{0}}, {dims}{corr}, keepdim={_keep(r)}){pick}", cost=2 * reduction_cost(n), special=True)


def _argmax(r, ms):
    m = ms[0]
    fn = r.choice(["argmax", "argmin"])
    if r.random() < 0.3 or m.ndim == 0:
        if m.numel == 0:
            return None
        return Emit(f"torch.{fn}({{0}})", grad=False)
    d = pick_dim(r, m)
    if m.shape[d] == 0:
        return None
    return Emit(f"torch.{fn}({{0}}, {d}, keepdim={_keep(r)})", grad=False)


def _max_dim(r, ms):
    m = ms[0]
    d = pick_dim(r, m)
    if m.ndim and m.shape[d] == 0 or m.numel == 0:
        return None
    k = r.randrange(2) if m.exact else 0  # indices flip on one-ulp differences: exact inputs only
    return Emit(f"torch.{r.choice(['max', 'min'])}({{0}}, {d}, keepdim={_keep(r)})[{k}]", grad=k == 0)


def _logsumexp(r, ms):
    m = ms[0]
    dims, n = _dims(r, m)
    dims = dims if dims is not None else str(tuple(range(m.ndim))) if m.ndim else "0"
    return Emit(f"torch.logsumexp({{0}}, {dims}, keepdim={_keep(r)})", cost=2 * reduction_cost(n), special=True)


def _softmax(r, ms):
    m = ms[0]
    d = pick_dim(r, m)
    n = m.shape[d] if m.ndim else 1
    fn = r.choice(["F.softmax", "F.log_softmax", "torch.softmax", "torch.log_softmax"])
    dtype = f", dtype={CODE['f32']}" if m.dtype in ("f16", "bf16") and r.random() < 0.3 else ""
    return Emit(f"{fn}({{0}}, {d}{dtype})", cost=3 * reduction_cost(n), special=n == 0)


def _any_all(r, ms):
    m = ms[0]
    fn = r.choice(["any", "all", "count_nonzero"])
    if r.random() < 0.3 or m.ndim == 0:
        return Emit(f"torch.{fn}({{0}})", grad=False)
    d = pick_dim(r, m)
    if fn == "count_nonzero":
        return Emit(f"torch.count_nonzero({{0}}, {d})", grad=False)
    return Emit(f"torch.{fn}({{0}}, {d}, keepdim={_keep(r)})", grad=False)


def _norm(r, ms):
    m = ms[0]
    dims, n = _dims(r, m)
    ord_ = r.choice(["2", "1", "float('inf')", "float('-inf')", "3", "0.5", "0"])
    if "inf" in ord_ and not _nonzero_reduce(m, dims):
        return None
    d = "" if dims is None else f", dim={dims}"
    return Emit(f"torch.linalg.vector_norm({{0}}, {ord_}{d}, keepdim={_keep(r)})", cost=2 * reduction_cost(n),
                exact=True if "inf" in ord_ else False)


def _sort_like(r, ms):
    """Sorting ops have no lowering: ATen fallbacks inside a compiled graph."""
    m = ms[0]
    d = pick_dim(r, m)
    size = m.shape[d] if m.ndim else 1
    u = r.random()
    if u < 0.4:
        return Emit(f"torch.sort({{0}}, {d}, descending={r.random() < 0.5})[0]")
    if u < 0.7:
        if size == 0:
            return None
        return Emit(f"torch.topk({{0}}, {r.randint(1, size)}, {d})[0]")
    if size == 0:
        return None
    # contiguous: eager's median over a stride-0 (expanded) dim reads out of bounds (torch 2.13 CPU)
    return Emit(f"torch.median({{0}}.contiguous(), {d})[0]")


def _scan(r, ms):
    m = ms[0]
    d = pick_dim(r, m)
    n = m.shape[d] if m.ndim else 1
    choices = ["cumsum", "cumsum", "cummax", "cummin"]
    if m.is_float:
        choices += ["cumprod", "logcumsumexp"]
    elif n <= 6:
        choices += ["cumprod"]
    fn = r.choice(choices)
    if m.is_bool and fn in ("cummax", "cummin"):
        fn = "cumsum"
    if fn in ("cummax", "cummin"):
        k = r.randrange(2) if m.exact else 0
        return Emit(f"torch.{fn}({{0}}, {d})[{k}]", grad=k == 0, exact=True if m.exact else None)
    dtype = f", dtype={CODE['f64'] if m.is_float else CODE['i64']}" if r.random() < 0.15 and m.dtype != "f64" else ""
    return Emit(f"torch.{fn}({{0}}, {d}{dtype})", cost=reduction_cost(n), special=fn != "cumsum",
                exact=None if fn in ("cumsum", "cumprod") else False)


def _diff(r, ms):
    m = ms[0]
    d = pick_dim(r, m)
    return Emit(f"torch.diff({{0}}, dim={d})", cost=1.0)


ROWS = [
    Row("sum", "reduction", _sum, exact="int", weight=1.5),
    Row("mean", "reduction", _mean, exact=False),
    Row("amax", "reduction", _minmax, accepts=nonempty, exact=True),
    Row("prod", "reduction", _prod, accepts=not_bool, exact="int", weight=0.6),
    Row("var", "reduction", _var, accepts=is_float),
    Row("argmax", "reduction", _argmax, accepts=not_bool, exact=True, needs_exact=True),
    Row("max_dim", "reduction", _max_dim, accepts=not_bool, exact=True, weight=0.6),
    Row("logsumexp", "reduction", _logsumexp, accepts=is_float, weight=0.7),
    Row("softmax", "reduction", _softmax, accepts=is_float, weight=1.5),
    Row("any_all", "reduction", _any_all, exact=True, needs_exact=True, weight=0.6),
    Row("norm", "reduction", _norm, accepts=is_float, weight=0.6),
    Row("sort_like", "reduction", _sort_like, accepts=not_bool, exact=True, weight=0.3),
    Row("scan", "scan", _scan, exact="int", weight=1.5),
    Row("diff", "scan", _diff, accepts=not_bool, exact="int", weight=0.3),
]
