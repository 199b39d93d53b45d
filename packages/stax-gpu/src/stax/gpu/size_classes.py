"""Size classes of a symbolic kernel: its launch configs are chosen, raced and cached per class.

A kernel compiled for symbolic sizes runs at every size, but its best blocks do not: a layer
norm over 17 rows wants one row per program (few programs would leave most SMs idle), over
16384 rows several. So the x element count (rows of a reduction, elements of a pointwise
kernel) is split into classes of a factor of 4, candidates are made at each class's largest
size within the kernel's range, and the autotuner's choice is kept per class (its cache key
names the class). A class's first call races its candidates; later calls of any size in the
class launch the choice.
"""

from __future__ import annotations

import math

from .symbolic import is_static, size_range

RATIO_BITS = 2  # a class spans a factor of 2**RATIO_BITS
LARGEST = 1 << 31  # counts beyond this (an unbounded size) share the last class


def size_class(n: int) -> int:
    """The class of element count n: 0 for 1, 1 for 2..4, 2 for 5..16, 3 for 17..64, ..."""
    return -(-(max(int(n), 1) - 1).bit_length() // RATIO_BITS)


def class_top(c: int) -> int:
    """The largest count of class c."""
    return 1 << (RATIO_BITS * c)


def count_range(numel, ranges: dict) -> tuple[int, int]:
    """(least, largest) value of a symbolic element count over the size ranges, the largest capped at LARGEST."""
    r = size_range(numel, ranges)
    lo = int(r.lo) if math.isfinite(r.lo) else 1
    hi = int(r.hi) if math.isfinite(r.hi) and r.hi < LARGEST else LARGEST
    return max(lo, 1), max(hi, 1)


def class_sizes(numel, ranges: dict) -> tuple[tuple[int, int], ...]:
    """((class, the count its candidates are made for), ...) over `numel`'s range; () for a static count."""
    if is_static(numel):
        return ()
    lo, hi = count_range(numel, ranges)
    return tuple((c, min(max(class_top(c), lo), hi)) for c in range(size_class(lo), size_class(hi) + 1))
