"""Tools on real files and real subprocesses: confinement, deny list, validation errors as results."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from memclaw.config import Config
from memclaw.tools.base import ToolContext
from memclaw.tools.exec import denied_reason
from memclaw.tools.registry import ToolRegistry


@pytest.fixture
def ctx(tmp_path):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "notes.md").write_text("line one\nline two\n", "utf-8")
    cfg = Config()
    cfg.agent.exec_enabled = True  # off by default (tests/tools/test_exec_sandbox.py)
    return ToolContext(root=root, config=cfg, scope="owner", is_owner=True)


def run(reg: ToolRegistry, name: str, args, ctx: ToolContext):
    return asyncio.run(reg.execute(name, args if isinstance(args, str) else json.dumps(args), ctx))


def test_definitions_by_sender(ctx):
    reg = ToolRegistry()
    owner = {d["function"]["name"] for d in reg.definitions(ctx)}
    assert owner == {"read_file", "write_file", "edit_file", "list_dir", "exec", "memory_search", "remember"}
    outsider = ToolContext(ctx.root, ctx.config, "people/discord:9", is_owner=False)
    assert [d["function"]["name"] for d in reg.definitions(outsider)] == ["memory_search", "remember"]
    ctx.config.agent.exec_enabled = False
    assert "exec" not in reg.names(ctx)
    schema = next(d for d in reg.definitions(ctx) if d["function"]["name"] == "memory_search")["function"]
    params = schema["parameters"]
    assert params["required"] == ["query"] and params["properties"]["kind"]["enum"] == ["fact", "history"]
    json.dumps(reg.definitions(ctx))  # serialisable


def test_definitions_are_built_once_and_handed_out_as_copies(ctx):
    reg = ToolRegistry()
    first = reg.definitions(ctx)
    first[0]["function"]["parameters"]["properties"].clear()  # a caller mangling what it got
    second = reg.definitions(ctx)
    assert second != first and second == ToolRegistry().definitions(ctx)
    search = next(d["function"] for d in second if d["function"]["name"] == "memory_search")
    assert search["description"].startswith("Search long-term memory (facts and past conversations)")  # template


def test_outsider_cannot_use_file_tools_even_if_called(ctx):
    outsider = ToolContext(ctx.root, ctx.config, "people/discord:9", is_owner=False)
    r = run(ToolRegistry(), "read_file", {"path": "notes.md"}, outsider)
    assert not r.ok and r.content.startswith("Error: unknown tool 'read_file'")
    assert "line one" not in r.content


def test_read_write_edit_list(ctx):
    reg = ToolRegistry()
    assert run(reg, "read_file", {"path": "notes.md"}, ctx).content == "line one\nline two\n"
    r = run(reg, "write_file", {"path": "sub/dir/new.txt", "content": "héllo"}, ctx)
    assert r.ok and "sub/dir/new.txt" in r.content
    assert (ctx.root / "sub/dir/new.txt").read_text("utf-8") == "héllo"
    r = run(reg, "edit_file", {"path": "notes.md", "old_text": "line two", "new_text": "line 2"}, ctx)
    assert r.ok and (ctx.root / "notes.md").read_text() == "line one\nline 2\n"
    r = run(reg, "edit_file", {"path": "notes.md", "old_text": "line", "new_text": "x"}, ctx)
    assert not r.ok and "occurs 2 times" in r.content
    r = run(reg, "edit_file", {"path": "notes.md", "old_text": "absent", "new_text": "x"}, ctx)
    assert not r.ok and "not found" in r.content
    listing = run(reg, "list_dir", {}, ctx).content.splitlines()
    assert listing[:2] == ["memory/", "sub/"] and listing[2].startswith("notes.md (")


def test_confinement_refuses_escapes_and_symlinks(ctx, tmp_path):
    reg = ToolRegistry()
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    (ctx.root / "link").symlink_to(secret)
    (ctx.root / "dirlink").symlink_to(tmp_path)
    for path in ["../secret.txt", str(secret), "link", "dirlink/secret.txt", "~/x", "memory/../../secret.txt"]:
        r = run(reg, "read_file", {"path": path}, ctx)
        assert not r.ok and "outside the workspace" in r.content, path
        assert "TOP SECRET" not in r.content
    r = run(reg, "write_file", {"path": "dirlink/evil.txt", "content": "x"}, ctx)
    assert not r.ok and not (tmp_path / "evil.txt").exists()
    r = run(reg, "list_dir", {"path": ".."}, ctx)
    assert not r.ok
    r = run(reg, "write_file", {"path": "sessions/cli__cli.jsonl", "content": "x"}, ctx)
    assert not r.ok and "managed by memclaw" in r.content
    ctx.config.agent.restrict_to_workspace = False
    assert run(reg, "read_file", {"path": str(secret)}, ctx).content == "TOP SECRET"


def test_unknown_tool_and_bad_arguments_are_results(ctx):
    reg = ToolRegistry()
    r = run(reg, "launch_rockets", {}, ctx)
    assert not r.ok and "unknown tool 'launch_rockets'" in r.content and "read_file" in r.content
    r = run(reg, "read_file", "{not json", ctx)
    assert not r.ok and "not valid JSON" in r.content
    r = run(reg, "read_file", {"file": "x"}, ctx)
    assert not r.ok and "invalid arguments for read_file" in r.content and "path" in r.content
    r = run(reg, "memory_search", {"query": "x", "k": 1000}, ctx)
    assert not r.ok and "k:" in r.content
    r = run(reg, "read_file", "[1, 2]", ctx)
    assert not r.ok and "JSON object" in r.content
    r = run(reg, "read_file", '```json\n{"path": "notes.md"}\n```', ctx)  # fenced arguments are accepted
    assert r.ok and "line one" in r.content
    r = run(reg, "memory_search", {"query": "x"}, ctx)  # no memory service attached
    assert not r.ok and "memory is not available" in r.content


def test_exec_runs_in_workspace_with_timeout_cap_and_no_secrets(ctx, monkeypatch):
    reg = ToolRegistry()
    monkeypatch.setenv("SOME_API_KEY", "sk-should-not-leak")
    r = run(reg, "exec", {"command": "pwd; ls; env"}, ctx)
    assert r.ok and str(ctx.root.resolve()) in r.content and "notes.md" in r.content and "[exit code 0]" in r.content
    assert "sk-should-not-leak" not in r.content
    r = run(reg, "exec", {"command": "echo oops >&2; exit 3"}, ctx)
    assert "[stderr]\noops" in r.content and "[exit code 3]" in r.content
    r = run(reg, "exec", {"command": "python3 -c \"print('y' * 100000)\""}, ctx)
    assert len(r.content) < 11_000 and "characters omitted" in r.content
    ctx.config.agent.exec_timeout_s = 0.5
    r = run(reg, "exec", {"command": "sleep 30 & sleep 30"}, ctx)
    assert "killed after the 0.5s timeout" in r.content


def test_exec_output_is_capped_while_it_is_read_not_after(ctx):
    """300 MB of output: the result keeps a head and a tail, and the memory it took stays bounded (reading it all
    first and capping afterwards would need the whole 300 MB, twice)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    r = run(ToolRegistry(), "exec", {"command": "head -c 300000000 /dev/zero | tr '\\0' y; echo; echo END"}, ctx)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert r.ok and len(r.content) <= 10_100
    assert r.content.startswith("yyyy") and "bytes omitted" in r.content and "END\n[exit code 0]" in r.content
    assert grown_mb < 100, f"peak memory grew by {grown_mb:.0f} MB while reading the command's output"


