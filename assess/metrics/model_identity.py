"""The identity of a metric's model (CLIP, the preference models), kept with every score it produces.

A score's `config` is `model=<identity>`: a local folder's content digest or a hub model's resolved commit
(render.rundir.identity.model_identity), so two scores are comparable exactly when the same weights produced them,
whatever the model was called or wherever its folder lies. A folder is asked again on every call (one stat per
file, its digest cached by file state and never trusted within a timestamp tick of a change): weights swapped
under the same name in a running process, even with the same size and a restored mtime, are another model. Only
a hub id's resolution is kept for the process (a commit is content already).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

_HUB: dict[str, str] = {}  # hub id -> its identity, resolved once per process (a network round trip)


def metric_model_identity(name: str) -> str:
    """`sha256:...` of a local folder, `hub:<commit>` of a hub model, or `unresolved` when it cannot be had here
    (the metric is then unavailable with its reason: no score carries an unresolved identity)."""
    from render.rundir import model_identity

    folder = Path(name).expanduser()
    if folder.is_dir():
        return _resolved(lambda: model_identity(str(folder), None))
    if name not in _HUB:  # unresolved too: an offline process asks the hub once
        _HUB[name] = _resolved(lambda: model_identity(name, None))
    return _HUB[name]


def _resolved(identity: Callable[[], str]) -> str:
    try:
        return identity()
    except (ValueError, OSError):
        return "unresolved"


def model_config(name: str) -> str:
    """The score's config: the model's identity; its name only when the model cannot be had here (then every
    score of it is unavailable, with the reason), its credentials redacted: the config is stored and compared
    as the index keeps it (render.rundir.redact)."""
    from render.rundir.redact import redact

    identity = metric_model_identity(name)
    return f"model={redact(name)}" if identity == "unresolved" else f"model={identity}"
