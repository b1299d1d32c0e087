"""The ranks of a parallel cell (render.axes.parallel): rank 0 is the process that renders the cell; it
starts ranks 1..width-1 itself, as `python -m render.run.ranks <job>` processes with torch.distributed's
environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK), and joins them in one process
group (gloo on the CPU, nccl on CUDA: rank r on cuda:r of the GPUs the cell was given).

Only rank 0 writes the run directory. Every pipeline call of rank 0 is announced first (`lead`: the
sample's prompt and seed, broadcast), and the other ranks make the same call (`follow`), so their
collectives meet. When a rank fails or is killed, rank 0's next collective fails; `team` then names
the rank and its cause (`rank 1 (pid N) was killed by SIGKILL`) in the error FAILED.json records.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Optional

from render.errors import RenderError

TIMEOUT = datetime.timedelta(minutes=10)  # a rank that never joins, or a collective that never meets
_LEADING: Optional[str] = None  # the cell key this process leads a team for (rank 0): that cell's calls are announced


class RankFailed(RenderError, RuntimeError):
    """A rank of a parallel cell failed or was killed."""


def backend(device: str) -> str:
    return "nccl" if device.startswith("cuda") else "gloo"


def rank_device(device: str, rank: int) -> str:
    """Rank r of a CUDA cell runs on cuda:r of the GPUs the cell holds (as diffusers' mesh expects)."""
    return f"cuda:{rank}" if device.startswith("cuda") else device


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cause(rank: int, process: subprocess.Popen, log: Path) -> str:
    """What ended a rank, in words; its last log line when it exited on its own."""
    code = process.poll()
    if code is None:
        return f"rank {rank} (pid {process.pid}) was still running"
    if code < 0:
        return f"rank {rank} (pid {process.pid}) was killed by {signal.Signals(-code).name}"
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()] if log.exists() else []
    return f"rank {rank} (pid {process.pid}) exited with {code}" + (f": {lines[-1]}" if lines else "")


def lead(cell_key: str, text: str, seed: int) -> None:
    """Rank 0, before each pipeline call of `cell_key`: the other ranks make the same call (a no-op outside a team,
    and for another cell's call: a side-by-side session times width-1 cells between a parallel cell's calls)."""
    if _LEADING == cell_key:
        import torch.distributed as dist

        dist.broadcast_object_list([(text, seed)], src=0)


def follow() -> Optional[tuple[str, int]]:
    """Another rank: the next call rank 0 makes, or None when the cell is done."""
    import torch.distributed as dist

    message: list[Any] = [None]
    dist.broadcast_object_list(message, src=0)
    return message[0]


@contextlib.contextmanager
def team(job: Any, width: int, pipelines: Any) -> Iterator[None]:
    """Rank 0's side of a parallel cell: start the other ranks, join the process group, and on leaving
    end them (a failure names the rank that caused it). The pipeline loaded for the team is forgotten
    with it: its mesh belongs to this process group."""
    global _LEADING
    import torch.distributed as dist

    work = Path(tempfile.mkdtemp(prefix="hypergrid-ranks-"))
    (work / "job.pkl").write_bytes(pickle.dumps(job))
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(width)}
    ranks: list[tuple[int, subprocess.Popen, Path]] = []
    for rank in range(1, width):
        log = work / f"rank{rank}.log"
        with log.open("w") as out:
            process = subprocess.Popen([sys.executable, "-m", "render.run.ranks", str(work / "job.pkl")], stdout=out,
                                       stderr=subprocess.STDOUT, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)})
        ranks.append((rank, process, log))
    try:
        dist.init_process_group(backend(job.device), init_method=f"tcp://127.0.0.1:{env['MASTER_PORT']}",
                                rank=0, world_size=width, timeout=TIMEOUT)
        _LEADING = job.cell.key
        yield
        dist.broadcast_object_list([None], src=0)
        for _, process, _ in ranks:
            process.wait(timeout=TIMEOUT.total_seconds())
    except BaseException as error:
        failed = _failures(ranks)
        if failed and isinstance(error, Exception):
            raise RankFailed("; ".join(failed) + f" (rank 0 saw {type(error).__name__}: {error})") from error
        raise
    finally:
        _LEADING = None
        for _, process, _ in ranks:
            if process.poll() is None:
                process.kill()
                process.wait()
        if dist.is_initialized():
            dist.destroy_process_group()
        pipelines.clear()


def _failures(ranks: list[tuple[int, subprocess.Popen, Path]]) -> list[str]:
    """The ranks that ended on their own account (waiting a moment for a dying one to be reaped)."""
    failed = []
    for rank, process, log in ranks:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        if process.poll() not in (None, 0):
            failed.append(cause(rank, process, log))
    return failed


def serve(job_file: Path) -> None:
    """Rank r > 0: load the cell's pipeline sharded like rank 0's, configure it, make every call rank 0 makes."""
    import torch.distributed as dist

    from render import axes
    from render.run.loader import PipelineCache, call_kwargs, configure

    job = pickle.loads(job_file.read_bytes())
    rank = int(os.environ["RANK"])
    dist.init_process_group(backend(job.device), rank=rank, world_size=int(os.environ["WORLD_SIZE"]), timeout=TIMEOUT)
    device = rank_device(job.device, rank)
    loaded = PipelineCache().get(job.cell.model, device, axes.load_options(job.cell))

    def call(message: tuple[str, int]) -> None:
        import torch

        with torch.inference_mode():  # as rank 0's timed call
            loaded.pipe(**call_kwargs(job.cell, *message))

    def calibrate() -> None:  # MagCache's calibration render: rank 0 announces it like any call
        message = follow()
        assert message is not None, "rank 0 ended the cell during a calibration"
        call(message)

    configure(loaded, job.cell, calibrate)
    while (message := follow()) is not None:
        call(message)
    dist.destroy_process_group()


if __name__ == "__main__":
    from render.run.quiet import filter_third_party_warnings

    filter_third_party_warnings()  # a rank's log ends with its cause (`cause`), not with torchao's import noise
    serve(Path(sys.argv[1]))
