"""Hostile input that used to end in a traceback or a misleading message, through the console script: a deeply
nested config.toml, a section name of undecodable argv bytes, a malformed model reply (litellm over real HTTP to the
scripted server). Each: one clear line on stderr, the documented exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm_server import scripted_server

pytestmark = pytest.mark.slow


def _memclaw(*args: str | bytes) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MEMCLAW_AGENT__MODEL": "openai/gpt-4o-mini",
        "MEMCLAW_AGENT__MAX_RETRIES": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COLUMNS": "400",
    }
    argv = [sys.executable, "-m", "memclaw.cli.main", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def _one_line(p: subprocess.CompletedProcess[str], code: int) -> str:
    assert p.returncode == code, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def test_a_deeply_nested_config_is_one_line_exit_2(memclaw_home: Path) -> None:
    assert _memclaw("onboard").returncode == 0
    with (memclaw_home / "config.toml").open("a", encoding="utf-8") as f:
        f.write("a = " + "[" * 5000 + "]" * 5000 + "\n")
    for args in (("status",), ("recall", "hello")):
        line = _one_line(_memclaw(*args), 2)
        assert "config.toml" in line and "nest" in line


def test_a_section_of_undecodable_bytes_is_repaired_not_blamed_on_the_file(memclaw_home: Path) -> None:
    assert _memclaw("onboard").returncode == 0
    p = _memclaw("memory", "add", "--section", os.fsdecode(b"sec\xff"), "I keep bees")
    assert p.returncode == 0, p.stderr
    text = (memclaw_home / "workspace" / "memory" / "MEMORY.md").read_text("utf-8")
    assert "# sec\ufffd" in text and "I keep bees" in text


def test_a_malformed_model_reply_is_one_clean_line(memclaw_home: Path, monkeypatch) -> None:
    assert _memclaw("onboard").returncode == 0
    with scripted_server(monkeypatch) as server:
        server.raw('{"choices": [{"message": {"role": "assistant", "content": 5, "tool_calls": "x"}}]}', times=3)
        line = _one_line(_memclaw("agent", "-m", "hello"), 5)
    assert "Invalid response object" in line and "Pydantic" not in line
