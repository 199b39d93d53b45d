"""The launcher of a kernel whose sizes are call-time values (symbolic shapes).

The wrapper passes the kernel's element counts and size symbols after its pointers
(`launch_0(in_ptr0, out_ptr0, (s0*s1), s1, s0, s1)`); the grid is computed from them at
every call. One compiled kernel serves every size: its size parameters are not specialized
(kernels.signature).

Two decisions need the size. A reduction over a symbolic row has a persistent form (R0_BLOCK
a launch argument) and a looped one: each call goes to the persistent form when its row fits
kernels.persistent_limit, with R0_BLOCK the row padded to a power of two (a row bucket: its
candidates are the hint's, rescaled by heuristics.at_row_block), else to the looped one. And a
symbolic x count falls in a size class (size_classes.py) with candidates of its own. Each
bucket (form, row block, class) has its own choice among its own candidates, made at its first
call and cached under a key that names the bucket.
"""

from __future__ import annotations

from .heuristics import LaunchConfig, at_row_block, grid
from .kernels import LOOPED, PERSISTENT, next_pow2
from .runtime import KernelLauncher
from .size_classes import size_class

ANY = "any"  # the one bucket of a kernel without a persistent / looped pair


class SizedLauncher(KernelLauncher):
    """A KernelLauncher whose last `n_numels + n_sizes` arguments are ints of this call. It launches
    through the JIT's own call path (DirectLaunch fixes the numels and the grid at its first call)."""

    sized = True

    def __init__(self, *args, n_numels: int, n_sizes: int, by_size: tuple = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.n_numels = n_numels
        self.n_ints = n_numels + n_sizes
        self._kwargs: dict = {}  # config key -> launch keyword arguments
        pair = PERSISTENT in self.variants and LOOPED in self.variants
        persistent = self.variants[PERSISTENT][0] if pair else None
        # rows up to this length take the persistent form (None: one bucket); sized: its R0_BLOCK per call
        self.r0_limit = None if persistent is None else (persistent.r0_max or persistent.r0_block)
        self.row_sized = persistent is not None and persistent.r0_max is not None
        self.by_size = {c: tuple(cs) for c, cs in by_size}  # size class -> its candidates ({}: no classes)
        numels = [n for n, _ in next(iter(self.variants.values()))[0].numels]
        self.x_at = numels.index("xnumel")
        self.choices: dict = {}  # bucket -> LaunchConfig

    def bucket(self, args) -> str:
        """'persistent' / 'looped' / 'any', '/r<R0_BLOCK>' for a persistent form sized per call, and
        '/x<class>' where the x count has size classes."""
        first = len(args) - self.n_ints
        form = ANY
        if self.r0_limit is not None:
            rows = args[first + 1]  # numels: (xnumel, r0_numel)
            form = PERSISTENT if rows <= self.r0_limit else LOOPED
            if self.row_sized and form == PERSISTENT:
                form = f"{PERSISTENT}/r{next_pow2(rows)}"
        if not self.by_size:
            return form
        return f"{form}/x{size_class(args[first + self.x_at])}"

    def bucket_candidates(self, b: str) -> list:
        """The candidates of bucket `b`: its size class's (the hint's outside every class), of its form,
        at its row block."""
        head, _, cls = b.partition("/x")
        form, _, r = head.partition("/r")
        cands = self.by_size.get(int(cls), self.candidates) if cls else self.candidates
        out = [c for c in cands if form == ANY or c.variant == form] or \
            [c for c in self.candidates if form == ANY or c.variant == form]
        if r:
            out = list({c.key(): c for c in (at_row_block(c, int(r)) for c in out)}.values())
        return out

    def launch(self, cfg: LaunchConfig, args) -> None:
        ks, fn = self.variants[cfg.variant]
        first = len(args) - self.n_ints
        g = grid(ks, cfg, args[first : first + self.n_numels])
        if 0 in g:
            return
        kwargs = self._kwargs.get(cfg.key())
        if kwargs is None:
            kwargs = self._kwargs[cfg.key()] = dict(cfg.kwargs(), num_warps=cfg.num_warps,
                                                    num_stages=cfg.num_stages, **self.options)
        fn[g](*args, **kwargs)

    def __call__(self, *args) -> None:
        b = self.bucket(args)
        choice = self.choices.get(b)
        if choice is None:
            cands = self.bucket_candidates(b)
            trial = self._trial_args(args)
            key = self.key if b == ANY else f"{self.key}-{b}"
            choice = self.choices[b] = self.autotuner.select(key, cands, lambda c: self.launch(c, trial))
            self.choice = choice
        self.launch(choice, args)
