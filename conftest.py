"""Shared pytest set-up for every package's tests (run from the repository root).

CI must not fail on a fresh random draw unrelated to the change under test, so tox selects the
derandomized "ci" Hypothesis profile (HYPOTHESIS_PROFILE=ci); a plain local pytest keeps exploring
new random inputs.
"""

import os

try:
    from hypothesis import settings
except ImportError:  # envs without hypothesis (lint) never import tests
    settings = None

if settings is not None:
    settings.register_profile("ci", derandomize=True, print_blob=True)
    profile = os.environ.get("HYPOTHESIS_PROFILE")
    if profile:
        settings.load_profile(profile)
