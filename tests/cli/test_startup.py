"""Start-up (issue 19, items 5 and 7): litellm (a 3-8 s import) is imported only where a request is made; a command
that makes none (`status`, `context`, `recall`, a repeated provider recall, `agent -m` without a key) never imports
it, which `python -X importtime` shows. The ONNX fast path comes with the package (onnx is a runtime dependency) and
third-party progress bars never reach the terminal. Timings are measured in benchmarks/bench_startup.py, not here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.embedding_server import embedding_server
from tests.service.test_memory_service import make_workspace

pytestmark = pytest.mark.slow


def run(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The console script under `python -X importtime`: the result and the top-level packages it imported."""
    full = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    full.update(LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", COLUMNS="200")
    full.update(env)
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memclaw.cli.main", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    imported = {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s*([\w.]+)$", p.stderr, re.M)}
    p.stderr = "".join(line for line in p.stderr.splitlines(keepends=True) if not line.startswith("import time:"))
    return p, imported


@pytest.fixture
def root(tmp_path) -> Path:
    return make_workspace(tmp_path / "ws").root


def test_commands_that_make_no_request_do_not_import_litellm(root):
    for args in (("status",), ("context", "where does my sister live"), ("recall", "sister")):
        p, imported = run(*args, "-w", str(root), MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini")
        assert p.returncode == 0, (args, p.stderr)
        assert "litellm" not in imported and "openai" not in imported, args
        assert "torch" not in imported, args  # the ONNX export is there: no torch either
    p, _ = run("status", "--json", "-w", str(root), MEMCLAW_AGENT__MODEL="anthropic/claude-3-5-haiku-latest")
    assert "ANTHROPIC_API_KEY" in json.loads(p.stdout)["model_key_missing"]  # and it still knows the key is missing


def test_agent_without_a_key_says_so_before_loading_anything_heavy(root):
    p, imported = run("agent", "-m", "hello", "-w", str(root), MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini")
    assert (p.returncode, p.stdout) == (5, "")
    assert p.stderr == (
        "Error: no API key for openai/gpt-4o-mini: set OPENAI_API_KEY in the environment (or agent.api_key in "
        "config.toml)\n"
    )
    assert not imported & {"litellm", "openai", "onnxruntime", "chromadb", "torch"}, imported
    assert not (root / "sessions").exists()  # nothing was started


def test_a_repeated_provider_recall_makes_no_request_and_does_not_import_litellm(root):
    with embedding_server() as server:
        env = {
            "MEMCLAW_EMBEDDINGS__MODEL": "openai/text-embedding-hashed",
            "MEMCLAW_EMBEDDINGS__API_BASE": server.url,
            "OPENAI_API_KEY": "sk-test-not-a-real-key",
        }
        p, imported = run("recall", "where does my sister live", "--json", "-w", str(root), **env)
        assert p.returncode == 0, p.stderr
        assert "litellm" in imported  # the first one embeds the memories and the query
        first = len(server.requests)
        assert first >= 2
        p2, imported = run("recall", "where does my sister live", "--json", "-w", str(root), **env)
        assert p2.returncode == 0, p2.stderr
        assert len(server.requests) == first  # the query's vector came from the on-disk cache
        assert json.loads(p2.stdout) == json.loads(p.stdout)
        assert "litellm" not in imported and "onnxruntime" not in imported
        p3, _ = run("recall", "who is my manager", "--json", "-w", str(root), **env)
        assert p3.returncode == 0 and len(server.requests) == first + 1  # a new query: one request


def test_the_onnx_exporter_is_a_runtime_dependency():
    """A plain `pip install memclaw` must be able to make the ONNX export (else every start runs torch)."""
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text("utf-8"))["project"]
    runtime = {re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in project["dependencies"]}
    assert {"onnx", "onnxruntime", "torch", "sentence-transformers", "tiktoken"} <= runtime


def test_third_party_progress_bars_stay_off_the_terminal(root, tmp_path):
    # the torch backend loads the model through transformers, which draws "Loading weights 0/103" unless told not to
    p, imported = run("recall", "sister", "-w", str(root), MEMCLAW_EMBEDDINGS__BACKEND="torch")
    assert p.returncode == 0, p.stderr
    assert "torch" in imported
    assert "Loading weights" not in p.stderr and "it/s]" not in p.stderr and "\r" not in p.stderr, p.stderr


def test_the_console_script_runs_main_which_keeps_exit_codes_and_exit_handlers(root):
    """`main` (the console script) tunes the garbage collector for a short life: the exit code and the interpreter's
    exit handlers (logging's flush among them) are as with `run`."""
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["scripts"]["memclaw"] == "memclaw.cli.main:main"
    code = (
        "import atexit, sys; atexit.register(lambda: sys.stderr.write('handlers ran\\n'))\n"
        "sys.argv = ['memclaw', 'recall', 'x', '--mode', 'nonsense', '-w', sys.argv[1]]\n"
        "from memclaw.cli.main import main; main()"
    )
    p = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unknown recall mode" in p.stderr and p.stderr.endswith("handlers ran\n"), p.stderr
