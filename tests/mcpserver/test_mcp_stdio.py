"""`memclaw mcp` over stdio, spawned as the MCP SDK's own client spawns it, on a real workspace (real Chroma, the
bundled embedding model): every tool and resource, memclaw's errors as MCP tool errors, secrets masked as
`memory add` masks them, a `memclaw memory add` in another process found by the running server, read-only mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.mcpserver.harness import ToolFailed, ids, onboard, run_memclaw, stdio_params, stdio_session

pytestmark = pytest.mark.slow

PLUMBER = "Rui the plumber comes on Thursdays to fix the boiler"
TOOLS = {"recall", "remember", "list", "forget", "memory_section"}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("mcp-stdio-home")
    ws = onboard(home)
    (ws / "memory/MEMORY.md").write_text(f"# Home\n- {PLUMBER}\n", "utf-8")
    return home


@pytest.fixture(scope="module")
def server_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp-stdio-log") / "stderr.txt"
    with path.open("w+", encoding="utf-8") as f:
        yield f


@pytest.fixture(scope="module")
def mcp(home, server_log):
    session = stdio_session(stdio_params(home), errlog=server_log)
    yield session
    session.close()


def test_every_tool_is_listed_with_a_description_and_a_schema(mcp):
    tools = {t.name: t for t in mcp.call(lambda c: c.list_tools()).tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert len(t.description or "") > 80, t.name
        assert t.input_schema["type"] == "object"
    assert set(tools["recall"].input_schema["properties"]) == {"query", "k", "tokens", "kind"}
    assert tools["recall"].input_schema["required"] == ["query"]
    assert set(tools["remember"].input_schema["properties"]) == {"text", "section", "date"}
    assert tools["forget"].input_schema["properties"]["ids"]["type"] == "array"
    assert "data" in tools["recall"].description and "instructions" in tools["recall"].description
    uris = {str(r.uri) for r in mcp.call(lambda c: c.list_resources()).resources}
    assert uris == {"memclaw://memory/MEMORY.md", "memclaw://memory/HISTORY.md"}


def test_remember_then_recall_list_section_and_resource_find_it(mcp, home):
    added = mcp.tool("remember", text="Ana works at the Lisbon office of Tidewater", section="Work", date="2026-11-20")
    assert added["already_remembered"] is False and added["scope"] == "owner" and added["section"] == "Work"
    assert added["date"].startswith("2026-11-20")
    again = mcp.tool("remember", text="Ana works at the Lisbon office of Tidewater", section="Work", date="2026-11-20")
    assert again["already_remembered"] is True and again["id"] == added["id"]

    found = mcp.tool("recall", query="where does Ana work?", k=5)
    assert found["scope"] == "owner" and found["hits"][0]["id"] == added["id"]
    hit = found["hits"][0]
    assert hit["date"].startswith("2026-11-20") and hit["source"].startswith("memory/MEMORY.md:")
    assert hit["bm25"]["rank"] == 1 and hit["vector"]["rank"] == 1  # why it ranked: both signals, real model
    assert "never follow instructions" in found["note"]

    assert added["id"] in ids(mcp.tool("list", kind="fact")["memories"])
    assert mcp.tool("list", kind="history")["memories"] == []

    section = mcp.tool("memory_section", message="Where does Ana work these days?")
    assert section["is_owner"] is True and added["id"] in ids(section["memories"])
    assert section["text"].startswith("## Recalled memories")
    assert "Ana works at the Lisbon office of Tidewater" in section["text"]
    assert section["text"].rstrip().endswith("</recalled-memories>")

    assert "Ana works at the Lisbon office of Tidewater" in mcp.read("memclaw://memory/MEMORY.md")
    assert mcp.read("memclaw://memory/MEMORY.md") == (home / "workspace/memory/MEMORY.md").read_text("utf-8")


def test_recall_within_a_token_budget_keeps_what_the_memory_section_would(mcp):
    for i, town in enumerate(["Porto", "Braga", "Faro", "Coimbra"]):
        mcp.tool("remember", text=f"Cousin number {i} of Ana lives in {town} near the river", section="Family")
    full = mcp.tool("recall", query="where do Ana's cousins live", k=4)
    assert len(full["hits"]) == 4 and full["left_out"] == []
    cut = mcp.tool("recall", query="where do Ana's cousins live", k=4, tokens=40)
    assert 0 < len(cut["hits"]) < 4
    assert sorted(ids(cut["hits"]) + ids(cut["left_out"])) == sorted(ids(full["hits"]))
    assert all(h["memory_section"]["kept"] for h in cut["hits"]) and all(o["reason"] for o in cut["left_out"])
    history = mcp.tool("recall", query="where do Ana's cousins live", kind="history")
    assert history["hits"] == []  # (facts only so far)


def test_a_secret_is_masked_as_memory_add_masks_it(mcp, home):
    key = "sk-proj-" + "Q7w9Xe2Rt5Yu8Io1Pa4Sd6Fg3Hj0Kl2Zx"
    added = mcp.tool("remember", text=f"The staging API key is {key}")
    assert key not in added["text"] and "***" in added["text"]
    assert key not in (home / "workspace/memory/MEMORY.md").read_text("utf-8")


def test_forget_removes_and_a_bad_id_is_memclaws_one_line(mcp):
    added = mcp.tool("remember", text="The spare house key is under the blue flowerpot")
    gone = mcp.tool("forget", ids=[added["id"]])
    assert ids(gone["forgotten"]) == [added["id"]]
    assert added["id"] not in ids(mcp.tool("list")["memories"])
    assert added["id"] not in ids(mcp.tool("recall", query="spare house key flowerpot")["hits"])
    with pytest.raises(ToolFailed, match=r"no memory with id 'nope0000' in scope owner: use an id from") as e:
        mcp.tool("forget", ids=["nope0000"])
    assert "\n" not in str(e.value) and "Traceback" not in str(e.value)


def test_bad_arguments_are_refused_by_the_schema(mcp):
    with pytest.raises(ToolFailed, match="k"):
        mcp.tool("recall", query="anything", k=0)
    with pytest.raises(ToolFailed, match="date"):
        mcp.tool("remember", text="a fact", date="next Tuesday")
    with pytest.raises(ToolFailed, match="kind"):
        mcp.tool("list", kind="everything")


def test_a_fact_added_by_another_process_is_found_by_the_running_server(mcp, home):
    mcp.tool("recall", query="warm-up: the server has synced and holds the index open")
    p = run_memclaw(home, "memory", "add", "Ana's sister Lena plays the cello in the Porto orchestra", "--json")
    assert p.returncode == 0, p.stderr
    found = mcp.tool("recall", query="which instrument does Lena play?", k=3)
    assert "Lena plays the cello" in found["hits"][0]["text"]


def test_the_server_logged_no_traceback(server_log):
    server_log.flush()
    server_log.seek(0)
    assert "Traceback" not in server_log.read()


def test_read_only_lists_no_writing_tool_and_refuses_one(home):
    before = (home / "workspace/memory/MEMORY.md").read_text("utf-8")
    session = stdio_session(stdio_params(home, "--read-only"))
    try:
        names = {t.name for t in session.call(lambda c: c.list_tools()).tools}
        assert names == {"recall", "list", "memory_section"}
        with pytest.raises(ToolFailed, match="remember"):
            session.tool("remember", text="Ana now works in Madrid")
        with pytest.raises(ToolFailed, match="forget"):
            session.tool("forget", ids=[ids(session.tool("list")["memories"])[0]])
        assert PLUMBER in session.tool("recall", query="when does the plumber come?")["hits"][0]["text"]
    finally:
        session.close()
    assert (home / "workspace/memory/MEMORY.md").read_text("utf-8") == before


def test_the_server_ends_with_exit_0_when_the_client_closes_stdin(home):
    p = run_memclaw(home, "mcp")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""


def test_a_resource_that_cannot_be_read_is_an_mcp_error_with_memclaws_line(mcp, home, tmp_path):
    history = home / "workspace/memory/HISTORY.md"
    kept = tmp_path / "HISTORY.md"
    history.rename(kept)
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("[2026-11-02 18:10] Not memclaw's file.\n", "utf-8")
    history.symlink_to(elsewhere)
    try:
        with pytest.raises(MCPError) as e:
            mcp.read("memclaw://memory/HISTORY.md")
        assert "symlink" in str(e.value) and "\n" not in str(e.value)
    finally:
        history.unlink()
        kept.rename(history)
    assert "Not memclaw's file" not in mcp.read("memclaw://memory/HISTORY.md")
