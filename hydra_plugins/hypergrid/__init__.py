"""hypergrid's Hydra launchers: in-process (default), one job per GPU, SLURM."""
