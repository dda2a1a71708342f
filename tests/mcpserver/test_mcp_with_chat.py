"""Issue 42's "done when": an MCP client configured as docs/mcp.md says finds a fact that a running `memclaw chat`
remembered a moment before, and the chat's next turn sees a fact the MCP client remembered while it was open.

Every part is real: `memclaw chat` in a pseudo-terminal, as a person runs it, talking over HTTP to the scripted
LLM server of tests/llm_server.py (its answer calls the `remember` tool); the MCP SDK's own client, over stdio
launched with the command, args and env of the docs' Claude Desktop and Cursor entry, and over streamable HTTP
with the bearer token (`--port 0`: no shared port). Waits are on what the processes say, with a deadline.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from pathlib import Path

import pytest
from mcp.client.stdio import StdioServerParameters

from tests.llm_server import ScriptedLLMServer
from tests.mcpserver.harness import (
    TOKEN,
    WAIT,
    HttpServer,
    McpSession,
    home_env,
    http_session,
    memclaw_argv,
    onboard,
    stdio_session,
)

pytestmark = pytest.mark.slow

BIKE = "The owner's bike is a green Brompton kept in the hallway"
DENTIST = "The owner's dentist is Dr. Okafor, next appointment Friday at 9"


class PtyChat:
    """`memclaw chat` with a pseudo-terminal as its stdin, stdout and stderr; what it writes is collected as it
    comes (poll, not select: select() fails on a descriptor above 1024, which a long test process reaches)."""

    def __init__(self, home: Path, **env: str) -> None:
        import pty

        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            memclaw_argv("chat"), stdin=slave, stdout=slave, stderr=slave, env=home_env(home, COLUMNS="100", **env)
        )
        os.close(slave)
        self._out = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        poller = select.poll()
        poller.register(self.master, select.POLLIN)
        while True:
            if poller.poll(200):
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    # EIO: the chat closed the terminal
                    return
                if not chunk:
                    return
                with self._lock:
                    self._out += chunk
            elif self.proc.poll() is not None:
                return

    @property
    def text(self) -> str:
        with self._lock:
            return self._out.decode("utf-8", "replace")

    def prompts(self) -> int:
        return self.text.count("you> ")

    def wait_for(self, cond, what: str) -> None:
        """Until `cond()` holds; the deadline is a safety net against a hang, not a timing assertion."""
        deadline = time.monotonic() + WAIT
        while not cond():
            assert self.proc.poll() is None, (what, self.text)
            assert time.monotonic() < deadline, (what, self.text)
            time.sleep(0.05)

    def say(self, line: str) -> None:
        """Type `line` at the prompt and wait for the reply and the next prompt."""
        before = self.prompts()
        os.write(self.master, line.encode() + b"\r")
        self.wait_for(lambda: self.prompts() > before, f"the reply to {line!r}")

    def close(self) -> int:
        if self.proc.poll() is None:
            os.write(self.master, b"/exit\r")
        try:
            return self.proc.wait(WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self._reader.join(WAIT)
            os.close(self.master)


def docs_stdio_client(home: Path, errlog) -> McpSession:
    """The client as docs/mcp.md configures Claude Desktop and Cursor: `"command"` the memclaw script by its full
    path, `"args": ["mcp"]`, `"env": {"MEMCLAW_HOME": ...}`; the SDK adds only its default environment to that."""
    script = memclaw_argv("mcp")
    assert Path(script[0]).name == "memclaw", f"the console script is not installed beside {script[0]}"
    params = StdioServerParameters(command=script[0], args=["mcp"], env={"MEMCLAW_HOME": str(home)})
    return stdio_session(params, errlog)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_and_a_running_chat_share_one_memory(tmp_path, transport):
    home = tmp_path / "home"
    onboard(home)
    llm = ScriptedLLMServer().start()
    chat = server = mcp = None
    log = (tmp_path / "mcp-stderr.txt").open("w+", encoding="utf-8")
    try:
        if transport == "stdio":
            mcp = docs_stdio_client(home, log)
        else:
            server = HttpServer(home)
            mcp = http_session(server.url, TOKEN)
        # The server has synced and holds the index open before the chat writes
        assert mcp.tool("recall", query="what bike do I ride?")["hits"] == []

        chat = PtyChat(home, MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini", MEMCLAW_AGENT__MAX_RETRIES="0",
                       OPENAI_API_BASE=llm.url, OPENAI_API_KEY="sk-test-not-a-real-key")  # fmt: skip
        chat.wait_for(lambda: chat.prompts() == 1, "the first prompt")
        llm.tool_call("remember", {"text": BIKE})
        llm.reply("Noted: your bike is a green Brompton.")
        chat.say("Remember that my bike is a green Brompton, it is kept in the hallway")
        assert "Noted: your bike is a green Brompton." in chat.text and llm.pending() == 0

        # the fact the chat remembered, found by the client while the chat is still open
        hits = mcp.tool("recall", query="what colour is my bike?", k=3)["hits"]
        assert hits and BIKE in hits[0]["text"], hits

        # and the other way: remembered over MCP, in the prompt of the chat's next turn
        added = mcp.tool("remember", text=DENTIST)
        assert added["already_remembered"] is False
        llm.reply("Friday at 9, with Dr. Okafor.")
        chat.say("When is my next dentist appointment?")
        prompt = "\n".join(str(m.get("content")) for m in llm.requests[-1]["messages"])
        assert "Dr. Okafor, next appointment Friday at 9" in prompt, prompt
        assert "green Brompton" in prompt

        assert chat.close() == 0, chat.text
        assert "Traceback" not in chat.text
    finally:
        if chat is not None and chat.proc.poll() is None:
            chat.proc.kill()
        if mcp is not None:
            mcp.close()
        if server is not None:
            code, _, err = server.stop()
            assert code == 130 and "Traceback" not in err, err
        llm.stop()
        log.seek(0)
        assert "Traceback" not in log.read()
        log.close()
    memory = (home / "workspace/memory/MEMORY.md").read_text("utf-8")
    assert memory.count("green Brompton") == 1 and memory.count("Dr. Okafor") == 1, memory
