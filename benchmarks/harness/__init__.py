"""Benchmark harness: timing, bandwidth, memory, compile, output; the runner ties them together."""
