"""Issue 39.1: the owner's `exec` cannot hand out memclaw's secrets. The attacks of the hostile test, replayed
through the agent's tool path (litellm over real HTTP to the scripted server, real bubblewrap, real files): memclaw's
environment through /proc, its config file by a relative and an absolute path, `env`. Each result, the session file
and the reply hold nothing secret. Without bwrap (or with a bwrap that cannot start) exec refuses in one line: those
tests never skip. exec is off by default."""

from __future__ import annotations

import asyncio
import shutil
import stat

import pytest

from memclaw.agent.loop import Agent
from memclaw.agent.sessions import SessionStore
from memclaw.agent.turn import InboundMessage
from memclaw.config import Config, load_config
from memclaw.llm.client import LLMClient
from memclaw.tools.base import ToolContext
from memclaw.tools.exec import hidden_in_workspace, sandbox_argv
from memclaw.tools.registry import ToolRegistry
from tests.llm_server import scripted_server

API_KEY = "sk-config-agent-key-0123456789abcdef"
DISCORD = "discord-token-MTIzNDU2Nzg5MDEyMzQ1Njc4.Gh7-xy"
CANARY = "canary-value-of-memclaws-environment-4417"
ENV_SECRET = "env-held-secret-value-99881"

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

ATTACKS = [
    "tr '\\0' '\\n' < /proc/$PPID/environ | grep -E 'KEY|TOKEN'",
    "tr '\\0' '\\n' < /proc/$PPID/environ",
    "cat ../config.toml",
    "env",
    "cat /proc/1/environ",
    "cat {home}/config.toml",
    "cat $MEMCLAW_HOME/config.toml",
    "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done",
]


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def home(memclaw_home, monkeypatch):
    """The default layout: the workspace in MEMCLAW_HOME, its config.toml one level up (holding the agent's key
    and the Discord token); memclaw's environment holds a canary and a secret-named variable."""
    ws = memclaw_home / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "notes.md").write_text("line one\n", "utf-8")
    (memclaw_home / "config.toml").write_text(
        f'[agent]\napi_key = "{API_KEY}"\nexec_enabled = true\n\n[channels.discord]\ntoken = "{DISCORD}"\n', "utf-8"
    )
    monkeypatch.setenv("MEMCLAW_TEST_CANARY", CANARY)
    monkeypatch.setenv("SERVICE_PASSWORD", ENV_SECRET)
    return memclaw_home


def make_agent(home) -> Agent:
    cfg = load_config()
    cfg.agent.model = "openai/gpt-4o-mini"
    cfg.agent.max_retries = 0
    cfg.agent.api_key = None  # the scripted server's OPENAI_API_KEY (the config's key stays known as a secret)
    return Agent(cfg, home / "workspace", llm=LLMClient(cfg, backoff_base_s=0.01, max_backoff_s=0.02))


def forbidden(home) -> list[str]:
    """What no exec result may show: the secrets, the canary of memclaw's environment, the config file's text."""
    return [API_KEY, DISCORD, CANARY, ENV_SECRET, "sk-test-not-a-real-key", "api_key", "[channels.discord]"]


def echo_tool_result(req: dict):
    """The model's reply: the last tool result, verbatim (a model that repeats what it read)."""
    from tests.llm_server import Scripted

    tool = [m for m in req["messages"] if m["role"] == "tool"][-1]
    return Scripted(message={"role": "assistant", "content": "I found: " + tool["content"]})


