"""`memclaw import` end to end through the console script's entry point (in-process; a subprocess where it is
interrupted): real Markdown, the real writer, real Chroma and the bundled model for the one index sync.

The fixtures are written from each format's public definition; fixtures/README.md cites them: nanobot's
`nanobot/agent/memory.py` (HKUDS/nanobot), OpenClaw's memory docs and session deep dive (docs.openclaw.ai), and the
ChatGPT data export's `conversations.json` (its `mapping` tree of messages)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests.cli import test_bad_input
from tests.cli.test_bad_input import assert_error

cli = test_bad_input.cli
FIXTURES = Path(__file__).parent / "fixtures"
LEARNED = datetime(2025, 2, 1, 12, 0).timestamp()
"""The fixtures' MEMORY.md files are dated this (their mtime): the day facts without a date were learned."""


@pytest.fixture
def ws(cli, memclaw_home) -> Path:
    """An onboarded workspace whose memory holds one fact the imports also bring (a duplicate to skip)."""
    assert cli("onboard").code == 0
    root = memclaw_home / "workspace"
    (root / "memory" / "MEMORY.md").write_text("# Preferences\n- Prefers tea over coffee (2024-12-01)\n", "utf-8")
    (root / "memory" / "HISTORY.md").unlink(missing_ok=True)
    return root


@pytest.fixture
def src(tmp_path) -> Path:
    """A copy of the fixtures (tests may break them), MEMORY.md files dated LEARNED."""
    dst = tmp_path / "src"
    shutil.copytree(FIXTURES, dst)
    for p in dst.rglob("MEMORY.md"):
        os.utime(p, (LEARNED, LEARNED))
    return dst


def memory_files(root: Path) -> dict[str, str]:
    """The workspace's Markdown memory (facts, history, archives of every scope)."""
    return {str(p.relative_to(root)): p.read_text("utf-8") for p in sorted((root / "memory").rglob("*.md"))}


def day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).date().isoformat()


