"""`memclaw agent -m` and `memclaw chat` end to end: the real console script in a subprocess, litellm over real HTTP
to the scripted server (OPENAI_API_BASE), the real MemoryService (bundled model, embedded Chroma), real sessions.
`memclaw chat` runs with TTY_COMPATIBLE=1 so rich treats stderr as a terminal and draws its spinner."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memclaw.agent.commands import USAGE
from memclaw.agent.sessions import SessionStore
from memclaw.markdown.units import unit_id
from tests.llm_server import scripted_server

pytestmark = pytest.mark.slow

MEMORY = "# Work\n- I work at Solaris Energy as a battery engineer\n\n# Home\n- I live in Lyon\n"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    return root


def memclaw(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)  # MEMCLAW_HOME (a temp dir) and OPENAI_API_BASE/KEY come from the fixtures
    full.update(
        MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini",
        MEMCLAW_AGENT__MAX_RETRIES="0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        COLUMNS="100",
    )
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", *args],
        input=stdin,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_agent_one_shot_through_the_console_script(root, llm_server):
    llm_server.reply("You work at Solaris Energy.")
    p = memclaw("agent", "-m", "where do I work?", "-w", str(root))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "You work at Solaris Energy."
    sent = llm_server.requests[0]
    assert sent["model"] == "gpt-4o-mini" and sent["messages"][-1]["content"] == "where do I work?"
    system = sent["messages"][0]["content"]
    assert "Solaris Energy" in system[system.index("<recalled-memories>") :]  # auto-recall over the owner's memory
    offered = {t["function"]["name"] for t in sent["tools"]}
    assert offered >= {"read_file", "memory_search"} and "exec" not in offered  # the owner; exec is off by default
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert [(m["role"], m["content"]) for m in session.messages] == [
        ("user", "where do I work?"),
        ("assistant", "You work at Solaris Energy."),
    ]
    # the model unavailable: one clear line, exit code 5, the message kept
    llm_server.status(500, times=3)
    p = memclaw("agent", "-m", "still there?", "-w", str(root))
    assert p.returncode == 5
    assert p.stdout == ""  # an error is never printed as if it were the reply
    line = p.stderr.strip()
    assert line.startswith("Error: the model openai/gpt-4o-mini is unavailable") and "\n" not in line
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert session.messages[-1]["content"] == "still there?"
    # an empty message is a usage error naming the fix
    p = memclaw("agent", "-m", "  ", "-w", str(root))
    assert p.returncode == 2 and 'memclaw agent -m "your message"' in p.stderr


def test_a_one_shot_turn_at_a_named_server_never_imports_litellm(root, llm_server):
    """Issue 38.11: an `openai/` model at a server the user named is asked over plain HTTP (agent.transport auto);
    `agent.transport = "litellm"` goes back to litellm. Python's own import log says which modules were loaded."""
    llm_server.reply("You work at Solaris Energy.", times=2)
    for transport, imported in (("auto", False), ("litellm", True)):
        full = dict(os.environ, MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini", MEMCLAW_AGENT__TRANSPORT=transport,
                    HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")  # fmt: skip
        p = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "memclaw.cli.main", "agent", "-m", "where?", "-w", str(root)],
            env=full,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert (p.returncode, p.stdout) == (0, "You work at Solaris Energy.\n"), p.stderr[-2000:]
        loaded = re.findall(r"^import time:.*\|\s*(\S+)$", p.stderr, re.M)
        assert ("litellm" in loaded) is imported, transport
    assert [r["model"] for r in llm_server.requests] == ["gpt-4o-mini", "gpt-4o-mini"]


def test_a_local_api_base_says_any_key_works(root, llm_server, monkeypatch):
    """Issue 38 (papercuts): a local `agent.api_base` asked for an API key without saying that any value works.
    litellm's OpenAI client sends no request without a key, so memclaw asks for one and says so; any value then
    reaches the local server."""
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_API_BASE")
    base = llm_server.url.replace("127.0.0.1", "localhost")
    p = memclaw("agent", "-m", "hello?", "-w", str(root), MEMCLAW_AGENT__API_BASE=base)
    assert p.returncode == 5 and p.stderr.count("\n") == 1, p.stderr
    assert "set OPENAI_API_KEY" in p.stderr and "any value works, e.g. OPENAI_API_KEY=local" in p.stderr, p.stderr
    assert not llm_server.requests
    llm_server.reply("Hi.")
    p = memclaw("agent", "-m", "hello?", "-w", str(root), MEMCLAW_AGENT__API_BASE=base, OPENAI_API_KEY="local")
    assert (p.returncode, p.stdout) == (0, "Hi.\n"), p.stderr
    p = memclaw("agent", "-m", "hello?", "-w", str(root), MEMCLAW_AGENT__API_BASE="https://api.example.com/v1")
    assert p.returncode == 5 and "set OPENAI_API_KEY" in p.stderr and "any value" not in p.stderr, p.stderr


