"""Every statistic hypergrid reports: cell-against-anchor comparisons and their intervals, a report's scope,
noise, parity with one GPU, lossless floors, side-by-side speed-ups, categories."""
