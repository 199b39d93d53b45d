"""C++ toolchain: find the compiler, build shared libraries in parallel, cache them on disk.

Cache entries live in <cache>/cpu/<key[:2]>/<key>.so, keyed by sha256 of (compiler
identity, flags, source). Writes are atomic (temp file + os.replace); a sidecar
<key>.so.sha256 holds the library's own checksum, so a truncated or corrupt entry
(or one that fails to dlopen) is detected and rebuilt.

Without a compiler the key cannot be computed, so every entry is also listed under a key
that needs none: an empty marker <cache>/cpu/any/<skey[:2]>/<skey>/<key>, skey = sha256(CPU
identity, flags, source). A warm cache then still loads (`find_any`); only a miss raises
CompilerNotFoundError. A cache directory that cannot be written is still read, and new
entries go to a private temporary directory removed at exit (`open_cache`, one warning).

Every subprocess (compile, `--version`, the ISA probe) runs through `run_tool`: in its own
process group, killed as a whole and reaped when its timeout expires.

Process-wide state (caches of facts that do not change while the process runs, and what
must hold for its lifetime): `compiler_identity` / `cpu_identity` results, and `_PRIVATE`,
the private directory standing in for each unusable cache directory (so the warning is given
once per directory and the directory is removed by one atexit hook).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .config import CpuConfig, resolve_compile_timeout, resolve_probe_timeout

log = logging.getLogger("stax.cpu")

BASE_FLAGS = ("-shared", "-fPIC", "-fopenmp", "-ffp-contract=off", "-fno-math-errno", "-fwrapv",
              "-fno-exceptions", "-fno-rtti", "-std=c++17", "-w")

COMPILE_SETTING = "CpuConfig.compile_timeout / $STAX_CPU_COMPILE_TIMEOUT"
PROBE_SETTING = "CpuConfig.probe_timeout / $STAX_CPU_PROBE_TIMEOUT"


class CompilerNotFoundError(RuntimeError):
    """No C++ compiler: set $CXX or install g++."""


class CompileError(RuntimeError):
    """The C++ compiler rejected generated code (a Stax bug): carries the source path and log."""


class ToolchainTimeoutError(RuntimeError):
    """A compiler / probe subprocess ran past its timeout; it was killed (with its children)."""


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (g++ -> cc1plus, as, ld) and reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)  # the pipes close once the group is dead
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds a pipe: do not wait for it
        proc.kill()
        proc.wait()
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def run_tool(cmd: list[str], timeout: float, setting: str = COMPILE_SETTING) -> subprocess.CompletedProcess:
    """Run `cmd` (output captured as text) in a new session; past `timeout` seconds kill its process group
    and raise ToolchainTimeoutError naming the command, the timeout and the setting that controls it."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ToolchainTimeoutError(
            f"{' '.join(cmd)!r} did not finish within {timeout:g} s and was killed (raise {setting})"
        ) from None
    except BaseException:  # KeyboardInterrupt: the child is in its own session and would live on
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def check_program(tc: Toolchain, source: str, flags, prefix: str) -> int | None:
    """Build `source` with `flags` in a fresh directory (name prefix `prefix`) and run it: its exit code, or None
    when it does not build or start (the probes' answer then: no). Timeouts: the probe timeout."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        exe, cpp = Path(d) / "check", Path(d) / "check.cpp"
        cpp.write_text(source)
        if run_tool([tc.require(), *flags, str(cpp), "-o", str(exe)], tc.probe_timeout, PROBE_SETTING).returncode:
            return None
        try:
            return run_tool([str(exe)], tc.probe_timeout, PROBE_SETTING).returncode
        except OSError:
            return None


def find_cxx(explicit: str | None = None) -> str:
    """The C++ compiler: `explicit`, else $CXX, else g++ / c++ / clang++ on PATH."""
    for cand in (explicit, os.environ.get("CXX")):
        if cand:
            path = shutil.which(cand)
            if path is None:
                raise CompilerNotFoundError(f"C++ compiler {cand!r} (from config/$CXX) was not found on PATH")
            return path
    for cand in ("g++", "c++", "clang++"):
        path = shutil.which(cand)
        if path:
            return path
    raise CompilerNotFoundError(
        "no C++ compiler found: stax.cpu needs g++ (or clang++) with OpenMP; install it or set $CXX"
    )


@functools.cache
def cpu_identity() -> str:
    """The CPU model and flags (-march=native code is CPU-specific): part of every cache key."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    cpu += line
                if line.strip() == "":
                    break
    except OSError:
        pass
    return cpu


