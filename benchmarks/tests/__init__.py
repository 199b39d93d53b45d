"""Smoke tests of the benchmark harness (a package, so pytest puts the repository root on sys.path)."""
