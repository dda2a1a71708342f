"""The scope cache keeps at most `memory.open_scopes` scopes loaded, the owner's always among them (issue 39,
item 6: a gateway meeting thousands of senders kept every one loaded). A scope let go is read again from its state
file at its next use, and a turn still holding it keeps a consistent copy. Real MemoryService, model, Chroma."""

from __future__ import annotations

import pytest

from memclaw.config import Config
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace

pytestmark = pytest.mark.slow


def test_at_most_open_scopes_stay_loaded_the_owner_pinned_and_a_let_go_scope_reads_again(tmp_path, embedder):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("# About me\n- I live in Lyon\n", "utf-8")
    mem = MemoryService(Workspace(root), Config(workspace=root, memory={"open_scopes": 3}), embedder=embedder)
    people = [f"people/discord:{2000 + i}" for i in range(6)]
    for i, scope in enumerate(people):
        mem.add_fact(f"Person {i} keeps a parrot called Kiwi{i}", scope=scope)
    mem.recall("Lyon", scope="owner")
    held = mem.scopes.get(people[0])  # a turn of person 0 still holds its scope
    for scope in people:
        assert mem.recall("parrot", scope=scope)
    loaded = mem.scopes.loaded()
    assert len(loaded) == 3 and "owner" in loaded and loaded[-1] == people[-1]
    assert people[0] not in loaded
    assert held is not None and len(held.state.units) == 1  # the holder's copy is intact
    hits = mem.recall("parrot", scope=people[0])  # read again from its state file
    assert [h.unit.text.startswith("Person 0 keeps a parrot") for h in hits] == [True]
    assert people[0] in mem.scopes.loaded() and len(mem.scopes.loaded()) == 3