def imported(cli, *args: str) -> dict:
    r = cli("import", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_chatgpt_export_lands_in_the_archive_verbatim_dated_and_a_second_import_adds_nothing(cli, ws, src):
    out = imported(cli, "chatgpt", str(src / "chatgpt"))
    assert out["added"] == {"conversations": 2, "turns": 7, "facts": 0, "history_entries": 0}, out
    # the index sync apart from the writes: every turn embedded, at least one vector each
    assert out["index"]["vectors"] >= 7 and out["index"]["seconds"] > 0, out
    archive = (ws / "memory" / "archive" / f"{day(1740000010)}.md").read_text("utf-8")
    # the branch shown (current_node), not the regenerated draft; text parts of a multimodal message; no tool turns
    assert "It is hungry, not dead: feed it twice a day at room temperature." in archive
    assert "FIRST DRAFT" not in archive
    assert "Here is a photo. I named it Bubbles." in archive and "file-service" not in archive
    assert "search('sourdough')" not in archive and "search results" not in archive
    assert f"## {datetime.fromtimestamp(1740000010):%H:%M}" in archive  # dated as it was said
    marathon = (ws / "memory" / "archive" / f"{day(1741600010)}.md").read_text("utf-8")
    assert "Great! Sixteen weeks of training is a good plan." in marathon  # a message without a time: the one before
    before = memory_files(ws)
    again = imported(cli, "chatgpt", str(src / "chatgpt" / "conversations.json"))
    assert again["added"] == {"conversations": 0, "turns": 0, "facts": 0, "history_entries": 0}, again
    assert again["skipped"]["conversations"] == 2
    assert memory_files(ws) == before
    hits = json.loads(cli("recall", "what did I name my sourdough starter", "--json").out)
    assert any("Bubbles" in h["text"] for h in hits), hits


def test_nanobot_workspace_brings_facts_history_and_sessions_with_their_dates_duplicates_skipped(cli, ws, src):
    out = imported(cli, "nanobot", str(src / "nanobot"))
    assert out["added"]["facts"] == 3 and out["skipped"]["facts"] == 1, out  # "Prefers tea" is there already
    assert out["added"]["history_entries"] == 2 and out["added"]["conversations"] == 1, out
    mem = (ws / "memory" / "MEMORY.md").read_text("utf-8")
    assert mem.count("Prefers tea over coffee") == 1
    assert "- Works as a nurse at St. Olaf hospital (2025-02-01 #" in mem  # learned the day MEMORY.md was written
    history = (ws / "memory" / "HISTORY.md").read_text("utf-8")
    assert "[2025-03-02 09:15 #" in history and "Dana planned a trip to Lisbon" in history
    assert "[2025-03-02 09:15] Dana" not in history  # nanobot's own stamp is not kept twice
    assert "[2025-03-09 18:40 #" in history
    archive = (ws / "memory" / "archive" / "2025-03-10.md").read_text("utf-8")
    assert "Your flight to Lisbon leaves at 7:40 on April 3rd." in archive and "Noted your locker code." in archive
    assert "save_memory" not in archive  # tool calls and results are not conversation
    legacy = imported(cli, "nanobot", str(src / "nanobot_legacy"))
    assert legacy["added"]["history_entries"] == 2 and legacy["added"]["facts"] == 0, legacy
    assert "[2025-01-05 10:00 #" in (ws / "memory" / "HISTORY.md").read_text("utf-8")


def test_openclaw_folder_brings_memory_daily_notes_and_transcripts(cli, ws, src):
    out = imported(cli, "openclaw", str(src / "openclaw"))
    assert out["added"] == {"conversations": 1, "turns": 2, "facts": 3, "history_entries": 3}, out
    mem = (ws / "memory" / "MEMORY.md").read_text("utf-8")
    assert "- Chose the Fujifilm X100V over the Ricoh GR (2025-02-20 #" in mem  # learned the day it names
    history = (ws / "memory" / "HISTORY.md").read_text("utf-8")
    assert "[2025-03-04 00:00 #" in history and "Sam wants to wait until the lease ends in June" in history
    assert "[2025-03-05 00:00 #" in history and "Priya moved the ward audit to Friday." in history
    assert "Not a daily note" not in history
    archive = memory_files(ws)
    text = "".join(v for k, v in archive.items() if "/archive/" in k)
    assert "Which bakery did Sam like in Porto?" in text and "Sam liked Manteigaria, near the Bolhao market." in text
    assert "check memory" not in text and "near the market" not in text  # thinking and tool results left out


def test_messages_are_split_by_sender_as_consolidation_splits_them(cli, ws, src):
    out = imported(cli, "jsonl", str(src / "messages.jsonl"))
    assert out["added"]["conversations"] == 2 and out["added"]["turns"] == 6, out
    assert out["scopes"] == ["owner", "people/discord:5550001"], out
    files = memory_files(ws)
    owner = "".join(v for k, v in files.items() if k.startswith("memory/archive/"))
    omar = "".join(v for k, v in files.items() if k.startswith("memory/people/"))
    assert "The book club meets on the first Monday." in omar and "Thanks Omar, noted." in omar
    assert "The book club meets" not in owner and "I will bring the snacks on Monday." in owner
    assert "Booked the Hotel Kanra" in owner


def test_dry_run_says_what_an_import_would_add_and_writes_nothing(cli, ws, src):
    before = memory_files(ws)
    dry = imported(cli, "nanobot", str(src / "nanobot"), "--dry-run")
    assert dry["dry_run"] is True and memory_files(ws) == before
    real = imported(cli, "nanobot", str(src / "nanobot"))
    assert dry["added"] == real["added"] and dry["skipped"] == real["skipped"], (dry, real)


def test_broken_and_hostile_sources_are_refused_in_one_line_and_nothing_is_written(cli, ws, src, tmp_path):
    before = memory_files(ws)
    conv = src / "chatgpt" / "conversations.json"
    conv.write_bytes(conv.read_bytes()[:-200])  # truncated download
    assert_error(cli("import", "chatgpt", str(conv)), 2, "conversations.json", "not valid JSON")
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.write(b'{"role": "user", "content": "fine", "ts": "2025-01-01T10:00:00"}\n')
        f.write(b'{"role": "user", "content": "' + b"x" * (64 * 1024 * 1024 + 10) + b'"}\n')
    assert_error(cli("import", "jsonl", str(big)), 2, "line 2", "longer than 64 MiB")
    link = src / "openclaw" / "workspace" / "memory" / "2025-03-06.md"
    link.symlink_to("/etc/passwd")
    assert_error(cli("import", "openclaw", str(src / "openclaw")), 2, "is a symlink", "2025-03-06.md")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi", "ts": "2025-01-01T10:00:00"}\n{"role": "user", "con', "utf-8")
    assert_error(cli("import", "jsonl", str(bad)), 2, "line 2", "not valid JSON")
    assert_error(cli("import", "evernote", str(bad)), 2, "unknown source", "chatgpt")
    assert memory_files(ws) == before
    assert "root:x:0:0" not in "".join(before.values())


def test_hostile_text_is_data_secrets_are_masked_and_names_never_become_paths(cli, ws, tmp_path):
    f = tmp_path / "hostile.jsonl"
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    rows = [
        {
            "conversation": "../../../etc/evil",
            "role": "user",
            "content": f"my key is {key} \x1b]0;pwned\x07\x1b[2J ok",
            "ts": "2025-05-01T09:00:00",
            "sender": "../../etc",
            "name": "\x1b[31mEve",
        },
        {"conversation": "../../../etc/evil", "role": "assistant", "content": "noted", "ts": "2025-05-01T09:00:05"},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    r = cli("import", "jsonl", str(f))
    assert r.code == 0, r.err
    assert "\x1b" not in r.out + r.err
    assert re.search(r"^indexed in [\d.,]+ s \([\d,]+ vectors, [\d,]+/s\)$", r.out, re.M), r.out
    files = memory_files(ws)
    text = "".join(files.values())
    assert key not in text and "my key is" in text
    assert all(k.startswith("memory/") for k in files) and not (ws.parent / "etc").exists()
    people = [k for k in files if k.startswith("memory/people/")]
    assert people and all("/people/import%3A..%2F..%2Fetc/" in k for k in people), people


def memclaw(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True", **env)
    return subprocess.run([sys.executable, "-m", "memclaw.cli.main", *args], env=full, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_an_interrupted_import_resumes_and_ends_as_one_uninterrupted_import(cli, ws, src, memclaw_home, tmp_path):
    """Ctrl-C after two records (a deterministic KeyboardInterrupt from the test hook): exit 130 and a note; the
    records written are whole; run again, the import adds the rest and the memory equals an import in one go."""
    r = memclaw("import", "nanobot", str(src / "nanobot"), _MEMCLAW_TEST_IMPORT_INTERRUPT_AFTER="2")
    assert r.returncode == 130, r.stderr
    assert "import interrupted: 2 of 4 records written" in r.stderr and "run the same command again" in r.stderr
    r = memclaw("import", "nanobot", str(src / "nanobot"), "--json")
    assert r.returncode == 0, r.stderr
    rest = json.loads(r.stdout)
    assert rest["added"]["facts"] + rest["added"]["history_entries"] + rest["added"]["conversations"] > 0
    resumed = memory_files(ws)
    other = tmp_path / "other"
    shutil.copytree(ws, other, ignore=shutil.ignore_patterns(".memclaw*", "*.lock"))
    (other / "memory" / "MEMORY.md").write_text("# Preferences\n- Prefers tea over coffee (2024-12-01)\n", "utf-8")
    for p in (other / "memory").rglob("*.md"):
        if p.name != "MEMORY.md":
            p.unlink()
    assert memclaw("import", "nanobot", str(src / "nanobot"), "-w", str(other)).returncode == 0
    assert memory_files(other) == resumed


def test_a_ctrl_c_before_the_index_sync_is_finished_by_the_next_import(cli, ws, src, memclaw_home):
    """Ctrl-C after the last record, before the index sync: the next run has nothing to write and still syncs the
    index (it used to skip the sync, leaving every imported turn out of the index until some later recall)."""
    r = memclaw("import", "nanobot", str(src / "nanobot"), _MEMCLAW_TEST_IMPORT_INTERRUPT_AFTER="4")
    assert r.returncode == 130, r.stderr
    assert "4 of 4 records written" in r.stderr
    stale = json.loads(memclaw("memory", "stats", "--json").stdout)["scopes"]
    assert not all(s["fresh"] for s in stale.values()), stale
    rest = imported(cli, "nanobot", str(src / "nanobot"))
    assert rest["added"] == {"conversations": 0, "turns": 0, "facts": 0, "history_entries": 0}, rest
    assert rest["index"]["vectors"] > 0, rest
    scopes = json.loads(memclaw("memory", "stats", "--json").stdout)["scopes"]
    assert scopes and all(s["fresh"] and s["indexed"] > 0 for s in scopes.values()), scopes


def test_progress_counts_turns_with_a_rate_and_the_time_left():
    import io

    from memclaw.util.progress import stderr_progress

    now = [0.0]
    out = io.StringIO()
    with stderr_progress(100, "importing", stream=out, clock=lambda: now[0], unit="turn") as advance:
        now[0] = 2.0
        advance(40)
    assert out.getvalue().splitlines()[0] == "importing: 40/100 turns, 20/s, about 3 s left"


@pytest.fixture
def llm_server(monkeypatch):
    from tests.llm_server import scripted_server

    monkeypatch.setenv("MEMCLAW_AGENT__MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("MEMCLAW_AGENT__MAX_RETRIES", "0")
    with scripted_server(monkeypatch) as s:
        yield s


def test_consolidate_asks_the_model_through_litellm_once_per_conversation_and_resumes(cli, ws, src, llm_server):
    """--consolidate: the cost first; the model over real HTTP (the scripted server); facts and the summary carry
    the archive chunk's id; a failed model call stops with exit 5 and the next run goes on; done is never redone."""
    trip = src / "trip.jsonl"
    lines = (src / "messages.jsonl").read_text("utf-8").splitlines()[:2]
    trip.write_text("\n".join(lines) + "\n", "utf-8")
    assert imported(cli, "jsonl", str(trip))["added"]["conversations"] == 1
    r = cli("import", "jsonl", str(trip), "--consolidate")
    assert r.code == 2 and "add --yes" in r.err and not llm_server.requests, r.err
    llm_server.status(500)
    r = cli("import", "jsonl", str(trip), "--consolidate", "--yes", "--json")
    assert r.code == 5 and "Error: consolidating an imported conversation failed" in r.err, r.err
    answer = {
        "history_entry": "Booked a Kyoto hotel for May.",
        "facts": [{"op": "add", "text": "Stays at Hotel Kanra in Kyoto May 2-6"}],
    }
    llm_server.reply(json.dumps(answer))
    out = imported(cli, "jsonl", str(trip), "--consolidate", "--yes")
    est = out["consolidation_estimate"]
    assert est["conversations"] == 1 and est["input_tokens"] > 0 and est["cost_usd"] is not None, est
    assert out["consolidated"] == 1 and out["added"]["conversations"] == 0, out
    assert "Book the hotel in Kyoto" in llm_server.requests[-1]["messages"][1]["content"]
    files = memory_files(ws)
    archive = "".join(v for k, v in files.items() if "/archive/" in k)
    cid = re.search(r"^## \d\d:\d\d #(\S+)$", archive, re.M).group(1)
    assert archive.count("Booked the Hotel Kanra") == 1  # the chunk is the import's: not archived twice
    assert f"Stays at Hotel Kanra in Kyoto May 2-6 (2025-04-01 #{cid})" in files["memory/MEMORY.md"]
    assert f"#{cid}]" in files["memory/HISTORY.md"] and "Booked a Kyoto hotel for May." in files["memory/HISTORY.md"]
    asked = len(llm_server.requests)
    again = imported(cli, "jsonl", str(trip), "--consolidate", "--yes")
    assert again["consolidated"] == 0 and len(llm_server.requests) == asked
    assert memory_files(ws) == files
