"""A provider embedding model without its API key (issue 19, item 2): known before any request (no litellm, no
retry), one line naming the variable; `memory add` keeps the fact and says so, its vector pending; a re-run adds no
second bullet; the index keeps the previous model's identity and vectors until the provider has embedded, so going
back to the bundled model re-embeds nothing. The real console script in a subprocess, the scripted embedding server
over real HTTP (it counts requests), the real bundled model, embedded Chroma."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memclaw.config import Config, EmbeddingsConfig
from memclaw.index import layout as ix
from memclaw.service.facade import MemoryService
from memclaw.store.clients import release_embedded
from memclaw.workspace import Workspace
from tests.embedding_server import embedding_server
from tests.service.test_memory_service import make_workspace

pytestmark = pytest.mark.slow

MODEL = "openai/text-embedding-hashed"
FACT = "My kayak is moored at the Quai Rambaud"


@pytest.fixture
def server():
    with embedding_server() as s:
        yield s


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    full.update(LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", COLUMNS="200")
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", *args], env=full, capture_output=True, text=True, timeout=300
    )


class CountingEmbedder:
    """The real model; remembers every text it was asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.name, self.dim, self.fingerprint = inner.name, inner.dim, inner.fingerprint

    def encode(self, texts, *, batch_size=64, progress=None):
        self.texts += list(texts)
        return self.inner.encode(texts, batch_size=batch_size, progress=progress)


def test_memory_add_without_the_key_saves_the_fact_keeps_the_index_and_going_back_re_embeds_nothing(
    tmp_path, server, embedder
):
    ws = make_workspace(tmp_path / "ws")
    root = str(ws.root)
    assert cli("memory", "sync", "-w", root).returncode == 0  # the bundled model's index
    layout = ix.IndexLayout(ws.index_dir)
    before = ix.read_manifest(layout)
    provider = {
        "MEMCLAW_EMBEDDINGS__MODEL": MODEL,
        "MEMCLAW_EMBEDDINGS__API_BASE": server.url,
        "MEMCLAW_EMBEDDINGS__MAX_RETRIES": "3",
    }

    p = cli("memory", "add", FACT, "-w", root, **provider)
    assert (p.returncode, p.stdout) == (5, "")
    assert p.stderr.count("\n") == 1, p.stderr  # one line, no retry warnings, no traceback
    assert p.stderr.startswith(f"Error: no API key for {MODEL}: set OPENAI_API_KEY in the environment")
    assert "the fact is saved" in p.stderr and "its vector is pending" in p.stderr
    assert server.requests == []  # known before any request
    memory_md = ws.memory_file("owner")
    assert memory_md.read_text("utf-8").count(FACT) == 1
    assert ix.read_manifest(layout) == before  # the index still is the bundled model's

    p = cli("memory", "add", FACT, "-w", root, **provider)  # the user runs it again
    assert p.returncode == 5 and "the fact is saved" in p.stderr
    assert memory_md.read_text("utf-8").count(FACT) == 1  # no second bullet

    p = cli("recall", "kayak moored", "--json", "-w", root, **provider)  # keyword search has it meanwhile
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)[0]["text"].startswith(f"{FACT} (")  # with the day it was learned
    assert "OPENAI_API_KEY" in p.stderr and "BM25" in p.stderr
    assert server.requests == [] and ix.read_manifest(layout) == before

    # back to the bundled model: the pending fact is embedded, nothing else
    counting = CountingEmbedder(embedder)
    svc = MemoryService(Workspace(ws.root), Config(workspace=ws.root), embedder=counting)
    reports = svc.sync()
    assert len(counting.texts) == 1 and FACT in counting.texts[0]
    assert not any(r.rebuilt for r in reports) and svc.pending_vectors("owner") == set()
    assert ix.read_manifest(layout) == before
    hit = svc.recall_detailed("where is the kayak moored", k=1, mode="vector").hits[0]
    assert hit.unit.text.startswith(f"{FACT} (")
    svc.close()
    release_embedded(layout.chroma_dir)

    # with the key, the index changes model, once the provider has embedded
    p = cli("recall", "kayak moored", "--json", "-w", root, OPENAI_API_KEY="sk-test-not-a-real-key", **provider)
    assert p.returncode == 0, p.stderr
    assert "rebuilding the index: the embedding model changed" in p.stderr
    assert ix.read_manifest(layout)["embedder"] == f"litellm:{MODEL}"
    assert json.loads(p.stdout)[0]["text"].startswith(f"{FACT} (") and server.requests


def test_reindex_without_the_key_keeps_the_index(tmp_path, server):
    ws = make_workspace(tmp_path / "ws")
    root = str(ws.root)
    assert cli("memory", "sync", "-w", root).returncode == 0
    layout = ix.IndexLayout(ws.index_dir)
    before = ix.read_manifest(layout)
    chroma = sorted(p.name for p in Path(layout.chroma_dir).rglob("*"))
    p = cli("memory", "reindex", "-w", root, MEMCLAW_EMBEDDINGS__MODEL=MODEL, MEMCLAW_EMBEDDINGS__API_BASE=server.url)
    assert (p.returncode, p.stdout) == (5, "")
    assert p.stderr.strip() == (  # (rich's progress display ends with an empty line of its own)
        f"Error: no API key for {MODEL}: set OPENAI_API_KEY in the environment (or embeddings.api_key)"
    )
    assert server.requests == [] and ix.read_manifest(layout) == before
    assert sorted(p.name for p in Path(layout.chroma_dir).rglob("*")) == chroma  # nothing wiped
    p = cli("status", "--json", "-w", root, MEMCLAW_EMBEDDINGS__MODEL=MODEL)  # status says so up front
    assert "OPENAI_API_KEY" in json.loads(p.stdout)["embedding_key_missing"]


def test_the_same_fact_twice_under_one_heading_is_written_once(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    svc = MemoryService(ws, Config(workspace=ws.root, embeddings=EmbeddingsConfig(model="hash-test")))
    first, again = svc.add_fact(FACT), svc.add_fact(f"  {FACT} ")
    assert again.id == first.id and ws.memory_file("owner").read_text("utf-8").count(FACT) == 1
    other = svc.add_fact(FACT, section="Boats")  # the same words under another heading: another fact
    assert other.id != first.id and ws.memory_file("owner").read_text("utf-8").count(FACT) == 2
    svc.close()
    p = cli("memory", "add", FACT, "--section", "Boats", "-w", str(ws.root), MEMCLAW_EMBEDDINGS__MODEL="hash-test")
    assert p.returncode == 0 and p.stdout.startswith(f"already remembered {other.id}"), p.stdout + p.stderr
    assert ws.memory_file("owner").read_text("utf-8").count(FACT) == 2