def test_exec_timeout_kills_a_chatty_command_and_its_children(ctx, tmp_path):
    ctx.config.agent.exec_timeout_s = 0.5
    marker = ctx.root / "survived"  # in the workspace: the one place the sandboxed command may write
    r = run(
        ToolRegistry(),
        "exec",
        {"command": f"(sleep 1; touch {marker}) & while :; do echo tick; done"},
        ctx,
    )
    assert r.ok and r.content.startswith("tick") and r.content.endswith("[killed after the 0.5s timeout]")
    assert len(r.content) <= 10_100
    import time

    time.sleep(2)  # the background child was in the killed process group: it never gets to touch the file
    assert not marker.exists()


def test_outsider_cannot_exec_whatever_the_model_asks(ctx):
    """Adversarial: a model talked into running a command for an outsider gets 'unknown tool', nothing runs."""
    outsider = ToolContext(ctx.root, ctx.config, "people/discord:9", is_owner=False)
    reg = ToolRegistry()
    assert "exec" not in reg.names(outsider)
    for args in ({"command": "touch pwned"}, '{"command": "touch pwned"}', {"cmd": "touch pwned"}):
        r = run(reg, "exec", args, outsider)
        assert not r.ok and r.content.startswith("Error: unknown tool 'exec'")
    assert not (ctx.root / "pwned").exists()


