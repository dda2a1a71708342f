"""Ctrl-C inside a chunk of vectors keeps what was embedded (issue 38.6), counted at the embedding provider.

The console script runs in a child process against the scripted embedding server (tests/embedding_server.py), which
counts every text it embeds. The server itself sends the SIGINT when the batch after `KEPT_BATCHES` arrives, and holds
that batch unanswered: the batches before it are embedded, the one in flight is not. The next command must embed
only the memories the interrupted one had not, in a reindex of a full index and in an incremental sync alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memclaw.service.facade import INTERRUPTED_SYNC
from tests.embedding_server import ScriptedEmbeddingServer, embedding_server
from tests.llm_server import Scripted

pytestmark = pytest.mark.slow

N_FACTS = 600  # one chunk of vectors (memclaw.index._vector_writer.CHUNK_PASSAGES): the interrupt falls inside it
BATCH = 50
KEPT_BATCHES = 4


def _fact(i: int) -> str:
    return f"Fact {i}: Anna planted {i % 13} tomatoes near shed {i % 7} in the garden of house {i}"


def _env(home: Path, server: ScriptedEmbeddingServer) -> dict[str, str]:
    return {
        **os.environ,
        "MEMCLAW_HOME": str(home),
        "MEMCLAW_EMBEDDINGS__MODEL": "openai/text-embedding-hashed",
        "MEMCLAW_EMBEDDINGS__API_BASE": server.url,
        "MEMCLAW_EMBEDDINGS__BATCH_SIZE": str(BATCH),
        "OPENAI_API_KEY": "sk-test-not-a-real-key",
        "COLUMNS": "300",
    }


def _run(home: Path, server: ScriptedEmbeddingServer, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memclaw.cli.main", *args], env=_env(home, server), text=True,
                          capture_output=True, timeout=600)  # fmt: skip


def _embedded(server: ScriptedEmbeddingServer) -> list[str]:
    """The facts the server has embedded so far (not the one-word probes, nor queries)."""
    return [t for batch in server.inputs for t in batch if t.startswith("Fact ")]


def _interrupted(home: Path, server: ScriptedEmbeddingServer, *args: str) -> tuple[int, str]:
    """Run a command; when the fact batch after KEPT_BATCHES reaches the server, SIGINT the command and leave that
    batch unanswered. Returns the exit code and stderr."""
    child: list[subprocess.Popen] = []
    seen = 0
    answered = Scripted()

    def fn(req: dict) -> Scripted:
        nonlocal seen
        inputs = req.get("input") or []
        if not any(str(t).startswith("Fact ") for t in inputs):
            return answered
        seen += 1
        if seen <= KEPT_BATCHES:
            return answered
        os.kill(child[0].pid, signal.SIGINT)
        return Scripted(delay=120)  # (answered only when the server stops: the command is gone by then)

    server.default = Scripted(fn=fn)
    p = subprocess.Popen([sys.executable, "-m", "memclaw.cli.main", *args], env=_env(home, server), text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    child.append(p)
    _out, err = p.communicate(timeout=600)
    server.default = answered
    return p.returncode, err


def _workspace(home: Path, server: ScriptedEmbeddingServer, facts: list[str]) -> Path:
    assert _run(home, server, "onboard").returncode == 0
    mem = home / "workspace" / "memory" / "MEMORY.md"
    mem.write_text("# Garden\n" + "".join(f"- {f}\n" for f in facts), "utf-8")
    return mem


def test_interrupted_reindex_of_a_full_index_keeps_what_it_embedded(tmp_path):
    home = tmp_path / "home"
    with embedding_server() as server:
        _workspace(home, server, [_fact(i) for i in range(N_FACTS)])
        p = _run(home, server, "memory", "sync")
        assert p.returncode == 0, p.stderr
        assert len(_embedded(server)) == N_FACTS

        server.requests.clear()
        code, err = _interrupted(home, server, "memory", "reindex")
        assert code == 130, err
        assert err.strip().splitlines()[-1] == INTERRUPTED_SYNC, err
        first = _embedded(server)
        assert len(first) == (KEPT_BATCHES + 1) * BATCH  # (the last batch was never answered)

        server.requests.clear()
        p = _run(home, server, "recall", "Anna planted tomatoes near shed 3", "-k", "1")
        assert p.returncode == 0, p.stderr
        again = _embedded(server)
        assert len(again) == N_FACTS - KEPT_BATCHES * BATCH, p.stderr  # only what the reindex had not embedded
        assert set(again) | set(first[: KEPT_BATCHES * BATCH]) == {_fact(i) for i in range(N_FACTS)}


def test_interrupted_incremental_sync_keeps_what_it_embedded(tmp_path):
    home = tmp_path / "home"
    with embedding_server() as server:
        mem = _workspace(home, server, [_fact(i) for i in range(10)])
        assert _run(home, server, "memory", "sync").returncode == 0
        with mem.open("a", encoding="utf-8") as f:  # facts added by hand
            f.write("".join(f"- {_fact(i)}\n" for i in range(10, 10 + N_FACTS)))

        server.requests.clear()
        code, err = _interrupted(home, server, "memory", "sync")
        assert code == 130, err
        assert err.strip().splitlines()[-1] == INTERRUPTED_SYNC, err

        server.requests.clear()
        p = _run(home, server, "memory", "sync")
        assert p.returncode == 0, p.stderr
        again = _embedded(server)
        assert len(again) == N_FACTS - KEPT_BATCHES * BATCH, p.stderr
        assert not (set(again) & {_fact(i) for i in range(10)})


def _long_fact(i: int) -> str:
    """A fact of 10 sentences, about 160 words: a head and 4 passages, each of which starts with "Fact "."""
    return " ".join(f"Fact {i} part {j}: Anna planted {j} tomatoes near shed {i % 7} in the garden of house {i}."
                    for j in range(10))  # fmt: skip


def test_an_interrupted_sync_keeps_the_passages_of_a_half_embedded_unit(tmp_path):
    # Passages are embedded longest first, so a long unit's head and its passages fall in different batches:
    # the kept batches hold the heads of every unit and the passages of a few. None of them is embedded again.
    n = 120
    home = tmp_path / "home"
    with embedding_server() as server:
        mem = _workspace(home, server, [_fact(0)])
        assert _run(home, server, "memory", "sync").returncode == 0
        with mem.open("a", encoding="utf-8") as f:
            f.write("".join(f"- {_long_fact(i)}\n" for i in range(1, n + 1)))

        server.requests.clear()
        code, err = _interrupted(home, server, "memory", "sync")
        assert code == 130, err
        first = _embedded(server)
        assert len(first) == (KEPT_BATCHES + 1) * BATCH

        server.requests.clear()
        p = _run(home, server, "memory", "sync")
        assert p.returncode == 0, p.stderr
        again = _embedded(server)
        total = 5 * n
        assert len(again) == total - KEPT_BATCHES * BATCH, (len(again), p.stderr)
        assert not set(again) & set(first[: KEPT_BATCHES * BATCH])
