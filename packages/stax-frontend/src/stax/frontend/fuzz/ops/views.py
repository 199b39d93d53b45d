"""View rows (reshape, view, permute, transpose, expand, slice, select, unsqueeze, squeeze,
flatten, narrow, diagonal, unfold, unbind, split, as_strided) and shape-changing copies
(cat, stack, pad, flip, roll, repeat, tril, contiguous)."""

from __future__ import annotations

from .base import Aux, Emit, Row, add_aux, nonempty, pick_dim, rank_at_least, sized_dim


def _factor(r, n: int, rank: int) -> list[int]:
    """A random shape of `rank` dims with n elements."""
    if rank == 0:
        return [] if n == 1 else [n]
    if n == 0:
        s = [r.choice([1, 2, 3]) for _ in range(rank)]
        s[r.randrange(rank)] = 0
        return s
    dims = [1] * rank
    m = n
    p = 2
    primes = []
    while p * p <= m:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    if m > 1:
        primes.append(m)
    for q in primes:
        dims[r.randrange(rank)] *= q
    return dims


def _reshape(r, ms):
    m = ms[0]
    rank = r.choice([0, 1, 2, 3, 4]) if m.numel == 1 else r.choice([1, 2, 2, 3, 3, 4])
    shape = _factor(r, m.numel, rank)
    if shape and m.numel and r.random() < 0.3:
        shape[r.randrange(len(shape))] = -1
    kind = r.choice(["reshape", "reshape", "view", "flatten", "unflatten"])
    if kind == "flatten" and m.ndim:
        a = r.randrange(m.ndim)
        b = r.randrange(a, m.ndim)
        return Emit(f"torch.flatten({{0}}, {a}, {b})", view=True)
    if kind == "unflatten" and m.ndim and m.numel:
        d = r.randrange(m.ndim)
        sub = _factor(r, m.shape[d], r.choice([1, 2, 3]))
        return Emit(f"{{0}}.unflatten({d}, {tuple(sub)})", view=True)
    method = "view" if kind == "view" else "reshape"
    return Emit(f"{{0}}.{method}({tuple(shape)})", view=True)


def _permute(r, ms):
    m = ms[0]
    u = r.random()
    if m.ndim < 2:
        return Emit("{0}.t()" if u < 0.5 else "{0}.permute(" + str(tuple(range(m.ndim))) + ")", view=True)
    if u < 0.4:
        p = list(range(m.ndim))
        r.shuffle(p)
        return Emit(f"{{0}}.permute({tuple(p)})", view=True)
    if u < 0.8:
        a, b = r.sample(range(m.ndim), 2)
        return Emit(f"{{0}}.transpose({a}, {-b if b and r.random() < 0.3 else b})", view=True)
    if u < 0.9:
        return Emit("{0}.mT", view=True)
    return Emit(f"torch.movedim({{0}}, {r.randrange(m.ndim)}, {r.randrange(m.ndim)})", view=True)


def _expand(r, ms):
    m = ms[0]
    shape = [s if s != 1 or r.random() < 0.5 else r.choice([2, 3, 5]) for s in m.shape]
    lead = [r.choice([1, 2, 3])] * (r.random() < 0.4)
    if lead or shape != list(m.shape):
        target = lead + shape
    else:
        target = [2] + shape
    if r.random() < 0.3 and target:
        target = [-1 if k >= len(lead) and r.random() < 0.5 else s for k, s in enumerate(target)]
    return Emit(f"{{0}}.expand({tuple(target)})", view=True)


