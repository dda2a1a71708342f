"""End to end with memory: the agent over real HTTP (scripted LLM), the real MemoryService (real model, real
Chroma, real Markdown). Consolidation writes HISTORY entries and fact operations that recall then finds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("memclaw.markdown.files")
pytest.importorskip("memclaw.workspace")

from memclaw.agent.loop import Agent  # noqa: E402
from memclaw.agent.sessions import SessionStore  # noqa: E402
from memclaw.agent.turn import InboundMessage  # noqa: E402
from memclaw.config import Config  # noqa: E402
from memclaw.errors import LLMError  # noqa: E402
from memclaw.llm.client import LLMClient  # noqa: E402
from memclaw.service.facade import MemoryService  # noqa: E402
from memclaw.service.learned import bare_fact  # noqa: E402
from tests.agent.recording import RecordingAgent  # noqa: E402
from tests.llm_server import scripted_server  # noqa: E402

pytestmark = pytest.mark.slow

MEMORY = """# About me
- I live at 14 Rue des Lilas, Lyon
- I am allergic to penicillin

# Work
- I work at Solaris Energy as a battery engineer
"""
HISTORY = "[2026-03-02 18:10] Talked about the garden: tomatoes and basil on the balcony.\n"
OUTSIDER = "people/discord:2002"


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def env(tmp_path, embedder):
    from memclaw.workspace import Workspace

    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    (root / "memory" / "HISTORY.md").write_text(HISTORY, "utf-8")
    ws = Workspace(root)
    cfg = Config(workspace=root)
    cfg.agent.model = "openai/gpt-4o-mini"
    cfg.agent.max_retries = 1
    cfg.agent.memory_window = 6
    cfg.owners = {"discord": ["1001"]}
    mem = MemoryService(ws, cfg, embedder=embedder)
    agent = RecordingAgent(
        cfg, ws, mem, llm=LLMClient(cfg, backoff_base_s=0.01, max_backoff_s=0.02), background_consolidation=False
    )
    yield agent
    mem.close()


def cli(text: str) -> InboundMessage:
    return InboundMessage.cli(text)


def outsider(text: str) -> InboundMessage:
    return InboundMessage("discord", "dm-2002", "2002", "Mallory", text)


def fact_id(agent: Agent, needle: str, scope: str = "owner") -> str:
    return next(f.id for f in agent.memory.facts(scope) if needle in f.text)


def texts(hits) -> list[str]:
    """The hits' texts without the learned-mark facts end in (memclaw.service.learned)."""
    return [bare_fact(h.unit.text) for h in hits]


def fact_texts(agent: Agent, scope: str = "owner") -> list[str]:
    return [bare_fact(f.text) for f in agent.memory.facts(scope)]


def memory_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "memory").rglob("*.md"))}


def talk(agent: Agent, server, turns: list[str], msg=cli) -> None:
    async def go():
        for t in turns:
            server.reply(f"ok: {t}")
            r = await agent.handle(msg(t))
            assert r.ok, r.text

    asyncio.run(go())


def consolidation_json(history: str, facts: list[dict]) -> str:
    return json.dumps({"history_entry": history, "facts": facts})


