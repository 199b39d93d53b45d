"""Write a shrunk failure as a standalone script: the graph's source, its inputs, and a main
that compiles it with backend "stax" (strict), compares with eager using the fuzzer's
tolerances (`execute.check_case`) and raises while the bug is present."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

from .execute import Outcome, check_spec
from .program import Program
from .resolve import resolve
from .source import program_source

MAIN = '''

SEED = {seed}  # seeds the cotangents
DEVICE = {device!r}
CHECK = {spec!r}  # per output / input: error factor k, tolerance type, bit-exact or not


def main(device=DEVICE):
    """Eager vs torch.compile(fn, backend="stax", fullgraph=True) under strict config; raises on mismatch."""
    from stax.frontend.fuzz.execute import check_case  # registers backend "stax"

    outcome = check_case(globals(), CHECK, SEED, device, raise_errors=True)
    if outcome.status == "fail":
        raise AssertionError(f"{{outcome.kind}}: {{outcome.detail}}")
    print(f"{{outcome.status}}: stax agrees with eager (fallback ops: {{outcome.fallback_ops}})")


if __name__ == "__main__":
    main()
'''


def signature_key(kind: str, labels) -> str:
    """Dedupe key of a shrunk failure: its kind and the ops left in it."""
    return hashlib.sha1(f"{kind}|{'|'.join(labels)}".encode()).hexdigest()[:10]


def reproducer_text(program: Program, outcome: Outcome) -> str:
    c = resolve(program)
    detail = "\n".join(textwrap.wrap(outcome.detail.replace('"' * 3, "'" * 3), 100)) or "(no detail)"
    head = (f'"""Stax differential-fuzzer reproducer: {outcome.kind}'
            f'{" (" + outcome.exc + ")" if outcome.exc else ""}.\n\n'
            f"{detail}\n\nFound by `python -m stax.frontend.fuzz` ({program.origin}); shrunk to {len(c.labels)} op(s): "
            f"{', '.join(c.labels) or '(none)'}.\nForward{' and backward' if c.backward else ' only'}; "
            f"ATen fallbacks: {outcome.fallback_ops or 'none'}.\n"
            f"Run: python <this file>  (raises while the bug is present)\n"
            f"Program: {program.to_json()}\n"
            '"""\n')
    head = head.replace("\\", "\\\\")
    return head + program_source(c) + MAIN.format(seed=program.seed, device=program.device, spec=check_spec(c))


def write(out_dir: Path, program: Program, outcome: Outcome) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{outcome.kind}_{signature_key(outcome.kind, outcome.labels)}.py"
    path.write_text(reproducer_text(program, outcome))
    return path
