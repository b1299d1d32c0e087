"""Preflight is the only gate, and it is total: whatever fails before the first sample (a bad value, a file,
a folder, a library's own exception) is an exit-2 message naming the value, and no run folder is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from render.run import preflight
from render.cell import build_job
from render.run.preflight import PreflightCallback, PreflightError, preflight_config
from tests.conftest import compose_cfg, run_render

BIG = 2**63  # one past what sqlite's INTEGER (the index) holds
SEED_MAX = BIG - 1


def refused(*overrides: str, match: str, tmp_path: Path, out_root: Path | None = None) -> None:
    with pytest.raises(PreflightError, match=match):
        preflight_config(compose_cfg("device=cpu", "model=tiny", *overrides, out_root=out_root or tmp_path / "outputs"))


@pytest.mark.parametrize("overrides,match", [
    (["guidance=nan"], r"guidance=nan: must be >= 0 and finite"),
    (["guidance=inf"], r"guidance=inf: must be >= 0 and finite"),
    (["guidance=-inf"], r"guidance=-inf: must be >= 0 and finite"),
    (["cache=fbcache", "cache.threshold=nan"], r"cache.threshold=nan: must be a finite number"),
    (["cache=taylorseer", "cache.max_order=9223372036854775808"], r"cache.max_order=9223372036854775808: must lie in"),
    ([f"seed={BIG}"], rf"seed={BIG}: seeds must be non-negative integers up to {SEED_MAX}"),
    ([f"seed=[0,{BIG}]"], r"seeds must be non-negative integers up to"),
    ([f"steps={BIG}"], rf"steps={BIG}: must lie in \[-9223372036854775808, 9223372036854775807\]"),
    ([f"warmup={BIG}"], rf"warmup={BIG}: must lie in"),
    ([f"prompts.limit={BIG}"], rf"prompts.limit={BIG}: must lie in"),
    (["height=16384", "width=16384"], r"height=16384 width=16384: 268435456 pixels, more than the \d+ that PIL"),
])
def test_a_number_downstream_code_cannot_take_is_refused(overrides: list[str], match: str, tmp_path: Path) -> None:
    refused(*overrides, match=match, tmp_path=tmp_path)


def test_seeds_are_accepted_up_to_what_the_index_holds_and_refused_past_it() -> None:
    assert build_job(compose_cfg("device=cpu", "model=tiny", f"seed={SEED_MAX}")).seeds == [SEED_MAX]
    with pytest.raises(ValueError, match=f"seed={BIG}: seeds must be non-negative integers up to {SEED_MAX}"):
        build_job(compose_cfg("device=cpu", "model=tiny", f"seed={BIG}"))


def test_a_latin1_prompts_file_is_refused_naming_the_byte_and_line(tmp_path: Path) -> None:
    prompts = tmp_path / "latin.jsonl"
    prompts.write_bytes(b'{"id": "p0", "text": "tea"}\n{"id": "p1", "text": "caf\xe9 au lait"}\n')
    refused(f"prompts.file={prompts}", match=r"prompts.file=.*latin.jsonl: .*latin.jsonl is not UTF-8 text \(byte 0xe9 on line 2\); save it as UTF-8",
            tmp_path=tmp_path)


def test_an_out_root_that_is_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    refused(match=r"out_root=.*loop: .*is a symlink that leads nowhere \(dangling, or a loop\)", tmp_path=tmp_path,
            out_root=loop)
    refused(match=r"out_root=.*loop/sub: .*loop is a symlink that leads nowhere", tmp_path=tmp_path, out_root=loop / "sub")


def test_an_unwritable_cache_for_the_tiny_model_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HYPERGRID_CACHE", str(blocker / "cache"))  # the tiny model is not built there
    refused(match=r"HYPERGRID_CACHE \(the tiny model is built there once\)=.*cannot be created, .*a-file is a file",
            tmp_path=tmp_path)


def test_an_unwritable_home_is_refused_when_the_tiny_model_must_be_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    monkeypatch.delenv("HYPERGRID_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(home))
    refused(match=r"HYPERGRID_CACHE .*home-is-a-file/.cache/hypergrid: cannot be created", tmp_path=tmp_path)


@pytest.mark.parametrize("write,match", [
    (lambda m: (m / "model_index.json").write_text("{not json"), r"model_index.json is not valid JSON"),
    (lambda m: (m / "model_index.json").write_bytes(b'{"_class_name": "Flux\xe9"}'), r"model_index.json is not UTF-8 text"),
    (lambda m: (m / "model_index.json").write_text("[1, 2]"), r"model_index.json holds no JSON object"),
    (lambda m: (m / "model_index.json").write_text(json.dumps({"_class_name": "FluxPipeline", "vae": ["diffusers", "AutoencoderKL"]})),
     r"lists the component 'vae', but .*vae is missing or empty"),
])
def test_a_corrupt_model_folder_is_refused(write, match: str, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    write(folder)
    refused(f"model.id={folder}", match=rf"model.id={folder}: .*{match}", tmp_path=tmp_path)


def test_any_exception_in_a_check_is_a_refusal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def loop(*args, **kwargs):
        raise OSError(40, "Too many levels of symbolic links", "/some/file")

    monkeypatch.setattr(preflight, "check_experiment", loop)
    refused(match=r"preflight could not check this cell \(OSError: \[Errno 40\] Too many levels of symbolic links: "
                  r"'/some/file'\); nothing was written", tmp_path=tmp_path)


def test_the_hydra_callback_exits_2_on_any_exception(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                                      tmp_path: Path) -> None:
    """Hydra turns an exception raised in a callback into a warning and runs the job: the callback must exit."""
    from hydra import compose, initialize_config_dir

    from tests.conftest import CONF_DIR

    def broken(*args, **kwargs):
        raise UnicodeDecodeError("utf-8", b"\xe9", 0, 1, "invalid continuation byte")

    monkeypatch.setattr(preflight, "build_job", broken)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        config = compose(config_name="config", overrides=["model=tiny", f"out_root={tmp_path / 'o'}"], return_hydra_config=True)
    with pytest.raises(SystemExit) as exit_:
        PreflightCallback().on_run_start(config)
    assert exit_.value.code == 2
    assert "UnicodeDecodeError" in capsys.readouterr().err


@pytest.mark.parametrize("multirun", [False, True])
def test_a_latin1_prompts_file_exits_2_and_writes_no_run_folder(multirun: bool, tmp_path: Path) -> None:
    (tmp_path / "latin.jsonl").write_bytes(b'{"id": "p1", "text": "caf\xe9"}\n')
    args = ["-m"] if multirun else []
    result = run_render(*args, "model=tiny", "steps=1", "render_anchor=false", "prompts.file=latin.jsonl", cwd=tmp_path,
                        env_extra={"HYPERGRID_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "prompts.file=latin.jsonl: " in result.stderr
    assert "latin.jsonl is not UTF-8 text (byte 0xe9 on line 1)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_guidance_nan_exits_2_and_writes_no_anchor_folder(tmp_path: Path) -> None:
    result = run_render("model=tiny", "steps=1", "guidance=nan", cwd=tmp_path, env_extra={"HYPERGRID_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 2 and "error: guidance=nan: must be >= 0 and finite" in result.stderr
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "cache").exists()


def safetensors(path: Path, cut: int = 0) -> None:
    """A one-tensor safetensors file (written by hand: the format is 8 bytes of header length, the header, data)."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    data = len(header).to_bytes(8, "little") + header + bytes(16)
    path.write_bytes(data[: len(data) - cut])