@functools.cache
def compiler_identity(cxx: str, timeout: float = 30.0) -> str:
    """`cxx --version` plus the CPU identity: part of every cache key."""
    try:
        out = run_tool([cxx, "--version"], timeout, PROBE_SETTING).stdout
    except OSError as e:
        raise CompilerNotFoundError(f"cannot run C++ compiler {cxx!r}: {e}") from None
    return out.strip() + "\n" + cpu_identity()


@dataclass(frozen=True)
class Toolchain:
    """The compiler as resolved for one compile: `cxx` is None when there is none (then only cached
    libraries can be used, and `missing` says why), plus the subprocess timeouts."""

    cxx: str | None
    identity: str | None  # compiler_identity(cxx): part of every cache key
    missing: str
    compile_timeout: float
    probe_timeout: float

    @classmethod
    def from_config(cls, config: CpuConfig) -> Toolchain:
        ct, pt = resolve_compile_timeout(config), resolve_probe_timeout(config)
        try:
            cxx = find_cxx(config.cxx)
            identity = compiler_identity(cxx, pt)
        except CompilerNotFoundError as e:
            return cls(None, None, str(e), ct, pt)
        return cls(cxx, identity, "", ct, pt)

    def require(self) -> str:
        if self.cxx is None:
            raise CompilerNotFoundError(self.missing)
        return self.cxx


def cache_key(identity: str, flags: tuple, source: str) -> str:
    h = hashlib.sha256()
    for part in (identity, " ".join(flags), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def source_key(flags: tuple, source: str) -> str:
    """The key of the compiler-free index: CPU identity, flags, source (no compiler needed to compute it)."""
    return cache_key("any-compiler-v1\n" + cpu_identity(), flags, source)


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _valid(so: Path) -> bool:
    side = so.with_suffix(".so.sha256")
    try:
        return side.read_text().strip() == _sha256_file(so)
    except OSError:
        return False


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# ---- cache directories -------------------------------------------------------------------------

_PRIVATE: dict[str, Path] = {}  # unusable <cache>/cpu -> the private directory used instead (process-wide)
_PRIVATE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Cache:
    """Where entries are looked up (`read`, in order) and written (`write`): <cache>/cpu, or, when that
    cannot be written, a private temporary directory, with <cache>/cpu still read for warm entries."""

    read: tuple[Path, ...]
    write: Path

    def find(self, key: str) -> Path | None:
        """The valid library of `key` in any read directory."""
        for d in self.read:
            so = d / key[:2] / f"{key}.so"
            if so.exists() and _valid(so):
                return so
        return None

    def slot(self, key: str) -> Path:
        return self.write / key[:2] / f"{key}.so"

    def read_text(self, name: str) -> tuple[Path, str] | None:
        """(path, stripped text) of the small file `name`, the write directory's copy first (the newest)."""
        for d in (self.write, *(d for d in self.read if d != self.write)):
            try:
                return d / name, (d / name).read_text().strip()
            except OSError:
                continue
        return None

    def write_text(self, name: str, text: str) -> None:
        path = self.write / name
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, text.encode())


def _check_writable(cpu_dir: Path) -> None:
    """Raise OSError unless files can be created in `cpu_dir` (made if missing)."""
    cpu_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cpu_dir, prefix=".write-check-")
    os.close(fd)
    os.unlink(tmp)


def open_cache(cache_dir: Path, warn: bool = True) -> Cache:
    """The cache under `cache_dir`; if it cannot be written (not writable, read-only, a file in the way)
    compile into a private temporary directory instead, with one warning per process and directory:
    failing a compile because a cache cannot be written would lose the user's work for a speed-up.
    `warn=False`: the caller gives that warning itself (stax.frontend folds it into its own)."""
    cpu = Path(cache_dir) / "cpu"
    with _PRIVATE_LOCK:
        private = _PRIVATE.get(os.path.abspath(cpu))
        if private is None:
            try:
                _check_writable(cpu)
                return Cache((cpu,), cpu)
            except OSError as e:
                private = Path(tempfile.mkdtemp(prefix="stax-cpu-cache-"))
                atexit.register(shutil.rmtree, private, True)
                _PRIVATE[os.path.abspath(cpu)] = private
                if warn:
                    warnings.warn(
                        f"stax.cpu: cache directory {cpu} is not usable ({e}); compiling into the private "
                        f"directory {private} (removed at exit); entries already in {cpu} are still used. "
                        "Set $STAX_CACHE_DIR or CpuConfig.cache_dir to a writable directory.",
                        RuntimeWarning, stacklevel=3)
    return Cache((cpu, private), private)


