"""GPU check: a full-size random-weight FLUX.1-dev transformer (built from its config, nothing
downloaded) in bf16, rendered under native and flex attention, with and without fbcache and
taylorseer, through the project's own attention and cache registries. Prints latencies and ratios.

With --stacked: the cells a GPU user stacks, through the project's compile, quant and cache modules:
eager; regional compile; fp8dq + regional compile; fp8dq + regional compile + fbcache, timed side by
side in this process (each configured and warmed up once, then --rounds interleaved rounds in a
shuffled order) — each with its warm latency (median of the rounds; CUDA events beside perf_counter
on CUDA), compile time (first call minus warm latency), peak memory (torch.cuda.max_memory_allocated
over its warm-up, every contender's weights resident) and speed-up over eager with its 95 % interval
(assess.statistics.side_by_side: the median of the per-round ratios). The eager cell shares the bf16
transformer with the compiled one (run under torch.compiler.set_stance("force_eager")); each fp8 cell
has its own quantized copy. Where torchao's float8 dynamic path cannot run (the CPU, compute capability
< 8.9) the fp8 cells use fp8wo and say so. Goal on an H200: the stacked cell at least 2.2x faster than
eager (diffusers-torchao's figure on an H100). `--json` prints one JSON line per contender instead
(benchmarks/gpu.py reads them).

    python benchmarks/gpu_check.py                 # on a CUDA GPU (about 24 GiB for the weights)
    python benchmarks/gpu_check.py --stacked       # the stacked speed levers (CUDA; about 50 GiB: three transformers)
    python benchmarks/gpu_check.py --scale tiny    # the same code path on the CPU, tiny sizes
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, cast

import torch
from omegaconf import OmegaConf

from render import axes
from render.axes.attention import AXIS as ATTENTION
from render.axes.caches import CACHES, apply_cache, reset_cache

FULL = dict(num_layers=19, num_single_layers=38, attention_head_dim=128, num_attention_heads=24,
            joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=True, axes_dims_rope=(16, 56, 56))
TINY = dict(num_layers=2, num_single_layers=2, attention_head_dim=16, num_attention_heads=2,
            joint_attention_dim=32, pooled_projection_dim=16, guidance_embeds=True, axes_dims_rope=(4, 6, 6))


def build_pipeline(scale: str, device: str, dtype: torch.dtype):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel

    # diffusers' hints leave out the nn.Module methods its classes inherit (.to, .eval): untyped here
    Transformer, Autoencoder, Pipeline = cast(Any, (FluxTransformer2DModel, AutoencoderKL, FluxPipeline))
    torch.manual_seed(0)
    with torch.device(device):
        transformer = Transformer(in_channels=64, **(FULL if scale == "full" else TINY)).to(dtype).eval()
        blocks = (128, 256, 512, 512) if scale == "full" else (8, 16)
        vae = Autoencoder(in_channels=3, out_channels=3, latent_channels=16, block_out_channels=blocks,
                            down_block_types=("DownEncoderBlock2D",) * len(blocks), up_block_types=("UpDecoderBlock2D",) * len(blocks),
                            layers_per_block=1 if scale == "tiny" else 2, norm_num_groups=8 if scale == "tiny" else 32,
                            use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.1159, scaling_factor=0.3611).to(dtype).eval()
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15)
    pipe = Pipeline(scheduler=scheduler, vae=vae, text_encoder=None, tokenizer=None, text_encoder_2=None, tokenizer_2=None, transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def render_once(pipe, args, embeds, pooled) -> float:
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    with torch.inference_mode():
        pipe(prompt_embeds=embeds, pooled_prompt_embeds=pooled, num_inference_steps=args.steps, guidance_scale=3.5,
             height=args.size, width=args.size, generator=torch.Generator("cpu").manual_seed(0), output_type="latent")
    sync()
    return time.perf_counter() - start


STACKED = {  # name -> (quant, compile, cache); "fp8dq" falls back to fp8wo where torchao's float8 dynamic path cannot run
    "eager": ("none", "none", "none"),
    "regional compile": ("none", "regional", "none"),
    "fp8dq + compile": ("fp8dq", "regional", "none"),
    "fp8dq + compile + fbcache": ("fp8dq", "regional", "fbcache"),
}


@dataclass
class Contender:
    """One stacked cell timed side by side: its pipeline (its own transformer, or the eager one's under
    `torch.compiler.set_stance("force_eager")`), its warm-up and its per-round samples."""

    name: str
    quant: str
    compile: str
    cache: str
    pipe: Any = None
    force_eager: bool = False  # shares a compiled transformer: run with every torch.compile ignored
    first_s: float | None = None  # the first call: compile included
    latencies: list[float] = field(default_factory=list)  # perf_counter seconds, one per round
    cuda_latencies: list[float] = field(default_factory=list)  # CUDA-event seconds of the same calls (CUDA only)
    peak_bytes: int | None = None  # torch.cuda.max_memory_allocated over its warm-up (every contender's weights resident)
    weights_bytes: int = 0
    error: str | None = None

    def row(self) -> dict[str, Any]:
        """Its figures as one JSON-able record (benchmarks/gpu.py computes the ratios from the samples)."""
        warm = statistics.median(self.latencies) if self.latencies else None
        return {"name": self.name, "quant": self.quant, "compile": self.compile, "cache": self.cache, "first_s": self.first_s,
                "warm_s": warm, "compile_s": max(self.first_s - warm, 0.0) if self.first_s is not None and warm is not None else None,
                "cuda_warm_s": statistics.median(self.cuda_latencies) if self.cuda_latencies else None,
                "latencies": self.latencies, "cuda_latencies": self.cuda_latencies, "peak_bytes": self.peak_bytes,
                "weights_bytes": self.weights_bytes, "error": self.error}


def timed_call(contender: Contender, args, embeds, pooled) -> tuple[float, float | None]:
    """(perf_counter seconds, CUDA-event seconds or None off CUDA) of one render, device-synchronised."""
    cuda = args.device.startswith("cuda")
    stance = torch.compiler.set_stance("force_eager") if contender.force_eager else contextlib.nullcontext()
    events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else None
    with stance:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        if events:
            events[0].record()
        with torch.inference_mode():
            contender.pipe(prompt_embeds=embeds, pooled_prompt_embeds=pooled, num_inference_steps=args.steps, guidance_scale=3.5,
                           height=args.size, width=args.size, generator=torch.Generator("cpu").manual_seed(0),
                           output_type="latent")
        if events:
            events[1].record()
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    return wall, events[0].elapsed_time(events[1]) / 1000 if events else None


def _contenders(pipe, args) -> list[Contender]:
    """One transformer per (quant, cache): the eager cell shares the bf16 one with its regional compile (run with
    compile ignored), the quantized cells each get a copy, quantized before anything is compiled."""
    from render.axes.quant import quantize_in_place, weights_bytes

    pipes: dict[tuple[str, str], Any] = {}
    contenders = []
    for name, (quant, compile_name, cache) in STACKED.items():
        quant = args.fp8 if quant == "fp8dq" else quant
        contender = Contender(name.replace("fp8dq", quant), quant, compile_name, cache)
        contenders.append(contender)
        try:
            if (quant, cache) not in pipes:
                transformer = pipe.transformer if quant == "none" else copy.deepcopy(pipe.transformer)
                if quant != "none":
                    quantize_in_place(transformer, quant)
                pipes[(quant, cache)] = type(pipe)(**{**pipe.components, "transformer": transformer})
                pipes[(quant, cache)].set_progress_bar_config(disable=True)
            contender.pipe = pipes[(quant, cache)]
            contender.weights_bytes = weights_bytes(contender.pipe)
        except Exception as error:  # noqa: BLE001 - recorded on the contender; the others go on
            contender.error = f"{type(error).__name__}: {str(error)[:300]}"
    compiled = {id(c.pipe) for c in contenders if c.compile != "none" and c.pipe is not None}
    for contender in contenders:
        contender.force_eager = contender.compile == "none" and id(contender.pipe) in compiled
    return contenders


def _warm_up(contender: Contender, args, embeds, pooled) -> None:
    """Its cache and compile applied (cache first: compile traces the hooks), two warm-up calls, its peak memory."""
    from render.axes.compile import CompileConf, apply_compile

    cuda = args.device.startswith("cuda")
    if contender.cache != "none" or contender.compile != "none":
        conf = OmegaConf.structured(CACHES[contender.cache][0]())
        if contender.cache == "fbcache":
            conf.threshold = 0.12  # FLUX.1's usual setting
        apply_cache(contender.pipe, conf, steps=args.steps)
        apply_compile(contender.pipe.transformer, CompileConf(name=contender.compile, backend=args.backend))
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    contender.first_s = timed_call(contender, args, embeds, pooled)[0]
    timed_call(contender, args, embeds, pooled)  # a second warm-up: guards settle, cache branches compiled
    contender.peak_bytes = torch.cuda.max_memory_allocated() if cuda else None


def stacked(pipe, args, embeds, pooled, *, deadline: float | None = None,
            report: Callable[[Contender], None] = lambda c: None) -> list[Contender]:
    """The stacked speed levers timed side by side in this process: each contender configured and warmed up once,
    then `args.rounds` rounds, each contender rendering once per round in a shuffled order (no new round after
    `deadline`, a time.monotonic()). Returns the contenders with their samples; `report` sees each one warmed up."""
    # Every contender stays compiled in one process (no dynamo reset between them): room for their recompiles
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    contenders = _contenders(pipe, args)
    for contender in contenders:
        if contender.error is None:
            try:
                _warm_up(contender, args, embeds, pooled)
            except Exception as error:  # noqa: BLE001 - recorded; the rounds go on without it
                contender.error = f"{type(error).__name__}: {str(error)[:300]}"
        report(contender)
    shuffle = random.Random(0)
    for _ in range(args.rounds):
        if deadline is not None and time.monotonic() > deadline:
            break
        live = [c for c in contenders if c.error is None]
        shuffle.shuffle(live)
        for contender in live:
            try:
                wall, events = timed_call(contender, args, embeds, pooled)
            except Exception as error:  # noqa: BLE001 - recorded; later rounds leave it out (its samples stay)
                contender.error = f"{type(error).__name__}: {str(error)[:300]}"
                continue
            contender.latencies.append(wall)
            if events is not None:
                contender.cuda_latencies.append(events)
    return contenders


def ratio_to(base: Contender | None, contender: Contender) -> Any:
    """The contender's speed-up over `base` from the rounds both completed (assess.statistics.side_by_side: the
    median of per-round ratios, its order-statistic 95 % interval from 6 rounds on); None without a shared round."""
    from assess.statistics.side_by_side import round_speedup

    if base is None:
        return None
    rounds = min(len(base.latencies), len(contender.latencies))
    return round_speedup(contender.latencies[:rounds], base.latencies[:rounds])


def print_stacked(contenders: list[Contender]) -> None:
    eager = next((c for c in contenders if c.name == "eager" and c.latencies), None)
    for contender in contenders:
        row = contender.row()
        if contender.error and not contender.latencies:
            print(f"{contender.name:>28}: FAILED {contender.error}", flush=True)
            continue
        speedup = ratio_to(eager, contender)
        ratio = "" if speedup is None else f"  {speedup.value:.2f}x eager" + (
            f" [{speedup.low:.2f}, {speedup.high:.2f}]" if speedup.low is not None else f" ({speedup.note})")
        cuda = f" (CUDA events {row['cuda_warm_s']:.3f} s)" if row["cuda_warm_s"] is not None else ""
        peak = f"  peak {row['peak_bytes'] / 2**30:.1f} GiB" if row["peak_bytes"] is not None else ""
        print(f"{contender.name:>28}: {row['warm_s']:.3f} s/image{cuda}  compile {row['compile_s']:.1f} s{peak}  "
              f"weights {row['weights_bytes'] / 2**30:.2f} GiB{ratio}  ({len(contender.latencies)} rounds)", flush=True)
    print("speed-up vs eager, side by side (goal for the stacked cell on an H200: >= 2.2x)", flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=["full", "tiny"], default="full")
    parser.add_argument("--steps", type=int, default=28)
    parser.add_argument("--size", type=int, default=None, help="image side in pixels (full: 1024, tiny: 64)")
    parser.add_argument("--repeats", type=int, default=3, help="warm calls timed per cell (without --stacked)")
    parser.add_argument("--attention", default="native,flex")
    parser.add_argument("--cache", default="none,fbcache,taylorseer")
    parser.add_argument("--stacked", action="store_true", help="the stacked compile / fp8dq / fbcache cells instead")
    parser.add_argument("--rounds", type=int, default=6, help="--stacked: interleaved rounds (6 or more give an interval)")
    parser.add_argument("--deadline", type=float, default=None, help="--stacked: seconds after which no new round starts")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (the CPU rehearsal uses eager)")
    parser.add_argument("--json", action="store_true", help="--stacked: one JSON line per contender, nothing else")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: expected at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    started = time.monotonic()
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.size = args.size or (1024 if args.scale == "full" else 64)
    args.fp8 = "fp8dq" if args.device == "cuda" and torch.cuda.get_device_capability() >= (8, 9) else "fp8wo"
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    pipe = build_pipeline(args.scale, args.device, dtype)
    config = pipe.transformer.config
    embeds = torch.randn(1, 512 if args.scale == "full" else 16, config.joint_attention_dim, device=args.device, dtype=dtype)
    pooled = torch.randn(1, config.pooled_projection_dim, device=args.device, dtype=dtype)
    header = (f"device={args.device} ({torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}) "
              f"params={sum(p.numel() for p in pipe.transformer.parameters()) / 1e9:.2f}B dtype={dtype} {args.size}px {args.steps} steps")
    if args.json and args.stacked:
        print(json.dumps({"kind": "header", "line": header}), flush=True)
    else:
        print(header, flush=True)

    if args.stacked:
        deadline = None if args.deadline is None else started + args.deadline
        if args.json:  # each contender's warm-up as it ends, then every contender's samples
            warmed = lambda c: print(json.dumps({"kind": "warmed", **c.row()}), flush=True)  # noqa: E731
            for contender in stacked(pipe, args, embeds, pooled, deadline=deadline, report=warmed):
                print(json.dumps({"kind": "timed", **contender.row()}), flush=True)
        else:
            print_stacked(stacked(pipe, args, embeds, pooled, deadline=deadline))
        return
    results: dict[tuple[str, str], float] = {}
    for attention in args.attention.split(","):
        for cache in args.cache.split(","):
            reset_cache(pipe)
            ATTENTION.apply(attention, axes.Target(pipe, pipe.transformer, "cuda"))
            conf = OmegaConf.structured(CACHES[cache][0]())
            if cache == "fbcache":
                conf.threshold = 0.12  # FLUX.1's usual setting (the shipped default targets the tiny model)
            try:
                apply_cache(pipe, conf, steps=args.steps)
                render_once(pipe, args, embeds, pooled)  # warm-up (kernels, autotune)
                results[(attention, cache)] = statistics.median(render_once(pipe, args, embeds, pooled) for _ in range(args.repeats))
                if args.device == "cuda":
                    peak = torch.cuda.max_memory_allocated() / 2**30
                print(f"{attention:>8} {cache:>11}: {results[(attention, cache)]:.3f} s/image"
                      + (f"  peak {peak:.1f} GiB" if args.device == "cuda" else ""), flush=True)
            except Exception as error:  # noqa: BLE001 - report and go on to the next cell
                print(f"{attention:>8} {cache:>11}: FAILED {type(error).__name__}: {str(error)[:200]}", flush=True)
    base = results.get(("native", "none"))
    if base:
        print("latency ratio vs native + no cache:")
        for (attention, cache), latency in results.items():
            print(f"  {attention:>8} {cache:>11}: {latency / base:.3f}")


if __name__ == "__main__":
    main()
