"""Counter-based random numbers: Philox4x32-10, bit-compatible with Triton's tl.rand/tl.randn.

A kernel computes element k's random number from (seed, offset_k) alone, with no
state between elements or kernels, so a dropout mask is reproducible whatever the
tiling, fusion or device. The key is the seed (low, high 32 bits), the counter is
(offset low, offset high, 0, 0); `rand` maps the first output word to [0, 1) and
`randn` applies Box-Muller to the first two, exactly as triton.language.random, so
the GPU backend can call tl.rand/tl.randn and the CPU backend ports this file.
"""

from __future__ import annotations

import numpy as np

PHILOX_KEY_A = np.uint32(0x9E3779B9)
PHILOX_KEY_B = np.uint32(0xBB67AE85)
PHILOX_ROUND_A = np.uint32(0xD2511F53)
PHILOX_ROUND_B = np.uint32(0xCD9E8D57)
N_ROUNDS = 10

_U32 = np.uint64(0xFFFFFFFF)
_UNIFORM_SCALE = np.float32(4.6566127342e-10)  # largest scale with INT32_MAX * scale < 1 in float32


def _mulhilo(a: np.uint32, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.uint64(a) * b.astype(np.uint64)
    return (p >> np.uint64(32)).astype(np.uint32), (p & _U32).astype(np.uint32)


def philox4x32(c0, c1, c2, c3, k0, k1, n_rounds: int = N_ROUNDS):
    """Philox4x32 with `n_rounds` rounds on uint32 arrays (broadcast together)."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(x, dtype=np.uint32) for x in np.broadcast_arrays(c0, c1, c2, c3, k0, k1))
    with np.errstate(over="ignore"):
        for _ in range(n_rounds):
            hi_b, lo_b = _mulhilo(PHILOX_ROUND_B, c2)
            hi_a, lo_a = _mulhilo(PHILOX_ROUND_A, c0)
            c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
            k0 = k0 + PHILOX_KEY_A
            k1 = k1 + PHILOX_KEY_B
    return c0, c1, c2, c3


def randint4x(seed, offset):
    """Four uint32 words for each (seed, offset); seed and offset are int64 values."""
    seed = np.asarray(seed, dtype=np.int64).astype(np.uint64)
    offset = np.asarray(offset, dtype=np.int64).astype(np.uint64)
    zero = np.zeros(np.broadcast(seed, offset).shape, dtype=np.uint32)
    return philox4x32(
        (offset & _U32).astype(np.uint32),
        (offset >> np.uint64(32)).astype(np.uint32),
        zero,
        zero,
        (seed & _U32).astype(np.uint32),
        (seed >> np.uint64(32)).astype(np.uint32),
    )


def uint_to_uniform_float(x: np.ndarray) -> np.ndarray:
    """uint32 -> float32 in [0, 1): reinterpret as int32, fold negatives (-x - 1), scale."""
    i = np.asarray(x, dtype=np.uint32).view(np.int32).astype(np.int64)
    i = np.where(i < 0, -i - 1, i)
    return i.astype(np.float32) * _UNIFORM_SCALE


def rand(seed, offset) -> np.ndarray:
    """Uniform float32 in [0, 1) for each (seed, offset)."""
    return uint_to_uniform_float(randint4x(seed, offset)[0])


def randn(seed, offset) -> np.ndarray:
    """Standard normal float32 for each (seed, offset): Box-Muller on the first two words."""
    w = randint4x(seed, offset)
    u1 = np.maximum(np.float32(1.0e-7), uint_to_uniform_float(w[0]))
    u2 = uint_to_uniform_float(w[1])
    th = np.float32(6.283185307179586) * u2
    with np.errstate(all="ignore"):
        r = np.sqrt(np.float32(-2.0) * np.log(u1))
        return (r * np.cos(th)).astype(np.float32)
