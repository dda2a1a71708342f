"""Sessions: real files, real fcntl locks, real processes."""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
from pathlib import Path

from memclaw.agent.sessions import SessionStore, llm_messages, parse_filename, session_filename


def test_roundtrip_and_ts(tmp_path):
    st = SessionStore(tmp_path / "sessions")
    s = st.load("discord", "123")
    assert s.messages == [] and not s.path.exists()
    st.append(s, {"role": "user", "content": "hi", "sender_id": "42"}, {"role": "assistant", "content": "hello"})
    again = st.load("discord", "123")
    assert [m["content"] for m in again.messages] == ["hi", "hello"]
    assert all("ts" in m for m in again.messages)
    assert again.history() == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_filenames_are_safe_for_any_id(tmp_path):
    st = SessionStore(tmp_path / "sessions")
    for cid in ["../../etc/passwd", "a/b", ".hidden", "x" * 1000, "é 中 \u200b"]:
        p = st.path_for("discord", cid)
        assert p.parent == st.root and not p.name.startswith(".") and len(p.name) < 255
        s = st.load("discord", cid)
        st.append(s, {"role": "user", "content": cid})
        assert st.load("discord", cid).messages[0]["content"] == cid
    assert parse_filename(session_filename("cli", "a/b")) == ("cli", "a/b")
    assert len(list((tmp_path / "sessions").glob("*.jsonl"))) == 5


def test_torn_last_line_dropped_only(tmp_path, caplog):
    st = SessionStore(tmp_path)
    s = st.load("cli", "cli")
    st.append(s, *({"role": "user", "content": f"m{i}"} for i in range(3)))
    with open(s.path, "ab") as f:
        f.write(b'{"role": "assistant", "content": "half a mess')  # crash mid-write
    with caplog.at_level(logging.WARNING):
        loaded = st.load("cli", "cli")
    assert [m["content"] for m in loaded.messages] == ["m0", "m1", "m2"]
    assert "torn last line" in caplog.text and loaded.warnings
    # the next append starts on a clean line: the torn fragment is cut, the new message survives
    st.append(loaded, {"role": "user", "content": "after"})
    fresh = st.load("cli", "cli")
    assert [m["content"] for m in fresh.messages] == ["m0", "m1", "m2", "after"]
    assert fresh.warnings == []


def test_complete_record_missing_only_newline_is_kept(tmp_path):
    st = SessionStore(tmp_path)
    s = st.load("cli", "cli")
    st.append(s, {"role": "user", "content": "a"})
    with open(s.path, "ab") as f:
        f.write(b'{"role": "user", "content": "b"}')
    st.append(s, {"role": "user", "content": "c"})
    assert [m["content"] for m in st.load("cli", "cli").messages] == ["a", "b", "c"]


def test_corrupt_middle_line_skipped(tmp_path, caplog):
    st = SessionStore(tmp_path)
    s = st.load("cli", "x")
    st.append(s, {"role": "user", "content": "a"})
    with open(s.path, "ab") as f:
        f.write(b"\x00\xffgarbage\n")
    st.append(s, {"role": "user", "content": "b"})
    with caplog.at_level(logging.WARNING):
        loaded = st.load("cli", "x")
    assert [m["content"] for m in loaded.messages] == ["a", "b"]
    assert "corrupt line 2" in caplog.text


def test_pointer_and_trim_keep_concurrent_appends(tmp_path):
    st = SessionStore(tmp_path)
    s = st.load("cli", "cli")
    st.append(s, *({"role": "user", "content": f"m{i}"} for i in range(6)))
    st.set_meta(s, last_consolidated=4)
    assert st.load("cli", "cli").last_consolidated == 4
    assert [m["content"] for m in st.load("cli", "cli").unconsolidated] == ["m4", "m5"]
    # another writer appends after `s` was loaded; trim must keep it
    other = st.load("cli", "cli")
    st.append(other, {"role": "user", "content": "late"})
    st.drop(s, s.messages[:4])
    after = st.load("cli", "cli")
    assert [m["content"] for m in after.messages] == ["m4", "m5", "late"]
    assert after.last_consolidated == 0
    assert not list(tmp_path.glob("*.tmp"))
    st.clear(after)
    assert st.load("cli", "cli").messages == []


