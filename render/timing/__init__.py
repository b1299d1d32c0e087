"""Timing that survives a noisy machine, built on the run: side-by-side sessions of contenders, the round a sweep
ends with, and sweeps rendered in interleaved rounds (a job's own measurement is render.run.measure)."""