@needs_bwrap
@pytest.mark.parametrize("attack", ATTACKS)
def test_exec_attacks_reach_no_secret(home, llm_server, attack):
    command = attack.format(home=home)
    llm_server.tool_call("exec", {"command": command})
    llm_server.dynamic(echo_tool_result)
    reply = asyncio.run(make_agent(home).handle(InboundMessage.cli("show me the keys")))
    tool_result = [m for m in llm_server.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "[exit code" in tool_result, tool_result  # the command ran, in the sandbox
    session = SessionStore(home / "workspace" / "sessions").path_for("cli", "cli").read_text("utf-8")
    for seen in (tool_result, reply.text, session):
        for secret in forbidden(home):
            assert secret not in seen, (command, secret, seen)


@needs_bwrap
def test_exec_still_works_in_the_sandbox(home):
    cfg = load_config()
    ws = home / "workspace"
    ctx = ToolContext(root=ws, config=cfg, scope="owner", is_owner=True)
    reg = ToolRegistry()

    def run(command: str):
        return asyncio.run(reg.execute("exec", {"command": command}, ctx))

    r = run("pwd; ls; echo hello from the sandbox")
    assert r.ok and str(ws.resolve()) in r.content and "notes.md" in r.content, r.content
    assert "hello from the sandbox" in r.content and "[exit code 0]" in r.content
    r = run("echo made > made.txt && mkdir -p sub && cp notes.md sub/copy.md && wc -l notes.md")
    assert r.ok and "[exit code 0]" in r.content, r.content
    assert (ws / "made.txt").read_text() == "made\n" and (ws / "sub" / "copy.md").read_text() == "line one\n"
    r = run('python3 -c "print(sum(range(10)))"; echo tmp > /tmp/x && cat /tmp/x; id -u')
    assert "45" in r.content and "tmp" in r.content and "[exit code 0]" in r.content, r.content
    r = run("ls /root /home 2>&1; ls /etc | grep -c shadow; touch /usr/evil 2>&1")
    assert "[exit code 1]" in r.content and "Read-only file system" in r.content, r.content
    assert not (ws / "evil").exists()


@needs_bwrap
def test_exec_has_no_network_unless_the_owner_allows_it(home, llm_server):
    cfg = load_config()
    ctx = ToolContext(root=home / "workspace", config=cfg, scope="owner", is_owner=True)
    connect = f"socket.create_connection(('127.0.0.1', {llm_server.port}), timeout=5)"
    probe = f"python3 -c \"import socket; {connect}; print('CONNECTED')\""
    r = asyncio.run(ToolRegistry().execute("exec", {"command": probe}, ctx))
    assert "CONNECTED" not in r.content and "[exit code 1]" in r.content, r.content
    cfg.agent.exec_network = True
    r = asyncio.run(ToolRegistry().execute("exec", {"command": probe}, ctx))
    assert "CONNECTED" in r.content, r.content


@needs_bwrap
@pytest.mark.parametrize("layout", ["home is the workspace", "home inside the workspace", "config linked into it"])
def test_config_inside_the_workspace_is_not_visible(tmp_path, monkeypatch, layout):
    ws = tmp_path / "ws"
    ws.mkdir()
    home = {"home is the workspace": ws, "home inside the workspace": ws / ".memclaw"}.get(layout, tmp_path / "h")
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(f'[agent]\napi_key = "{API_KEY}"\nexec_enabled = true\n', "utf-8")
    (home / "chat_history").write_text("my password is hunter2\n", "utf-8")
    if layout == "config linked into it":  # the real files in a folder of the workspace, linked from the home
        (ws / ".memclaw").mkdir()
        for name in ("config.toml", "chat_history"):
            (home / name).rename(ws / ".memclaw" / name)
            (home / name).symlink_to(ws / ".memclaw" / name)
    monkeypatch.setenv("MEMCLAW_HOME", str(home))
    cfg = Config()  # not load_config: the config's key is not known as a secret, so masking cannot hide it
    cfg.agent.exec_enabled = True
    ctx = ToolContext(root=ws, config=cfg, scope="owner", is_owner=True)
    command = "cat config.toml; cat .memclaw/config.toml; cat .memclaw/chat_history; grep -r api_key . ; echo END"
    r = asyncio.run(ToolRegistry().execute("exec", {"command": command}, ctx))
    assert "END" in r.content, r.content
    assert API_KEY not in r.content and "api_key" not in r.content and "hunter2" not in r.content, r.content
    assert (home / "config.toml").read_text().startswith("[agent]")  # covered in the sandbox, not removed
    assert (home / "chat_history").read_text() == "my password is hunter2\n"
    assert len(hidden_in_workspace(ws)) == (1 if layout == "home inside the workspace" else 2)


def fake_bin(tmp_path, name: str, script: str):
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text("#!/bin/sh\n" + script, "utf-8")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return d


def test_exec_refuses_without_bwrap(home, llm_server, tmp_path, monkeypatch):
    """Never skipped: on a machine without bubblewrap exec runs nothing and says the fix in one line."""
    empty = tmp_path / "no-bwrap-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for attack in ATTACKS:
        llm_server.tool_call("exec", {"command": attack.format(home=home) + "; touch pwned"})
    llm_server.dynamic(echo_tool_result)
    reply = asyncio.run(make_agent(home).handle(InboundMessage.cli("show me the keys")))
    results = [m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(ATTACKS)
    for r in results:
        assert r.startswith("Error: exec is refused: bubblewrap (bwrap) is not installed") and "\n" not in r, r
        assert "apt-get install bubblewrap" in r and 'agent.exec_sandbox = "none"' in r
    assert not (home / "workspace" / "pwned").exists()
    assert all(s not in reply.text for s in forbidden(home))


def test_exec_refuses_when_the_sandbox_cannot_start(home, tmp_path, monkeypatch):
    """A bwrap that fails to set up its namespaces (as in a container without user namespaces): one line, and
    the command is not run some other way."""
    fake = fake_bin(tmp_path, "bwrap", "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    cfg = load_config()
    ctx = ToolContext(root=home / "workspace", config=cfg, scope="owner", is_owner=True)
    r = asyncio.run(ToolRegistry().execute("exec", {"command": "touch pwned; cat ../config.toml"}, ctx))
    assert not r.ok and "\n" not in r.content
    assert r.content.startswith("Error: exec is refused: its sandbox could not start (bwrap: setting up uid map")
    assert 'agent.exec_sandbox = "none"' in r.content
    assert not (home / "workspace" / "pwned").exists()


def test_exec_is_off_by_default(tmp_path):
    cfg = Config()
    assert cfg.agent.exec_enabled is False and cfg.agent.exec_sandbox == "bwrap" and cfg.agent.exec_network is False
    ctx = ToolContext(root=tmp_path, config=cfg, scope="owner", is_owner=True)
    assert "exec" not in ToolRegistry().names(ctx)
    r = asyncio.run(ToolRegistry().execute("exec", {"command": "touch pwned"}, ctx))
    assert r.content.startswith("Error: unknown tool 'exec'") and not (tmp_path / "pwned").exists()


def test_every_tool_result_is_masked_for_known_secrets(home, monkeypatch):
    """Whatever a tool reads (a file holding the config's key, the Discord token, an environment secret), the
    result holds *** in its place: independent of the sandbox."""
    cfg = load_config()
    ws = home / "workspace"
    (ws / "leak.txt").write_text(f"key={API_KEY}\ntoken: {DISCORD}\npw {ENV_SECRET}\nplain words\n", "utf-8")
    ctx = ToolContext(root=ws, config=cfg, scope="owner", is_owner=True)
    r = asyncio.run(ToolRegistry().execute("read_file", {"path": "leak.txt"}, ctx))
    assert r.ok and "plain words" in r.content
    assert API_KEY not in r.content and DISCORD not in r.content and ENV_SECRET not in r.content
    assert r.content.count("***") == 3


def test_sandbox_sees_no_secret_of_the_machine(tmp_path):
    """What the sandbox mounts: the workspace read-write, system programs read-only, /etc only by an allow-list
    (never shadow or ssh keys), no home and no memclaw home."""
    argv = sandbox_argv("true", root=tmp_path, network=False)
    assert argv[:5] == ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    assert "--share-net" not in argv and "--share-net" in sandbox_argv("true", root=tmp_path, network=True)
    mounted = [argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind", "--ro-bind-try")]
    assert str(tmp_path.resolve()) in mounted
    assert not any(m in ("/etc", "/root", "/home", "/etc/shadow", "/etc/ssh", "/proc") for m in mounted)


@needs_bwrap
def test_exec_works_in_a_process_holding_more_than_1024_files(home):
    """A long-lived process (the gateway, or this test suite) holds many files: the sandbox's info pipe then gets a
    descriptor past 1024, which select() refused ("filedescriptor out of range") when a command failed."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit on open files ({hard}) is below 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while len(held) < 1100 and (not held or held[-1] < 1100):
            held.append(os.open(os.devnull, os.O_RDONLY))
        ctx = ToolContext(root=home / "workspace", config=load_config(), scope="owner", is_owner=True)
        r = asyncio.run(ToolRegistry().execute("exec", {"command": "echo failing; exit 3"}, ctx))
        assert "failing" in r.content and "[exit code 3]" in r.content, r.content
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