def test_consolidation_end_to_end_add_update_delete(env, llm_server):
    agent = env
    root = agent.root
    solaris = fact_id(agent, "Solaris Energy")
    penicillin = fact_id(agent, "penicillin")
    # 3 turns = 6 messages: at the window, nothing happens yet
    talk(agent, llm_server, ["My sister Lena moved to Porto", "I changed jobs", "The allergy test was negative"])
    assert len(llm_server.requests) == 3
    # the consolidation reply comes fenced and chatty: the shared helper copes
    reply = consolidation_json(
        "Ana planned a visit to her sister Lena in Porto for April 2026, booking TAP flights and rejecting the "
        "night train. She started a new job at Helios Power and learned her penicillin allergy test was negative.",
        [
            {"op": "add", "text": "Sister Lena lives in Porto", "section": "Family"},
            {"op": "update", "id": solaris, "text": "Works at Helios Power as a battery engineer"},
            {"op": "delete", "id": penicillin},
        ],
    )
    llm_server.reply("ok: visiting Lena")
    llm_server.reply(f"Here is the memory update:\n```json\n{reply}\n```")
    r = asyncio.run(agent.handle(cli("I will visit Lena in April")))  # 8 messages > 6: consolidation
    assert r.ok
    prompt = llm_server.requests[-1]["messages"][-1]["content"]
    assert f"[{solaris}]" in prompt and f"[{penicillin}]" in prompt  # current facts shown with their ids
    assert "My sister Lena moved to Porto" in prompt and "I will visit Lena" not in prompt  # only the older part

    md = (root / "memory" / "MEMORY.md").read_text("utf-8")
    assert "Sister Lena lives in Porto" in md and "Helios Power" in md
    assert "Solaris" not in md and "penicillin" not in md and "Rue des Lilas" in md
    hist = (root / "memory" / "HISTORY.md").read_text("utf-8")
    assert "Helios Power" in hist and hist.startswith(HISTORY.strip())
    import re

    cid = re.search(r"\n\[\d{4}-\d{2}-\d{2} \d{2}:\d{2} #(c[0-9a-f]{8})\] Ana planned a visit", hist).group(1)
    # the three records of this consolidation carry its id: the facts it wrote and its archived conversation
    day = hist[hist.index(f" #{cid}]") - 16 : hist.index(f" #{cid}]") - 6]  # the conversation's day
    assert f"- Sister Lena lives in Porto ({day} #{cid})\n" in md
    assert f"- Works at Helios Power as a battery engineer ({day} #{cid})\n" in md
    (day_file,) = agent.workspace.archive_files()
    assert day_file.name == f"{day}.md"
    archived = day_file.read_text("utf-8")
    assert f" #{cid}\n" in archived and "- " in archived
    assert "**user**: My sister Lena moved to Porto" in archived and "**memclaw**: ok: I changed jobs" in archived
    assert "I will visit Lena" not in archived  # the recent turn stays in the session, not yet archived

    mem = agent.memory
    assert "Sister Lena lives in Porto" in texts(mem.recall("Where does Lena live?", k=3))[:2]
    hist_hits = mem.recall("train to Porto rejected", kind="history", k=3)
    assert hist_hits and "night train" in hist_hits[0].unit.text
    assert "Works at Helios Power as a battery engineer" in texts(mem.recall("Where do I work?", k=3))
    everything = texts(mem.recall("Solaris Energy penicillin allergy job", k=50))
    assert not any("Solaris" in t or "allergic to penicillin" in t for t in everything)  # index updated too

    # the session was trimmed to the recent turn; nothing else lost
    s = SessionStore(root / "sessions").load("cli", "cli")
    assert [m["content"] for m in s.messages if m["role"] == "user"] == ["I will visit Lena in April"]
    assert s.last_consolidated == 0
    assert agent.last_consolidation and agent.last_consolidation.consolidated == 6

    # and `memclaw recall`, as the user would check it, sees the same: the new fact and history entry, the
    # updated fact instead of the old one, the deleted fact gone
    mem.close()
    assert "Sister Lena lives in Porto" in cli_recall(root, "Where does Lena live?", "--k", "3")[:2]
    assert "night train" in cli_recall(root, "train to Porto rejected", "--kind", "history", "--k", "3")[0]
    assert "Works at Helios Power as a battery engineer" in cli_recall(root, "Where do I work?", "--k", "3")
    everything = cli_recall(root, "Solaris Energy penicillin allergy job", "--k", "50")
    assert everything and not any("Solaris" in t or "allergic to penicillin" in t for t in everything)


def cli_recall(root: Path, query: str, *args: str) -> list[str]:
    """`memclaw recall QUERY --json -w ROOT ...` in-process (typer's CliRunner): the hits' texts, without marks."""
    from typer.testing import CliRunner

    from memclaw.cli.main import app

    r = CliRunner().invoke(app, ["recall", query, "--json", "-w", str(root), *args])
    assert r.exit_code == 0, (r.output, r.exception)
    return [bare_fact(h["text"]) for h in json.loads(r.stdout)]


