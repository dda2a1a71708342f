"""Small scopes without a Chroma collection (issue 39, item 6: memclaw.store.small): an outsider's few vectors in
one small file, searched exactly; past `memory.small_scope_vectors` the scope moves into Chroma; the owner's scope
is always in Chroma. Real MemoryService, real model, real Chroma, real Markdown."""

from __future__ import annotations

import os

import pytest

from memclaw.config import Config
from memclaw.service.facade import MemoryService
from memclaw.store.base import collection_name
from memclaw.store.small import FOLDER
from memclaw.workspace import Workspace

pytestmark = pytest.mark.slow

OUTSIDER = "people/discord:2002"


def make(tmp_path, embedder, **memory) -> MemoryService:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("# About me\n- I live in Lyon\n", "utf-8")
    return MemoryService(Workspace(root), Config(workspace=root, memory=memory), embedder=embedder)


def small_file(mem: MemoryService, scope: str):
    return mem.layout.chroma_dir / FOLDER / f"{collection_name(mem.namespace, scope)}.sqlite3"


def chroma_names(mem: MemoryService) -> set[str]:
    return {c.name for c in mem.store._client.list_collections()}  # type: ignore[attr-defined]


def test_an_outsiders_few_facts_live_in_a_small_file_and_move_into_chroma_past_the_limit(tmp_path, embedder):
    mem = make(tmp_path, embedder, small_scope_vectors=3)
    mem.add_fact("Mallory keeps bees on the roof", scope=OUTSIDER)
    mem.add_fact("Mallory's locker code is 4471", scope=OUTSIDER)
    mem.sync()
    assert small_file(mem, OUTSIDER).is_file() and not small_file(mem, "owner").exists()
    assert collection_name(mem.namespace, OUTSIDER) not in chroma_names(mem)
    assert collection_name(mem.namespace, "owner") in chroma_names(mem)
    hits = mem.recall("beekeeping hobby", scope=OUTSIDER, k=2, mode="vector")
    assert hits[0].unit.text.startswith("Mallory keeps bees")
    assert mem.store.count(OUTSIDER) == 2
    # an outsider's index for 2 facts: ~30 KiB on disk (it was ~285 KiB: a Chroma segment and a state file of
    # 16 KiB pages), each file a few times its Markdown
    markdown = mem.workspace.memory_file(OUTSIDER).stat().st_size
    state = mem.layout.state_file(OUTSIDER).stat().st_size
    vectors = small_file(mem, OUTSIDER).stat().st_size
    assert state <= 32 * 1024 and vectors <= 16 * 1024, (markdown, state, vectors)
    # past the limit: the scope moves into a collection of its own, with every vector
    mem.add_fact("Mallory drives a green van", scope=OUTSIDER)
    mem.add_fact("Mallory was born in Porto", scope=OUTSIDER)
    assert not small_file(mem, OUTSIDER).exists()
    assert collection_name(mem.namespace, OUTSIDER) in chroma_names(mem)
    assert mem.store.count(OUTSIDER) == 4
    assert mem.recall("beekeeping hobby", scope=OUTSIDER, k=2, mode="vector")[0].unit.text.startswith("Mallory keeps")


def test_a_forgotten_fact_leaves_the_small_file_and_a_damaged_one_is_rebuilt(tmp_path, embedder):
    mem = make(tmp_path, embedder)
    a = mem.add_fact("Mallory keeps bees on the roof", scope=OUTSIDER)
    b = mem.add_fact("Mallory drives a green van", scope=OUTSIDER)
    mem.forget([a.id], scope=OUTSIDER)
    assert mem.store.ids(OUTSIDER) == {b.id}
    assert [h.unit.id for h in mem.recall("which car does Mallory drive", scope=OUTSIDER, k=5)] == [b.id]
    path = small_file(mem, OUTSIDER)
    os.truncate(path, 0)
    path.write_bytes(b"not a database at all" * 100)
    # recall meets the damage, says so, and rebuilds the index from the Markdown
    assert [h.unit.id for h in mem.recall("which car does Mallory drive", scope=OUTSIDER, k=5)] == [b.id]
    assert mem.store.ids(OUTSIDER) == {b.id}
