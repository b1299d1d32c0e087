"""The run of a cell: preflight, the pipelines kept loaded, the runner that renders samples into a run directory
and measures them, and what a run needs around it (signals, ranks, progress, provenance, live metrics)."""
