"""Hydra's basic sweeper with a preflight: every cell is composed and checked before the sweep
folder exists, whatever launcher then runs the cells."""

from __future__ import annotations

from typing import Any, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from hydra_plugins.hypergrid import sweep


class HypergridSweeper(BasicSweeper):
    def __init__(self, max_batch_size: Optional[int] = None, params: Optional[dict] = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)

    def sweep(self, arguments: List[str]) -> Any:
        assert self.config is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides([*self._parse_config(), *arguments])
        job_overrides = [job for batch in self.split_arguments(overrides, None) for job in batch]
        configs = sweep.job_configs(self.hydra_context, self.config, job_overrides, 0)
        sweep.preflight_sweep(job_overrides, configs)  # exits 2, listing every bad cell, before any folder exists
        return super().sweep(arguments)