def test_llm_messages_drops_dangling_tool_calls():
    call = {"id": "c1", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}
    msgs = [
        {"role": "user", "content": "q", "ts": "x", "sender_id": "1"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "list_dir", "content": "a.md"},
        {"role": "assistant", "content": "done", "reasoning_content": "hmm"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "thinking", "tool_calls": [dict(call, id="c2")]},  # crash before result
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
    ]
    out = llm_messages(msgs)
    assert out[0] == {"role": "user", "content": "q"}
    assert out[1]["tool_calls"] == [call] and out[2]["tool_call_id"] == "c1"
    assert out[3] == {"role": "assistant", "content": "done"}
    assert out[4:] == [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "thinking"}]


def _writer(root: str, wid: int, n: int) -> None:
    st = SessionStore(Path(root))
    s = st.load("discord", "shared")
    big = "x" * 5000  # larger than a pipe buffer page: interleaving would show
    for i in range(n):
        st.append(s, {"role": "user", "content": f"{wid}:{i}:{big}"})


def test_concurrent_writers_in_processes_never_interleave(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    raw = (tmp_path / session_filename("discord", "shared")).read_bytes()
    lines = raw.decode().splitlines()
    assert len(lines) == 160
    recs = [json.loads(line) for line in lines]  # every line parses: no interleaving
    seen: dict[int, list[int]] = {}
    for r in recs:
        w, i, _ = r["content"].split(":", 2)
        seen.setdefault(int(w), []).append(int(i))
    assert all(v == list(range(40)) for v in seen.values())  # per-writer order kept, nothing lost


def test_a_stale_view_never_trims_past_what_it_read(tmp_path):
    """Two processes' views of one session: the one that consolidated trims; the other's stale trim of
    the same chunk (gone now) changes nothing, and the turns appended since stay."""
    st = SessionStore(tmp_path)
    a = st.load("cli", "cli")
    st.append(a, *({"role": "user", "content": f"m{i}"} for i in range(5)))
    b = st.load("cli", "cli")  # the other process read the same 5 messages
    stale = list(b.messages)
    st.append(b, *({"role": "user", "content": f"late{i}"} for i in range(3)))
    assert st.drop(a, a.messages[:5]) and [m["content"] for m in a.messages] == ["late0", "late1", "late2"]
    assert not st.drop(b, stale)  # that chunk is gone: nothing trimmed
    assert b.messages == a.messages  # ... and the view is brought up to date
    after = st.load("cli", "cli")
    assert [m["content"] for m in after.messages] == ["late0", "late1", "late2"] and after.last_consolidated == 0
    assert not st.holds(after, stale[:1])
    assert st.holds(after, after.messages[1:])


def test_clear_keeps_messages_appended_after_it_read(tmp_path):
    st = SessionStore(tmp_path)
    s = st.load("cli", "cli")
    st.append(s, {"role": "user", "content": "old"})
    other = st.load("cli", "cli")
    st.append(other, {"role": "user", "content": "new"})
    assert st.clear(s)
    assert [m["content"] for m in st.load("cli", "cli").messages] == ["new"]


def test_the_consolidation_claim_is_exclusive_across_stores(tmp_path):
    one, two = SessionStore(tmp_path), SessionStore(tmp_path)
    s = one.load("cli", "cli")
    held = one.try_lock(s)
    assert held is not None and two.try_lock(two.load("cli", "cli")) is None
    held.close()
    again = two.try_lock(s)
    assert again is not None
    again.close()


def test_a_retried_message_replaces_its_unanswered_first_copy(tmp_path):
    """Issue 38 (papercuts): the run from an unanswered user message to the end (its turn's tool calls and results
    included) goes when the same sender sends the same text again; an answered message, another text or another
    sender keeps it; and nothing goes while a consolidation holds the session's claim."""
    st = SessionStore(tmp_path)
    s = st.load("discord", "room")
    ask = {"role": "user", "content": "what is my address?", "sender_id": "42"}
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "memory_search"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "Rua das Flores 12"}
    st.append(s, {"role": "user", "content": "hi", "sender_id": "42"}, {"role": "assistant", "content": "hello"})
    st.append(s, ask, call, result)
    assert not st.drop_retried(s, dict(ask, sender_id="7"))  # another sender
    assert not st.drop_retried(s, dict(ask, content="where do I live?"))  # another message
    claim = st.try_lock(s)
    assert claim is not None
    with claim:
        assert not st.drop_retried(s, ask)  # a consolidation may be reading it
    assert len(st.load("discord", "room").messages) == 5
    assert st.drop_retried(s, ask)
    assert [m["content"] for m in st.load("discord", "room").messages] == ["hi", "hello"]
    st.append(s, ask, {"role": "assistant", "content": "Rua das Flores 12."})
    assert not st.drop_retried(s, ask)  # answered: asking again is a new question
    assert len(st.load("discord", "room").messages) == 4
