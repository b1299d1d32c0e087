"""Third-party warnings that say nothing to a hypergrid user, filtered at the entry points only (`assess`,
`python -m render`): each by its exact message and category, never a whole category or module, so a new warning
still shows. Library code and tests see every warning as Python would show it."""

from __future__ import annotations

import logging
import re
import warnings

# (message regex, category, why it is noise here)
THIRD_PARTY: tuple[tuple[str, type[Warning], str], ...] = (
    (r"`torch\.utils\._pytree\._register_pytree_node` is deprecated", FutureWarning,
     "diffusers/transformers register their output classes through torch's old name; nothing for a user to do"),
    (r"torch\.utils\._pytree\._register_pytree_node is deprecated", UserWarning,
     "the same, as older torch releases word it"),
)

# (logger, message regex, why): warnings third parties send through `logging`, not `warnings`
THIRD_PARTY_LOGS: tuple[tuple[str, str, str], ...] = (
    ("torch.utils._pytree", r"is an Enum subclass and is now natively supported by torch\.compile",
     "torchao (imported by diffusers and transformers for their quantizers) registers its enums the old way"),
)


class _Drop(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


def filter_third_party_warnings() -> None:
    """Install the filters (idempotent: warnings.filterwarnings replaces an equal filter, a logger's filter of the
    same message is not added twice)."""
    for message, category, _ in THIRD_PARTY:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name, message, _ in THIRD_PARTY_LOGS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Drop) and f.pattern.pattern == message for f in logger.filters):
            logger.addFilter(_Drop(message))
