"""Scoring run directories into the index: runs and samples, then per-sample and per-set metrics, and the
index rebuilt from scratch (`assess score --rebuild`)."""