def consolidation_answer(entry: str) -> str:
    return json.dumps({"history_entry": entry, "facts": []})


def archived(root: Path) -> str:
    return "".join(p.read_text("utf-8") for p in sorted((root / "memory" / "archive").glob("*.md")))


def test_a_message_sent_again_after_a_failed_turn_is_sent_and_archived_once(root, llm_server):
    """Issue 38 (papercuts): a failed turn kept the user's message, and sending it again stored it twice: the model
    read it twice and the archive kept it twice. The retry replaces the unanswered first copy."""
    llm_server.status(500)
    p = memclaw("agent", "-m", "what is my address?", "-w", str(root))
    assert p.returncode == 5, p.stderr
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert [m["content"] for m in session.messages] == ["what is my address?"]  # kept, as the reply says
    llm_server.reply("Rua das Flores 12.")
    p = memclaw("agent", "-m", "what is my address?", "-w", str(root))
    assert (p.returncode, p.stdout) == (0, "Rua das Flores 12.\n"), p.stderr
    sent = [m["content"] for m in llm_server.requests[-1]["messages"]]
    assert sent.count("what is my address?") == 1, sent
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert [(m["role"], m["content"]) for m in session.messages] == [
        ("user", "what is my address?"),
        ("assistant", "Rua das Flores 12."),
    ]
    llm_server.reply(consolidation_answer("Maya asked for her address."))
    p = memclaw("agent", "-m", "/new", "-w", str(root))
    assert p.returncode == 0, p.stderr
    assert archived(root).count("what is my address?") == 1


def test_the_owner_is_archived_under_the_name_user_md_gives(root, llm_server):
    """Issue 38 (papercuts): the terminal's owner was archived as `**user**` even with `- Name: Maya` in USER.md."""
    (root / "USER.md").write_text("# About the owner\n\n- Name: Maya\n- Location and time zone:\n", "utf-8")
    llm_server.reply("Noted.")
    assert memclaw("agent", "-m", "Lena moved to Porto", "-w", str(root)).returncode == 0
    llm_server.reply(consolidation_answer("Lena moved to Porto."))
    assert memclaw("agent", "-m", "/new", "-w", str(root)).returncode == 0
    text = archived(root)
    assert "**Maya**: Lena moved to Porto" in text and "**user**" not in text, text


def test_chat_is_interactive_with_history_a_spinner_and_commands(root, llm_server):
    llm_server.reply("Hello! How can I help?")
    llm_server.reply("You work at Solaris Energy.")
    p = memclaw(
        "chat",
        "-w",
        str(root),
        stdin="hello there\n\n/help\nwhere do I work?\nexit\n",
        TTY_COMPATIBLE="1",
        TTY_INTERACTIVE="1",
        NO_COLOR="1",
    )
    assert p.returncode == 0, p.stderr
    out, err = ANSI.sub("", p.stdout), ANSI.sub("", p.stderr)
    assert "Hello! How can I help?" in out and "You work at Solaris Energy." in out
    assert "/new" in out and "/recall" in out  # /help, answered without the model
    assert out.index("Hello!") < out.index("/recall") < out.index("Solaris")
    assert "/help for commands" in err and "thinking..." in err  # the banner and the spinner on stderr
    assert len(llm_server.requests) == 2
    second = llm_server.requests[1]["messages"]
    assert [m["content"] for m in second if m["role"] in ("user", "assistant")][:2] == [
        "hello there",
        "Hello! How can I help?",
    ]  # the conversation's history goes with the next message
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert [m["content"] for m in session.messages] == [
        "hello there",
        "Hello! How can I help?",
        "where do I work?",
        "You work at Solaris Energy.",
    ]
    assert json.dumps(session.messages).count("/help") == 0  # commands are not stored