@pytest.mark.parametrize(
    "cmd",
    [
        "rm -rf /",
        "rm -rf ~",
        "sudo rm -fr /*",
        "rm -r -f $HOME",
        "rm -rf ..",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda",
        "echo x > /dev/sda",
        "shutdown -h now",
        "reboot",
        ":(){ :|:& };:",
        "chmod -R 777 /",
    ],
)
def test_deny_list_blocks_destructive_commands(cmd, ctx):
    assert denied_reason(cmd)
    r = run(ToolRegistry(), "exec", {"command": cmd}, ctx)
    assert not r.ok and "deny list" in r.content


@pytest.mark.parametrize(
    "cmd", ["rm -rf build/", "rm notes.md", "ls -la", "git log --format=%H", "echo reboot-notes.md", "df -h"]
)
def test_deny_list_allows_ordinary_commands(cmd):
    assert denied_reason(cmd) is None


def test_exec_unavailable_for_outsiders_and_when_disabled(ctx):
    outsider = ToolContext(ctx.root, ctx.config, "people/discord:9", is_owner=False)
    assert not run(ToolRegistry(), "exec", {"command": "id"}, outsider).ok
    ctx.config.agent.exec_enabled = False
    r = run(ToolRegistry(), "exec", {"command": "id"}, ctx)
    assert not r.ok and "unknown tool" in r.content


def test_tool_crash_becomes_result(ctx):
    from memclaw.tools.base import Tool
    from memclaw.tools.files import ReadFileArgs

    class Boom(Tool):
        name = "boom"
        description = "explodes"
        Args = ReadFileArgs

        def run(self, args, ctx):
            raise RuntimeError("kaboom")

    reg = ToolRegistry([Boom()])
    r = run(reg, "boom", {"path": "x"}, ctx)
    assert not r.ok and "kaboom" in r.content
    assert os.path.exists(ctx.root / "notes.md")


def test_the_file_tools_write_no_huge_memory_file(ctx):
    """An owner's write_file of a 400,000-line MEMORY.md held a turn for ~10 minutes (its index sync runs in the
    turn): a memory file the tools write is capped (memclaw.tools.files.MAX_MEMORY_WRITE_BYTES), in one message."""
    from memclaw.tools.files import MAX_MEMORY_WRITE_BYTES

    reg = ToolRegistry()
    mem = ctx.root / "memory" / "MEMORY.md"
    mem.write_text("# Facts\n- I keep bees\n", "utf-8")
    huge = "# Facts\n" + "".join(f"- fact number {i}\n" for i in range(400_000))
    res = run(reg, "write_file", {"path": "memory/MEMORY.md", "content": huge}, ctx)
    assert not res.ok and f"{MAX_MEMORY_WRITE_BYTES:,} bytes" in res.content
    assert mem.read_text("utf-8") == "# Facts\n- I keep bees\n"
    res = run(reg, "edit_file", {"path": "memory/MEMORY.md", "old_text": "bees", "new_text": "x" * 300_000}, ctx)
    assert not res.ok and mem.read_text("utf-8") == "# Facts\n- I keep bees\n"
    notes = "x" * (MAX_MEMORY_WRITE_BYTES + 1)  # outside memory/: no cap of this kind
    assert run(reg, "write_file", {"path": "notes.md", "content": notes}, ctx).ok
    assert run(reg, "write_file", {"path": "memory/MEMORY.md", "content": "# Facts\n- I keep wasps\n"}, ctx).ok
