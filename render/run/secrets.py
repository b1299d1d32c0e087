"""Credentials stay with the process that needs them: a launcher hands them to its workers through a file only the
job's user can read, never through the engine's environment.

Ray shows a task's or a job's `runtime_env` in its dashboard (`/api/v0/tasks?detail=1`, `/api/jobs/`) and logs it
(`runtime_env_agent.log`); HF_TOKEN and a hub endpoint's password went there with every other passed variable. So a
launcher splits what it passes (`split_secrets`): the plain variables go into the engine's environment as before, the
credentials into a file of mode 0600 in a folder of mode 0700 of the sweep (`write_secrets`: the sweep folder is on
the filesystem every node shares, which the launchers need anyway), and only the file's path travels; the worker (or
a detached sweep's driver) reads it into its own environment before anything else (`adopt_secrets`).

A credential is a variable whose name says so (TOKEN, PASSWORD, SECRET, KEY, CREDENTIAL, AUTH) or whose value
carries one (a URL with user:password@, a token= parameter: render.rundir.redact).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from render.rundir.redact import redact

SECRETS_ENV = "HYPERGRID_SECRETS_FILE"  # a detached driver's credentials file (its path only: no secret)
SECRETS_DIR = ".secrets"  # in the sweep folder, mode 0700
_SECRET_NAME = re.compile(r"TOKEN|PASSW|SECRET|KEY|CREDENTIAL|AUTH", re.IGNORECASE)


def is_secret(name: str, value: str) -> bool:
    """Whether the variable is a credential: by its name, or by a credential in its value."""
    return bool(_SECRET_NAME.search(name)) or redact(value) != value


def split_secrets(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the plain variables, the credentials) of `env`."""
    plain = {k: v for k, v in env.items() if not is_secret(k, v)}
    return plain, {k: v for k, v in env.items() if k not in plain}


def write_secrets(secrets: Mapping[str, str], sweep_dir: Path) -> Path | None:
    """The credentials in a new file only this user can read (0600, in a 0700 folder of the sweep); None when there
    are none."""
    if not secrets:
        return None
    folder = sweep_dir / SECRETS_DIR
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)  # whatever the umask or an earlier mkdir made it
    fd, name = tempfile.mkstemp(dir=folder, prefix="env-", suffix=".json")  # 0600
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(dict(secrets), f)
        f.flush()
        os.fsync(f.fileno())
    return Path(name)


def adopt_secrets(path: str | Path | None, remove: bool = False) -> None:
    """Read the credentials file at `path` into this process's environment (nothing when None); `remove`: delete it
    after (a detached driver's, read once)."""
    if not path:
        return
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RuntimeError(f"{path}: the credentials this job was handed cannot be read ({error}); the sweep folder "
                           "must be on a filesystem every node mounts at the same path (docs/launchers.md)") from error
    os.environ.update({str(k): str(v) for k, v in values.items()})
    if remove:
        Path(path).unlink(missing_ok=True)


def forget(path: Path | None) -> None:
    """Remove a credentials file once its jobs have ended (and its folder, when it is left empty)."""
    if path is None:
        return
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass  # another sweep's file is still there