def test_a_missing_or_rejected_key_fails_at_once_naming_the_variable(root, llm_server, monkeypatch):
    # the server rejects the key (401): no retry, nothing on stdout, one line naming the variable
    llm_server.status(401, times=4)
    p = memclaw("agent", "-m", "hi", "-w", str(root), MEMCLAW_AGENT__MAX_RETRIES="3")
    assert (p.returncode, p.stdout) == (5, "")
    assert p.stderr.count("\n") == 1 and "rejected the API key" in p.stderr and "OPENAI_API_KEY" in p.stderr
    assert len(llm_server.requests) == 1
    # no key at all (litellm reports it as InternalServerError 500 "Missing credentials" for openai): no retry
    monkeypatch.delenv("OPENAI_API_KEY")
    p = memclaw("agent", "-m", "hi", "-w", str(root), MEMCLAW_AGENT__MAX_RETRIES="3")
    assert (p.returncode, p.stdout) == (5, "")
    assert p.stderr.startswith("Error: no API key for openai/gpt-4o-mini: set OPENAI_API_KEY") and (
        p.stderr.count("\n") == 1
    )
    assert len(llm_server.requests) == 1  # the call never left the process
    # a provider without api_base (litellm raises AuthenticationError): the provider's own variable
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = "anthropic/claude-3-5-sonnet-20241022"
    p = memclaw("agent", "-m", "hi", "-w", str(root), MEMCLAW_AGENT__MODEL=model, MEMCLAW_AGENT__MAX_RETRIES="3")
    assert (p.returncode, p.stdout) == (5, "")
    assert (
        p.stderr == f"Error: no API key for {model}: set ANTHROPIC_API_KEY in the environment "
        "(or agent.api_key in config.toml)\n"
    )
    # status and chat say so up front
    p = memclaw("status", "-w", str(root), MEMCLAW_AGENT__MODEL=model)
    assert p.returncode == 0 and "no API key for anthropic" in p.stdout and "ANTHROPIC_API_KEY" in p.stdout
    p = memclaw("status", "--json", "-w", str(root))
    assert "OPENAI_API_KEY" in json.loads(p.stdout)["model_key_missing"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    p = memclaw("status", "--json", "-w", str(root))
    assert json.loads(p.stdout)["model_key_missing"] is None
    p = memclaw("chat", "-w", str(root), stdin="/exit\n", MEMCLAW_AGENT__MODEL=model)
    assert p.returncode == 0 and "no API key for anthropic" in p.stderr and "ANTHROPIC_API_KEY" in p.stderr
    assert len(llm_server.requests) == 1


CHAT_TTY = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "NO_COLOR": "1"}


def test_chat_commands_exit_unknown_and_a_recall_table(root, llm_server):
    p = memclaw(
        "chat",
        "-w",
        str(root),
        stdin="/frobnicate now\n/etc/hosts is missing\n/help\n/recall where do I work\n/exit\nnot sent\n",
        **CHAT_TTY,
    )
    assert p.returncode == 0, p.stderr
    out = ANSI.sub("", p.stdout)
    # an unknown command is answered with the list; a path is a message; `/exit` leaves (the last line is not sent)
    assert "unknown command /frobnicate; commands: /new, /help, /incognito, /recall, /forget, /exit" in out
    assert [r["messages"][-1]["content"] for r in llm_server.requests] == ["/etc/hosts is missing"]
    assert "/exit" in out[out.index("unknown command") + 80 :]  # /help lists /exit in the terminal
    # /recall draws the same table as `memclaw recall`: a header row, then one row per hit, left-aligned title
    lines = out.splitlines()
    title = next(i for i, ln in enumerate(lines) if "recall 'where do I work' · scope owner · hybrid" in ln)
    assert lines[title].startswith("you> recall") or lines[title].startswith("recall")
    header = next(ln for ln in lines[title:] if "fused" in ln)
    assert header.split() == ["#", "fused", "id", "bm25", "vector", "kind", "text"]  # the ids /forget takes
    row = next(ln for ln in lines[title:] if "Solaris Energy" in ln)
    assert row.split()[0] == "1" and " fact " in row and "battery" in row  # (the text wraps in its column)
    assert re.search(r" f[0-9a-f]{11} ", row), row


