"""The fuzz loop: worker subprocesses run graphs under a per-graph timeout (a graph that does
not answer in time is a 'hang', a worker that dies a 'crash'), the parent shrinks each new
failure through the same workers, dedupes by (kind, ops of the shrunk graph) and writes
reproducers plus failures.jsonl / summary.json into the output directory.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from stax.frontend import register

from . import reproducer
from .execute import Outcome, run_index, run_program
from .generate import GenConfig
from .program import Program, Stats
from .resolve import resolve
from .shrink import shrink


@dataclass(frozen=True)
class Options:
    """One fuzz run (the CLI's flags)."""

    seed: int = 0
    count: int = 100
    workers: int = 1
    out: str = "fuzz_failures"
    time_limit: float | None = None  # seconds; no new graphs after this
    graph_timeout: float = 180.0
    shrink_budget: float = 240.0  # seconds per distinct failure
    shrink: bool = True
    gen: GenConfig = field(default_factory=GenConfig)
    verbose: bool = False


def _worker_main(conn, env: dict):
    """Worker loop: ('index', seed, i, gen) or ('program', json) -> ('start', json)*, ('done', json)."""
    os.environ.update(env)
    register()  # backend "stax" also when running from a source tree (no entry point)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg[0] == "index":
            _, seed, i, gen = msg
            out = run_index(seed, i, GenConfig(**gen), on_start=lambda p: conn.send(("start", p.to_json())))
        elif msg[0] in ("sleep", "exit", "retire"):  # the runner's own tests: a graph that hangs / kills / spoils
            conn.send(("start", ""))
            if msg[0] == "exit":
                os._exit(3)
            if msg[0] == "retire":
                conn.send(("retire", Outcome("pass").to_json()))
                return
            time.sleep(msg[1])
            out = Outcome("pass")
        else:
            program = Program.from_json(msg[1])
            conn.send(("start", msg[1]))
            out = run_program(program)
        if _cuda_context_lost():
            conn.send(("retire", out.to_json()))  # every later graph of this process would fail
            return
        conn.send(("done", out.to_json()))


def _cuda_context_lost() -> bool:
    """A device-side assert (eager's own, e.g. binary_cross_entropy on values outside [0, 1], or a
    kernel's) leaves the process's CUDA context unusable: the worker must be replaced."""
    if not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001
        return True


class Worker:
    """One subprocess; `call` returns its Outcome, or a hang / crash Outcome of the program it was on."""

    def __init__(self, env: dict, start_method: str = "spawn"):
        self._ctx = mp.get_context(start_method)  # spawn: a fresh interpreter (torch and OpenMP do not fork well)
        self._env = env
        self._spawn()

    def _spawn(self):
        os.environ.update(self._env)  # a spawned child imports torch before its target runs
        self.conn, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=_worker_main, args=(child, self._env), daemon=True)
        self.proc.start()
        child.close()

    def _restart(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self._spawn()

    def call(self, msg, timeout: float) -> Outcome:
        self.conn.send(msg)
        program = ""
        deadline = time.monotonic() + timeout + 60.0  # the first call also imports torch
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._restart()
                return _lost("hang", f"no answer within {timeout:.0f} s", program)
            try:
                ready = self.conn.poll(min(left, 1.0))
                if ready:
                    tag, payload = self.conn.recv()
                    if tag == "done":
                        return Outcome.from_json(payload)
                    if tag == "retire":
                        self._restart()
                        return Outcome.from_json(payload)
                    program, deadline = payload, time.monotonic() + timeout
                elif not self.proc.is_alive():
                    raise EOFError
            except (EOFError, OSError):
                self.proc.join(5)
                code = self.proc.exitcode
                self._restart()
                return _lost("crash", f"worker died (exit code {code})", program)

    def close(self):
        try:
            self.conn.send(None)
            self.proc.join(10)
        except (OSError, BrokenPipeError):
            pass
        if self.proc.is_alive():
            self.proc.kill()


def _lost(kind: str, detail: str, program_json: str) -> Outcome:
    labels = []
    if program_json:
        try:
            labels = resolve(Program.from_json(program_json)).labels
        except Exception:  # noqa: BLE001
            labels = []
    return Outcome("fail", kind=kind, detail=detail, labels=list(labels), program=program_json)


class Fuzzer:
    """Runs `Options.count` graphs from `Options.seed` on `Options.workers` workers."""

    def __init__(self, opts: Options, print_fn=print):
        self.o = opts
        self.out = Path(opts.out)
        self.stats = Stats()
        self.kinds: Counter = Counter()
        self.fallbacks: Counter = Counter()
        self.known: list[tuple[str, str, frozenset, str]] = []  # (kind, exc, labels, reproducer path)
        self.lock = threading.Lock()
        self.next = 0
        self.print = print_fn
        self.t0 = time.monotonic()
        self.env = {"STAX_CPU_COMPILE_TIMEOUT": os.environ.get("STAX_CPU_COMPILE_TIMEOUT", "60"),
                    "TORCH_CPP_LOG_LEVEL": os.environ.get("TORCH_CPP_LOG_LEVEL", "ERROR")}  # eager's warnings

    def _time_up(self) -> bool:
        return self.o.time_limit is not None and time.monotonic() - self.t0 > self.o.time_limit

    def run(self, replay: list | None = None) -> Stats:
        """Run the seeded graphs, or (`replay`: program JSON strings, e.g. from failures.jsonl)
        re-run those programs and shrink the ones that still fail."""
        self.out.mkdir(parents=True, exist_ok=True)
        self.jobs = [("index", i) for i in range(self.o.count)] if replay is None else [("program", p) for p in replay]
        threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(max(1, self.o.workers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._summary()
        return self.stats

    def _loop(self):
        w = Worker(self.env)
        try:
            while True:
                with self.lock:
                    if self.next >= len(self.jobs) or self._time_up():
                        return
                    i = self.next
                    self.next += 1
                kind, job = self.jobs[i]
                msg = ("index", self.o.seed, job, asdict(self.o.gen)) if kind == "index" else ("program", job)
                out = w.call(msg, self.o.graph_timeout)
                self._record(i, out, w)
        finally:
            w.close()

    def _record(self, i: int, out: Outcome, w: Worker):
        with self.lock:
            s = self.stats
            s.graphs += 1
            s.backward_graphs += out.backward
            s.stride_mismatches += out.stride_mismatches
            s.torch_differences += bool(out.note)
            if out.fallback_ops:
                s.graphs_with_fallbacks += 1
                self.fallbacks.update(out.fallback_ops)
            if out.status == "pass":
                s.passed += 1
                if out.note and self.o.verbose:
                    self.print(f"[{i}] note: {out.note[:300]}")
            elif out.status == "invalid":
                s.invalid += 1
                if self.o.verbose:
                    self.print(f"[{i}] invalid: {out.detail[:200]}")
            else:
                self.kinds[out.kind] += 1
            self._progress(i, out)
        if out.status == "fail":
            self._failure(i, out, w)

    def _progress(self, i, out):
        n = self.stats.graphs
        if out.status == "fail" or self.o.verbose or n % 10 == 0 or n == len(self.jobs):
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.kinds.items()) if v) or "none"
            mark = f" <- graph {i}: {out.kind}" if out.status == "fail" else ""
            self.print(f"[{n}/{len(self.jobs)} {time.monotonic() - self.t0:.0f}s] passed {self.stats.passed}, "
                       f"invalid {self.stats.invalid}, failures: {kinds}; "
                       f"reproducers {len(self.stats.reproducers)}{mark}")

    def _duplicate_of(self, out: Outcome) -> str | None:
        """A reproducer this failure probably repeats: same kind and its ops a superset of the
        reproducer's, or (errors) the same exception raised at the same place in Stax."""
        labels = set(out.labels)
        for kind, exc, known, path in self.known:
            if kind == out.kind and (known <= labels or (exc and exc == out.exc and "@" in exc)):
                return path
        return None

    def _failure(self, i: int, out: Outcome, w: Worker):
        if out.kind == "hang" and out.program and not self._confirm_hang(i, out, w):
            return
        with self.lock:
            dup = self._duplicate_of(out)
        self._log_failure(i, out, dup)
        if dup is not None:
            with self.lock:
                self.stats.duplicates += 1
            return
        program = Program.from_json(out.program) if out.program else None
        final = out
        if program is not None and self.o.shrink and not self._time_up():
            timeout = self.o.graph_timeout if out.kind != "hang" else min(self.o.graph_timeout, 120.0)

            def still_fails(p: Program) -> bool:
                got = w.call(("program", p.to_json()), timeout)
                ok = got.same_failure(out)
                if ok:
                    nonlocal final
                    final = got
                return ok

            program = shrink(program, still_fails, budget_s=self.o.shrink_budget)
            final.program = program.to_json()
            if not final.labels:
                final.labels = out.labels
        if program is None:
            return
        with self.lock:
            dup = self._duplicate_of(final)
            key = reproducer.signature_key(final.kind, final.labels)
            if dup is not None or any(key in p for p in self.stats.reproducers):
                self.stats.duplicates += 1
                return
        path = reproducer.write(self.out, program, final)
        with self.lock:
            self.known.append((final.kind, final.exc, frozenset(final.labels), str(path)))
            self.stats.reproducers.append(str(path))
        self.print(f"  -> {path}  ({len(final.labels)} ops: {', '.join(final.labels)})")

    def _confirm_hang(self, i: int, out: Outcome, w: Worker) -> bool:
        """A graph is a hang only if it also gets no answer in twice the time, alone on its worker:
        on a loaded machine a slow compile looks like one (and the shrinker would keep any slow
        candidate). One that answers counts as 'slow' and is not shrunk."""
        t0 = time.monotonic()
        again = w.call(("program", out.program), 2 * self.o.graph_timeout)
        if again.kind == "hang":
            return True
        with self.lock:
            self.kinds["hang"] -= 1
            self.kinds["slow"] += 1
        self.print(f"  graph {i}: not a hang, answered in {time.monotonic() - t0:.0f} s on a second try "
                   f"({again.status}{': ' + again.kind if again.kind else ''})")
        self._log_failure(i, dataclasses.replace(out, kind="slow"), None)
        return False

    def _log_failure(self, i, out, dup):
        rec = {"graph": i, "seed": self.o.seed, "kind": out.kind, "exc": out.exc, "detail": out.detail,
               "labels": out.labels, "duplicate_of": dup, "program": out.program}
        with self.lock, open(self.out / "failures.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")

    def _summary(self):
        s = self.stats
        s.failures = {k: v for k, v in sorted(self.kinds.items()) if v}
        s.fallback_ops = dict(self.fallbacks.most_common())
        elapsed = time.monotonic() - self.t0
        summary = {**asdict(s), "seed": self.o.seed, "seconds": round(elapsed, 1), "device": self.o.gen.device}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
        self.print("")
        self.print(f"graphs run {s.graphs} (backward {s.backward_graphs}), passed {s.passed}, invalid {s.invalid}, "
                   f"failed {sum(s.failures.values())} in {elapsed:.0f} s")
        for k, v in s.failures.items():
            self.print(f"  {k}: {v}")
        self.print(f"distinct reproducers written: {len(s.reproducers)} (duplicates {s.duplicates}) in {self.out}/")
        for p in s.reproducers:
            self.print(f"  {p}")
        self.print(f"info: {s.graphs_with_fallbacks} graphs ran ATen fallbacks "
                   f"({', '.join(f'{k} {v}' for k, v in list(s.fallback_ops.items())[:8])}); "
                   f"{s.stride_mismatches} outputs with strides other than eager's; "
                   f"{s.torch_differences} graphs differ from eager as torch's aot_eager does (not Stax's)")
