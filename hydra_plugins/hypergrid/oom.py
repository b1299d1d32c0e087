"""The kernel's out-of-memory killer, as this machine's memory cgroup counts it. A job whose worker vanished
without a word while the count rose was killed for memory: SIGKILL leaves a process no chance to record it."""

from __future__ import annotations

from pathlib import Path

# cgroup v2, then v1: each holds an "oom_kill N" line (kernel 4.13 and later)
EVENT_FILES = (Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control"))


def oom_kills() -> int | None:
    """Processes of this cgroup the out-of-memory killer ended so far; None where the kernel does not say."""
    for path in EVENT_FILES:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def oom_note(before: int | None) -> str | None:
    """What to add to a dead job's message when the out-of-memory killer ended a process since `before`."""
    now = oom_kills()
    if before is None or now is None or now <= before:
        return None
    return f"the kernel's out-of-memory killer ended {now - before} process(es) meanwhile (cgroup oom_kill {before} -> {now})"