def test_chat_shows_markup_in_memories_literally_and_usage_in_full(root, llm_server):
    """Issue 19.1/19.8: a memory holding `[/b]` used to end the chat at /recall (MarkupError); the usage lines
    lost their `<query>` / `<id>` (read as HTML by the Markdown renderer). The chat goes on after each."""
    memory = root / "memory" / "MEMORY.md"
    memory.write_text(MEMORY + "- Forum tip: close tags like [/b] in BBCode, not <b>\n", "utf-8")
    llm_server.reply("Still here.")
    uid = unit_id("owner", "memory/MEMORY.md", "fact", "Forum tip: close tags like [/b] in BBCode, not <b>", 0)
    stdin = f"/recall\n/forget\n/recall BBCode tags\nhello\n/forget {uid}\n"
    p = memclaw("chat", "-w", str(root), stdin=stdin, COLUMNS="160", **CHAT_TTY)
    assert p.returncode == 0, p.stderr
    out = ANSI.sub("", p.stdout)
    assert f"Usage: {USAGE['/recall']}" in out and f"Usage: {USAGE['/forget']}" in out
    assert "/recall <query>" in USAGE["/recall"] and "/forget <id> [<id>...] (ids from /recall" in USAGE["/forget"]
    row = next(ln for ln in out.splitlines() if "Forum tip" in ln)
    assert "close tags like [/b] in BBCode, not <b>" in row and f" {uid} " in row, out  # with its id
    assert "Still here." in out  # the chat went on after /recall
    assert f"- {uid} (fact): Forum tip: close tags like [/b] in BBCode, not <b>" in out
    assert "BBCode" not in memory.read_text("utf-8")


def test_chat_log_lines_print_above_the_spinner(root, llm_server):
    llm_server.status(500)  # one retry: memclaw.llm.client logs a WARNING while the spinner turns
    llm_server.reply("Hello!")
    p = memclaw("chat", "-w", str(root), stdin="hi\n", MEMCLAW_AGENT__MAX_RETRIES="1", **CHAT_TTY)
    assert p.returncode == 0, p.stderr
    assert "thinking..." in p.stderr and "Hello!" in p.stdout
    at = p.stderr.index("LLM call to openai/gpt-4o-mini failed")
    # the spinner's line was erased first (rich's live display), instead of the log line continuing "thinking...";
    # memclaw's own warning reads as a note (issue 38), not as `WARNING memclaw.llm.client: ...`
    assert re.search(r"\x1b\[2K(\x1b\[[0-9;]*m)*warning:(\x1b\[[0-9;]*m)* $", p.stderr[:at]), repr(
        p.stderr[at - 60 : at]
    )
    assert "WARNING memclaw" not in p.stderr