def _slice(r, ms):
    m = ms[0]
    d = r.randrange(m.ndim)
    n = m.shape[d]
    start = r.choice([None, 0, 1, -2, n // 2, r.randint(-n - 1, n + 1)])
    stop = r.choice([None, -1, n, r.randint(-n - 1, n + 2)])
    step = r.choice([1, 1, 2, 3])
    part = f"{'' if start is None else start}:{'' if stop is None else stop}" + (f":{step}" if step != 1 else "")
    idx = ", ".join([":"] * d + [part])
    if r.random() < 0.2:
        return Emit(f"torch.narrow({{0}}, {d}, {n // 3}, {n - n // 3 - (n // 4)})", view=True)
    return Emit(f"{{0}}[{idx}]", view=True)


def _select(r, ms):
    m = ms[0]
    if (dn := sized_dim(r, m)) is None:
        return None
    d, n = dn
    i = r.randrange(-n, n)
    u = r.random()
    if u < 0.4:
        return Emit(f"{{0}}.select({d}, {i})", view=True)
    if u < 0.6 and n <= 16:  # unbind's backward stacks one tensor per slice: keep it small
        return Emit(f"torch.unbind({{0}}, {d})[{i}]", view=True)
    if u < 0.8 and n > 1:
        size = max(r.randint(1, n - 1), -(-n // 16))
        k = r.randrange(-(-n // size))
        return Emit(f"torch.split({{0}}, {size}, {d})[{k}]", view=True)
    return Emit(f"{{0}}[{', '.join([':'] * d + [str(i)])}]", view=True)


def _unsqueeze(r, ms):
    m = ms[0]
    u = r.random()
    if u < 0.5:
        return Emit(f"{{0}}.unsqueeze({r.randint(-m.ndim - 1, m.ndim)})", view=True)
    if u < 0.8:
        ones = [d for d, s in enumerate(m.shape) if s == 1]
        if ones and r.random() < 0.7:
            return Emit(f"{{0}}.squeeze({r.choice(ones)})", view=True)
        return Emit("{0}.squeeze()", view=True)
    return Emit("{0}[None]" if r.random() < 0.5 else "{0}[..., None]", view=True)


def _diagonal(r, ms):
    m = ms[0]
    a, b = r.sample(range(m.ndim), 2)
    off = r.choice([0, 0, 1, -1, 2])
    return Emit(f"torch.diagonal({{0}}, {off}, {a}, {b})", view=True)


def _unfold(r, ms):
    m = ms[0]
    d = r.randrange(m.ndim) if m.ndim else 0
    n = m.shape[d] if m.ndim else 1
    size = r.randint(0 if r.random() < 0.1 else 1, max(1, min(n, 4)))
    step = r.choice([1, 2, 3])
    return Emit(f"{{0}}.unfold({d}, {size}, {step})", view=True)


def _as_strided(r, ms):
    m = ms[0]
    if m.numel < 4:
        return None
    n = m.numel
    size = (r.randint(1, 3), r.randint(1, 3))
    stride = (r.randint(0, 2), r.choice([1, 2]))
    last = (size[0] - 1) * stride[0] + (size[1] - 1) * stride[1]
    off = r.randint(0, max(0, n - 1 - last))
    if last + off >= n:
        return None
    return Emit(f"torch.as_strided({{0}}.contiguous(), {size}, {stride}, {off})")


def _cat(r, ms):
    m = ms[0]
    d = pick_dim(r, m) if m.ndim else None
    if d is None:
        return Emit("torch.stack([{0}, {0} * 2])") if not m.is_bool else Emit("torch.stack([{0}, {0}])")
    aux: list = []
    if len(ms) > 1:
        other = "{1}"
        if ms[1].ndim != m.ndim or any(a != b for k, (a, b) in enumerate(zip(ms[1].shape, m.shape)) if k != d % m.ndim):
            return None
    elif r.random() < 0.5:
        other = "{0}.flip(" + str(d) + ")"
    else:
        shape = list(m.shape)
        shape[d] = r.choice([0, 1, 2, 3])
        dtype = m.dtype if r.random() < 0.8 else r.choice(["f32", "i64", "b", "f16"])
        other = add_aux(aux, Aux("data", tuple(shape), dtype))
    if r.random() < 0.25 and (len(ms) == 1 or ms[1].shape == m.shape) and not other.startswith("{a"):
        return Emit(f"torch.stack([{{0}}, {other}], {r.randint(-m.ndim - 1, m.ndim)})", aux=tuple(aux))
    parts = ["{0}", other] if r.random() < 0.6 else [other, "{0}", other]
    return Emit(f"torch.cat([{', '.join(parts)}], {d})", aux=tuple(aux))


def _cat_partner(m0, m1):
    return m0.ndim == m1.ndim and m0.ndim > 0 and sum(a != b for a, b in zip(m0.shape, m1.shape)) <= 1


def _pad(r, ms):
    m = ms[0]
    k = r.randint(1, min(m.ndim, 3))
    pads = []
    for j in range(k):
        n = m.shape[m.ndim - 1 - j]
        lo, hi = r.randint(-min(n, 2), 3), r.randint(-min(n, 2), 3)
        if lo + hi + n < 0:
            lo = hi = 0
        pads += [lo, hi]
    mode = r.choice(["constant", "constant", "constant", "reflect", "replicate", "circular"])
    if mode != "constant":
        pads = [abs(p) for p in pads]
        if mode == "reflect":
            pads = [min(p, m.shape[m.ndim - 1 - j // 2] - 1) for j, p in enumerate(pads)]
        if mode == "circular":
            pads = [min(p, m.shape[m.ndim - 1 - j // 2]) for j, p in enumerate(pads)]
        if m.ndim < k + 1 or m.ndim > 5 or not m.is_float or m.numel == 0:
            mode = "constant"
    if mode == "constant":
        value = "" if r.random() < 0.5 else (", value=" + ("1.5" if m.is_float else "3"))
        if m.is_bool:
            value = ""
        return Emit(f"F.pad({{0}}, {tuple(pads)}{value})")
    return Emit(f"F.pad({{0}}, {tuple(pads)}, mode={mode!r})")


def _flip_roll(r, ms):
    m = ms[0]
    u = r.random()
    if u < 0.4:
        dims = tuple(sorted(r.sample(range(m.ndim), r.randint(1, m.ndim))))
        return Emit(f"torch.flip({{0}}, {dims})")
    if u < 0.8:
        d = r.randrange(m.ndim)
        return Emit(f"torch.roll({{0}}, {r.randint(-7, 7)}, {d})")
    return Emit(f"torch.roll({{0}}, {r.randint(-9, 9)})")


def _repeat(r, ms):
    m = ms[0]
    reps = [r.choice([1, 1, 2, 3]) for _ in range(m.ndim + r.randint(0, 1))]
    if r.random() < 0.3:
        return Emit(f"torch.tile({{0}}, {tuple(reps)})")
    if r.random() < 0.3 and m.ndim:
        return Emit(f"torch.repeat_interleave({{0}}, {r.choice([2, 3])}, dim={r.randrange(m.ndim)})")
    return Emit(f"{{0}}.repeat({tuple(reps) if reps else (1,)})" if len(reps) >= m.ndim else "{0}.clone()")


def _tri(r, ms):
    return Emit(f"torch.{r.choice(['tril', 'triu'])}({{0}}, {r.choice([0, 1, -1, 2])})")


def _copy(r, ms):
    m = ms[0]
    u = r.random()
    if u < 0.4:
        return Emit("{0}.contiguous()")
    if u < 0.7:
        return Emit("{0}.clone()")
    if m.ndim == 4 and u < 0.85:
        return Emit("{0}.contiguous(memory_format=torch.channels_last)")
    return Emit("{0}.clone(memory_format=torch.contiguous_format)")


ROWS = [
    Row("reshape", "view", _reshape, exact=True, weight=1.5),
    Row("permute", "view", _permute, exact=True, weight=1.2),
    Row("expand", "view", _expand, exact=True, weight=0.8),
    Row("slice", "view", _slice, accepts=rank_at_least(1), exact=True, weight=1.2),
    Row("select", "view", _select, accepts=rank_at_least(1), exact=True),
    Row("unsqueeze", "view", _unsqueeze, exact=True),
    Row("diagonal", "view", _diagonal, accepts=rank_at_least(2), exact=True, weight=0.4),
    Row("unfold", "view", _unfold, exact=True, weight=0.4),
    Row("as_strided", "view", _as_strided, exact=True, weight=0.2),
    Row("cat", "shape", _cat, arity=2, optional=1, partner=_cat_partner, exact=True, weight=1.2),
    Row("pad", "shape", _pad, accepts=rank_at_least(1), exact=True, weight=0.8),
    Row("flip_roll", "shape", _flip_roll, accepts=rank_at_least(1), exact=True, weight=0.8),
    Row("repeat", "shape", _repeat, accepts=nonempty, exact=True, weight=0.4),
    Row("tri", "shape", _tri, accepts=rank_at_least(2), exact=True, weight=0.4),
    Row("copy", "shape", _copy, exact=True, weight=0.5),
]
