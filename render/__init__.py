"""hypergrid's renderer: compose a cell with Hydra, render its samples into a run directory."""

__version__ = "0.1.0"