class LiveChat:
    """`memclaw chat` in a subprocess, fed line by line; its output is collected as it comes."""

    def __init__(self, root: Path, **env: str) -> None:
        full = dict(os.environ, MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini", MEMCLAW_AGENT__MAX_RETRIES="0", **env)
        self.p = subprocess.Popen(
            [sys.executable, "-m", "memclaw.cli.main", "chat", "-w", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full,
        )
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        for stream, sink in ((self.p.stdout, self.out), (self.p.stderr, self.err)):
            threading.Thread(
                target=lambda s=stream, k=sink: [k.append(b) for b in iter(lambda: s.read1(4096), b"")], daemon=True
            ).start()

    def text(self, which: list[bytes]) -> str:
        return ANSI.sub("", b"".join(which).decode("utf-8", "replace"))

    def wait_for(self, cond, what: str) -> None:
        deadline = time.monotonic() + 120  # a safety net against hanging, not a timing assertion
        while not cond():
            assert self.p.poll() is None, (what, self.text(self.err))
            assert time.monotonic() < deadline, (what, self.text(self.out), self.text(self.err))
            time.sleep(0.05)

    def send(self, line: str) -> None:
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()


def test_chat_ctrl_c_says_what_was_kept(root, llm_server):
    chat = LiveChat(root)
    try:
        chat.wait_for(lambda: chat.text(chat.out).count("you> ") == 1, "the first prompt")
        chat.p.send_signal(signal.SIGINT)  # at the idle prompt: a fresh prompt, nothing about a message
        chat.wait_for(lambda: chat.text(chat.out).count("you> ") == 2, "a fresh prompt")
        llm_server.reply("too late", delay=60)
        chat.send("remember the milk")
        chat.wait_for(lambda: len(llm_server.requests) == 1, "the model was asked")
        chat.p.send_signal(signal.SIGINT)  # mid-turn, after the message was stored
        chat.wait_for(lambda: "(interrupted" in chat.text(chat.err), "the interruption noted")
        assert "(interrupted; your message is saved)" in chat.text(chat.err)
        llm_server.reply("later", delay=60)
        chat.send("/new")  # the turn above was stopped (it no longer holds the chat): /new consolidates at once
        chat.wait_for(lambda: len(llm_server.requests) == 2, "the consolidation asked the model")
        chat.p.send_signal(signal.SIGINT)  # mid-command: no message of the user's was involved
        chat.wait_for(lambda: chat.text(chat.err).count("(interrupted") == 2, "the second interruption")
        chat.send("exit")
        assert chat.p.wait(timeout=120) == 0
    finally:
        if chat.p.poll() is None:
            chat.p.kill()
    err = chat.text(chat.err)
    assert err.count("saved") == 1 and err.rstrip().endswith("(interrupted)"), err
    assert "Interrupted." not in err  # the chat went on after each Ctrl-C
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert [m["content"] for m in session.messages] == ["remember the milk"]


def test_an_unknown_model_is_one_line_without_litellm_noise(root, llm_server):
    p = memclaw("agent", "-m", "hi", "-w", str(root), MEMCLAW_AGENT__MODEL="nonsense-model")
    assert (p.returncode, p.stdout) == (5, "")
    assert "Provider List" not in p.stdout + p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("Error: litellm does not know the provider of model 'nonsense-model'")
    assert "openai/gpt-4o-mini" in p.stderr and "agent.model" in p.stderr and llm_server.requests == []


EVIL_REPLY = (
    "Hi \x1b]0;PWNED-TITLE\x07 \x1b[31mRED\x1b[0m \x1b[2J \x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ "
    "and [your bank](http://evil.example/login)"
)
RICH_SGR = re.compile(rb"\x1b\[[0-9;]*m")  # rich's own colours and bold


def in_pty(*args: str, typed: bytes = b"") -> bytes:
    """Everything `memclaw <args>` writes to a real terminal (a pty as its stdin, stdout and stderr), `typed`
    waiting in its input."""
    import pty
    import select

    master, slave = pty.openpty()
    env = dict(os.environ, MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini", MEMCLAW_AGENT__MAX_RETRIES="0", COLUMNS="100")
    p = subprocess.Popen(
        [sys.executable, "-m", "memclaw.cli.main", *args], stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    os.write(master, typed)
    out = b""
    # poll, not select: select() fails on a descriptor above 1024, which a long test process reaches
    poller = select.poll()
    poller.register(master, select.POLLIN)
    deadline = time.monotonic() + 300  # a safety net against hanging, not a timing assertion
    while time.monotonic() < deadline:
        if poller.poll(200):
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    assert p.wait(timeout=60) == 0, out
    return out


def the_reply_is_harmless(out: bytes) -> None:
    styled = RICH_SGR.sub(b"", out)
    at = styled.index(b"Hi ")
    shown = styled[at : styled.index(b"login)", at) + 6]
    assert b"\x1b" not in shown and b"\x07" not in shown, shown  # only rich's styling: no title, clear, hyperlink
    assert b"\x1b]" not in out and b"\x1b[2J" not in out, out
    text = shown.decode()
    assert "␛]0;PWNED-TITLE␇ ␛[31mRED␛[0m ␛[2J ␛]8;;http://evil.example␛\\click" in text, text
    assert "your bank (http://evil.example/login)" in " ".join(text.split()), text  # the link's URL is shown


def test_escape_sequences_in_a_reply_never_reach_the_terminal(root, llm_server):
    """Issue: a reply rendered as Markdown on a terminal passed its escape sequences through (retitle the
    terminal, clear the screen, a hidden OSC 8 hyperlink), in `agent -m` and `chat` alike."""
    llm_server.reply(EVIL_REPLY, times=2)
    the_reply_is_harmless(in_pty("agent", "-m", "hi", "-w", str(root)))
    the_reply_is_harmless(in_pty("chat", "-w", str(root), typed=b"hello\r/exit\r"))
    assert len(llm_server.requests) == 2