def pipeline_folder(folder: Path, cut: int) -> Path:
    (folder / "transformer").mkdir(parents=True)
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "FluxPipeline", "transformer": ["diffusers", "FluxTransformer2DModel"]}))
    (folder / "transformer" / "config.json").write_text("{}")
    safetensors(folder / "transformer" / "diffusion_pytorch_model.safetensors", cut)
    return folder


@pytest.mark.parametrize("cut,match", [(4, r"is truncated \(\d+ bytes, its header promises \d+\)"),
                                       (60, r"is truncated or not a safetensors file")])
def test_a_model_folder_with_truncated_weights_is_refused(cut: int, match: str, tmp_path: Path) -> None:
    folder = pipeline_folder(tmp_path / "model", cut)
    refused(f"model.id={folder}", match=rf"model.id={folder}: .*diffusion_pytorch_model.safetensors {match}",
            tmp_path=tmp_path)


def full_pipeline_folder(folder: Path) -> Path:
    """A Flux-like folder as save_pretrained writes it: models with config.json and weights (the vae's sharded), a
    scheduler and a tokenizer with none."""
    pipeline_folder(folder, cut=0)
    index = {"_class_name": "FluxPipeline", "transformer": ["diffusers", "FluxTransformer2DModel"],
             "vae": ["diffusers", "AutoencoderKL"], "text_encoder": ["transformers", "CLIPTextModel"],
             "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"], "tokenizer": ["transformers", "CLIPTokenizer"],
             "image_encoder": [None, None]}
    (folder / "model_index.json").write_text(json.dumps(index))
    for name in ("vae", "text_encoder", "scheduler", "tokenizer"):
        (folder / name).mkdir()
    (folder / "vae" / "config.json").write_text("{}")
    shards = {"a": "diffusion_pytorch_model-00001-of-00002.safetensors", "b": "diffusion_pytorch_model-00002-of-00002.safetensors"}
    (folder / "vae" / "diffusion_pytorch_model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    for shard in shards.values():
        safetensors(folder / "vae" / shard)
    (folder / "text_encoder" / "config.json").write_text("{}")
    (folder / "text_encoder" / "pytorch_model.bin").write_bytes(b"a torch pickle")
    (folder / "scheduler" / "scheduler_config.json").write_text("{}")
    (folder / "tokenizer" / "tokenizer_config.json").write_text("{}")
    (folder / "tokenizer" / "vocab.json").write_text("{}")
    return folder


def test_a_complete_model_folder_passes_with_sharded_bin_and_weightless_components(tmp_path: Path) -> None:
    from render.run.environment import check_model_folder

    check_model_folder(full_pipeline_folder(tmp_path / "model"), "the folder")  # no refusal


@pytest.mark.parametrize("damage,match", [
    (lambda m: (m / "vae" / "diffusion_pytorch_model.safetensors.index.json").unlink() or
     [f.unlink() for f in (m / "vae").glob("*.safetensors")],
     r"the component 'vae' has no weights: .*/vae/diffusion_pytorch_model.safetensors is missing \(.*/vae holds "
     r"config.json and no \*.safetensors or \*.bin file"),
    (lambda m: (m / "vae" / "diffusion_pytorch_model-00002-of-00002.safetensors").unlink(),
     r"the component 'vae' has no weights: .*/vae/diffusion_pytorch_model-00002-of-00002.safetensors is missing "
     r"\(1 of the 2 shards diffusion_pytorch_model.safetensors.index.json names\)"),
    (lambda m: (m / "text_encoder" / "pytorch_model.bin").unlink(),
     r"the component 'text_encoder' has no weights: .*/text_encoder/model.safetensors is missing"),
])
def test_a_model_folder_whose_component_lacks_its_weights_is_refused(damage, match: str, tmp_path: Path) -> None:
    """A missing weights file failed 45 s into the cell, at load: preflight names the folder and the file."""
    folder = full_pipeline_folder(tmp_path / "model")
    damage(folder)
    refused(f"model.id={folder}", match=rf"model.id={folder}: {match}", tmp_path=tmp_path)


def test_the_tiny_model_as_built_passes_the_weights_check(tiny_cache: Path) -> None:
    from render.models.tiny import tiny_model_dir
    from render.run.environment import check_model_folder, missing_weights

    folder = tiny_model_dir()
    check_model_folder(folder, "hypergrid:tiny")
    assert missing_weights(folder / "vae", "diffusers") is None and missing_weights(folder / "scheduler", "diffusers") is None


def test_a_damaged_tiny_model_in_the_cache_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from render.models.tiny import tiny_model_dir

    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "cache"))
    pipeline_folder(tiny_model_dir(), cut=4)
    refused(match=r"model.id=hypergrid:tiny \(built in .*; delete that folder to build it again\): .*is truncated",
            tmp_path=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("args,key", [([], "hydra.run.dir"), (["-m"], "hydra.sweep.dir")])
def test_a_hydra_folder_that_is_a_symlink_loop_exits_2(args: list[str], key: str, tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    result = run_render(*args, "model=tiny", "steps=1", "render_anchor=false", f"{key}={tmp_path / 'loop' / 'run'}",
                        cwd=tmp_path, env_extra={"HYPERGRID_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stderr
    assert f"error: {key}={tmp_path / 'loop' / 'run'}: {tmp_path / 'loop'} is a symlink that leads nowhere" in result.stderr
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_a_model_folder_without_its_vae_weights_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    folder = full_pipeline_folder(tmp_path / "model")
    for f in (folder / "vae").iterdir():
        if f.name != "config.json":
            f.unlink()
    result = run_render("model=tiny", f"model.id={folder}", "steps=1", cwd=tmp_path,
                        env_extra={"HYPERGRID_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stderr
    assert f"error: model.id={folder}: the component 'vae' has no weights: {folder / 'vae'}" in result.stderr
    assert not (tmp_path / "outputs").exists()
