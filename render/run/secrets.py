"""Credentials stay with the process that needs them: a launcher hands them to its workers through a file only the
job's user can read, never through the engine's environment or its records.

Ray shows a task's or a job's `runtime_env` and a job's entrypoint in its dashboard (`/api/v0/tasks?detail=1`,
`/api/jobs/`) and logs them (`runtime_env_agent.log`); sbatch hands the submitting shell's environment to SLURM,
which keeps it with the job (`sacct --env-vars` where the cluster stores job environments); HF_TOKEN and a hub
endpoint's password went there with every other variable. So every launcher splits what it hands over (`hand`): the
plain variables (and the plain arguments of a command line) go to the engine as before, the credentials (and the
arguments that carry one: an override with user:password@ or token=) into a file of mode 0600 in a folder of mode
0700 of the sweep (`write_secrets`: the sweep folder is on the filesystem every node shares, which the launchers need
anyway), and only the file's path travels; while the engine is handed the jobs the credentials are out of this
process's environment (`withheld`: sbatch and submitit's local controller inherit it); the worker (or a detached
sweep's driver) reads the file into its own environment before anything else (`adopt_secrets`).

A credential is a variable whose name says so (TOKEN, PASSWORD, SECRET, KEY, CREDENTIAL, AUTH) or whose value
carries one (a URL with user:password@, a token= parameter: render.rundir.redact).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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


def carries_secret(argument: str) -> bool:
    """Whether a command-line argument (an override) carries a credential: user:password@ in a URL, token=..."""
    return redact(argument) != argument


def private_folder(folder: Path) -> Path:
    """`folder`, made (with its parents) and readable by this user only (0700, whatever the umask or an earlier mkdir
    made it)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def write_secrets(secrets: Mapping[str, str], sweep_dir: Path, argv: Sequence[str] = ()) -> Path | None:
    """The credentials (variables, and the arguments of a command line that carry one) in a new file only this user
    can read (0600, in a 0700 folder of the sweep); None when there are none."""
    if not secrets and not argv:
        return None
    fd, name = tempfile.mkstemp(dir=private_folder(sweep_dir / SECRETS_DIR), prefix="env-", suffix=".json")  # 0600
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"env": dict(secrets), "argv": list(argv)}, f)
        f.flush()
        os.fsync(f.fileno())
    return Path(name)


@dataclass(frozen=True)
class Handed:
    """What a launcher hands an engine: the plain variables and arguments, and the file the credentials are in."""

    env: dict[str, str]
    argv: list[str]
    file: Path | None


def hand(env: Mapping[str, str], sweep_dir: Path, argv: Sequence[str] = ()) -> Handed:
    """`env` and `argv` split: the plain ones to hand the engine, the credentials written to their file."""
    plain, credentials = split_secrets(env)
    return Handed(plain, [a for a in argv if not carries_secret(a)],
                  write_secrets(credentials, sweep_dir, [a for a in argv if carries_secret(a)]))


@contextmanager
def withheld(names: Sequence[str]) -> Iterator[None]:
    """These variables out of this process's environment while the engine is handed the jobs (a command it starts,
    sbatch or submitit's local controller, inherits the environment), put back after."""
    kept = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(kept)


def adopt_secrets(path: str | Path | None, remove: bool = False) -> list[str]:
    """Read the credentials file at `path` into this process's environment (nothing when None); its arguments (a
    detached driver's overrides that carry a credential, to append to its command line). `remove`: delete the file
    after (a detached driver's, read once)."""
    if not path:
        return []
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
        env, argv = values["env"], values["argv"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise RuntimeError(f"{path}: the credentials this job was handed cannot be read ({error}); the sweep folder "
                           "must be on a filesystem every node mounts at the same path (docs/launchers.md)") from error
    os.environ.update({str(k): str(v) for k, v in env.items()})
    if remove:
        Path(path).unlink(missing_ok=True)
    return [str(a) for a in argv]


def forget(path: Path | None) -> None:
    """Remove a credentials file once its jobs have ended (and its folder, when it is left empty)."""
    if path is None:
        return
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass  # another sweep's file is still there
