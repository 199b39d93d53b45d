"""A symbolic-shape graph's cache entry as plain data: the size expressions inside its call spec and
generated code (`2*s0` in a layout, an extern's view sizes) become stax.ir `PlainIndex` trees when the
entry is stored and expressions again when it is loaded, so that graph_cache's unpickler, which rebuilds
builtins and stax dataclasses only, reads it."""

from __future__ import annotations

import dataclasses

import sympy
from stax.ir.plain_index import PlainIndex, from_plain, to_plain

from .graph_key import Uncacheable


def encode(obj):
    """`obj` with every sympy expression (in tuples, lists, dicts, sets and dataclasses) as a PlainIndex."""
    if isinstance(obj, sympy.Basic):
        try:
            return to_plain(obj)
        except ValueError as e:
            raise Uncacheable(f"a size expression the cache cannot store: {e}") from None
    return _walk(obj, encode)


def decode(obj):
    """The inverse of `encode`."""
    if isinstance(obj, PlainIndex):
        return from_plain(obj)
    return _walk(obj, decode)


def _walk(obj, f):
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(f(x) for x in obj)
    if isinstance(obj, list):
        return [f(x) for x in obj]
    if isinstance(obj, dict):
        return {f(k): f(v) for k, v in obj.items()}
    if isinstance(obj, frozenset | set):
        return type(obj)(f(x) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {}
        for fld in dataclasses.fields(obj):
            if fld.init:
                old = getattr(obj, fld.name)
                new = f(old)
                if new is not old:
                    changes[fld.name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj
