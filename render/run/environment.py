"""Checks of the machine a render runs on, made before anything is written: folders it must write,
and models it must load."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from render.errors import ConfigError
from render.run.online import HUB_PROBE_TIMEOUT_S, hub_address, hub_reachable  # noqa: F401  (re-exported)


def check_writable_folder(folder: str | Path, what: str) -> None:
    """`folder` exists as a writable folder, or can be created: else a ConfigError naming it and why.

    Permission bits do not tell (root passes them; /proc, a read-only mount or a full quota refuse
    anyway), so the nearest existing folder is really tried: a probe folder is made in it and removed,
    and nothing is left behind."""
    path = Path(folder).expanduser().absolute()
    probe = path
    while not probe.exists():
        if probe.is_symlink():  # there, but pointing nowhere: a dangling link, or a loop of links
            raise ConfigError(f"{what}={folder}: {probe} is a symlink that leads nowhere (dangling, or a loop); "
                              f"remove it or choose another {what}")
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{what}={folder}: cannot be created, {probe} is a file, not a folder; choose another {what}")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hypergrid-probe-", dir=probe))
    except OSError as error:
        verb = "is not writable" if probe == path else f"cannot be created in {probe}"
        raise ConfigError(f"{what}={folder}: {verb} ({error.strerror or error}); choose another {what}") from None


def check_text_file(path: Path, what: str, given: str) -> None:
    """A file preflight's readers will decode: readable, and UTF-8 (else a ConfigError with the byte and line)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{what}={given}: {path} cannot be read ({error.strerror or error}); fix its permissions or "
                          f"choose another {what}") from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(f"{what}={given}: {path} is not UTF-8 text (byte 0x{data[error.start]:02x} on line {line}); save it "
                          f"as UTF-8, e.g. `iconv -f latin1 -t utf-8 {path} > {path.stem}.utf8{path.suffix}`") from None


def check_model_folder(folder: Path, given: str) -> None:
    """A local diffusers pipeline folder that from_pretrained can load: model_index.json is a JSON object and
    every component it lists has its subfolder."""
    index = folder / "model_index.json"
    fix = "re-save the pipeline with save_pretrained, or point model.id at a complete copy"
    check_text_file(index, "model.id", given)
    try:
        components = json.loads(index.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ConfigError(f"model.id={given}: {index} is not valid JSON ({error}); {fix}") from None
    if not isinstance(components, dict):
        raise ConfigError(f"model.id={given}: {index} holds no JSON object; {fix}")
    for name, spec in components.items():
        if name.startswith("_") or not isinstance(spec, list) or len(spec) != 2 or spec[0] is None:
            continue
        sub = folder / name
        if not sub.is_dir() or not any(sub.iterdir()):
            raise ConfigError(f"model.id={given}: model_index.json lists the component {name!r}, but {sub} is missing "
                              f"or empty; {fix}")
        missing = missing_weights(sub, str(spec[0]))
        if missing:
            raise ConfigError(f"model.id={given}: the component {name!r} has no weights: {missing}; {fix}")
        for weights in sorted(sub.glob("*.safetensors")):
            problem = safetensors_problem(weights)
            if problem:
                raise ConfigError(f"model.id={given}: {weights} {problem}; {fix}")


WEIGHT_SUFFIXES = (".safetensors", ".bin")  # what from_pretrained loads a model's weights from
# the weights file each library's save_pretrained writes, named when a component has none
WEIGHTS_NAME = {"diffusers": "diffusion_pytorch_model.safetensors", "transformers": "model.safetensors"}


def missing_weights(component: Path, library: str) -> str | None:
    """What a component folder lacks to load its weights, or None. A model's folder (one with a config.json) holds
    weight files (*.safetensors, *.bin) or a sharded index (*.safetensors.index.json) whose shards are all there;
    a scheduler (scheduler_config.json) or a tokenizer (its own files) has no weights to check."""
    if not (component / "config.json").is_file():
        return None
    for index in sorted(component.glob("*.index.json")):
        try:
            shards = shard_names(index)
        except (OSError, ValueError, AttributeError) as error:
            return f"{index} cannot be read as a sharded checkpoint's index ({error})"
        absent = sorted(s for s in shards if not (component / s).is_file())
        if absent:
            return f"{component / absent[0]} is missing ({len(absent)} of the {len(shards)} shards {index.name} names)"
        if shards:
            return None
    if any(f.name.endswith(WEIGHT_SUFFIXES) for f in component.iterdir() if f.is_file()):
        return None
    expected = WEIGHTS_NAME.get(library, "a *.safetensors file")
    return (f"{component / expected} is missing ({component} holds config.json and no *.safetensors or *.bin file, "
            "nor a sharded index)")


def shard_names(index: Path) -> set[str]:
    """The shard files a sharded checkpoint's index (its weight_map) names."""
    weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}
    return {str(v) for v in weight_map.values()}


def safetensors_problem(path: Path) -> str | None:
    """Why a .safetensors file cannot be loaded (a copy cut short, another file under its name), read from its
    header alone: 8 bytes of header length, the JSON header, then the tensors' bytes it promises."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if size < 8 or length > size - 8:
                return f"is truncated or not a safetensors file ({size} bytes, header of {length} promised)"
            header = json.loads(f.read(length))
    except (OSError, ValueError) as error:
        return f"cannot be read as safetensors ({error})"
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)
            and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2]
    if ends and 8 + length + max(ends) > size:
        return f"is truncated ({size} bytes, its header promises {8 + length + max(ends)})"
    return None


def check_builtin_model(name: str) -> None:
    """A built-in model must be loadable: the shipped shapes pipeline complete, a tiny twin (model=tiny,
    tiny-flux2, ...) complete in the project's cache ($HYPERGRID_CACHE, else ~/.cache/hypergrid) or that cache writable to build it once."""
    if name == "shapes":
        from render.models.shapes import shapes_model_dir

        try:
            folder = shapes_model_dir()
        except FileNotFoundError as error:
            raise ConfigError(f"model.id=hypergrid:shapes: {error}") from None
        check_model_folder(folder, f"hypergrid:shapes (shipped in {folder})")
    from render.models.families import twins
    from render.models.twins import default_cache_root, is_complete

    twin = twins().get(name)
    if twin is not None:
        folder = twin.folder()
        if is_complete(folder):
            check_model_folder(folder, f"hypergrid:{name} (built in {folder}; delete that folder to build it again)")
        else:
            check_writable_folder(default_cache_root(), f"HYPERGRID_CACHE (the {name} model is built there once)")


def check_hub_model(model: Any) -> None:
    """A hub model must be in the local cache, or the hub reachable to download it."""
    from huggingface_hub import try_to_load_from_cache

    from huggingface_hub import constants

    cached = try_to_load_from_cache(model.id, "model_index.json", revision=model.revision)
    if isinstance(cached, str):
        return
    if hub_reachable():
        check_writable_folder(constants.HF_HUB_CACHE, "HF_HOME (the hub cache the model downloads into)")
        return
    raise ConfigError(hub_unavailable_message(model.id))


def hub_unavailable_message(model_id: str) -> str:
    return (f"model.id={model_id}: not in the local Hugging Face cache, and the hub cannot be reached from here. "
            f"Download it where the hub is reachable (`hf download {model_id}`; HF_HOME sets the cache folder), "
            f"or point the model at a local folder written by save_pretrained: model.id=/path/to/{model_id.split('/')[-1]}")


def slurm_controller_problem(timeout_s: float = 15) -> str | None:
    """Why no job can be submitted from here (no SLURM commands, controller down), or None when it answers."""
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return "the SLURM commands (scontrol, sbatch) are not installed on this machine"
    except subprocess.TimeoutExpired:
        return f"`scontrol ping` did not answer within {timeout_s:.0f} s"
    answer = (ping.stdout + ping.stderr).strip()
    if ping.returncode != 0 or "UP" not in answer:
        return f"`scontrol ping` says: {answer.splitlines()[0] if answer else f'exit {ping.returncode}'}"
    return None
