"""Why (not) fused: for two nodes of a compiled graph, were they fused, and which rule refused it.

    python -m stax.frontend.why stax_report/ exp sum_1
    python -m stax.frontend.why stax_debug/inference_ad85c9084775 buf1 buf2

Reads a saved report page (config.report / STAX_REPORT=1), a debug dump's
report.json (config.debug / STAX_DEBUG=1), or a directory holding any of them.
A node is named by its IR buffer (`buf3`), its SchedulerNode (`op2`), or the ATen
node it came from (`sum_1`, through ComputedBuffer/ExternKernel origins; an ATen
node with no buffer of its own was inlined into its users' buffers). The answer
comes from Schedule.fusion_log: the last rejection of a pair holding the two
nodes names the rule (iteration spaces, index distance, cycle, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

from .report import load
from .report.data import group_members, relation

# Reason prefix (as stax.sched.can_fuse / fusion write it) -> the rule of §7.2-7.3 it applies.
RULES: tuple[tuple[str, str], ...] = (
    ("incompatible iteration spaces", "Def 7.2: iteration spaces must be compatible (CPU: outer loops agree)"),
    ("index mismatch", "Prop 7.2/7.3: a vertical read must be at the producer's write index"),
    ("would create a cycle", "Prop 7.1: fusing would create a cycle in the kernel graph"),
    ("shared bytes", "Algorithm 7.1: too few shared bytes to be worth fusing"),
    ("peak memory", "§7.3: fusing would extend lifetimes and raise peak memory"),
    ("too many nodes", "§7.3: at most 128 nodes per fused kernel"),
    ("too many buffers", "§7.3: at most 32 buffers per fused kernel"),
    ("extern kernels", "§7.3: extern (library) kernels are never fused"),
    ("scans are not fused", "§7.7: the scan axis carries a dependence"),
    ("different devices", "§7.3: nodes on different devices/streams"),
    ("needs the finished reduction", "§7.3: a reduction that needs another's finished result"),
)


# Node kinds the scheduler never pairs (they get no fusion-log record): kind -> why.
NEVER_FUSED = {
    "extern": "an extern (library) kernel, and extern kernels are never fused (§7.3)",
    "fallback": "an ATen fallback kernel, and extern kernels are never fused (§7.3)",
    "scan": "a scan, and scans are not fused: the scan axis carries a dependence (§7.7)",
}


def rule_of(reason: str) -> str:
    for prefix, rule in RULES:
        if prefix in reason:
            return rule
    return reason


@dataclass
class Answer:
    graph: str
    a: str
    b: str
    fused: bool | None  # None: could not tell (unknown name, input, dropped node)
    text: str
    records: list = field(default_factory=list)  # fusion-log entries about the pair

    def __str__(self) -> str:
        return f"[{self.graph}] {self.text}"


def resolve(data: dict, name: str) -> tuple[list[str], str]:
    """IR buffers a name stands for, and how it was found ('' when it is a buffer itself)."""
    nodes = data.get("nodes", [])
    inputs = {i["name"] for i in data.get("inputs", [])}
    for n in nodes:
        if name in (n["buffer"], n["op"]):
            return [n["buffer"]], ""
    if name in inputs:
        return [name], ""
    direct = [n["buffer"] for n in nodes if name in n["origins"]]
    if direct:
        return direct, ""
    inlined = data.get("inlined", {}).get(name)
    if inlined:
        return list(inlined), f"ATen node {name} (no buffer of its own: inlined into {', '.join(inlined)})"
    return [], ""


def _label(data: dict, buf: str) -> str:
    for n in data.get("nodes", []):
        if n["buffer"] == buf:
            origins = f", ATen {'/'.join(n['origins'])}" if n["origins"] else ""
            return f"{buf} ({n['op']}{origins})"
    return buf


def _pair_records(data: dict, op_a: str, op_b: str) -> list[dict]:
    out = []
    for r in data.get("fusion_log", []):
        ma, mb = set(group_members(r["a"])), set(group_members(r["b"]))
        if (op_a in ma and op_b in mb) or (op_b in ma and op_a in mb):
            out.append(r)
    return out


def _explain_pair(data: dict, x: str, y: str) -> tuple[bool | None, str, list]:
    node = {n["buffer"]: n for n in data.get("nodes", [])}
    lx, ly = _label(data, x), _label(data, y)
    if x == y:
        return True, f"{lx} is one buffer: both names are computed in the same node", []
    for b in (x, y):
        if b not in node:
            return None, f"{_label(data, b)} is a graph input, not a computed node: nothing to fuse", []
        if node[b]["kernel"] is None:
            return None, f"{_label(data, b)} was dropped by the scheduler (nobody uses it)", []
    nx, ny = node[x], node[y]
    records = _pair_records(data, nx["op"], ny["op"])
    rel = relation([x], [y], data.get("nodes", []))
    if nx["kernel"] == ny["kernel"]:
        how = next((r for r in records if r["fused"]), None)
        k = next(k for k in data.get("kernels", []) if k["name"] == nx["kernel"])
        detail = f" in round {how['round']} ({how['reason']}, {how['a']} + {how['b']})" if how else ""
        return True, (f"{lx} and {ly} were fused{detail}: both run in {k['name']} "
                      f"({k['node_type']}, {k['kind']})"), records
    where = f"{lx} runs in {nx['kernel']}, {ly} in {ny['kernel']}"
    rejected = [r for r in records if not r["fused"]]
    if rejected:
        last = rejected[-1]
        return False, (f"{rel} fusion of {lx} and {ly} was rejected in round {last['round']} "
                       f"({last['a']} + {last['b']}): {last['reason']} — rule: {rule_of(last['reason'])}. "
                       f"{where}"), records
    never = [(n, NEVER_FUSED[n["kind"]]) for n in (nx, ny) if n["kind"] in NEVER_FUSED]
    if never:
        n, why_not = never[0]
        return False, (f"{lx} and {ly} were not fused: {_label(data, n['buffer'])} is {why_not} "
                       f"(not a fusion candidate at all). {where}"), records
    shared = (set(nx["reads"]) | {x}) & (set(ny["reads"]) | {y})
    if not shared:
        return False, (f"{lx} and {ly} were never a candidate pair: they share no buffer "
                       f"(Algorithm 7.1 only pairs nodes that read or write a common buffer). {where}"), records
    return False, (f"{lx} and {ly} share {', '.join(sorted(shared))} but no decision on the pair was logged: "
                   f"each was fused into another group first and the groups were not paired later. {where}"), records


def why(data: dict, a: str, b: str) -> Answer:
    """Were `a` and `b` fused in this graph's schedule, and if not, why."""
    graph = data.get("ident", data.get("kind", "graph"))
    ra, how_a = resolve(data, a)
    rb, how_b = resolve(data, b)
    for name, found in ((a, ra), (b, rb)):
        if not found:
            known = sorted({n["buffer"] for n in data.get("nodes", [])} | {n["op"] for n in data.get("nodes", [])}
                           | {o for n in data.get("nodes", []) for o in n["origins"]})
            return Answer(graph, a, b, None, f"unknown node {name!r}; known names: {', '.join(known)}")
    if "fusion_log" not in data:
        return Answer(graph, a, b, None, "this graph has no schedule (it failed to compile or has no kernels)")
    answers = [(x, y, *_explain_pair(data, x, y)) for x in ra for y in rb]
    notes = [h for h in (how_a, how_b) if h]
    prefix = ("; ".join(notes) + ". ") if notes else ""
    verdicts = {f for _, _, f, _, _ in answers}
    fused = True if verdicts == {True} else False if verdicts == {False} else None  # None: mixed / unknown
    lines = [t for _, _, _, t, _ in answers]
    records = [r for *_, recs in answers for r in recs]
    return Answer(graph, a, b, fused, prefix + " | ".join(dict.fromkeys(lines)), records)


