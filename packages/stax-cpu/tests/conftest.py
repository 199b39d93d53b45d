import pytest
from stax.cpu import CpuConfig
from stax.cpu import isa as isa_mod
from stax.cpu.toolchain import find_cxx


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("stax-cpu-cache")


@pytest.fixture(scope="session")
def cfg(cache_dir):
    """Default config (the probed ISA) with a per-session cache (every test run compiles fresh)."""
    return CpuConfig(cache_dir=str(cache_dir))


@pytest.fixture(scope="session", params=["avx512", "avx2", "none"])
def level_cfg(request, cache_dir):
    """The config forced to each ISA level; levels this machine lacks are skipped."""
    if request.param not in isa_mod.supported_levels(find_cxx(), cache_dir):
        pytest.skip(f"{request.param} not supported here")
    return CpuConfig(cache_dir=str(cache_dir), isa=request.param)
