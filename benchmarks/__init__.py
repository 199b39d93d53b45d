"""Stax benchmarks: `python -m benchmarks --suite micro --device cpu` (see README.md).

The `harness/` measures (interleaved timing, bandwidth, memory, compile time, output),
`workloads/` defines what is measured; ir/, sched/, cpu/, gpu/ hold per-package
benchmark scripts.
"""
