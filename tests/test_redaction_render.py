"""Issue 29: a credential given to the renderer (an override holding a URL with a password or a token) is kept in
none of the files a sweep writes, nor in its log or its terminal output; environment variables are recorded by
allow-list only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_render

SECRET = "s3cr3t-pw"


@pytest.mark.slow
def test_a_sweep_keeps_no_credential_anywhere(tiny_cache: Path, tmp_path: Path) -> None:
    url = f"http://user:{SECRET}@hub.example.org/x?token={SECRET}"
    result = run_render("-m", "model=tiny", "prompts.limit=1", f"tag='{url}'", cwd=tmp_path,
                        env_extra={"OMP_NUM_THREADS": "1", "HF_TOKEN": SECRET, "MY_API_KEY": SECRET})
    assert result.returncode == 0, result.stderr[-3000:]
    assert SECRET not in result.stdout + result.stderr
    files = [p for p in (tmp_path / "outputs").rglob("*") if p.is_file() and p.suffix != ".png"]
    assert any(p.name == "run.json" for p in files)
    leaks = [p for p in files if SECRET.encode() in p.read_bytes()]
    assert not leaks
    (run_json,) = [p for p in files if p.name == "run.json" and "multirun" in str(p)]
    assert "http://***@hub.example.org/x?token=***" in run_json.read_text()
