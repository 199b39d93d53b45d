"""Cut a compiled module's source into one snippet per kernel (C++ function or Triton def).

The codegen packages emit each kernel as a named function — `extern "C" int kernel0(...)
{...}` for stax.cpu, `def <name>(...)` under `@triton.jit` for stax.gpu — and a wrapper
`def call(args)` that launches them. Matching is by name, so any backend that names
its functions after the Schedule's kernels works; a kernel not found gets None.
"""

from __future__ import annotations

import re


def _c_function(source: str, name: str) -> str | None:
    m = re.search(r'^[^\n]*\b' + re.escape(name) + r'\s*\([^)]*\)\s*\{', source, re.M)
    if m is None:
        return None
    depth, i = 0, source.index("{", m.start())
    while i < len(source):
        c = source[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return source[m.start() : i + 1]
        i += 1
    return None


def _py_function(source: str, name: str) -> str | None:
    """A top-level `def` whose name is or contains `name` (with its decorators)."""
    lines = source.splitlines()
    pat = re.compile(r"^def \w*" + re.escape(name) + r"\b\w*\s*\(")
    for k, line in enumerate(lines):
        if pat.match(line):
            start = k
            while start > 0 and lines[start - 1].startswith("@"):
                start -= 1
            end = k + 1
            while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t)"):
                end += 1
            return "\n".join(lines[start:end]).rstrip()
    return None


def kernel_source(source: str, name: str) -> str | None:
    return _c_function(source, name) or _py_function(source, name)


def wrapper_source(source: str) -> str | None:
    """The Python wrapper `call(args)` that allocates, launches and frees (Listing 8.1)."""
    return _py_function(source, "call")


def wrapper_lines(wrapper: str | None, name: str) -> list[str]:
    """The wrapper lines that launch kernel `name`."""
    if not wrapper:
        return []
    pat = re.compile(r"\b\w*" + re.escape(name) + r"\b")
    return [ln.strip() for ln in wrapper.splitlines() if pat.search(ln) and "raise" not in ln]
