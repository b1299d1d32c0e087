"""Third-party warnings that say nothing to a hypergrid user, filtered at the entry points only (`assess`,
`python -m render`): each by its exact message and category, never a whole category or module, so a new warning
still shows. Library code and tests see every warning as Python would show it."""

from __future__ import annotations

import warnings

# (message regex, category, why it is noise here)
THIRD_PARTY: tuple[tuple[str, type[Warning], str], ...] = (
    (r"`torch\.utils\._pytree\._register_pytree_node` is deprecated", FutureWarning,
     "diffusers/transformers register their output classes through torch's old name; nothing for a user to do"),
    (r"torch\.utils\._pytree\._register_pytree_node is deprecated", UserWarning,
     "the same, as older torch releases word it"),
)


def filter_third_party_warnings() -> None:
    """Install the filters (idempotent: warnings.filterwarnings replaces an equal filter)."""
    for message, category, _ in THIRD_PARTY:
        warnings.filterwarnings("ignore", message=message, category=category)
