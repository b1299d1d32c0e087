"""The identity of a metric's model (CLIP, the preference models), kept with every score it produces.

A score's `config` is `model=<identity>`: a local folder's content digest or a hub model's resolved commit
(render.rundir.identity.model_identity, cached by size, mtime, ctime and inode), so two scores are comparable exactly when
the same weights produced them, whatever the model was called or wherever its folder lies.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def metric_model_identity(name: str) -> str:
    """`sha256:...` of a local folder, `hub:<commit>` of a hub model, or `unresolved` when it cannot be had here
    (the metric is then unavailable with its reason: no score carries an unresolved identity)."""
    from pathlib import Path

    from render.rundir import model_identity

    try:
        return model_identity(str(Path(name).expanduser()) if Path(name).expanduser().is_dir() else name, None)
    except (ValueError, OSError):
        return "unresolved"


def model_config(name: str) -> str:
    """The score's config: the model's identity; its name only when the model cannot be had here (then every
    score of it is unavailable, with the reason), its credentials redacted: the config is stored and compared
    as the index keeps it (render.rundir.redact)."""
    from render.rundir.redact import redact

    identity = metric_model_identity(name)
    return f"model={redact(name)}" if identity == "unresolved" else f"model={identity}"
