"""hypergrid's Hydra plugins: the sweeper with preflight, the launchers (in-process, one job per GPU, SLURM, Ray), and
the search path plugin that adds the working directory's conf/."""
