import os

import pytest
from cpu_harness import supported_levels
from stax.cpu import CpuConfig

# The generated code depends on the thread count P (Algorithm 8.1: parallel depth, split full reductions,
# omp single for serial nests): the shared configs pin P = 2 so the structure the tests grep for is the
# same on a 1-core CI runner and a 64-core workstation (2 threads run correctly on any core count).
THREADS = 2


def pytest_configure(config):
    config.addinivalue_line("markers", "every_level: forces each ISA level itself (ignores $STAX_CPU_ISA); "
                                       "tox's forced-ISA passes deselect it with -m 'not every_level'")


def pytest_collection_modifyitems(items):
    """Mark the tests that pick their ISA level themselves (level_cfg, or a `level` parameter)."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "level_cfg" in getattr(item, "fixturenames", ()) or "level" in params:
            item.add_marker(pytest.mark.every_level)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("stax-cpu-cache")


@pytest.fixture(scope="session", autouse=True)
def _forced_level_supported(cache_dir):
    """STAX_CPU_ISA=avx2 on a CPU without AVX2 skips the run (CI forces avx2 and none on any runner)."""
    forced = os.environ.get("STAX_CPU_ISA", "").strip().lower()
    if forced and forced in ("avx512", "avx2", "none") and forced not in supported_levels(cache_dir):
        pytest.skip(f"STAX_CPU_ISA={forced}: this machine does not support it")


@pytest.fixture(scope="session")
def cfg(cache_dir):
    """Default config (the probed ISA, or $STAX_CPU_ISA) with a per-session cache (every test run compiles fresh)."""
    return CpuConfig(cache_dir=str(cache_dir), num_threads=THREADS)


@pytest.fixture(scope="session", params=["avx512", "avx2", "none"])
def level_cfg(request, cache_dir):
    """The config forced to each ISA level; levels this machine lacks are skipped."""
    if request.param not in supported_levels(cache_dir):
        pytest.skip(f"{request.param} not supported here")
    return CpuConfig(cache_dir=str(cache_dir), isa=request.param, num_threads=THREADS)
