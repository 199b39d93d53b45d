"""Counter-based RNG: Philox4x32-10 known answers, the tl.rand/tl.randn mappings, and independence
from how the iteration space is laid out."""

import math

import numpy as np
import pytest
from irtestlib import run_pointwise
from stax.ir import const, index_value, load, op, pointwise_vars
from stax.ir import dtypes as dt
from stax.ir.rng import philox4x32, rand, randint4x, randn, uint_to_uniform_float

i0, i1 = pointwise_vars(2)


@pytest.mark.parametrize(
    "ctr, key, want",
    [  # Random123's kat_vectors for philox4x32 with 10 rounds
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ],
)
def test_philox_known_answers(ctr, key, want):
    out = philox4x32(*(np.uint32(c) for c in ctr), *(np.uint32(k) for k in key))
    assert tuple(int(o) for o in out) == want


def test_offset_and_seed_split_into_words():
    """The counter is (offset lo, offset hi, 0, 0) and the key (seed lo, seed hi), as tl.randint4x."""
    seed, offset = 0x0123456789ABCDEF, 0x00000007_89ABCDEF
    got = randint4x(seed, offset)
    want = philox4x32(np.uint32(offset & 0xFFFFFFFF), np.uint32(offset >> 32), np.uint32(0), np.uint32(0),
                      np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32))
    assert [int(g) for g in got] == [int(w) for w in want]


def test_uniform_mapping_stays_below_one():
    words = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], dtype=np.uint32)
    u = uint_to_uniform_float(words)
    assert u.dtype == np.float32 and (u >= 0).all() and (u < 1).all()
    # negative int32 words fold onto the positive ones: -x - 1
    assert u[3] == u[2] and u[4] == u[0] == 0


def test_rand_and_randn_statistics():
    n = 1 << 16
    u = rand(2024, np.arange(n, dtype=np.int64))
    z = randn(2024, np.arange(n, dtype=np.int64))
    # deterministic streams; bounds at ~5 standard errors of the estimates
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 5 * 0.0745 / math.sqrt(n)
    assert abs(z.mean()) < 5 / math.sqrt(n) and abs(z.var() - 1) < 5 * math.sqrt(2 / n)
    hist = np.histogram(u, bins=16, range=(0, 1))[0]
    assert (np.abs(hist - n / 16) < 5 * math.sqrt(n / 16)).all()
    assert len(np.unique(u)) > 0.99 * n


def test_rand_ops_in_graphs_depend_only_on_seed_and_offset():
    """The same (seed, offset) gives the same number whatever the loop nest: 4x8 vs a flat 32."""
    seed = load("seed", 0, dt.int64)
    for name, fn in (("rand", rand), ("randn", randn)):
        a = run_pointwise(op(name, seed, index_value(8 * i0 + i1 + 100)), (4, 8), {"seed": (np.array([7]), dt.int64)})
        b = run_pointwise(op(name, seed, index_value(i0 + 100)), (32,), {"seed": (np.array([7]), dt.int64)})
        np.testing.assert_array_equal(a.reshape(-1), b)
        np.testing.assert_array_equal(b, fn(7, np.arange(100, 132)))
        c = run_pointwise(op(name, const(8, dt.int64), index_value(i0 + 100)), (32,), {})
        assert not np.array_equal(b, c)  # another seed, another stream


def test_dropout_mask_from_rand():
    """dropout(p=0.25): keep where rand >= p, scale by 1/(1-p); about 3/4 kept."""
    x = np.ones(4096, dtype=np.float32)
    r = op("rand", const(1234, dt.int64), index_value(i0))
    keep = op("ge", r, const(0.25, dt.float32))
    y = op("where", keep, op("mul", load("x", i0, dt.float32), const(1 / 0.75, dt.float32)), const(0.0, dt.float32))
    out = run_pointwise(y, (4096,), {"x": (x, dt.float32)})
    kept = out != 0
    np.testing.assert_array_equal(kept, rand(1234, np.arange(4096)) >= np.float32(0.25))
    assert abs(kept.mean() - 0.75) < 5 * math.sqrt(0.75 * 0.25 / 4096)
