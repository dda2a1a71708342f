"""A failed request is said as what happened (issue 38.7): could not connect, closed without answering, or the
server's own status; never "InternalServerError 500 ... Connection error" for a connection that was never made.
A refused address is not asked again in the same process (a circuit breaker per endpoint), for the model and for
provider embeddings alike. Real HTTP through litellm: a bound port that does not listen, a scripted server that
answers 500, and a server that hangs up after reading the request."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memclaw.config import Config, EmbeddingsConfig
from memclaw.embedding._query_cache import QueryCache
from memclaw.embedding.provider import ProviderEmbedder
from memclaw.errors import EmbeddingUnavailable, LLMError
from memclaw.llm import client as llm_client
from memclaw.llm.client import LLMClient
from tests.llm_server import Scripted, ScriptedLLMServer

HELLO = [{"role": "user", "content": "hello"}]


def _chat(client: LLMClient, messages: list[dict]) -> object:
    """One `chat` call from this synchronous test (no running event loop)."""
    return asyncio.run(client.chat(messages))


@pytest.fixture(autouse=True)
def _fresh_circuits(monkeypatch):
    monkeypatch.setattr(llm_client, "_dead", {}, raising=False)


@contextmanager
def refusing_port() -> Iterator[socket.socket]:
    """A port bound on 127.0.0.1 that does not listen (connections are refused), reserved while the test runs."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    try:
        yield s
    finally:
        s.close()


@contextmanager
def hanging_up() -> Iterator[str]:
    """A server that reads each request and closes the connection without a byte of answer."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    finally:
        stop.set()
        srv.close()
        t.join(5)


def _client(base: str, retries: int = 2) -> LLMClient:
    cfg = Config.model_validate(
        {"agent": {"model": "openai/gpt-4o-mini", "api_base": base, "api_key": "sk-test-x", "max_retries": retries,
                   "timeout_s": 20}}
    )  # fmt: skip
    return LLMClient(cfg, backoff_base_s=0.01, max_backoff_s=0.01)


def _embedder(base: str, tmp_path: Path) -> ProviderEmbedder:
    cfg = EmbeddingsConfig(model="openai/text-embedding-3-small", api_base=base, api_key="sk-test-x", max_retries=3)
    return ProviderEmbedder(cfg, cache=QueryCache(tmp_path / "q.sqlite"), backoff_base_s=0.01, max_backoff_s=0.01)


def _no_connection_pending(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        s.accept()[0].close()
    except BlockingIOError:
        return True
    return False


def test_a_refused_connection_is_said_so_and_not_asked_again(caplog):
    with refusing_port() as s:
        base = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        with pytest.raises(LLMError) as first:
            _chat(_client(base), HELLO)
        msg = str(first.value)
        assert f"could not connect to {base}" in msg and "connection refused" in msg
        assert "500" not in msg and "Connection error" not in msg and "check agent.api_base" in msg
        assert not [r for r in caplog.records if "retry" in r.getMessage()]  # (refused: not retried)

        s.listen(1)  # from now on a connection would be accepted: none may come
        with pytest.raises(LLMError) as second:
            _chat(_client(base), HELLO)
        assert "could not connect" in str(second.value)
        assert _no_connection_pending(s)


def test_a_server_that_answers_500_is_said_so_and_retried(caplog):
    server = ScriptedLLMServer().start()
    try:
        server.default = Scripted(status=500)
        with pytest.raises(LLMError) as e:
            _chat(_client(server.url, retries=1), HELLO)
        msg = str(e.value)
        assert f"{server.url} answered HTTP 500: scripted status 500" in msg, msg
        assert "after 2 attempt(s)" in msg and "could not connect" not in msg
        assert len(server.requests) == 2
        with pytest.raises(LLMError):  # (an answer, even 500, does not open the circuit)
            _chat(_client(server.url, retries=0), HELLO)
        assert len(server.requests) == 3
    finally:
        server.stop()


def test_a_server_that_hangs_up_is_said_so():
    with hanging_up() as base, pytest.raises(LLMError) as e:
        _chat(_client(base, retries=1), HELLO)
    msg = str(e.value)
    assert f"{base} closed the connection without answering" in msg, msg
    assert "500" not in msg and "Connection error" not in msg


def test_provider_embeddings_stop_at_a_refused_address(tmp_path, caplog):
    with refusing_port() as s:
        base = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        with pytest.raises(EmbeddingUnavailable) as first:
            _embedder(base, tmp_path).encode(["one"])
        assert "could not connect to" in str(first.value) and "500" not in str(first.value)
        assert not [r for r in caplog.records if "retry" in r.getMessage()]
        s.listen(1)
        with pytest.raises(EmbeddingUnavailable, match="is still unavailable"):
            _embedder(base, tmp_path).encode(["two"])  # (a new embedder: the process remembers, not the object)
        assert _no_connection_pending(s)


def test_recall_with_a_dead_embedding_provider_says_it_once(tmp_path):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("# Home\n- I live in Lyon\n", "utf-8")
    with refusing_port() as s:
        base = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        env = {**os.environ, "MEMCLAW_EMBEDDINGS__MODEL": "openai/text-embedding-3-small",
               "MEMCLAW_EMBEDDINGS__API_BASE": base, "OPENAI_API_KEY": "sk-test-x", "COLUMNS": "300",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
        p = subprocess.run([sys.executable, "-m", "memclaw.cli.main", "recall", "where do I live", "-w", str(root)],
                           env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "Lyon" in p.stdout
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert sum("could not connect to" in ln for ln in lines) == 1, p.stderr
    assert "500" not in p.stderr and "retry" not in p.stderr, p.stderr
