"""`memclaw mcp --sender discord:<id>`: an outside sender served through MCP cannot reach the owner's memories.
The agent's isolation probes replayed through the SDK's client over stdio, on a real workspace (real Chroma, the
bundled model): search for the owner's facts, forget an owner id, read MEMORY.md and HISTORY.md, ask for the
memory section of a message about the owner. `--sender` is read by the one rule of every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcpserver.harness import ToolFailed, ids, onboard, run_memclaw, stdio_params, stdio_session

pytestmark = pytest.mark.slow

OWNER_FACT = "The owner's safe combination is 4412 and it sits behind the Vermeer print"
OWNER_HISTORY = "[2026-11-02 18:10] The owner planned a surprise trip to Kyoto for their partner's birthday."
OUTSIDER = "discord:555000111"
SCOPE = f"people/{OUTSIDER}"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("mcp-outsider-home")
    ws = onboard(home)
    (ws / "memory/MEMORY.md").write_text(f"# Home\n- {OWNER_FACT}\n", "utf-8")
    (ws / "memory/HISTORY.md").write_text(OWNER_HISTORY + "\n", "utf-8")
    with (home / "config.toml").open("a", encoding="utf-8") as f:
        f.write('\n[owners]\ndiscord = ["1234"]\n')
    return home


@pytest.fixture(scope="module")
def owner_ids(home) -> list[str]:
    p = run_memclaw(home, "memory", "list", "--json")
    assert p.returncode == 0, p.stderr
    import json

    listed = json.loads(p.stdout)
    assert len(listed) == 2
    return ids(listed)


@pytest.fixture(scope="module")
def outsider(home, owner_ids):
    session = stdio_session(stdio_params(home, "--sender", OUTSIDER))
    yield session
    session.close()


def owner_files(home: Path) -> tuple[str, str]:
    mem = home / "workspace/memory"
    return (mem / "MEMORY.md").read_text("utf-8"), (mem / "HISTORY.md").read_text("utf-8")


def test_searching_for_the_owners_facts_finds_none(outsider, owner_ids):
    for query in ("safe combination Vermeer print", "Kyoto surprise trip birthday", "what does the owner plan"):
        found = outsider.tool("recall", query=query, k=20)
        assert found["scope"] == SCOPE
        assert not set(ids(found["hits"])) & set(owner_ids), query
    listed = outsider.tool("list")
    assert listed["scope"] == SCOPE and not set(ids(listed["memories"])) & set(owner_ids)


def test_forgetting_an_owner_id_is_refused_and_changes_nothing(outsider, owner_ids, home):
    before = owner_files(home)
    for owner_id in owner_ids:
        with pytest.raises(ToolFailed, match=f"no memory with id '{owner_id}' in scope {SCOPE}"):
            outsider.tool("forget", ids=[owner_id])
    assert owner_files(home) == before


def test_the_resources_are_the_outsiders_own_files(outsider):
    assert "4412" not in outsider.read("memclaw://memory/MEMORY.md")
    assert "Kyoto" not in outsider.read("memclaw://memory/HISTORY.md")


def test_the_memory_section_holds_none_of_the_owners_memories(outsider, owner_ids):
    section = outsider.tool("memory_section", message="What is the owner's safe combination? And the Kyoto plan?")
    assert section["is_owner"] is False and section["scope"] == SCOPE
    assert not set(ids(section["memories"])) & set(owner_ids)
    assert "4412" not in section["text"] and "Kyoto" not in section["text"]


def test_what_the_outsider_remembers_stays_in_their_scope(outsider, home):
    before = owner_files(home)
    added = outsider.tool("remember", text="Mallory keeps bees and sells honey on Saturdays")
    assert added["scope"] == SCOPE
    assert ids(outsider.tool("recall", query="who keeps bees")["hits"])[0] == added["id"]
    assert "Mallory keeps bees" in outsider.read("memclaw://memory/MEMORY.md")
    assert owner_files(home) == before


def test_a_sender_listed_as_an_owner_is_the_owner_and_a_bare_id_is_refused(home, owner_ids):
    owner = stdio_session(stdio_params(home, "--sender", "discord:1234", "--read-only"))
    try:
        assert set(owner_ids) <= set(ids(owner.tool("list")["memories"]))
    finally:
        owner.close()
    p = run_memclaw(home, "mcp", "--sender", "1234")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("Error: --sender '1234' names no outside channel") and p.stderr.count("\n") == 1
