"""The one Python warning a user sees when a whole graph runs eagerly.

A log record under the library's NullHandler says nothing by default, and a graph that
silently stops being compiled is the worst kind of slow. So each cause (no C++ compiler,
a dtype Stax has no equivalent for, symbolic shapes, a missing GPU backend, ...) raises a
`StaxEagerWarning` once per process; every such graph is still counted in `metrics` and
logged, and `strict` (STAX_STRICT=1) raises instead.
"""

from __future__ import annotations

import re
import threading
import warnings


class StaxEagerWarning(UserWarning):
    """A graph given to backend="stax" runs eagerly (filter it with this category)."""


_NUMBERED = re.compile(r"[A-Za-z_]*\d+\w*")  # graph-specific: arg0_1, s77, buf12, 4096
_SEEN: set[str] = set()  # causes warned about in this process (the "once" of the contract)
_LOCK = threading.Lock()


def cause_of(error: BaseException) -> str:
    """What a warning is deduplicated by: the error's declared cause, else its type and
    message with graph-specific names and numbers masked (`arg0_1=s77` -> `#=#`)."""
    cause = getattr(error, "cause", None)
    if cause:
        return f"{type(error).__name__}: {cause}"
    return f"{type(error).__name__}: {_NUMBERED.sub('#', str(error))}"


def warn_eager(cause: str, message: str) -> bool:
    """Warn (StaxEagerWarning) unless `cause` was warned about before; True if it warned."""
    with _LOCK:
        if cause in _SEEN:
            return False
        _SEEN.add(cause)
    warnings.warn(f"{message} (StaxEagerWarning is raised once per cause; set STAX_STRICT=1 to raise, "
                  "STAX_LOG=frontend to log every graph)", StaxEagerWarning, stacklevel=3)
    return True


def reset() -> None:
    """Forget the causes warned about (tests)."""
    with _LOCK:
        _SEEN.clear()
