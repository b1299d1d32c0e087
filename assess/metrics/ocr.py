"""Text in the image, read by OCR on real weights: `ocr` (the text read in a sample against the text read in its
anchor's) and `ocr_prompt` (against the text the prompt quotes: `a sign that says "OPEN"`).

The reader is rapidocr-onnxruntime (Apache-2.0): PP-OCRv4's detector and recogniser, shipped inside its wheel and
run by onnxruntime on the CPU, so the metric needs no download. An optional extra (`pip install 'hypergrid[ocr]'`);
without it both metrics are unavailable with that line (a SetupProblem). The reader's settings: the detector sees
the image at its own size up to 960 px on its longer side (rapidocr's default upsamples a small image to 736 px on
its shorter side, 10-30x slower here for no better read), no angle classifier (text the model renders upright).

Both score only the samples whose prompt quotes text (`quoted_text`); a prompt that quotes none is not a text
prompt, and the metrics do not apply to it: no score and no "unavailable" (MetricSpec.text_prompts_only). Texts
are compared after `normalized`: case folded, and everything but letters and digits dropped (the recogniser often
drops or adds the space between words); the value is the normalised Levenshtein similarity, 1 - distance / the
longer length (rapidfuzz), in [0, 1]: 1 when both read the same, 0 when nothing is shared or one reads nothing.
Two empty reads compare as 1 (the anchor has no legible text either). The detail holds what was read and the text
it was compared with (JSON).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from collections import OrderedDict
from collections.abc import Mapping
from functools import cache
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from assess.metrics.base import Outcome, SampleInput, SampleMetric, SetupProblem
from render.compose.metric_registry import OCR, OCR_PROMPT

if TYPE_CHECKING:
    import numpy as np

PACKAGES = ("rapidocr_onnxruntime", "rapidfuzz")
INSTALL = "pip install 'hypergrid[ocr]'"
READER_SETTINGS = {"det_limit_type": "max", "det_limit_side_len": 960, "use_cls": False}
# A double-quoted span (straight or curly), or a single-quoted one not inside a word (an apostrophe is no quote)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|(?<!\w)'([^']+)'(?!\w)")
READS_KEPT = 256  # reads kept by content: an anchor's image is read once for all its cells, a sample's once for both


def quoted_text(prompt: str | None) -> str | None:
    """The text a prompt asks to be written: its quoted spans joined by a space; None when it quotes none."""
    if not prompt:
        return None
    spans = [next(g for g in m.groups() if g is not None).strip() for m in _QUOTED.finditer(prompt)]
    spans = [s for s in spans if s]
    return " ".join(spans) if spans else None


def normalized(text: str) -> str:
    """What two texts are compared on: case folded, letters and digits only."""
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def similarity(read: str, expected: str) -> float:
    """1 - normalised Levenshtein distance of the two normalised texts; 1 for two empty ones."""
    from rapidfuzz.distance import Levenshtein

    a, b = normalized(read), normalized(expected)
    if not a and not b:
        return 1.0
    return float(Levenshtein.normalized_similarity(a, b))


def missing_packages() -> SetupProblem | None:
    """Why the reader cannot run on this machine (a package not installed), or None."""
    absent = [p for p in PACKAGES if importlib.util.find_spec(p) is None]
    if not absent:
        return None
    names = ", ".join(p.replace("_", "-") for p in absent)
    return SetupProblem(f"the OCR metrics need {names}, not installed: `{INSTALL}` (PP-OCRv4's weights ship inside "
                        "rapidocr-onnxruntime's wheel; nothing is downloaded)", f"{names} not installed", f"`{INSTALL}`")


@cache
def reader() -> Any:
    """rapidocr's reader with this module's settings, built once per process (about 1 s)."""
    from rapidocr_onnxruntime import RapidOCR

    return RapidOCR(**READER_SETTINGS)


def read_text(image: np.ndarray) -> str:
    """The text in an H x W x 3 uint8 RGB image, its lines in reading order joined by spaces ("" when none)."""
    import numpy as np

    bgr = np.ascontiguousarray(image[..., ::-1])  # rapidocr takes OpenCV's channel order
    found, _elapsed = reader()(bgr)
    return " ".join(str(text) for _box, text, _score in (found or []))


class _Reads:
    """Reads of images by content, the most recent READS_KEPT kept."""

    def __init__(self) -> None:
        self.kept: OrderedDict[str, str] = OrderedDict()

    def __call__(self, image: np.ndarray) -> str:
        key = hashlib.blake2b(image.tobytes(), digest_size=16).hexdigest() + str(image.shape)
        if key in self.kept:
            self.kept.move_to_end(key)
            return self.kept[key]
        text = self.kept[key] = read_text(image)
        if len(self.kept) > READS_KEPT:
            self.kept.popitem(last=False)
        return text


READS = _Reads()  # one for both metrics: a sample's image is read once for `ocr` and `ocr_prompt`


class _OCRMetric(SampleMetric):
    """Reads each sample's image and compares it with what `against` gives for it."""

    reads = READS

    @classmethod
    def from_options(cls, models: Mapping[str, str] | None = None) -> SampleMetric:
        return cls()

    @property
    def config(self) -> str:
        if missing_packages() is not None:
            return ""
        settings = ",".join(f"{k}={v}" for k, v in sorted(READER_SETTINGS.items()))
        return f"rapidocr-onnxruntime={version('rapidocr-onnxruntime')} PP-OCRv4 {settings}"

    def against(self, item: SampleInput) -> tuple[str, str] | str:
        """(what the sample's read is compared with, what that is) or why there is nothing to compare with."""
        raise NotImplementedError

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        problem = missing_packages()
        if problem is not None:
            return [Outcome.unavailable(problem) for _ in inputs]
        outcomes = []
        for item in inputs:
            found = self.against(item)
            if isinstance(found, str):
                outcomes.append(Outcome.unavailable(found))
                continue
            expected, what = found
            read = self.reads(item.image)
            outcomes.append(Outcome.of(similarity(read, expected), json.dumps({"read": read, what: expected})))
        return outcomes


class OCRMetric(_OCRMetric):
    """The text read in the sample against the text read in its anchor's sample (same prompt and seed)."""

    spec = OCR

    def against(self, item: SampleInput) -> tuple[str, str] | str:
        assert item.reference is not None  # SampleMetric.score checked it
        return self.reads(item.reference), "anchor_read"


class OCRPromptMetric(_OCRMetric):
    """The text read in the sample against the text its prompt quotes."""

    spec = OCR_PROMPT

    def against(self, item: SampleInput) -> tuple[str, str] | str:
        expected = quoted_text(item.prompt)
        if expected is None:
            return "the prompt quotes no text"
        return expected, "prompt_text"
