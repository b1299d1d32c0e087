"""Identity by content (render.rundir.identity): prompt texts, model weights, metric models, anchor samples."""

from __future__ import annotations

import json
import os
import shutil
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from render import rundir
from render.laws import HoldoutLocked, check_holdout
from render.compose.splits import PACKAGE_PROMPTS, Prompt, load_prompts
from render.rundir import folder_digest, text_hash, text_identity

HOLDOUT = load_prompts(str(PACKAGE_PROMPTS / "holdout.jsonl"))

# -- known vectors --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_an_ascii_text_takes_the_fast_fold_to_the_same_identity(text: str) -> None:
    from render.rundir.identity import _unicode_identity

    assert text_identity(text) == _unicode_identity(text)


@pytest.mark.parametrize("variant", [
    "a red cube", "A RED CUBE", "Ａ ＲＥＤ “cube”…", "a\u00a0red\tcube", "a red—cube!", "a r\u200bed cube",
    "a red cu\u00adbe", "  a   red cube. ", "a red cube\ufe0f", "(a) [red] {cube}", "a\u3000red\u2002cube",
])
def test_variants_of_one_text_are_one_text(variant: str) -> None:
    assert text_identity(variant) == "a red cube"
    assert text_hash(variant) == "9f967626aad36812"  # sha256("a red cube")[:16]: pinned, the contract's vector


@pytest.mark.parametrize("a, b", [("a red cube", "a red cubes"), ("a red cube", "ared cube"), ("café", "cafe"),
                                  ("a red cube", "a red c ube")])
def test_different_texts_stay_different(a: str, b: str) -> None:
    assert text_hash(a) != text_hash(b)


def test_compatibility_forms_fold_as_the_tokenizers_see_them() -> None:
    assert text_identity("ﬁsh") == "fish" and text_identity("Straße") == "strasse"
    assert text_identity("cafe\u0301") == text_identity("café")  # NFD and NFC


# -- property: no Unicode variant of a holdout text gets past the lock -----------------------

INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u034f", "\ufe0f", "\u180e", "\u2061"]
SPACES = [" ", "  ", "\u00a0", "\u2002", "\u2009", "\u202f", "\u3000", "\t", "\n"]
PUNCTUATION = ["“", "”", "‘", "’", "…", "—", "–", "«", "»", "¡", "¿", "。", "！", "，", "・", ".", "!", "?", "\"", "'"]


def full_width(c: str) -> str:
    return chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c


@st.composite
def variants(draw: st.DrawFn) -> tuple[str, str]:
    text = draw(st.sampled_from([p.text for p in HOLDOUT]))
    out = []
    for char in text:
        if char == " ":
            out.append(draw(st.sampled_from(SPACES)))
            continue
        form = draw(st.sampled_from(["same", "upper", "full-width", "full-width upper"]))
        char = char.upper() if "upper" in form else char
        out.append(full_width(char) if "full-width" in form else char)
        if draw(st.integers(0, 5)) == 0:
            out.append(draw(st.sampled_from(INVISIBLE)))
    variant = draw(st.sampled_from(PUNCTUATION + [""])) + "".join(out) + draw(st.sampled_from(PUNCTUATION + [""]))
    normal = draw(st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]))
    return text, unicodedata.normalize(normal, variant)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(variants())
def test_every_unicode_variant_of_a_holdout_text_is_that_text(pair: tuple[str, str]) -> None:
    text, variant = pair
    assert text_hash(variant) == text_hash(text), (variant, text_identity(variant))


@settings(max_examples=60, deadline=None)
@given(variants())
def test_every_unicode_variant_of_a_holdout_text_is_refused(tmp_path_factory: pytest.TempPathFactory,
                                                            pair: tuple[str, str]) -> None:
    _, variant = pair
    out_root = tmp_path_factory.mktemp("out")
    job = SimpleNamespace(out_root=out_root, prompts=[Prompt("mine-000", variant)])
    cfg = SimpleNamespace(get=lambda key: None, prompts=SimpleNamespace(name="mine", file="mine.jsonl"))
    with pytest.raises(HoldoutLocked, match="locked holdout"):
        check_holdout(job, cfg)


