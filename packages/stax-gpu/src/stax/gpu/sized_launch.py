"""The launcher of a kernel whose sizes are call-time values (symbolic shapes).

The wrapper passes the kernel's element counts and size symbols after its pointers
(`launch_0(in_ptr0, out_ptr0, s0*s1, s1, s0, s1)`); the grid is computed from them at every
call. One compiled kernel serves every size: its size parameters are not specialized
(kernels.signature), and the autotuner's choice, made once at the first call's sizes, is
kept for all sizes (the key names the size expressions, not their values).
"""

from __future__ import annotations

from .heuristics import LaunchConfig, grid
from .runtime import KernelLauncher


class SizedLauncher(KernelLauncher):
    """A KernelLauncher whose last `n_numels + n_sizes` arguments are ints of this call. It launches
    through the JIT's own call path (DirectLaunch fixes the numels and the grid at its first call)."""

    sized = True

    def __init__(self, *args, n_numels: int, n_sizes: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_numels = n_numels
        self.n_ints = n_numels + n_sizes
        self._kwargs: dict = {}  # config key -> launch keyword arguments

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
        if self.choice is None:
            trial = self._trial_args(args)
            self.choice = self.autotuner.select(self.key, self.candidates, lambda c: self.launch(c, trial))
        self.launch(self.choice, args)
