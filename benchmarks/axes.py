"""The speed axes on model=shapes (CPU), side by side in one run, through the runner's own code.

    python benchmarks/axes.py [--prompts 8] [--steps 16] [--skip-cold]

For each option of compile / quant / offload / toggles that runs on this machine: the warm latency
ratio vs `none` (median over the samples after the cell's warm-up calls), the weights footprint
ratio (quantization, layerwise casting), fidelity to the anchor (PSNR, SSIM on the PNG pixels; the
shapes checker's fit) and, for compile, the compile time of a fresh process with an empty and with
a warm artefact cache (`<HYPERGRID_CACHE>/torch-compile`). Prints a Markdown table (docs/axes.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

OPTIONS: dict[str, list[str]] = {
    "none": [],
    "compile=regional": ["compile=regional"],
    "compile=full": ["compile=full"],
    "quant=int8wo": ["quant=int8wo"],
    "quant=int8dq": ["quant=int8dq"],
    "quant=fp8wo": ["quant=fp8wo"],
    "quant=quanto-int8": ["quant=quanto-int8"],
    "offload=group": ["offload=group"],
    "offload=layerwise": ["offload=layerwise"],
    "fuse_qkv": ["fuse_qkv=true"],
    "int8wo+regional": ["quant=int8wo", "compile=regional"],
}
COLD_WARM = ("compile=regional", "compile=full")  # compile time from an empty and from a warm artefact cache


def render_cell(pipelines: Any, job: Any, baseline: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """Configure the cell, make its warm-up calls, render its samples: images, warm latencies, compile figures.
    With a `baseline` (loaded pipeline, job) each sample is paired with a baseline sample rendered just before
    it, so the ratio compares latencies measured under the same machine load."""
    import io

    import numpy as np
    from PIL import Image

    from render import axes
    from render.axes.compile import CompileCounters
    from render.run.loader import configure
    from render.run.runner import render_sample

    loaded = pipelines.get(job.cell.model, job.device, axes.load_options(job.cell))
    configure(loaded, job.cell, calibrate=lambda: None)
    prompt, seed = job.prompts[0].text, job.seeds[0]
    before = CompileCounters.now()
    first = [render_sample(loaded, job, prompt, seed)[1][0] for _ in range(axes.default_warmups(job.cell))]
    compiled = CompileCounters.now().since(before)
    images, latencies, base = [], [], []
    for p in job.prompts:
        if baseline:
            base.append(render_sample(baseline[0], baseline[1], p.text, seed)[1][0])
        png, calls, _, _ = render_sample(loaded, job, p.text, seed)
        images.append(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")))
        latencies.append(calls[0])
    return {"images": images, "latency": statistics.median(latencies), "first_call": first[0],
            "ratio": statistics.median(latencies) / statistics.median(base) if base else 1.0,
            "compile_s": compiled.seconds, "weights": loaded.weights_bytes, "prompts": [p.text for p in job.prompts]}


def fidelity(images: list, reference: list) -> tuple[float, float]:
    import numpy as np
    import torch
    from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

    a, b = (torch.from_numpy(np.stack(x)).permute(0, 3, 1, 2).float() for x in (images, reference))
    if torch.equal(a, b):
        return float("inf"), 1.0
    psnr = peak_signal_noise_ratio(a, b, data_range=255.0, reduction="none", dim=(1, 2, 3)).mean()
    ssim = structural_similarity_index_measure(a, b, data_range=255.0)  # a tensor: no per-image maps asked for
    return float(psnr), float(ssim if isinstance(ssim, torch.Tensor) else ssim[0])


def shapes_fit(result: dict[str, Any]) -> float:
    from assess.metrics.tradeoff import Sample, score

    return score(Sample(p, 0, img, 0.0) for p, img in zip(result["prompts"], result["images"])).fit


def compile_probe(option: str, steps: int) -> None:
    """One fresh process: the compile time of `option`'s first call (run with a chosen HYPERGRID_CACHE)."""
    from assess.metrics.tradeoff import compose_job
    from render.run.loader import PipelineCache

    job = compose_job("prompts=dev", "prompts.limit=1", f"steps={steps}", *OPTIONS[option])
    result = render_cell(PipelineCache(), job)
    print(json.dumps({"compile_s": result["compile_s"], "first_call": result["first_call"]}))


def cold_and_warm(option: str, steps: int) -> tuple[float, float]:
    """Compile time with an empty artefact cache, then in a second process reusing it."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "HYPERGRID_CACHE": cache}
        env.pop("TORCHINDUCTOR_CACHE_DIR", None)
        times = []
        for _ in range(2):
            out = subprocess.run([sys.executable, __file__, "--probe", option, "--steps", str(steps)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            times.append(json.loads(out.strip().splitlines()[-1])["compile_s"])
        return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=8, help="dev prompts per cell (one seed)")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold/warm artefact-cache processes")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        compile_probe(args.probe, args.steps)
        return
    import torch

    from render.cell import anchor_job
    from assess.metrics.tradeoff import compose_job
    from render.run.loader import PipelineCache

    pipelines = PipelineCache()
    jobs = {name: compose_job("prompts=dev", f"prompts.limit={args.prompts}", f"steps={args.steps}", *o) for name, o in OPTIONS.items()}
    anchor = render_cell(pipelines, anchor_job(jobs["none"]))
    reference = PipelineCache()  # the plain pipeline, loaded apart: every cell's samples alternate with its samples
    baseline = reference.get(jobs["none"].cell.model, jobs["none"].device)
    render_cell(reference, jobs["none"])  # configured and warm
    print(f"model=shapes CPU ({torch.get_num_threads()} threads), {args.prompts} dev prompts, {args.steps} steps; "
          f"anchor {jobs['none'].anchor.steps} steps, fit {shapes_fit(anchor):.3f}")
    print("| option | warm latency ratio vs none (ms) | compile s (first call) | compile s cold / warm cache | weights ratio | PSNR vs anchor | SSIM vs anchor | shapes fit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    base = None  # the plain cell: the weights reference
    for name, job in jobs.items():
        r = render_cell(pipelines, job, (baseline, jobs["none"]))
        base = base or r
        psnr, ssim = fidelity(r["images"], anchor["images"])
        cold_warm = "-"
        if name in COLD_WARM and not args.skip_cold:
            cold, warm = cold_and_warm(name, args.steps)
            cold_warm = f"{cold:.1f} / {warm:.1f}"
        compile_s = f"{r['compile_s']:.1f}" if r["compile_s"] else "-"
        print(f"| {name} | {r['ratio']:.2f} ({r['latency'] * 1000:.0f} ms) | {compile_s} | {cold_warm} | "
              f"{r['weights'] / base['weights']:.2f} | {psnr:.1f} | {ssim:.3f} | {shapes_fit(r):.3f} |", flush=True)


if __name__ == "__main__":
    main()
