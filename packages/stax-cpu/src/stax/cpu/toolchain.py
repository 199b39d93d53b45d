"""C++ toolchain: find the compiler, build shared libraries in parallel, cache them on disk.

Cache entries live in <cache>/cpu/<key[:2]>/<key>.so, keyed by sha256 of (compiler
identity, flags, source). Writes are atomic (temp file + os.replace); a sidecar
<key>.so.sha256 holds the library's own checksum, so a truncated or corrupt entry
(or one that fails to dlopen) is detected and rebuilt.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("stax.cpu")

BASE_FLAGS = ("-shared", "-fPIC", "-fopenmp", "-ffp-contract=off", "-fno-math-errno", "-fwrapv",
              "-fno-exceptions", "-fno-rtti", "-std=c++17", "-w")


class CompilerNotFoundError(RuntimeError):
    """No C++ compiler: set $CXX or install g++."""


class CompileError(RuntimeError):
    """The C++ compiler rejected generated code (a Stax bug): carries the source path and log."""


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
def compiler_identity(cxx: str) -> str:
    """`cxx --version` plus the CPU model: part of every cache key (-march=native code is CPU-specific)."""
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError as e:
        raise CompilerNotFoundError(f"cannot run C++ compiler {cxx!r}: {e}") from None
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
    return out.strip() + "\n" + cpu


def cache_key(cxx: str, flags: tuple, source: str) -> str:
    h = hashlib.sha256()
    for part in (compiler_identity(cxx), " ".join(flags), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


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


def _compile(cxx: str, flags: tuple, source: str, so: Path) -> None:
    so.parent.mkdir(parents=True, exist_ok=True)
    cpp = so.with_suffix(".cpp")
    _atomic_write(cpp, source.encode())
    fd, tmp = tempfile.mkstemp(dir=so.parent, prefix=so.name + ".", suffix=".tmp.so")
    os.close(fd)
    cmd = [cxx, *flags, str(cpp), "-o", tmp]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise CompileError(f"C++ compilation failed ({' '.join(cmd)}):\n{res.stderr[-4000:]}")
        digest = _sha256_file(Path(tmp))
        _atomic_write(so.with_suffix(".so.sha256"), digest.encode())
        os.replace(tmp, so)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build(sources: list[str], cxx: str, flags: tuple, cache_dir: Path, workers: int) -> list[Path]:
    """Shared libraries for `sources` (cache hits reused; misses compiled in parallel)."""
    paths = []
    for src in sources:
        key = cache_key(cxx, flags, src)
        paths.append(cache_dir / "cpu" / key[:2] / f"{key}.so")
    todo = {p: s for p, s in zip(paths, sources) if not (p.exists() and _valid(p))}
    if todo:
        log.info("compiling %d C++ unit(s) (%d cached)", len(todo), len(paths) - len(todo))
        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            list(pool.map(lambda item: _compile(cxx, flags, item[1], item[0]), todo.items()))
    return paths


def load(path: Path, source: str, cxx: str, flags: tuple) -> ctypes.CDLL:
    """dlopen a cached library; a corrupt entry (checksum or dlopen failure) is rebuilt once."""
    try:
        if not _valid(path):
            raise OSError("checksum mismatch")
        return ctypes.CDLL(str(path))
    except OSError as e:
        log.warning("cache entry %s is corrupt (%s); rebuilding", path, e)
        for p in (path, path.with_suffix(".so.sha256")):
            try:
                p.unlink()
            except OSError:
                pass
        _compile(cxx, flags, source, path)
        return ctypes.CDLL(str(path))
