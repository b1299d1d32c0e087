"""assess: score run directories into a sqlite index, show status, write a visual report.

The library lives in plain modules (`rundir`, `index`, `score`, `metrics`, `stats`, `status`,
`report`); `assess.cli` only parses arguments and calls them. Heavy imports (torch,
torchmetrics, transformers, scipy, matplotlib) happen inside the functions that need them.
"""
