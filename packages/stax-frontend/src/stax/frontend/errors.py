"""Why a whole graph cannot be compiled by Stax (it then runs eagerly, aot.py)."""

from __future__ import annotations


class GraphUnsupported(NotImplementedError):
    """The whole graph cannot be compiled by Stax (e.g. symbolic shapes); run it eagerly.
    `cause`: a short name of the reason, shared by every graph it stops (one warning each)."""

    def __init__(self, message: str, cause: str | None = None):
        super().__init__(message)
        self.cause = cause
