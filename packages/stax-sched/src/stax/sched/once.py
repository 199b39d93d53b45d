"""`once`: a computed-once attribute, like functools.cached_property without its lock.

Python 3.11's cached_property takes a lock on every first access (3.12 dropped it); the
scheduler makes tens of thousands of dependences and ReadWrites per large graph and
reads each derived attribute once or twice, so the lock cost more than the values. The
first access stores the value in the instance's __dict__ (which then shadows this
non-data descriptor; frozen dataclasses too, as their __setattr__ is bypassed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class once(Generic[T]):  # noqa: N801  (used like `property`)
    def __init__(self, fn: Callable[[Any], T]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, objtype=None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]  # the descriptor itself, for introspection
        value = self.fn(obj)
        obj.__dict__[self.name] = value
        return value
