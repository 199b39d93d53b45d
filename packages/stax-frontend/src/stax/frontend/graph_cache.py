"""The whole-graph cache: a compiled graph's plain data on disk, keyed by graph_key.

An entry holds what a second process needs to run the graph without lowering, scheduling or
generating code again: the CallSpec (the runtime wrapper's data), the generated code (stax.cpu's
CpuArtifact: C++ units, wrapper source, the .so files coming from stax.cpu's own cache, or g++ if
evicted; or build.GpuBuild: stax.gpu's GpuArtifact, Triton and wrapper source with launch configs,
and the GpuConfig overrides it was built with), the extern kernels by name and the metrics of the
compile. Only plain data and stax's own frozen
dataclasses are stored: an entry is checked to unpickle with `_PlainUnpickler` before it is
written, and nothing else is ever unpickled.

File: <dir>/<key[:2]>/<key>.entry (dir: config.graph_cache_dir, default <$STAX_CACHE_DIR>/graphs)
= MAGIC + sha256(payload) hex + "\\n" + payload.
Written to a temporary file and os.replace'd (two processes writing one key: both succeed, one
file wins whole). A truncated or corrupt entry (magic, checksum, unpickling, another key inside)
is never loaded: it is logged, counted (metrics.graph_cache_corrupt), removed and rebuilt. A
directory that cannot be written is still read; nothing is stored, with one warning per process
and directory (stax.cpu's own warning about its .so cache folded in).

Process-wide state: `_UNWRITABLE`, the directories already warned about.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import pickle
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .graph_key import Uncacheable

log = logging.getLogger("stax.frontend.cache")

MAGIC = b"STAXGRAPH1\n"
_DIGEST = 64  # hex sha256


class StaxCacheWarning(RuntimeWarning):
    """The whole-graph cache cannot write its directory: graphs compile, uncached."""


@dataclass(frozen=True)
class GraphEntry:
    """One compiled graph as stored. `artifact` None with `no_kernels` set: a graph with nothing to
    compute (its module is NoKernels(inputs, outputs))."""

    key: str
    graph_hash: str  # the IR's content hash (short), as the report and the debug dump name the graph
    spec: object  # call_spec.CallSpec
    artifact: object  # stax.cpu.CpuArtifact | build.GpuBuild | None
    no_kernels: tuple | None  # (IR input names, IR output names)
    externs: tuple  # aten_runtime.extern_kinds: (kernel, fallback?) pairs
    counts: tuple  # (metrics field, value) recorded for the compile: the same on a hit


_SAFE_BUILTINS = frozenset({"frozenset", "set", "complex", "slice", "range"})


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles builtins and stax's own classes only: an entry can rebuild no other object."""

    def find_class(self, module: str, name: str):
        if module == "builtins" and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if module.startswith("stax."):
            cls = super().find_class(module, name)
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                return cls
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def _plain_loads(payload: bytes):
    return _PlainUnpickler(io.BytesIO(payload)).load()


_UNWRITABLE: set[str] = set()
_LOCK = threading.Lock()


class GraphCache:
    """The entries under `directory`; `writable` is False when they can only be read. `cpu_root` is
    stax.cpu's cache directory (its .so files), named in the warning when it is unusable too (None:
    a GPU graph's cache); `note()`, more for that warning (where stax.gpu writes its modules)."""

    def __init__(self, directory: Path, cpu_root: Path | None, note: Callable[[], str] | None = None):
        self.dir = Path(directory)
        self.cpu_root = Path(cpu_root) if cpu_root is not None else None
        self.note = note
        self.writable = self._check_writable()

    def _check_writable(self) -> bool:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".write-check-")
            os.close(fd)
            os.unlink(tmp)
            return True
        except OSError as e:
            self._warn_unwritable(e)
            return False

    def _warn_unwritable(self, e: OSError) -> None:
        import stax.cpu.toolchain

        with _LOCK:
            if str(self.dir) in _UNWRITABLE:
                return
            _UNWRITABLE.add(str(self.dir))
        also = ""
        if self.cpu_root is not None:
            cpu = stax.cpu.toolchain.open_cache(self.cpu_root, warn=False)  # stax.cpu's fallback, told here once
            also = (f"; C++ libraries are compiled into the private directory {cpu.write} (removed at exit)"
                    if cpu.write != self.cpu_root / "cpu" else "")
        if self.note is not None:
            also += self.note()
        warnings.warn(f"stax: cache directory {self.dir} cannot be written ({e}): compiled graphs are not "
                      f"stored (entries already there are still read){also}. Set $STAX_CACHE_DIR to a writable "
                      "directory, or turn the whole-graph cache off (config.graph_cache=False, STAX_GRAPH_CACHE=0).",
                      StaxCacheWarning, stacklevel=2)

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.entry"

    def load(self, key: str) -> GraphEntry | None:
        """The entry of `key`, or None (absent). A corrupt entry raises CorruptEntry (after removing it)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise CorruptEntry(path, f"unreadable: {e}") from None
        why = _check(data)
        if why is None:
            try:
                entry = _plain_loads(data[len(MAGIC) + _DIGEST + 1:])
            except Exception as e:  # noqa: BLE001 - any failure to rebuild it means the entry is bad
                why = f"does not unpickle as plain data ({type(e).__name__}: {e})"
            else:
                if not isinstance(entry, GraphEntry) or entry.key != key:
                    why = "holds another key's entry"
                else:
                    return entry
        self.remove(path)
        raise CorruptEntry(path, why)

    def store(self, entry: GraphEntry) -> bool:
        """Write `entry` atomically; False (logged) when the directory is read-only. Raises Uncacheable
        when the entry holds something other than plain data."""
        try:
            payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as e:  # a callable, a lambda, a lock...
            raise Uncacheable(f"the compiled graph does not pickle ({type(e).__name__}: {e})") from None
        try:
            _plain_loads(payload)
        except pickle.UnpicklingError as e:
            raise Uncacheable(f"the compiled graph holds {e}") from None
        if not self.writable:
            return False
        path = self.path(entry.key)
        data = MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True

    @staticmethod
    def remove(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass  # read-only: it stays, and is detected (never loaded) again next time


class CorruptEntry(Exception):
    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


def _check(data: bytes) -> str | None:
    """None when `data` is a whole entry (magic, checksum of the payload); else what is wrong."""
    if not data.startswith(MAGIC):
        return "bad header (not a stax graph entry, or truncated)"
    head = len(MAGIC)
    digest = data[head:head + _DIGEST]
    if len(data) < head + _DIGEST + 1 or data[head + _DIGEST:head + _DIGEST + 1] != b"\n":
        return "truncated header"
    if hashlib.sha256(data[head + _DIGEST + 1:]).hexdigest().encode() != digest:
        return "checksum mismatch (truncated or corrupted)"
    return None
