"""Run every stax-gpu test under TRITON_INTERPRET=1 on CPU tensors, unless
STAX_TEST_DEVICE=cuda asks for the real GPU (the H200 script sets it).

STAX_TEST_PERTURB=1 (CPU only) compares as on a GPU, after shifting each output by
simulated GPU deviations (see gpu_testlib's docstring and gpu_sim.py).

TRITON_INTERPRET must be set before triton is imported: triton.jit reads it at
decoration time, so it is set here, at conftest import, before any test module.
"""

import os
import tempfile

# STAX_TEST_AOT=1 (developer tool): compile each test's kernels for sm_90 instead of running them
if os.environ.get("STAX_TEST_DEVICE", "cpu") != "cuda" and os.environ.get("STAX_TEST_AOT") != "1":
    os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("STAX_CACHE_DIR", tempfile.mkdtemp(prefix="stax-gpu-tests-"))


def pytest_configure(config):
    # the interpreter evaluates masked-off lanes too (x/0 there is expected)
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:triton.*")
