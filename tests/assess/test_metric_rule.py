"""Evidence is checked against the rule it is judged under (issue 61, principle 1): every score the climb and its
final read carries the frozen rule's metric model identity, else it is set apart with the reason; a cell and its
anchor that match each other but not the rule no longer decide the climb."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

from assess.climb.observe import quality_deltas
from assess.experiment import load_experiment
from assess.index.database import Index
from assess.scoring.ingest import score
from render.laws import Ledger, experiment_rule, freeze_rule
from render.rundir import cell_key_of
from tests.assess.climb_fixtures import ANCHOR_KEY, DemoRuns, demo_cell, dev_ids, restore_hydra  # noqa: F401
from tests.assess.conftest import shift
from tests.conftest import compose_cfg

pytestmark = pytest.mark.usefixtures("restore_hydra")
CLIP_RULE = "experiment.quality.metric=clip_score"


@functools.lru_cache(maxsize=None)
def _composed():
    """tiny-demo on clip_score, composed once per module (its rule is read from the environment at each call)."""
    return compose_cfg("experiment=tiny-demo", CLIP_RULE).experiment


@pytest.fixture(scope="module", autouse=True)
def composed() -> None:
    """Hydra's first composition, paid once for the module (a shared fixture)."""
    from tests.assess.climb_fixtures import hydra_state_kept

    with hydra_state_kept():
        _composed()


@pytest.fixture
def two_clips(tiny_clip: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The rule's CLIP (a folder) and another one: the same network with one more file, so another content digest."""
    ours, theirs = tmp_path / "clip-ours", tmp_path / "clip-theirs"
    shutil.copytree(tiny_clip, ours)
    shutil.copytree(tiny_clip, theirs)
    (theirs / "NOTES.md").write_text("a colleague's CLIP\n")
    return ours, theirs


def _experiment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clip: Path) -> tuple[Path, DemoRuns]:
    """tiny-demo climbing on clip_score, its rule frozen with HYPERGRID_CLIP_MODEL naming `clip`; a cell and its
    anchor rendered on 4 dev prompts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYPERGRID_CLIP_MODEL", str(clip))
    freeze_rule(Ledger("tiny-demo", tmp_path / "outputs"), experiment_rule(_composed()))
    runs = DemoRuns((tmp_path / "outputs").resolve())
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(4), dev_ids(4), perturb=shift(1))
    runs.anchor(dev_ids(4))
    return sweep, runs


def _deltas(db: Path):
    exp = load_experiment("tiny-demo", [CLIP_RULE])
    with Index.open(db) as index:
        return quality_deltas(index, exp, cell_key_of(demo_cell(4)), ANCHOR_KEY, "dev", frozenset(dev_ids(4)))


@pytest.mark.slow
def test_scores_of_another_clip_than_the_rules_are_set_apart(two_clips: tuple[Path, Path], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's route: the index rebuilt from a shell pointed at another CLIP. The cell and the anchor were scored
    with the same (wrong) model, so they matched each other and decided the climb; now every score is set apart,
    with the rule's model named, and the cell has no delta to decide on. Slow (about 5 s): two scoring passes of a
    real CLIP model, which the default tier's 2 s cannot hold; the check itself is test_a_score_names_the_rules_model's."""
    ours, theirs = two_clips
    sweep, runs = _experiment(tmp_path, monkeypatch, ours)
    db = tmp_path / "index.db"
    score([runs.root], db, metrics=["clip_score"], clip_model=str(theirs))
    deltas, unscored, unavailable = _deltas(db)
    assert deltas == {} and not unscored, deltas
    assert set(unavailable) == set(dev_ids(4))
    why = next(iter(unavailable.values()))
    assert "set apart" in why and f"HYPERGRID_CLIP_MODEL={ours}" in why and "re-score" in why, why
    from assess.climb.experiment_report import write_experiment_report

    page = write_experiment_report("tiny-demo", db, overrides=(CLIP_RULE,)).read_text()
    assert 'id="set-apart"' in page and "4 prompt(s)" in page and "not the frozen rule" in page
    # re-scored with the rule's model: the same samples decide again
    score([runs.root], db, metrics=["clip_score"], clip_model=str(ours), force=True)
    deltas, _, unavailable = _deltas(db)
    assert set(deltas) == set(dev_ids(4)) and not unavailable


def test_a_rule_frozen_without_a_model_variable_takes_the_metrics_default_only(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A route of our own: the rule was frozen with no HYPERGRID_CLIP_MODEL (its model is clip_score's default hub
    model), and everything was scored with `assess score --clip-model <folder>`, which no variable records: the
    folder's scores are not the rule's."""
    from assess.metrics.model_identity import rule_model

    ours = tmp_path / "clip"
    ours.mkdir()
    (ours / "config.json").write_text('{"model_type": "clip"}')
    monkeypatch.delenv("HYPERGRID_CLIP_MODEL", raising=False)
    rule = experiment_rule(_composed())
    model = rule_model(rule, "clip_score")
    assert model is not None and model.identity is None and "the default openai/clip" in model.named
    from assess.metrics.model_identity import model_config

    why = model.why_not(model_config(str(ours)))
    assert why is not None and "set apart" in why, why
    assert rule_model(rule, "ssim") is None  # a metric without a model is not checked


def test_a_score_names_the_rules_model_or_is_set_apart() -> None:
    """The check in the default tier: a folder frozen by content admits its own digest only."""
    from assess.metrics.model_identity import RuleModel

    model = RuleModel("clip_score", "HYPERGRID_CLIP_MODEL=/m", "/m", "sha256:aaaa")
    assert model.why_not("model=sha256:aaaa") is None
    assert model.why_not("model=sha256:aaaa processor=sha256:cccc") is None
    assert "model=sha256:bbbb, not the frozen rule's clip_score model (HYPERGRID_CLIP_MODEL=/m: sha256:aaaa)" in \
        str(model.why_not("model=sha256:bbbb"))
    assert "model=unnamed" in str(model.why_not(None))


def test_the_rules_folder_edited_in_place_after_the_freeze_is_another_model(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A route of our own: the rule froze HYPERGRID_CLIP_MODEL's folder by content; its weights replaced in place
    afterwards (same path, same variable), every new score names the new digest and is set apart: the rule holds the
    digest of its first launch, not the path."""
    from assess.metrics.model_identity import model_config, rule_model

    folder = tmp_path / "clip"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "clip"}')
    (folder / "model.safetensors").write_bytes(b"A" * 64)
    monkeypatch.setenv("HYPERGRID_CLIP_MODEL", str(folder))
    rule = experiment_rule(_composed())
    model = rule_model(rule, "clip_score")
    assert model is not None and model.why_not(model_config(str(folder))) is None
    (folder / "model.safetensors").write_bytes(b"B" * 64)
    why = model.why_not(model_config(str(folder)))
    assert why is not None and "set apart" in why and rule["metric_models"]["HYPERGRID_CLIP_MODEL"]["identity"] in why