def _index(cache: Cache, flags: tuple, source: str, key: str) -> None:
    """List `key` under the compiler-free key of (flags, source), so a warm cache loads without a compiler."""
    skey = source_key(flags, source)
    if any((d / "any" / skey[:2] / skey / key).exists() for d in cache.read):
        return
    marker = cache.write / "any" / skey[:2] / skey / key
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError as e:  # the index is an optimisation for compiler-less use; never fail a compile for it
        log.debug("cannot index %s: %s", marker, e)


def find_any(cache: Cache, flags: tuple, source: str) -> Path | None:
    """A valid library for (flags, source) on this CPU built by any compiler (the newest listed first)."""
    skey = source_key(flags, source)
    listed = []
    for d in cache.read:
        try:
            listed += [(m.stat().st_mtime, m.name) for m in (d / "any" / skey[:2] / skey).iterdir()]
        except OSError:
            continue
    for _, key in sorted(listed, reverse=True):
        so = cache.find(key)
        if so is not None:
            return so
    return None


# ---- build and load ----------------------------------------------------------------------------

def _compile(tc: Toolchain, flags: tuple, source: str, so: Path) -> None:
    so.parent.mkdir(parents=True, exist_ok=True)
    cpp = so.with_suffix(".cpp")
    _atomic_write(cpp, source.encode())
    fd, tmp = tempfile.mkstemp(dir=so.parent, prefix=so.name + ".", suffix=".tmp.so")
    os.close(fd)
    cmd = [tc.require(), *flags, str(cpp), "-o", tmp]
    try:
        res = run_tool(cmd, tc.compile_timeout, COMPILE_SETTING)
        if res.returncode != 0:
            raise CompileError(f"C++ compilation failed ({' '.join(cmd)}):\n{res.stderr[-4000:]}")
        digest = _sha256_file(Path(tmp))
        _atomic_write(so.with_suffix(".so.sha256"), digest.encode())
        os.replace(tmp, so)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build(sources: list[str], tc: Toolchain, flags: tuple, cache: Cache, workers: int) -> list[Path]:
    """Shared libraries for `sources` (cache hits reused; misses compiled in parallel). Without a compiler,
    every source must be cached (by any compiler identity) or this raises CompilerNotFoundError."""
    if tc.cxx is None:
        found = [find_any(cache, flags, src) for src in sources]
        missing = sum(p is None for p in found)
        if missing:
            raise CompilerNotFoundError(f"{tc.missing} ({missing} of {len(sources)} librar"
                                        f"{'y is' if missing == 1 else 'ies are'} not in the cache {cache.read[0]})")
        log.info("no C++ compiler (%s): %d librar%s loaded from the cache", tc.missing, len(found),
                 "y" if len(found) == 1 else "ies")
        return found  # type: ignore[return-value]
    keys = [cache_key(tc.identity, flags, src) for src in sources]
    found = [cache.find(key) for key in keys]
    todo = {cache.slot(key): src for key, src, p in zip(keys, sources, found) if p is None}
    if todo:
        log.info("compiling %d C++ unit(s) (%d cached)", len(todo), len(sources) - len(todo))
        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            list(pool.map(lambda item: _compile(tc, flags, item[1], item[0]), todo.items()))
    for key, src in zip(keys, sources):
        _index(cache, flags, src, key)
    return [p or cache.slot(key) for key, p in zip(keys, found)]


def load(path: Path, source: str, tc: Toolchain, flags: tuple, cache: Cache) -> ctypes.CDLL:
    """dlopen a cached library; a corrupt entry (checksum or dlopen failure) is rebuilt once."""
    try:
        if not _valid(path):
            raise OSError("checksum mismatch")
        return ctypes.CDLL(str(path))
    except OSError as e:
        if tc.cxx is None:
            raise CompilerNotFoundError(f"cache entry {path} is corrupt ({e}) and cannot be rebuilt: "
                                        f"{tc.missing}") from None
        log.warning("cache entry %s is corrupt (%s); rebuilding", path, e)
        for p in (path, path.with_suffix(".so.sha256")):
            try:
                p.unlink()
            except OSError:
                pass
        fresh = cache.slot(path.stem)  # in the write directory: `path` may be in a read-only one
        _compile(tc, flags, source, fresh)
        return ctypes.CDLL(str(fresh))
