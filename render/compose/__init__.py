"""The composition of a cell: Hydra's schemas and config paths, the cell's spec, its registries,
the checks a composed config must pass, and the prompt splits it names."""
