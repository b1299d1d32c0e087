"""Each model family's tiny twin side by side in one run on the CPU: build, load, warm latency of its default cell.

    python benchmarks/families.py                          # every twin (model=tiny, tiny-flux2, tiny-qwen-image, ...)
    python benchmarks/families.py --models tiny-wan --repeats 5

For each twin, its default cell (its model YAML's steps, guidance and size; cache, compile and the rest at
their defaults): the seconds to build it (random weights drawn and saved into a fresh folder), to load it
(`from_pretrained` and the rest of the runner's load), and its warm latency (median of --repeats calls after
one warm-up call, each timed as the runner times a sample), per image, or per clip and per frame for a
video family. Prints a Markdown table (docs/models.md). The figures are plumbing costs of toy sizes, not
the speed of the real models.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class Figures:
    model: str
    family: str
    steps: int
    size: str  # height x width (x frames)
    build_s: float
    load_s: float
    warm_s: float  # per pipeline call: one image, or one clip
    frames: Optional[int]  # a clip's frame count; None for an image family

    def row(self) -> str:
        per = f"{self.warm_s / self.frames * 1000:.1f} ms/frame" if self.frames else f"{self.warm_s * 1000:.0f} ms/image"
        clip = f"{self.warm_s:.2f} s/clip" if self.frames else "-"
        return (f"| `{self.model}` | {self.family} | {self.steps} | {self.size} | {self.build_s:.1f} | {self.load_s:.2f} | "
                f"{per} | {clip} |")


HEADER = ("| model | family | steps | size | build s | load s | warm latency | per clip |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")


def compose_job(model: str):
    """The `render.cell.Job` of `python -m render model=<model> device=cpu prompts.limit=1`: the twin's default cell."""
    from hydra import compose, initialize_config_dir

    import render
    import render.compose.schema  # noqa: F401  registers the schemas
    from render.cell import build_job

    with initialize_config_dir(config_dir=str(Path(render.__file__).resolve().parent / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"model={model}", "device=cpu", "prompts=smoke", "prompts.limit=1",
                                                       "render_anchor=false"])
    return build_job(cfg)


def measure(model: str, repeats: int) -> Figures:
    """Build, load and time one twin into the cache root $HYPERGRID_CACHE names (fresh: the build is timed)."""
    from render import axes
    from render.models.families import family, twins
    from render.run.loader import PipelineCache, configure
    from render.run.runner import timed_call

    start = time.perf_counter()
    twins()[model].ensure()
    build_s = time.perf_counter() - start
    job = compose_job(model)
    start = time.perf_counter()
    loaded = PipelineCache().get(job.cell.model, job.device, axes.load_options(job.cell))
    load_s = time.perf_counter() - start
    configure(loaded, job.cell, calibrate=lambda: None)
    prompt, seed = job.prompts[0].text, job.seeds[0]
    pixels, _ = timed_call(loaded, job.cell, job.device, prompt, seed)  # warm-up
    warm = statistics.median(timed_call(loaded, job.cell, job.device, prompt, seed)[1] for _ in range(repeats))
    clips = family(job.cell.model.family).clips
    frames = len(pixels) if clips else None
    size = f"{pixels.shape[-3]}x{pixels.shape[-2]}" + (f"x{frames}" if frames else "")
    return Figures(model, job.cell.model.family, job.cell.steps, size, build_s, load_s, warm, frames)


def main(argv: Optional[list[str]] = None) -> list[Figures]:
    from render.models.families import twins

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(twins()), help=f"comma-separated twins (default: all: {', '.join(twins())})")
    parser.add_argument("--repeats", type=int, default=3, help="warm calls per twin (the median is shown)")
    args = parser.parse_args(argv)
    models = args.models.split(",")
    unknown = [m for m in models if m not in twins()]
    if unknown:
        parser.error(f"--models {','.join(unknown)}: no such twin; valid: {', '.join(twins())}")
    from render.compose.introspect import quiet_libraries

    quiet_libraries()
    before = os.environ.get("HYPERGRID_CACHE")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HYPERGRID_CACHE"] = cache  # a fresh cache root: each twin is built here, and loaded from here
        try:
            return table(models, args.repeats)
        finally:
            if before is None:
                del os.environ["HYPERGRID_CACHE"]
            else:
                os.environ["HYPERGRID_CACHE"] = before


def table(models: list[str], repeats: int) -> list[Figures]:
    """Measure each twin in turn, printing its row as it comes."""
    import torch

    print(f"CPU ({torch.get_num_threads()} threads), each twin's default cell, one smoke prompt, "
          f"warm latency = median of {repeats} calls after one warm-up")
    print(HEADER, flush=True)
    rows = []
    for model in models:
        rows.append(measure(model, repeats))
        print(rows[-1].row(), flush=True)
    return rows


if __name__ == "__main__":
    main()
