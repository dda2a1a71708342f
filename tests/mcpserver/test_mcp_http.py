"""`memclaw mcp --http`: streamable HTTP on 127.0.0.1 behind the bearer token of MEMCLAW_MCP_TOKEN, driven by the
MCP SDK's own client over real HTTP on a real workspace (real Chroma, the bundled model). A request without the
token or with another is refused 401; every tool and resource works with it; a chat turn of `memclaw agent` (the
scripted LLM server of tests/llm_server.py calling `remember`) writes a fact the running server then finds; the
token is never printed; Ctrl-C ends the server with exit 130."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.llm_server import ScriptedLLMServer
from tests.mcpserver.harness import (
    TOKEN,
    WAIT,
    HttpServer,
    ToolFailed,
    http_session,
    ids,
    leaves,
    onboard,
    run_memclaw,
)

pytestmark = pytest.mark.slow

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}},
}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("mcp-http-home")
    onboard(home)
    return home


@pytest.fixture(scope="module")
def server(home):
    s = HttpServer(home)
    yield s
    if s.proc.poll() is None:
        s.stop()


@pytest.fixture(scope="module")
def mcp(server):
    session = http_session(server.url, TOKEN)
    yield session
    session.close()


def post(url: str, headers: dict[str, str]) -> tuple[int, dict, dict[str, str]]:
    req = urllib.request.Request(
        url,
        data=json.dumps(INITIALIZE).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} | headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=WAIT) as r:
            return r.status, {}, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), dict(e.headers)


def test_it_listens_on_loopback_only(server):
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-wrong-token-123"}, {"Authorization": TOKEN},
     {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": f"bearer{TOKEN}"}],
    ids=["none", "wrong", "no-scheme", "longer", "no-space"],
)  # fmt: skip
def test_a_request_without_the_token_is_refused(server, headers):
    status, body, got = post(server.url, headers)
    assert status == 401 and body["error"] == "invalid_token"
    assert got.get("www-authenticate", got.get("WWW-Authenticate", "")).startswith("Bearer")


def test_the_sdk_client_with_a_wrong_token_cannot_connect(server):
    with pytest.raises(BaseException) as e:
        http_session(server.url, "wrong-token-wrong-token-123")
    assert [type(x).__name__ for x in leaves(e.value)] == ["MCPError"]


def test_every_tool_and_resource_over_http(mcp):
    names = {t.name for t in mcp.call(lambda c: c.list_tools()).tools}
    assert names == {"recall", "remember", "list", "forget", "memory_section"}
    added = mcp.tool("remember", text="Jonas the manager prefers calls before ten in the morning", section="Work")
    found = mcp.tool("recall", query="when should I call Jonas?", k=3, tokens=200)
    assert found["hits"][0]["id"] == added["id"] and found["hits"][0]["memory_section"]["kept"]
    assert added["id"] in ids(mcp.tool("list", kind="fact")["memories"])
    assert "Jonas the manager prefers calls" in mcp.tool("memory_section", message="Can I call Jonas at 11?")["text"]
    assert "Jonas the manager" in mcp.read("memclaw://memory/MEMORY.md")
    assert mcp.read("memclaw://memory/HISTORY.md") is not None
    assert ids(mcp.tool("forget", ids=[added["id"]])["forgotten"]) == [added["id"]]
    with pytest.raises(ToolFailed, match=f"no memory with id '{added['id']}' in scope owner"):
        mcp.tool("forget", ids=[added["id"]])


def test_a_chat_turn_in_another_process_writes_a_fact_the_server_finds(mcp, home):
    mcp.tool("recall", query="warm-up: the server has synced and holds the index open")
    llm = ScriptedLLMServer().start()
    try:
        llm.tool_call("remember", {"text": "The owner's bike is a green Brompton kept in the hallway"})
        llm.reply("Noted: your bike is a green Brompton.")
        p = run_memclaw(
            home,
            "agent",
            "-m",
            "Remember that my bike is a green Brompton, it is kept in the hallway",
            MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini",
            MEMCLAW_AGENT__MAX_RETRIES="0",
            OPENAI_API_BASE=llm.url,
            OPENAI_API_KEY="sk-test-not-a-real-key",
        )
    finally:
        llm.stop()
    assert p.returncode == 0, p.stderr
    found = mcp.tool("recall", query="what colour is my bike?", k=3)
    assert "green Brompton" in found["hits"][0]["text"]


def test_no_token_no_server_and_a_port_in_use_is_refused(home):
    p = run_memclaw(home, "mcp", "--http")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1
    assert p.stderr.startswith("Error: no bearer token for --http: set MEMCLAW_MCP_TOKEN")
    p = run_memclaw(home, "mcp", "--http", MEMCLAW_MCP_TOKEN="short")
    assert p.returncode == 2 and "at least 24 characters" in p.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        p = run_memclaw(home, "mcp", "--http", "--port", port, MEMCLAW_MCP_TOKEN=TOKEN)
    assert p.returncode == 2 and f"Error: port {port} on 127.0.0.1 is in use; pass --port N" in p.stderr


def test_ctrl_c_ends_it_with_130_and_the_token_was_never_printed(home):
    own = HttpServer(home)  # (its own: the module's server serves the other tests, in any order)
    assert post(own.url, {"Authorization": "Bearer wrong-token-wrong-token-123"})[0] == 401
    code, out, err = own.stop()
    assert code == 130
    assert TOKEN not in out and TOKEN not in err
    assert "Traceback" not in err