def test_outsider_facts_go_to_their_scope(env, llm_server):
    agent = env
    owner_before = memory_files(agent.root)
    talk(agent, llm_server, ["hi", "I keep bees", "I sell honey"], msg=outsider)
    llm_server.reply("ok")
    llm_server.reply(
        consolidation_json(
            "Mallory said she keeps bees and sells honey at the Saturday market.",
            [{"op": "add", "text": "Mallory keeps bees and sells honey"}],
        )
    )
    assert asyncio.run(agent.handle(outsider("see you"))).ok
    prompt = llm_server.requests[-1]["messages"][-1]["content"]
    assert "Rue des Lilas" not in prompt and "Solaris" not in prompt  # owner facts never shown for an outsider
    after = memory_files(agent.root)
    assert {k: v for k, v in after.items() if not k.startswith("memory/people/")} == owner_before
    people = [k for k in after if k.startswith("memory/people/")]
    assert any(k.endswith("MEMORY.md") and b"bees" in after[k] for k in people)
    mem = agent.memory
    assert "Mallory keeps bees and sells honey" in texts(mem.recall("who keeps bees?", scope=OUTSIDER, kind="fact"))
    assert not any("bees" in t for t in texts(mem.recall("who keeps bees?", k=10)))


def test_junk_is_retried_once_then_nothing_is_lost(env, llm_server):
    agent = env
    talk(agent, llm_server, ["one", "two", "three"])
    mem_before = memory_files(agent.root)
    session_path = SessionStore(agent.root / "sessions").path_for("cli", "cli")
    llm_server.reply("ok: four")
    llm_server.reply("I summarised the conversation for you!")  # junk
    llm_server.reply('{"history_entry": "x", "facts": [{"op": "delete", "id": "f-does-not-exist"}]}')  # junk again
    assert asyncio.run(agent.handle(cli("four"))).ok
    assert "not valid JSON" in llm_server.requests[-1]["messages"][-1]["content"]  # the retry names the error
    assert memory_files(agent.root) == mem_before
    s = SessionStore(agent.root / "sessions").load("cli", "cli")
    assert len(s.messages) == 8 and s.last_consolidated == 0
    before_fail = session_path.read_bytes()
    # the LLM down during consolidation: same, nothing trimmed or written
    llm_server.reply("ok: five")
    llm_server.status(500, times=2)  # max_retries=1: both attempts of the consolidation call fail
    assert asyncio.run(agent.handle(cli("five"))).ok
    assert llm_server.pending() == 0
    assert memory_files(agent.root) == mem_before
    assert session_path.read_bytes().startswith(before_fail)
    assert not agent.last_consolidation.ok
    # and once the model behaves, the next turn consolidates
    llm_server.reply("ok: six")
    llm_server.reply("not json")
    llm_server.reply(consolidation_json("Counted from one to six.", []))
    assert asyncio.run(agent.handle(cli("six"))).ok
    assert (
        agent.last_consolidation.ok and "Counted from one to six." in (agent.root / "memory" / "HISTORY.md").read_text()
    )


def test_new_consolidates_everything_and_starts_fresh(env, llm_server):
    agent = env
    talk(agent, llm_server, ["I adopted a cat called Miso"])
    llm_server.reply(consolidation_json("Adopted a cat named Miso.", [{"op": "add", "text": "Has a cat called Miso"}]))
    r = asyncio.run(agent.handle(cli("/new")))
    assert r.ok and r.command == "/new" and "New session" in r.text
    assert SessionStore(agent.root / "sessions").load("cli", "cli").messages == []
    assert "Has a cat called Miso" in (agent.root / "memory" / "MEMORY.md").read_text()
    assert "Has a cat called Miso" in texts(agent.memory.recall("pet cat name", k=3))
    # /new when the model fails keeps the session
    talk(agent, llm_server, ["something else"])
    llm_server.status(500, times=2)
    r = asyncio.run(agent.handle(cli("/new")))
    assert not r.ok and "kept it" in r.text
    assert len(SessionStore(agent.root / "sessions").load("cli", "cli").messages) == 2


