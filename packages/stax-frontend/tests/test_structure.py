"""The package's import structure (issue 22): no import circle among stax.frontend's modules, and
no import of a sibling module placed inside a function (the old way of dodging one)."""

from __future__ import annotations

import ast
from pathlib import Path

import stax.frontend

ROOT = Path(stax.frontend.__file__).parent
PACKAGE = "stax.frontend"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([PACKAGE, *parts])


def _resolve(module: str, is_package: bool, node: ast.ImportFrom, modules) -> list[str]:
    """Absolute names of the stax.frontend modules an ImportFrom names: `from . import views`
    names the module views, `from .views import expand` the module views."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith(PACKAGE):
        return []
    subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
    return subs or [target]


def _graph():
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set] = {m: set() for m in modules}
    nested: list[str] = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text())
        top = set(id(n) for n in tree.body)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                targets = [t for t in _resolve(mod, path.name == "__init__.py", node, modules) if t in modules]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name in modules]
            else:
                continue
            if not targets:
                continue
            if id(node) not in top and not _under_type_checking(tree, node):
                nested.append(f"{mod}: line {node.lineno}")
            edges[mod].update(t for t in targets if t != mod)
    return edges, nested


def _under_type_checking(tree, node) -> bool:
    for n in tree.body:
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test) and node in list(ast.walk(n)):
            return True
    return False


def _cycle(edges):
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_circle():
    edges, _ = _graph()
    cycle = _cycle(edges)
    assert cycle is None, " -> ".join(cycle)


def test_no_sibling_import_inside_a_function():
    _, nested = _graph()
    assert not nested, nested
