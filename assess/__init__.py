"""assess: score run directories into a sqlite index, show status, write a visual report.

The library lives in subpackages by concern (`index`, `scoring`, `metrics`, `statistics`, `verdicts`, `report`,
`climb`, `export`: docs/architecture.md); `assess.cli` only parses arguments and calls them. Heavy imports (torch,
torchmetrics, transformers, scipy, matplotlib) happen inside the functions that need them.
"""
