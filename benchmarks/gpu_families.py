"""GPU check of the new families: full-size random-weight transformers of FLUX.2 [dev], Qwen-Image and Wan 2.1
T2V 14B, built from their published configs (written below; nothing downloaded), in bf16 on the GPU, each
timed per denoising step (one transformer forward: a CFG step runs two) eager, with regional compile
(`compile_repeated_blocks`, through render.axes.compile) and with fp8 (torchao float8 dynamic activations and
weights, per row, + regional compile, through render.axes.quant). Only the transformer is built: the text
encoders and the VAE are outside a step.

    python benchmarks/gpu_families.py                      # CUDA: about 8 minutes on an H200 (the deadline stops it at 9)
    python benchmarks/gpu_families.py --models wan --blocks 10 --deadline 300
    python benchmarks/gpu_families.py --scale tiny         # the same code path on the CPU, tiny sizes (the tests)
    python benchmarks/gpu_families.py --json               # one JSON line per measurement (benchmarks/gpu.py reads them)

--blocks N keeps at most N blocks of each repeated stack (the output says so): the per-step figures are then
those of a shallower model, for when memory or time cannot hold the published depth. Without CUDA, and
without --scale tiny, it exits 2. fp8 needs compute capability >= 8.9 (else fp8 weights only, fp8wo).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

import torch

DEADLINE_S = 540  # stop starting new measurements after this: the whole run stays under 10 minutes


@dataclass(frozen=True)
class Spec:
    """One family's transformer: its diffusers class, its published config, a tiny one, and a step's inputs."""

    cls: str
    full: Dict[str, Any]  # the published transformer config (the hub repo's transformer/config.json)
    tiny: Dict[str, Any]
    stacks: Dict[str, str]  # config key of each repeated block stack's depth -> the block class
    inputs: Callable[[Any, str, torch.device, torch.dtype], Dict[str, Any]]  # (config, scale, device, dtype) -> forward kwargs
    shape: Dict[str, str] = field(default_factory=dict)  # scale -> what one step denoises, in words


def _flux2_inputs(config: Any, scale: str, device: torch.device, dtype: torch.dtype) -> Dict[str, Any]:
    side, text = (64, 512) if scale == "full" else (4, 8)  # 1024x1024: 64x64 latent tokens (VAE 16x with its 2x2 patchify)
    h, w = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    img_ids = torch.stack([torch.zeros_like(h), h, w, torch.zeros_like(h)], -1).reshape(1, -1, 4)
    txt_ids = torch.stack([torch.zeros(text), torch.zeros(text), torch.zeros(text), torch.arange(text)], -1)[None]
    return {"hidden_states": torch.randn(1, side * side, config.in_channels, device=device, dtype=dtype),
            "encoder_hidden_states": torch.randn(1, text, config.joint_attention_dim, device=device, dtype=dtype),
            "timestep": torch.full((1,), 0.5, device=device, dtype=dtype), "guidance": torch.full((1,), 4.0, device=device, dtype=dtype),
            "img_ids": img_ids.to(device), "txt_ids": txt_ids.to(device)}


def _qwen_inputs(config: Any, scale: str, device: torch.device, dtype: torch.dtype) -> Dict[str, Any]:
    side, text = (64, 256) if scale == "full" else (4, 8)  # 1024x1024: 128x128 latents in 2x2 patches
    return {"hidden_states": torch.randn(1, side * side, config.in_channels, device=device, dtype=dtype),
            "encoder_hidden_states": torch.randn(1, text, config.joint_attention_dim, device=device, dtype=dtype),
            "encoder_hidden_states_mask": torch.ones(1, text, device=device, dtype=torch.long),
            "timestep": torch.full((1,), 0.5, device=device, dtype=dtype), "img_shapes": [[(1, side, side)]]}


def _wan_inputs(config: Any, scale: str, device: torch.device, dtype: torch.dtype) -> Dict[str, Any]:
    frames, height, width = (21, 60, 104) if scale == "full" else (2, 4, 4)  # 81 frames at 832x480: 21x60x104 latents
    return {"hidden_states": torch.randn(1, config.in_channels, frames, height, width, device=device, dtype=dtype),
            "encoder_hidden_states": torch.randn(1, 512 if scale == "full" else 8, config.text_dim, device=device, dtype=dtype),
            "timestep": torch.full((1,), 500.0, device=device, dtype=dtype)}


SPECS: Dict[str, Spec] = {
    "flux2-dev": Spec(  # black-forest-labs/FLUX.2-dev, 32B
        "Flux2Transformer2DModel",
        dict(patch_size=1, in_channels=128, num_layers=8, num_single_layers=48, attention_head_dim=128, num_attention_heads=48,
             joint_attention_dim=15360, timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=(32, 32, 32, 32),
             rope_theta=2000, eps=1e-6, guidance_embeds=True),
        dict(patch_size=1, in_channels=16, num_layers=2, num_single_layers=2, attention_head_dim=16, num_attention_heads=2,
             joint_attention_dim=48, timestep_guidance_channels=256, axes_dims_rope=(4, 4, 4, 4)),
        {"num_layers": "Flux2TransformerBlock", "num_single_layers": "Flux2SingleTransformerBlock"},
        _flux2_inputs, {"full": "1024x1024 (4096 image + 512 text tokens)", "tiny": "16 image + 8 text tokens"}),
    "qwen-image": Spec(  # Qwen/Qwen-Image, 20B
        "QwenImageTransformer2DModel",
        dict(patch_size=2, in_channels=64, out_channels=16, num_layers=60, attention_head_dim=128, num_attention_heads=24,
             joint_attention_dim=3584, guidance_embeds=False, axes_dims_rope=(16, 56, 56)),
        dict(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
             joint_attention_dim=16, axes_dims_rope=(4, 6, 6)),
        {"num_layers": "QwenImageTransformerBlock"},
        _qwen_inputs, {"full": "1024x1024 (4096 image + 256 text tokens)", "tiny": "16 image + 8 text tokens"}),
    "wan": Spec(  # Wan-AI/Wan2.1-T2V-14B-Diffusers
        "WanTransformer3DModel",
        dict(patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16, out_channels=16, text_dim=4096,
             freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
             rope_max_seq_len=1024),
        dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16, text_dim=32,
             freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32),
        {"num_layers": "WanTransformerBlock"},
        _wan_inputs, {"full": "81 frames at 832x480 (32760 tokens)", "tiny": "2x2x2 latent tokens"}),
}


def build(name: str, scale: str, blocks: Optional[int], device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    """The transformer with random weights, created on `device` in `dtype` (nothing is allocated in float32 first)."""
    import diffusers

    spec = SPECS[name]
    config = dict(spec.full if scale == "full" else spec.tiny)
    if blocks is not None:
        config.update({key: min(config[key], blocks) for key in spec.stacks})
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters are drawn in dtype, on the device: no float32 copy of 32B weights
    try:
        torch.manual_seed(0)
        with torch.device(device):
            model = getattr(diffusers, spec.cls)(**config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def time_step(model: torch.nn.Module, inputs: Dict[str, Any], repeats: int, device: torch.device) -> tuple[float, float]:
    """(first call, median of `repeats` warm calls) in seconds: one transformer forward each, device-synchronised."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def once() -> float:
        sync()
        start = time.perf_counter()
        with torch.inference_mode():
            model(**inputs, return_dict=False)
        sync()
        return time.perf_counter() - start

    first = once()
    once()  # a second warm-up: compiled guards settle
    return first, statistics.median(once() for _ in range(repeats))


