"""Cut a compiled module's source into one snippet per kernel (C++ function or Triton def).

The codegen packages emit each kernel as a named function — `extern "C" int kernel0(...)
{...}` for stax.cpu, `def <name>(...)` under `@triton.jit` for stax.gpu — and a wrapper
`def call(args)` that launches them. Matching is by name, so any backend that names
its functions after the Schedule's kernels works; a kernel not found gets None. stax.cpu
may emit several kernels in one parallel region (`extern "C" int region0(...)`, announced
in the wrapper as `# region0: kernel0, kernel1 in one parallel region`): such a kernel's
snippet is its block inside the region (the braces opened just before its
`// kernel0: ...` comment), headed by the region's signature line.
"""

from __future__ import annotations

import re
import textwrap


def _c_function(source: str, name: str) -> str | None:
    m = re.search(r'^[^\n]*\b' + re.escape(name) + r'\s*\([^)]*\)\s*\{', source, re.M)
    if m is None:
        return None
    return _braced(source, m.start(), source.index("{", m.start()))


def _braced(source: str, start: int, i: int) -> str | None:
    """source[start:] up to the brace matching the `{` at i."""
    depth = 0
    while i < len(source):
        c = source[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return source[start : i + 1]
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


_REGION = re.compile(r"^\s*# (\w+): ([\w, ]+) in one parallel region", re.M)


def _region_of(source: str, name: str) -> str | None:
    for m in _REGION.finditer(source):
        if name in (k.strip() for k in m.group(2).split(",")):
            return m.group(1)
    return None


def kernel_source(source: str, name: str) -> str | None:
    found = _c_function(source, name) or _py_function(source, name)
    if found is None and (region := _region_of(source, name)) is not None:
        found = _region_block(source, region, name)
    return found


def _region_block(source: str, region: str, name: str) -> str | None:
    func = _c_function(source, region)
    mark = func.find(f"// {name}:") if func else -1
    if mark < 0:
        return func
    open_ = func.rfind("{", 0, mark)
    block = _braced(func, func.rfind("\n", 0, open_) + 1, open_)
    header = func[: func.index("{")].strip()
    return f"{header}  // {name} runs in this region:\n{textwrap.dedent(block)}" if block else func


def wrapper_source(source: str) -> str | None:
    """The Python wrapper `call(args)` that allocates, launches and frees (Listing 8.1); stax.cpu's
    checks the inputs and runs the rest in `call_unchecked(args)`, which comes with it."""
    found = [f for f in (_py_function(source, "call"), _py_function(source, "call_unchecked")) if f]
    return "\n\n\n".join(dict.fromkeys(found)) or None


def wrapper_lines(wrapper: str | None, name: str) -> list[str]:
    """The wrapper lines that launch kernel `name` (or the parallel region it runs in)."""
    if not wrapper:
        return []
    names = [name] + [r for r in (_region_of(wrapper, name),) if r]
    pat = re.compile(r"\b\w*(" + "|".join(map(re.escape, names)) + r")\b")
    return [ln.strip() for ln in wrapper.splitlines() if pat.search(ln) and "raise" not in ln]