def find_reports(path: str) -> list[tuple[str, dict]]:
    """(file, data) for the report pages / report.json files at `path` (a file or a directory tree)."""
    if os.path.isfile(path):
        return [(path, load(path))]
    found = []
    for root, _, files in sorted(os.walk(path)):
        for f in sorted(files):
            if (f.endswith(".html") and f != "index.html") or f == "report.json":
                p = os.path.join(root, f)
                try:
                    data = load(p)
                except (ValueError, json.JSONDecodeError):
                    continue
                if f == "report.json":
                    data.setdefault("ident", os.path.basename(root))
                found.append((p, data))
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stax.frontend.why", description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="a report page, a report.json, or a directory of them (report or debug dir)")
    ap.add_argument("a", help="IR buffer (buf1), SchedulerNode (op0) or ATen node name (exp)")
    ap.add_argument("b")
    ap.add_argument("--graph", help="only the graph whose report name contains this (e.g. forward)")
    ap.add_argument("--json", action="store_true", help="print the answers as JSON")
    args = ap.parse_args(argv)
    if not os.path.exists(args.path):
        print(f"why: {args.path} does not exist", file=sys.stderr)
        return 2
    reports = [(p, d) for p, d in find_reports(args.path) if not args.graph or args.graph in d.get("ident", p)]
    if not reports:
        print(f"why: no Stax report or report.json under {args.path}", file=sys.stderr)
        return 2
    answers = [why(d, args.a, args.b) for _, d in reports]
    known = [x for x in answers if not x.text.startswith("unknown node")]
    shown = known or answers[:1]
    if args.json:
        print(json.dumps([{"graph": x.graph, "fused": x.fused, "text": x.text, "records": x.records} for x in shown],
                         indent=1))
    else:
        for x in shown:
            print(x)
    return 0 if known else 2


if __name__ == "__main__":
    sys.exit(main())
