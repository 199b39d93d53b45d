import pytest
from stax.cpu import CpuConfig


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("stax-cpu-cache")


@pytest.fixture(scope="session")
def cfg(cache_dir):
    """Default config with a per-session cache (every test run compiles fresh)."""
    return CpuConfig(cache_dir=str(cache_dir))
