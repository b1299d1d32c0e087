"""GPU check: a full-size random-weight FLUX.1-dev transformer (built from its config, nothing
downloaded) in bf16, rendered under native and flex attention, with and without fbcache and
taylorseer, through the project's own attention and cache registries. Prints latencies and ratios.

With --stacked: the cells a GPU user stacks, through the project's compile, quant and cache modules:
eager; regional compile; fp8dq + regional compile; fp8dq + regional compile + fbcache — each with
its warm latency, compile time (first call minus warm latency), peak memory and ratio vs eager.
Goal on an H200: the stacked cell at least 2.2x faster than eager (diffusers-torchao's figure on an H100).

    python benchmarks/gpu_check.py                 # on a CUDA GPU (about 24 GiB for the weights)
    python benchmarks/gpu_check.py --stacked       # the stacked speed levers (CUDA, compute capability >= 8.9 for fp8dq)
    python benchmarks/gpu_check.py --scale tiny    # the same code path on the CPU, tiny sizes
"""

from __future__ import annotations

import argparse
import statistics
import time

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

    torch.manual_seed(0)
    with torch.device(device):
        transformer = FluxTransformer2DModel(in_channels=64, **(FULL if scale == "full" else TINY)).to(dtype).eval()
        blocks = (128, 256, 512, 512) if scale == "full" else (8, 16)
        vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=16, block_out_channels=blocks,
                            down_block_types=("DownEncoderBlock2D",) * len(blocks), up_block_types=("UpDecoderBlock2D",) * len(blocks),
                            layers_per_block=1 if scale == "tiny" else 2, norm_num_groups=8 if scale == "tiny" else 32,
                            use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.1159, scaling_factor=0.3611).to(dtype).eval()
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15)
    pipe = FluxPipeline(scheduler=scheduler, vae=vae, text_encoder=None, tokenizer=None, text_encoder_2=None, tokenizer_2=None, transformer=transformer)
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


STACKED = {  # name -> (quant, compile, cache), applied in this order (quantization cannot be undone: it comes last)
    "eager": ("none", "none", "none"),
    "regional compile": ("none", "regional", "none"),
    "fp8dq + compile": ("fp8dq", "regional", "none"),
    "fp8dq + compile + fbcache": ("fp8dq", "regional", "fbcache"),
}


def stacked(pipe, args, embeds, pooled) -> None:
    """The stacked speed levers, each undone (compile, cache) before the next; fp8dq quantizes in place once."""
    from render.axes.compile import CompileConf, apply_compile, reset_compile
    from render.axes.quant import quantize_in_place, weights_bytes

    cuda = args.device.startswith("cuda")
    quantized, rows = False, {}
    for name, (quant, compile_name, cache) in STACKED.items():
        reset_compile(pipe.transformer)
        reset_cache(pipe)
        try:
            if quant != "none" and not quantized:
                quantize_in_place(pipe.transformer, quant)
                quantized = True
            conf = OmegaConf.structured(CACHES[cache][0]())
            if cache == "fbcache":
                conf.threshold = 0.12  # FLUX.1's usual setting
            apply_cache(pipe, conf, steps=args.steps)
            apply_compile(pipe.transformer, CompileConf(name=compile_name))
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            first = render_once(pipe, args, embeds, pooled)
            render_once(pipe, args, embeds, pooled)  # a second warm-up: guards settle, cache branches compiled
            warm = statistics.median(render_once(pipe, args, embeds, pooled) for _ in range(args.repeats))
            peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
            rows[name] = warm
            print(f"{name:>28}: {warm:.3f} s/image  compile {max(first - warm, 0):.1f} s  peak {peak:.1f} GiB  "
                  f"weights {weights_bytes(pipe) / 2**30:.2f} GiB", flush=True)
        except Exception as error:  # noqa: BLE001 - report and go on to the next cell
            print(f"{name:>28}: FAILED {type(error).__name__}: {str(error)[:300]}", flush=True)
    if "eager" in rows:
        print("speed-up vs eager (goal for the stacked cell on an H200: >= 2.2x):")
        for name, latency in rows.items():
            print(f"  {name:>28}: {rows['eager'] / latency:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=["full", "tiny"], default="full")
    parser.add_argument("--steps", type=int, default=28)
    parser.add_argument("--size", type=int, default=None, help="image side in pixels (full: 1024, tiny: 64)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--attention", default="native,flex")
    parser.add_argument("--cache", default="none,fbcache,taylorseer")
    parser.add_argument("--stacked", action="store_true", help="the stacked compile / fp8dq / fbcache cells instead")
    args = parser.parse_args()
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.size = args.size or (1024 if args.scale == "full" else 64)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    pipe = build_pipeline(args.scale, args.device, dtype)
    config = pipe.transformer.config
    embeds = torch.randn(1, 512 if args.scale == "full" else 16, config.joint_attention_dim, device=args.device, dtype=dtype)
    pooled = torch.randn(1, config.pooled_projection_dim, device=args.device, dtype=dtype)
    print(f"device={args.device} ({torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}) "
          f"params={sum(p.numel() for p in pipe.transformer.parameters()) / 1e9:.2f}B dtype={dtype} {args.size}px {args.steps} steps", flush=True)

    if args.stacked:
        stacked(pipe, args, embeds, pooled)
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