def test_memory_tools_in_the_loop(env, llm_server):
    agent = env
    llm_server.tool_call("remember", {"text": "Favourite tea is genmaicha", "section": "Preferences"})
    llm_server.tool_call("memory_search", {"query": "favourite tea", "k": 3})
    llm_server.reply("Noted: genmaicha.")
    r = asyncio.run(agent.handle(cli("remember that my favourite tea is genmaicha")))
    assert r.ok and [t.ok for t in r.record.tools] == [True, True]
    results = [m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Remembered [") and "genmaicha" in results[1].splitlines()[0]
    assert "genmaicha" in (agent.root / "memory" / "MEMORY.md").read_text()
    # the outsider's remember lands in their scope; their search cannot see the owner's memory
    llm_server.tool_call("remember", {"text": "Mallory prefers green tea"})
    llm_server.tool_call("memory_search", {"query": "genmaicha tea Lyon address"})
    llm_server.reply("ok")
    asyncio.run(agent.handle(outsider("remember I like green tea")))
    results = [m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "genmaicha" not in results[1] and "Lilas" not in results[1]
    assert "Mallory prefers green tea" in texts(agent.memory.recall("tea", scope=OUTSIDER, k=3))
    assert "green tea" not in (agent.root / "memory" / "MEMORY.md").read_text()


def test_remember_files_a_fact_under_the_default_section_or_the_given_one(env, llm_server):
    """Issue 13.3: the remember tool without a section files the fact under "Notes", not under "Work" (the last
    heading); with a section, under it."""
    from memclaw.markdown.memory_md import parse_memory

    agent = env
    llm_server.tool_call("remember", {"text": "My neighbour Omar has a dog"})
    llm_server.tool_call("remember", {"text": "Favourite tea is genmaicha", "section": "Preferences"})
    llm_server.tool_call("remember", {"text": "The bins go out on Tuesday"})
    llm_server.reply("Noted.")
    r = asyncio.run(agent.handle(cli("remember these")))
    assert r.ok and [t.ok for t in r.record.tools] == [True, True, True]
    text = (agent.root / "memory" / "MEMORY.md").read_text()
    got = [(u.section, bare_fact(u.text)) for u in parse_memory(text, scope="owner", source="m")][-3:]
    assert got == [
        ("Notes", "My neighbour Omar has a dog"),
        ("Notes", "The bins go out on Tuesday"),
        ("Preferences", "Favourite tea is genmaicha"),
    ]
    assert text.count("# Notes\n") == 1


def test_file_tool_edit_of_memory_is_indexed(env, llm_server):
    agent = env
    llm_server.tool_call(
        "edit_file",
        {"path": "memory/MEMORY.md", "old_text": "- I am allergic to penicillin", "new_text": "- I play the cello"},
    )
    llm_server.reply("Updated.")
    r = asyncio.run(agent.handle(cli("replace the allergy line with: I play the cello")))
    assert r.ok and "memory index updated" in llm_server.requests[-1]["messages"][-1]["content"]
    assert "I play the cello" in texts(agent.memory.recall("musical instrument cello", k=3))


def test_recall_command_for_owner(env, llm_server):
    r = asyncio.run(env.handle(cli("/recall where do I work")))
    assert r.ok and "Solaris Energy" in r.text and "memory/MEMORY.md:" in r.text
    assert llm_server.requests == []


def test_cli_agent_command_one_shot(tmp_path, llm_server, capsys, monkeypatch):
    from memclaw.cli.agent_cmd import agent_command

    monkeypatch.setenv("MEMCLAW_AGENT__MAX_RETRIES", "0")

    root = tmp_path / "cli-ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    llm_server.reply("You work at Solaris Energy.")
    agent_command("where do I work?", workspace=root)
    assert "You work at Solaris Energy." in capsys.readouterr().out
    system = llm_server.requests[0]["messages"][0]["content"]
    assert "Solaris Energy" in system  # auto-recall put the owner's fact in the prompt
    assert SessionStore(root / "sessions").load("cli", "cli").messages[-1]["content"] == "You work at Solaris Energy."
    llm_server.status(500, times=10)
    with pytest.raises(LLMError) as ei:  # the console script makes it one line on stderr and exit code 5
        agent_command("still there?", workspace=root)
    assert ei.value.exit_code == 5 and "is unavailable after 1 attempt" in str(ei.value)
    assert capsys.readouterr().out == ""  # an error is never printed as if it were the reply


def test_retry_after_a_partial_write_does_not_duplicate(env, llm_server):
    # One group chat, the owner and an outsider: consolidation writes two scopes. The outsider's HISTORY.md
    # cannot be written (a folder where its lock file goes; a symlink would be refused for the whole turn), so the
    # first attempt fails after the owner's scope and the outsider's facts are written. Once fixed, the retry
    # writes only what is missing.
    agent = env

    def owner(text: str) -> InboundMessage:
        return InboundMessage("discord", "guild-7", "1001", "Owner", text)

    def guest(text: str) -> InboundMessage:
        return InboundMessage("discord", "guild-7", "2002", "Mallory", text)

    from memclaw.markdown.files import lock_path

    blocked = agent.workspace.history_file(OUTSIDER)
    blocked.parent.mkdir(parents=True)
    lock_path(blocked).mkdir()

    async def go(msgs):
        for m in msgs:
            llm_server.reply(f"ok: {m.text}")
            assert (await agent.handle(m)).ok

    asyncio.run(go([owner("I planted garlic"), guest("I keep bees"), owner("and onions")]))
    llm_server.reply("ok: bye")
    llm_server.reply(
        consolidation_json("The owner planted garlic and onions.", [{"op": "add", "text": "I grow garlic"}])
    )
    llm_server.reply(consolidation_json("Mallory said she keeps bees.", [{"op": "add", "text": "Mallory keeps bees"}]))
    assert asyncio.run(agent.handle(guest("bye"))).ok
    report = agent.last_consolidation
    assert not report.ok and f"cannot lock memory file {blocked}" in report.error
    owner_hist = (agent.root / "memory" / "HISTORY.md").read_text()
    assert owner_hist.count("planted garlic and onions") == 1
    assert fact_texts(agent, OUTSIDER) == ["Mallory keeps bees"]
    s = SessionStore(agent.root / "sessions").load("discord", "guild-7")
    assert s.last_consolidated == 0 and s.meta["consolidating"]["done"] == [
        "owner#archive",
        "owner#facts",
        "owner#history",
        f"{OUTSIDER}#archive",
        f"{OUTSIDER}#facts",
    ]

    lock_path(blocked).rmdir()
    llm_server.reply("ok: again")
    # the model is not asked again (its answers were kept); only the outsider's history entry is written now
    assert asyncio.run(agent.handle(owner("again"))).ok
    assert agent.last_consolidation.ok, agent.last_consolidation.error
    assert llm_server.pending() == 0 and len(llm_server.requests) == 7  # 5 replies, 2 consolidation calls
    assert (agent.root / "memory" / "HISTORY.md").read_text().count("planted garlic and onions") == 1
    assert fact_texts(agent).count("I grow garlic") == 1
    assert fact_texts(agent, OUTSIDER) == ["Mallory keeps bees"]
    owner_day, guest_day = agent.workspace.archive_files(), agent.workspace.archive_files(OUTSIDER)
    assert [p.read_text().count("**Owner**: I planted garlic\n") for p in owner_day] == [1]
    assert [p.read_text().count("**Mallory**: I keep bees\n") for p in guest_day] == [1]
    assert not any("bees" in p.read_text() for p in owner_day)  # the guest's turns went to the guest's archive
    assert "Mallory said she keeps bees." in agent.workspace.history_file(OUTSIDER).read_text()
    s = SessionStore(agent.root / "sessions").load("discord", "guild-7")
    assert s.last_consolidated == 0 and not s.meta.get("consolidating")  # trimmed: the pointer moved past the chunk


def test_what_the_owner_forgot_in_a_chat_is_not_written_back_by_consolidation(env, llm_server):
    """Issue 19.3: after /forget ID, consolidation sent the transcript in which the fact was said, so the model
    could write it back. The model here tries everything: re-adding it, folding it into an update, telling it in
    the history entry. After /new it is in no memory file and the model never saw the turns that said it."""
    agent = env
    root = agent.root

    async def go():
        llm_server.tool_call("remember", {"text": "Sister Lena lives in Porto", "section": "Family"})
        llm_server.reply("Noted: Lena lives in Porto.")
        assert (await agent.handle(cli("My sister Lena moved to Porto last month"))).ok
        llm_server.reply("Have fun in the Jura!")
        assert (await agent.handle(cli("We are hiking in the Jura on Saturday"))).ok
        lena = fact_id(agent, "Lena")
        rec = await agent.handle(cli("/recall where does Lena live"))
        assert lena in rec.text
        gone = await agent.handle(cli(f"/forget {lena}"))
        assert gone.ok and "Sister Lena lives in Porto" in gone.text
        solaris = fact_id(agent, "Solaris")
        llm_server.reply(
            consolidation_json(
                "Ana said her sister Lena moved to Porto last month. She is hiking in the Jura on Saturday.",
                [
                    {"op": "add", "text": "Sister Lena lives in Porto", "section": "Family"},
                    {"op": "add", "text": "Ana's sister Lena moved to Porto, Portugal"},
                    {"op": "update", "id": solaris, "text": "Works at Solaris Energy; sister Lena lives in Porto"},
                    {"op": "add", "text": "Goes hiking in the Jura", "section": "Hobbies"},
                ],
            )
        )
        return await agent.handle(cli("/new"))

    new = asyncio.run(go())
    assert new.ok, new.text
    sent = llm_server.requests[-1]["messages"][-1]["content"]
    conversation = sent[sent.index("<conversation>") : sent.index("</conversation>")]
    assert "Porto" not in conversation and "hiking in the Jura" in conversation  # the turns that said it: redacted
    assert "Forgotten on purpose" in sent and "- Sister Lena lives in Porto" in sent[: sent.index("<conversation>")]
    md = (root / "memory" / "MEMORY.md").read_text("utf-8")
    hist = (root / "memory" / "HISTORY.md").read_text("utf-8")
    assert "Porto" not in md and "Porto" not in hist
    assert "Goes hiking in the Jura" in md and "I work at Solaris Energy" in md  # the rest of the consolidation
    assert "She is hiking in the Jura on Saturday." in hist
    assert all("Porto" not in h.unit.text for h in agent.memory.recall("where does Lena live", k=20))


def test_said_again_after_forgetting_it_is_remembered(env, llm_server):
    """The owner changed their mind in the same session: what they say after the /forget is news."""
    agent = env

    async def go():
        agent.memory.add_fact("Sister Lena lives in Porto")
        lena = fact_id(agent, "Lena")
        llm_server.reply("Noted.")
        assert (await agent.handle(cli("My sister Lena lives in Porto"))).ok
        assert (await agent.handle(cli(f"/forget {lena}"))).ok
        llm_server.reply("Got it.")
        assert (await agent.handle(cli("Sorry, I was wrong: do remember that my sister Lena lives in Porto"))).ok
        llm_server.reply(consolidation_json("", [{"op": "add", "text": "Sister Lena lives in Porto"}]))
        return await agent.handle(cli("/new"))

    assert asyncio.run(go()).ok
    assert "Sister Lena lives in Porto" in (agent.root / "memory" / "MEMORY.md").read_text("utf-8")