def test_a_fullwidth_holdout_text_is_refused_by_a_plain_render(tmp_path: Path) -> None:
    from tests.conftest import run_render

    text = HOLDOUT[4].text
    variant = "".join(full_width(c) for c in text).replace("\uff20", "@") + "\u200b…"
    manifest = tmp_path / "mine.jsonl"
    manifest.write_text(f'{{"id": "mine-000", "text": "“{variant}”"}}\n', encoding="utf-8")
    result = run_render(f"prompts.file={manifest}", "model=tiny", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "locked holdout" in result.stderr
    assert not (tmp_path / "outputs" / "runs").exists()


# -- model weights --------------------------------------------------------------------------


@pytest.fixture
def model_folder(tiny_cache: Path, tmp_path: Path) -> Path:
    from render.models.tiny import ensure_tiny

    folder = tmp_path / "my-model"
    shutil.copytree(ensure_tiny(tiny_cache), folder)
    return folder


def weights_file(folder: Path) -> Path:
    return next(p for p in sorted(folder.rglob("*.safetensors")))


def test_folder_digest_is_by_content_and_cached_by_size_and_mtime(model_folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    from render.rundir import identity

    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(identity, "TICK_NS", 0)  # the folder was copied just now: take its digests as settled
    identity._MEMO.clear()
    first = folder_digest(model_folder)
    copy = tmp_path / "copy"
    shutil.copytree(model_folder, copy)
    assert folder_digest(copy) == first  # the same files elsewhere: the same weights
    identity._MEMO.clear()
    hashed: list[Path] = []
    original = identity._file_sha
    monkeypatch.setattr(identity, "_file_sha", lambda path: hashed.append(path) or original(path))
    assert folder_digest(model_folder) == first and hashed == []  # unchanged sizes and mtimes: nothing read
    target = weights_file(model_folder)
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    changed = folder_digest(model_folder)
    assert changed != first and hashed == [target]  # only the replaced file is hashed again


def test_replaced_weights_in_the_same_folder_are_another_cell_and_another_anchor(model_folder: Path) -> None:
    from render.cell import build_job
    from render.laws import ExperimentGuard, Ledger, check_anchor, record_anchor
    from render.rundir import identity
    from tests.conftest import compose_cfg

    def job():
        identity._MEMO.clear()
        return build_job(compose_cfg("model=tiny", f"model.id={model_folder}", "experiment=tiny-demo",
                                     out_root=model_folder.parent / "out"))

    before = job()
    assert before.cell.model.weights.startswith("sha256:")
    ledger = Ledger("tiny-demo", model_folder.parent / "out")
    record_anchor(ledger, before.anchor)
    target = weights_file(model_folder)
    target.write_bytes(target.read_bytes()[:-1] + b"\x00")
    after = job()
    assert after.cell.key != before.cell.key and after.anchor.key != before.anchor.key
    with pytest.raises(ExperimentGuard, match="other weights"):
        check_anchor(ledger, after.anchor)


def test_a_hub_model_is_identified_by_its_resolved_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from render.rundir import model_identity

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    refs = tmp_path / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("0123456789abcdef0123456789abcdef01234567")
    assert model_identity("org/model", "main") == "hub:0123456789abcdef0123456789abcdef01234567"
    assert model_identity("org/model", "f" * 40) == f"hub:{'f' * 40}"


def test_a_metric_model_is_kept_with_every_score_by_its_content(tiny_clip: Path, tmp_path: Path) -> None:
    from assess.metrics.alignment import CLIPScoreMetric
    from assess.metrics.model_identity import metric_model_identity

    copy = tmp_path / "clip-copy"
    shutil.copytree(tiny_clip, copy)
    assert CLIPScoreMetric(str(tiny_clip)).config == f"model={folder_digest(tiny_clip)}"
    assert metric_model_identity(str(copy)) == metric_model_identity(str(tiny_clip))
    target = weights_file(copy)
    target.write_bytes(target.read_bytes()[:-1] + b"\x01")
    assert CLIPScoreMetric(str(copy)).config != CLIPScoreMetric(str(tiny_clip)).config  # same process, no reset


def test_swapped_weights_with_the_same_size_and_a_restored_mtime_are_another_model_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44 item 5: no digest cache answers for changed bytes, in memory or on disk, even when the swap keeps
    size, mtime, inode and (the kernel's coarse clock) ctime: a digest taken within a tick of a change is not
    trusted. The metric's identity is asked of the folder every time, not remembered by its name."""
    from assess.metrics.model_identity import metric_model_identity
    from render.rundir import identity

    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "clip"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"A" * 4096)
    first = metric_model_identity(str(folder))
    assert first == folder_digest(folder)
    stat = weights.stat()
    with open(weights, "r+b") as handle:  # in place: the same inode and size
        handle.write(b"B" * 4096)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the old mtime put back
    swapped = weights.stat()
    assert (swapped.st_ino, swapped.st_size, swapped.st_mtime_ns) == (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    assert metric_model_identity(str(folder)) != first  # the same process: no memo answers for it
    assert folder_digest(folder) == metric_model_identity(str(folder))
    identity._MEMO.clear()  # another process, with the disk cache only
    assert folder_digest(folder) != first
    cached = json.loads((tmp_path / "cache" / identity.DIGEST_CACHE).read_text())
    assert all("at_ns" in entry for entry in cached[str(folder.resolve())].values())


@pytest.fixture
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.assess.conftest import _tiny_clip

    return _tiny_clip(tmp_path_factory.mktemp("clip"))


def test_the_contract_vectors_are_the_records_identity() -> None:
    record = rundir.SampleRecord(cell_key="k", prompt_id="p", seed=0, prompt="Ａ red cube", image="images/p__s0.png",
                                 width=1, height=1, latency_s=0.1, warmup=False, steps=1, s_per_step=0.1,
                                 peak_mem_bytes=1, mem_kind="x", load_s=0.0, reused_from=None, finished_at=None,
                                 prompt_sha="0000000000000000")  # an older normal form's hash: recomputed from the text
    assert record.identity == ("k", "925d518cbaf69514", 0)  # sha256("Ａ red cube", exact)[:16] (issue 28)


# -- a sample's anchor is matched by text identity, not by prompt id -----------------------------


def test_a_tweaked_manifest_that_keeps_its_ids_is_compared_with_the_anchor_of_its_own_texts(tmp_path: Path) -> None:
    """dev-000 had text A; the manifest now gives dev-000 text B. The anchor has both samples (two runs): the cell's
    sample of text B must be compared with the anchor's sample of text B (identical images: SSIM 1), never with the
    anchor's dev-000 of text A (shifted images) — whichever was indexed last."""
    from assess.index.database import Index
    from assess.scoring.ingest import score
    from tests.assess.conftest import RunFactory, make_cell, shift

    outputs = RunFactory(tmp_path / "outputs")
    old, new = {"dev-000": "a red circle on the left"}, {"dev-000": "a blue square at the top"}
    outputs.stored_anchor("2026-11-30_10-00-00-b-new-text", prompts=new, perturb=shift(20), seeds=(0,))
    outputs.stored_anchor("2026-11-30_10-00-00-z-old-text", prompts=old, seeds=(0,))  # indexed last
    sweep = outputs.sweep()
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], prompts=new, perturb=shift(20),
                seeds=(0,))
    db = tmp_path / "index.db"
    score([sweep], db, metrics=["ssim"])
    with Index.open(db) as index:
        [row] = index.query("SELECT value, prompt_sha FROM scores WHERE cell_key = ? AND metric = 'ssim'",
                            (rundir.cell_key_of(make_cell(steps=8)),))
        anchors = index.query("SELECT prompt_id, prompt_sha FROM samples WHERE cell_key = ? ORDER BY prompt_sha",
                              (rundir.cell_key_of(make_cell()),))
    assert row["prompt_sha"] == rundir.sample_text_hash(new["dev-000"])
    assert row["value"] == pytest.approx(1.0)  # the anchor of its own text
    assert len(anchors) == 2 and {a["prompt_id"] for a in anchors} == {"dev-000"}  # both kept: two samples


def test_skip_if_done_reuses_a_sample_by_its_text_under_another_id(tmp_path: Path) -> None:
    from render.rundir import SampleStore
    from tests.assess.conftest import RunFactory

    outputs = RunFactory(tmp_path / "outputs")
    run = outputs.run(outputs.sweep(), "0_x", prompts={"dev-007": "a green star"}, seeds=(0,))
    key = rundir.load_run(run).cell_key
    store = SampleStore(outputs.root)
    assert store.find(key, "renamed-000", "a green star", 0) is not None  # the same text, another id
    assert store.find(key, "renamed-000", "A green star!", 0) is None  # another case: the tokenizer sees other tokens
    assert store.find(key, "dev-007", "a green star at noon", 0) is None  # the same id, another text
    linked = rundir.link_sample(store.find(key, "renamed-000", "a green star", 0), tmp_path / "new-run",
                                outputs.root, "renamed-000")
    assert linked.prompt_id == "renamed-000" and linked.image == "images/renamed-000__s0.png"
    assert (tmp_path / "new-run" / linked.image).is_file()
