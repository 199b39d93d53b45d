"""The launcher of a kernel whose sizes are call-time values (symbolic shapes).

The wrapper passes the kernel's element counts and size symbols after its pointers
(`launch_0(in_ptr0, out_ptr0, (s0*s1), s1, s0, s1)`); the grid is computed from them at
every call. One compiled kernel serves every size: its size parameters are not specialized
(kernels.signature), and the autotuner's choice, made once at the first call's sizes, is
kept for all sizes (the key names the size expressions, not their values).

One decision needs the size: a reduction over a symbolic row has a persistent form (R0_BLOCK
fixed at the row's hint, kernels.persistent_block) and a looped one. Each call goes to the
persistent form when its row fits the block, else to the looped one: two size buckets, each
with its own choice among its own candidates.
"""

from __future__ import annotations

from .heuristics import LaunchConfig, grid
from .kernels import LOOPED, PERSISTENT
from .runtime import KernelLauncher

ANY = "any"  # the one bucket of a kernel without a persistent / looped pair


class SizedLauncher(KernelLauncher):
    """A KernelLauncher whose last `n_numels + n_sizes` arguments are ints of this call. It launches
    through the JIT's own call path (DirectLaunch fixes the numels and the grid at its first call)."""

    sized = True

    def __init__(self, *args, n_numels: int, n_sizes: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_numels = n_numels
        self.n_ints = n_numels + n_sizes
        self._kwargs: dict = {}  # config key -> launch keyword arguments
        pair = PERSISTENT in self.variants and LOOPED in self.variants
        # rows up to this length take the persistent form (None: one bucket)
        self.r0_limit = self.variants[PERSISTENT][0].r0_block if pair else None
        self.choices: dict = {}  # bucket -> LaunchConfig

    def bucket(self, args) -> str:
        if self.r0_limit is None:
            return ANY
        r0_numel = args[len(args) - self.n_ints + 1]  # numels: (xnumel, r0_numel)
        return PERSISTENT if r0_numel <= self.r0_limit else LOOPED

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
            cands = [c for c in self.candidates if b == ANY or c.variant == b]
            trial = self._trial_args(args)
            key = self.key if b == ANY else f"{self.key}-{b}"
            choice = self.choices[b] = self.autotuner.select(key, cands, lambda c: self.launch(c, trial))
            self.choice = choice
        self.launch(choice, args)