def measure(name: str, args: argparse.Namespace, deadline: float) -> Dict[str, float]:
    """Eager, regional compile, fp8 + regional compile of one family, in that order (fp8 quantizes in place: last)."""
    from render.axes.compile import CompileConf, apply_compile, reset_compile
    from render.axes.quant import quantize_in_place

    device, dtype = args.device, args.dtype
    model = build(name, args.scale, args.blocks, device, dtype)
    inputs = SPECS[name].inputs(model.config, args.scale, device, dtype)
    params = sum(p.numel() for p in model.parameters()) / 1e9
    _say(args, {"model": name, "params_b": params, "blocks": args.blocks},
         f"{name}: {SPECS[name].cls} {params:.2f}B params, one step = one forward over {SPECS[name].shape[args.scale]}"
         + (f", depth cut to {args.blocks} blocks per stack (--blocks)" if args.blocks else ""))
    rows: Dict[str, float] = {}
    phases = [("eager", "none", "none"), ("regional compile", "regional", "none"), (f"{args.fp8} + regional compile", "regional", args.fp8)]
    for label, compile_name, quant in phases:
        if time.monotonic() > deadline:
            _say(args, {"model": name, "phase": label, "status": "skipped", "error": f"the {args.deadline} s deadline has passed"},
                 f"  {label:>28}: skipped (the {args.deadline} s deadline has passed)")
            continue
        try:
            reset_compile(model)
            if quant != "none":
                quantize_in_place(model, quant)
            apply_compile(model, CompileConf(name=compile_name, backend=args.backend))
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            first, warm = time_step(model, inputs, args.repeats, device)
            peak_gib = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
            rows[label] = warm
            _say(args, {"model": name, "phase": label, "status": "ok", "ms_per_step": warm * 1000, "first_call_s": first,
                        "peak_gib": peak_gib, "vs_eager": rows["eager"] / warm if "eager" in rows else None},
                 f"  {label:>28}: {warm * 1000:.1f} ms/step  first call {first:.1f} s"
                 + (f"  peak {peak_gib:.1f} GiB" if peak_gib is not None else ""))
        except Exception as error:  # noqa: BLE001 - report and go on to the next phase
            _say(args, {"model": name, "phase": label, "status": "failed", "error": f"{type(error).__name__}: {str(error)[:300]}"},
                 f"  {label:>28}: FAILED {type(error).__name__}: {str(error)[:300]}")
    if "eager" in rows and not args.json:
        print("  " + ", ".join(f"{label} {rows['eager'] / latency:.2f}x" for label, latency in rows.items() if label != "eager")
              + " vs eager", flush=True)
    reset_compile(model)
    del model
    gc.collect()  # torchao's quantized modules hold themselves in a cycle: freed by the collector only
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows


def _say(args: argparse.Namespace, row: Dict[str, Any], text: str) -> None:
    """One measurement as it is known: a JSON line (--json, what benchmarks/gpu.py reads) or its text line."""
    print(json.dumps({**row, "line": text.strip()}) if args.json else text, flush=True)


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=["full", "tiny"], default="full")
    parser.add_argument("--models", default=",".join(SPECS), help=f"comma-separated, of: {', '.join(SPECS)}")
    parser.add_argument("--blocks", type=int, default=None, help="keep at most N blocks of each repeated stack")
    parser.add_argument("--repeats", type=int, default=3, help="warm steps timed per phase (the median is shown)")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds after which no new phase starts")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (the tests use eager)")
    parser.add_argument("--json", action="store_true", help="one JSON line per measurement (benchmarks/gpu.py reads them)")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models.split(",") if m not in SPECS]
    if unknown:
        parser.error(f"--models {','.join(unknown)}: no such model; valid: {', '.join(SPECS)}")
    if args.blocks is not None and args.blocks < 1:
        parser.error(f"--blocks {args.blocks}: expected at least 1")
    return args


def main(argv: Optional[list[str]] = None) -> Dict[str, Dict[str, float]]:
    args = parse(argv)
    cuda = torch.cuda.is_available()
    if args.scale == "full" and not cuda:
        print("gpu_families: no CUDA device here; the full-size transformers need a GPU (about 70 GiB for FLUX.2 [dev] "
              "in bf16). Run it on a CUDA machine, or run `--scale tiny` for the same code path on the CPU.", file=sys.stderr)
        raise SystemExit(2)
    args.device = torch.device("cuda" if cuda and args.scale == "full" else "cpu")
    args.dtype = torch.bfloat16 if args.device.type == "cuda" else torch.float32
    fp8dq = args.device.type == "cuda" and torch.cuda.get_device_capability() >= (8, 9)
    args.fp8 = "fp8dq" if fp8dq else "fp8wo"
    deadline = time.monotonic() + args.deadline
    where = torch.cuda.get_device_name() if args.device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    _say(args, {"device": where}, f"device={where} dtype={args.dtype} scale={args.scale} fp8={args.fp8} "
         f"compile backend={args.backend} deadline {args.deadline:.0f} s")
    return {name: measure(name, args, deadline) for name in args.models.split(",")}


if __name__ == "__main__":
    main()
