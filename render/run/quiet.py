"""Third-party noise that says nothing to a hypergrid user, filtered at the entry points only (`assess`,
`python -m render`, the submitit worker of a batch, a parallel cell's `python -m render.run.ranks`): each warning by
its exact message and category (and the module it is raised from where one is known), each log record by its
logger and message, never a whole category, module or logger, so a new warning still shows. Library code and
tests see every warning as Python would show it.

`HYPERGRID_VERBOSE=1` (what `assess -v` sets; worker and rank processes inherit it) installs nothing: every line
shows. A dropped log record is held (`held`), so an error it explains can still say so (render.axes.quant)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from collections.abc import Iterator

VERBOSE_ENV = "HYPERGRID_VERBOSE"

# (message regex, category, module regex ("" any), why it is noise here)
THIRD_PARTY: tuple[tuple[str, type[Warning], str, str], ...] = (
    (r"`torch\.utils\._pytree\._register_pytree_node` is deprecated", FutureWarning, "",
     "diffusers/transformers register their output classes through torch's old name; nothing for a user to do"),
    (r"torch\.utils\._pytree\._register_pytree_node is deprecated", UserWarning, "",
     "the same, as older torch releases word it"),
    (r"`torch\.distributed\._functional_collectives\.all_gather_tensor` is deprecated", FutureWarning,
     r"diffusers\.hooks\.context_parallel",
     "diffusers' Ulysses attention (parallel=ulysses) gathers through torch's old name, once a render"),
)

# (logger, message regex, why): warnings third parties send through `logging`, not `warnings`
THIRD_PARTY_LOGS: tuple[tuple[str, str, str], ...] = (
    ("torch.utils._pytree", r"is an Enum subclass and is now natively supported by torch\.compile",
     "torchao (imported by diffusers and transformers for their quantizers) registers its enums the old way"),
    ("torchao", r"^Failed to load \S*/torchao/_C\w*\.\S*\.so: ",
     "torchao's optional compiled kernels (mxfp8, CUTLASS sm90a) that a CPU or another torch build cannot load; "
     "held, and named in the error of a cell whose torchao quantization fails (render.axes.quant)"),
    ("torchao.kernel.intmm", r"^Warning: Detected no triton, on systems without Triton certain kernels will not work$",
     "torchao's int8 matmul falls back to torch's without triton (every CPU machine); held like the kernels above"),
    ("diffusers.quantizers.torchao.torchao_quantizer", r"^Unable to import `torchao` Tensor objects\. ",
     "diffusers registers safe globals for checkpoints serialized by torchao; hypergrid quantizes at load and "
     "never reads one"),
    ("transformers.utils.import_utils", r"requires torchvision \(not installed\); falling back to `\w+ImageProcessorPil`",
     "the twins' CLIP/Siglip image processors work with PIL; LPIPS, which does need torchvision, says so in `assess score`"),
)


def verbose() -> bool:
    """Whether the user asked to see everything: `HYPERGRID_VERBOSE` set to anything but empty or 0."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


class _Drop(logging.Filter):
    """Drops the records of one logger whose message matches, and holds them for an error that needs them."""

    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)
        self.held: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.pattern.search(message):
            self.held.append(message)
            return False
        return True


def filter_third_party_warnings() -> None:
    """Install the filters unless verbose (idempotent: warnings.filterwarnings replaces an equal filter, a
    logger's filter of the same message is not added twice)."""
    if verbose():
        return
    for message, category, module, _ in THIRD_PARTY:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
    for name, message, _ in THIRD_PARTY_LOGS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Drop) and f.pattern.pattern == message for f in logger.filters):
            logger.addFilter(_Drop(message))


def show_everything() -> None:
    """Verbose from here on, for this process and the ones it starts: the filters installed come off."""
    os.environ[VERBOSE_ENV] = "1"
    for message, category, module, _ in THIRD_PARTY:  # ahead of our "ignore": shown as Python shows a warning
        warnings.filterwarnings("default", message=message, category=category, module=module)
    for name, _, _ in THIRD_PARTY_LOGS:
        logger = logging.getLogger(name)
        for f in [f for f in logger.filters if isinstance(f, _Drop)]:
            logger.removeFilter(f)


def held(*loggers: str) -> list[str]:
    """The records of these loggers this process dropped, in order per logger (none when nothing was filtered)."""
    return [message for name in loggers for f in logging.getLogger(name).filters if isinstance(f, _Drop)
            for message in f.held]


@contextlib.contextmanager
def saving() -> Iterator[None]:
    """transformers' "Writing model shards" bars (its `save_pretrained` of each text encoder) off while a
    pipeline is written into the cache; its own setting is back after. Shown when verbose."""
    if verbose():
        yield
        return
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()
