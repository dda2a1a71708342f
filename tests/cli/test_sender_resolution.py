"""One reading of `--sender` for every command (memclaw.cli.sender_opt), and the agent's own routing agrees with it.

`context --sender discord:1234` used to say "the owner" when `owners.discord = ["1234"]` while `recall` and `memory
add` with the same sender read and wrote `people/discord:1234`, a scope that sender never reads; `cli:owner` was the
owner for context and `people/cli:owner` for the rest. Here each sender goes through `memory add`, `memory list`,
`recall`, `context` and `memory forget` (the console script's entry point in-process, a real workspace under the
per-test MEMCLAW_HOME) and through a real agent turn over HTTP (a scripted model calling `remember`): every one
places it in the same scope with the same owner verdict.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from memclaw.agent.loop import Agent
from memclaw.agent.turn import InboundMessage
from memclaw.cli.common import load, memory_service
from tests.cli import test_bad_input
from tests.cli.test_bad_input import Result
from tests.llm_server import scripted_server

cli = test_bad_input.cli  # the in-process console script

OWNERS = '\n[owners]\ndiscord = ["1234", " 77 "]\nslack = ["U0ABC"]\n'

# (sender as typed, is_owner, scope)
SENDERS = [
    ("discord:1234", True, "owner"),
    ("  discord : 1234 ", True, "owner"),  # whitespace around the id and around its parts
    ("discord:77", True, "owner"),  # an owner id configured with spaces around it
    ("slack:U0ABC", True, "owner"),
    ("slack:1234", False, "people/slack:1234"),  # the owner's number on another channel is someone else
    ("discord:12345", False, "people/discord:12345"),
    ("telegram:1234", False, "people/telegram:1234"),  # a channel with no owners configured
    ("cli:owner", True, "owner"),
    ("owner", True, "owner"),
    ("discord:a:b", False, "people/discord:a:b"),  # a colon in the id
    ("discord:ünï/../cøde 😀", False, "people/discord:ünï/../cøde 😀"),
    ("discord:[b]x[/b]", False, "people/discord:[b]x[/b]"),
]
WORDS = ["teapot", "lantern", "violin", "cactus", "harbour", "glacier", "saffron", "compass", "orchid", "tundra"]


@pytest.fixture
def home(cli, memclaw_home, monkeypatch) -> Path:
    monkeypatch.setenv("MEMCLAW_EMBEDDINGS__MODEL", "hash-test")  # what is under test is where, not how it embeds
    assert cli("onboard").code == 0
    with (memclaw_home / "config.toml").open("a", encoding="utf-8") as f:
        f.write(OWNERS)
    return memclaw_home


def ok_json(r: Result) -> object:
    assert r.code == 0 and "Traceback" not in r.err, r.err
    return json.loads(r.out)


def places(cli, sender: str, word: str) -> tuple[set[str], set[bool]]:
    """Every command's scope for `sender` (and context's owner verdict), a fact added and forgotten on the way."""
    added = ok_json(cli("memory", "add", f"I keep a {word} on the shelf", "--sender", sender, "--json"))
    listed = ok_json(cli("memory", "list", "--sender", sender, "--kind", "fact", "--json"))
    assert added["id"] in {u["id"] for u in listed}
    hits = ok_json(cli("recall", word, "--sender", sender, "--mode", "bm25", "--json"))
    assert added["id"] in {h["id"] for h in hits}
    built = ok_json(cli("context", f"where is my {word}", "--sender", sender, "--json"))
    gone = ok_json(cli("memory", "forget", added["id"], "--sender", sender, "--json"))
    assert [u["id"] for u in gone] == [added["id"]]
    scopes = {added["scope"], built["scope"], *(u["scope"] for u in listed), *(h["scope"] for h in hits)}
    return scopes | {g["scope"] for g in gone}, {built["is_owner"]}


def test_every_command_places_a_sender_in_the_same_scope(cli, home):
    for i, (sender, owner, scope) in enumerate(SENDERS):
        scopes, verdicts = places(cli, sender, WORDS[i % len(WORDS)])
        assert (scopes, verdicts) == ({scope}, {owner}), sender


def test_the_agent_routes_a_sender_as_the_commands_do(cli, home, monkeypatch):
    """A real turn from each channel sender: the model calls `remember`; the fact lands in the scope `memory list
    --sender` reads, and the turn's record says the same scope and owner verdict as `context`."""
    monkeypatch.setenv("MEMCLAW_AGENT__MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("MEMCLAW_AGENT__MAX_RETRIES", "0")
    channel_senders = [(s, o, sc) for s, o, sc in SENDERS if ":" in s and not s.startswith("cli:")]
    with scripted_server(monkeypatch) as server:
        cfg, ws = load(None)
        mem = memory_service(cfg, ws, progress=False)
        agent = Agent(cfg, ws, mem, background_consolidation=False)
        try:
            for i, (sender, owner, scope) in enumerate(channel_senders):
                channel, sid = sender.split(":", 1)
                server.tool_call("remember", {"text": f"Keeps a {WORDS[i % len(WORDS)]} by the door"})
                server.reply("Noted.")
                msg = InboundMessage(channel.strip(), f"chat-{i}", sid, "Someone", "remember this")
                reply = asyncio.run(agent.handle(msg))
                assert reply.ok and [t.ok for t in reply.record.tools] == [True], (sender, reply.text)
                assert (reply.record.scope, reply.record.is_owner) == (scope, owner), sender
                built = ok_json(cli("context", "door", "--sender", sender, "--json"))
                assert (built["scope"], built["is_owner"]) == (scope, owner), sender
                listed = ok_json(cli("memory", "list", "--sender", sender, "--kind", "fact", "--json"))
                assert any(WORDS[i % len(WORDS)] in u["text"] and u["scope"] == scope for u in listed), sender
        finally:
            asyncio.run(agent.aclose())
            mem.close()


def test_an_outsider_never_reaches_the_owner_scope_through_a_look_alike(cli, home):
    """Ids that look like an owner's but are not (another channel, a longer number, a case change of the channel)
    read and write their own scope: the owner's MEMORY.md is never touched by them."""
    memory_md = home / "workspace" / "memory" / "MEMORY.md"
    before = memory_md.read_bytes()
    for sender in ("slack:1234", "discord:12340", "Discord:1234", "discord:1234x", "people/discord:1234"):
        added = ok_json(cli("memory", "add", "Look-alike note", "--sender", sender, "--json"))
        assert added["scope"] != "owner", sender
        assert ok_json(cli("context", "note", "--sender", sender, "--json"))["is_owner"] is False, sender
    assert memory_md.read_bytes() == before
