"""The shapes model's speed/quality trade-off: steps x cache -> checker score with intervals, latency.

    nice -n 10 python scripts/shapes_tradeoff.py                  # the grid in docs/shapes.md (dev, 5 seeds)
    python scripts/shapes_tradeoff.py --seeds 1 --limit 8 --out outputs/shapes-quick

Every cell is composed as `python -m render model=shapes <overrides>` would compose it and rendered
through the runner's code (assess/metrics/tradeoff.py); each cell's per-sample verdicts are
kept in <out>/cells/<cell key>.json, so an interrupted run renders only the missing cells. Writes
<out>/table.md (the table of docs/shapes.md) and the contact sheet (--sheet).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

STEPS_ONLY = [1, 2, 4, 8, 16, 48]  # cache=none at these step counts (and the anchor's)
CACHE_STEPS = [8, 16]  # every cache setting at these step counts (and the anchor's)
CACHES: dict[str, list[str]] = {  # column label -> cache overrides
    "fbcache 0.3": ["cache=fbcache"],
    "fbcache 0.6": ["cache=fbcache", "cache.threshold=0.6"],
    "pab": ["cache=pab"],
    "fastercache": ["cache=fastercache"],
    "taylorseer": ["cache=taylorseer"],
    "magcache": ["cache=magcache"],
}
AGGRESSIVE = "fbcache 0.6"  # the most aggressive cache setting of the grid (tests/test_shapes_model.py checks it)


def sheet_columns(anchor_steps: int) -> list[tuple[str, list[str] | None]]:
    """(label, overrides) of the contact sheet's columns; None: the anchor."""
    return [("anchor", None), ("1 step", ["steps=1"]), ("2 steps", ["steps=2"]), ("4 steps", ["steps=4"]), ("8 steps", ["steps=8"]),
            (f"{AGGRESSIVE}, {anchor_steps} steps", [f"steps={anchor_steps}", *CACHES[AGGRESSIVE]])]


def cell_record(out: Path, overrides: list[str], base: list[str]) -> dict:
    """The cell's per-sample results, rendered now unless <out>/cells holds them."""
    from assess.metrics.tradeoff import compose_job, load_shipped, render_job, verdicts

    job = compose_job(*base, *overrides)
    path = out / "cells" / f"{job.cell.key}.json"
    if path.is_file():
        return json.loads(path.read_text())
    global _LOADED
    if _LOADED is None:
        _LOADED = load_shipped(job)
    samples = render_job(_LOADED, job)
    found = verdicts(samples)
    record = {
        "cell_key": job.cell.key, "describe": job.cell.describe(), "overrides": overrides,
        "steps": job.cell.steps, "cache": job.cell.axes["cache"],
        "samples": [{"prompt": s.prompt, "seed": s.seed, "latency_s": s.latency_s, "correct": v.correct,
                     "colour": v.colour, "shape": v.shape, "position": v.position, "fit": v.fit}
                    for s, v in zip(samples, found)],
        "images": {f"{s.prompt}|{s.seed}": s.image.tolist() for s in samples if s.seed == job.seeds[0]},
    }
    _atomic_write(path, json.dumps(record))
    print(f"{job.cell.describe()}: {np.mean([v.correct for v in found]):.1%} correct", flush=True)
    return record


_LOADED = None


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def summary(record: dict, anchor: dict) -> dict:
    from assess.metrics.tradeoff import paired_difference

    def column(rec: dict, key: str) -> list[float]:
        return [float(s[key]) for s in rec["samples"]]

    latencies = [s["latency_s"] for s in record["samples"][1:]]  # the first sample is the warm-up
    return {
        "correct": float(np.mean(column(record, "correct"))),
        "fit": float(np.mean(column(record, "fit"))),
        "d_correct": paired_difference(column(anchor, "correct"), column(record, "correct")),
        "d_fit": paired_difference(column(anchor, "fit"), column(record, "fit")),
        "latency": float(np.median(latencies)),
        **{a: float(np.mean(column(record, a))) for a in ("colour", "shape", "position")},
    }


def table(rows: list[tuple[str, str, dict]], anchor_latency: float) -> str:
    lines = [
        "| steps | cache | overall | colour | shape | position | Δ overall vs anchor [95% CI] | fit | Δ fit vs anchor [95% CI] | latency (s) | speed-up |",
        "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: |",
    ]
    for steps, cache, s in rows:
        dc, df = s["d_correct"], s["d_fit"]
        lines.append(
            f"| {steps} | {cache} | {s['correct']:.1%} | {s['colour']:.0%} | {s['shape']:.0%} | {s['position']:.0%} | "
            f"{dc.value:+.1%} [{dc.low:+.1%}, {dc.high:+.1%}]{' *' if dc.excludes_zero else ''} | {s['fit']:.3f} | "
            f"{df.value:+.3f} [{df.low:+.3f}, {df.high:+.3f}]{' *' if df.excludes_zero else ''} | "
            f"{s['latency']:.3f} | {anchor_latency / s['latency']:.1f}x |"
        )
    return "\n".join(lines)


def contact_sheet(columns: list[tuple[str, dict]], prompts: list[str], seed: int, path: Path, scale: int = 4) -> None:
    from PIL import Image, ImageDraw

    cell, label_w, head_h = 32 * scale, 230, 18
    sheet = Image.new("RGB", (label_w + cell * len(columns), head_h + cell * len(prompts)), "white")
    draw = ImageDraw.Draw(sheet)
    for j, (label, record) in enumerate(columns):
        draw.text((label_w + j * cell + 4, 3), label, fill="black")
        for i, prompt in enumerate(prompts):
            pixels = np.array(record["images"][f"{prompt}|{seed}"], dtype=np.uint8)
            tile = Image.fromarray(pixels).resize((cell, cell), Image.NEAREST)
            sheet.paste(tile, (label_w + j * cell, head_h + i * cell))
    for i, prompt in enumerate(prompts):
        draw.text((4, head_h + i * cell + cell // 2 - 6), prompt, fill="black")
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure the shapes model's steps x cache trade-off with the checker.")
    parser.add_argument("--out", type=Path, default=Path("outputs/shapes-tradeoff"), help="results folder (resumable)")
    parser.add_argument("--prompts", default="dev", help="prompts option (render/conf/prompts)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per prompt")
    parser.add_argument("--sheet", type=Path, default=Path("docs/shapes-contact-sheet.png"), help="contact sheet PNG")
    parser.add_argument("--sheet-prompts", type=int, default=10, help="prompts (rows) on the contact sheet")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    import torch

    from assess.metrics.tradeoff import compose_job

    torch.set_num_threads(args.threads)
    base = [f"prompts={args.prompts}", f"seed=[{','.join(str(s) for s in range(args.seeds))}]"]
    if args.limit:
        base.append(f"prompts.limit={args.limit}")
    anchor_steps = compose_job(*base).anchor.steps
    anchor = cell_record(args.out, [f"steps={anchor_steps}"], base)
    rows: list[tuple[str, str, dict]] = []
    for steps in sorted({*STEPS_ONLY, anchor_steps}):
        rows.append((str(steps), "none", summary(cell_record(args.out, [f"steps={steps}"], base), anchor)))
    for steps in sorted({*CACHE_STEPS, anchor_steps}):
        for label, overrides in CACHES.items():
            rows.append((str(steps), label, summary(cell_record(args.out, [f"steps={steps}", *overrides], base), anchor)))
    anchor_latency = summary(anchor, anchor)["latency"]
    text = table(rows, anchor_latency)
    _atomic_write(args.out / "table.md", text + "\n")
    print(text)

    columns = [(label, anchor if overrides is None else cell_record(args.out, overrides, base))
               for label, overrides in sheet_columns(anchor_steps)]
    prompts = [s["prompt"] for s in anchor["samples"] if s["seed"] == 0][: args.sheet_prompts]
    contact_sheet(columns, prompts, 0, args.sheet)
    print(f"contact sheet: {args.sheet}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
