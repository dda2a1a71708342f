"""What the owner forgot is not written back by consolidation (issue 19.3): the guard's rules on their own. The
end-to-end runs (chat over the scripted LLM server, Discord through discord.py's real objects) are in
test_agent_memory.py and test_discord_gateway.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from memclaw.index.tokenizer import Tokenizer
from memclaw.markdown.units import MemoryUnit
from memclaw.service.forgotten import DISTINCTIVE_DF, REDACTED, ForgottenMemory, Guard, key_of, load, record, restates

T0 = datetime(2026, 3, 2, 18, 0).astimezone()
FORGOT = "Sister Lena lives in Porto (2025-03-01)"


def msg(role: str, text: str, minutes: int, **kw) -> dict:
    return {"role": role, "content": text, "ts": (T0 + timedelta(minutes=minutes)).isoformat(), **kw}


def guard(msgs, forgotten_at: int = 10, scope: str = "owner") -> Guard:
    entry = ForgottenMemory(scope, FORGOT, T0 + timedelta(minutes=forgotten_at))
    return Guard([entry], "owner", msgs, Tokenizer().tokenize)


CHAT = [
    msg("user", "My sister Lena moved to Porto last month!", 1),
    msg("assistant", "", 2, tool_calls=[{"id": "c1", "type": "function",
                                         "function": {"name": "remember", "arguments": '{"text": "Lena lives in Porto, sister"}'}}]),  # noqa: E501
    msg("tool", "Remembered [f1]: Sister Lena lives in Porto", 2, tool_call_id="c1", name="remember"),
    msg("assistant", "Noted: Lena lives in Porto now.", 3),
    msg("user", "We also planned a hike in the Jura on Saturday.", 4),
]  # fmt: skip


def test_messages_before_the_forget_that_restate_it_are_redacted():
    g = guard(CHAT)
    out = g.redact(CHAT)
    assert [m["content"] for m in out] == [REDACTED, "", REDACTED, REDACTED, CHAT[4]["content"]]
    assert out[1]["tool_calls"][0]["function"]["arguments"] == "{}"  # a tool call alone said nothing: still nothing
    assert CHAT[0]["content"].startswith("My sister")  # the session itself is not changed
    assert g.texts == [FORGOT]


def test_ops_and_history_sentences_that_write_it_back_are_dropped():
    g = guard(CHAT)
    assert not g.keeps("Sister Lena lives in Porto")
    assert not g.keeps("The owner's sister, Lena, now lives in Porto, Portugal")  # reworded, more words
    assert g.keeps("Lena is a marine biologist")  # shares a word, not the fact
    assert g.keeps("Planned a hike in the Jura")
    entry = "Maya said her sister Lena moved to Porto. They planned a hike in the Jura on Saturday."
    assert g.scrub(entry) == "They planned a hike in the Jura on Saturday."


def test_said_again_after_the_forget_it_is_news():
    again = [*CHAT, msg("user", "Actually, do remember it: my sister Lena lives in Porto.", 20)]
    g = guard(again)
    assert g.keeps("Sister Lena lives in Porto") and g.texts == []
    out = g.redact(again)
    assert out[0]["content"] == REDACTED and out[-1]["content"] == again[-1]["content"]  # only what came before


def test_only_the_scope_and_the_time_of_the_chunk_count():
    assert guard(CHAT, scope="people/discord:2").texts == []  # another scope's forget
    assert guard(CHAT, forgotten_at=-5).texts == []  # forgotten before this chunk began: not said in it
    assert guard(CHAT, forgotten_at=-5).redact(CHAT) == CHAT


def test_the_record_keeps_scope_text_and_time(tmp_path):
    path = tmp_path / "sessions" / "forgotten.jsonl"
    units = [MemoryUnit("f1", "fact", "owner", "memory/MEMORY.md", 3, FORGOT)]
    record(path, units, now=T0)
    path.write_text(path.read_text() + "{torn\n")
    record(path, [MemoryUnit("h1", "history", "people/x", "h", 1, "line one\nline two")], now=T0)
    got = load(path)
    assert [(f.scope, f.text, f.at) for f in got] == [("owner", FORGOT, T0), ("people/x", "line one\nline two", T0)]


def said(text: str, forgot: str, doc_freq=lambda _: 1) -> bool:
    tok = Tokenizer().tokenize
    return restates(set(tok(text)), key_of(forgot, tok).distinctive(doc_freq))


def test_a_short_echo_of_a_distinctive_name_or_number_restates_it():
    dog = "The owner dog is named Biscuitron (2026-11-28)"
    assert said("Got it, Biscuitron it is.", dog)
    assert said("Locker 3917, noted.", "Maya's gym locker code is 3917")
    assert said("Edinburgh, Scotland would be great", "John is considering Edinburgh, Scotland for the trip")
    # a common word is not distinctive: not the sentence's first word, a weekday or a month, a plain word
    assert not said("I walked the dog this morning", dog)
    assert not said("The owner is back", dog)
    assert not said("See you on Friday", "Maria ran a charity race last Friday")
    assert not said("The gym closes at ten", "Maya's gym locker code is 3917")
    assert not said("Edinburgh is lovely", "John is considering Edinburgh, Scotland for the trip")  # half the names


def test_a_name_the_scope_holds_often_is_not_distinctive():
    dog = "The owner dog is named Biscuitron"
    assert said("Got it, Biscuitron it is.", dog, lambda _: DISTINCTIVE_DF)
    assert not said("Got it, Biscuitron it is.", dog, lambda _: DISTINCTIVE_DF + 1)
    assert said("My dog is named Biscuitron", dog, lambda _: 100)  # most of its words: restated whatever the names


def test_masked_replaces_each_run_of_restating_sentences_once():
    from memclaw.service.forgotten import MASKED, masked

    says = lambda s: "Porto" in s  # noqa: E731
    assert masked("Lena moved to Porto. She loves Porto! We hiked.", says) == f"{MASKED} We hiked."
    assert masked("We hiked. Lena moved to Porto. We ate.", says) == f"We hiked. {MASKED} We ate."
    assert masked("Lena moved to Porto.", says) is None  # nothing else left
    assert masked("We hiked.", says) == "We hiked."


def test_mentions_are_kept_with_each_forgotten_memory_and_an_old_line_reads_without(tmp_path):
    path = tmp_path / "forgotten.jsonl"
    path.write_text('{"scope": "owner", "text": "old", "at": "2026-03-01T10:00:00+00:00"}\n', "utf-8")
    units = [MemoryUnit(i, "fact", "owner", "memory/MEMORY.md", 1, t) for i, t in (("f1", FORGOT), ("f2", "x"))]
    record(path, units, now=T0, mentions={"f1": ["h9", "f7"]})
    old, f1, f2 = load(path)
    assert old.mentions is None  # noted before mentions were: recall masks history entries dated before it
    assert f1.mentions == frozenset({"h9", "f7"}) and f2.mentions == frozenset()


def test_a_memory_forgotten_before_mentions_were_noted_masks_history_dated_before_its_forget(tmp_path):
    from memclaw.service.forgotten import ForgottenFilter

    line = {"scope": "owner", "text": FORGOT, "at": (T0 + timedelta(minutes=10)).isoformat()}
    (tmp_path / "forgotten.jsonl").write_text(json.dumps(line) + "\n", "utf-8")
    filt = ForgottenFilter(tmp_path, Tokenizer().tokenize, lambda scope: lambda term: 1)
    keys = filt.keys_in("owner")

    def entry(minutes: int) -> MemoryUnit:
        text = "Lena moved to Porto, the sister said. We planned a hike in the Jura."
        return MemoryUnit("h1", "history", "owner", "memory/HISTORY.md", 1, text, T0 + timedelta(minutes=minutes))

    assert filt.shown(entry(5), keys).text == "[forgotten] We planned a hike in the Jura."
    assert filt.shown(entry(20), keys) == entry(20)  # written after the forget: news
    fact = MemoryUnit("f9", "fact", "owner", "memory/MEMORY.md", 1, "Sister Lena lives in Porto")
    assert filt.shown(fact, keys) is fact  # which facts restated it was not noted: none is hidden


def test_a_history_entry_restates_a_fact_in_one_sentence_not_in_words_spread_over_many(tmp_path):
    from memclaw.service.forgotten import ForgottenFilter

    filt = ForgottenFilter(tmp_path, Tokenizer().tokenize, lambda scope: lambda term: 1)
    fact = MemoryUnit("f1", "fact", "owner", "memory/MEMORY.md", 1, FORGOT)

    def entry(uid: str, text: str) -> MemoryUnit:
        return MemoryUnit(uid, "history", "owner", "memory/HISTORY.md", 1, text, T0)

    spread = entry("h1", "My sister called. Lena is fine. We talked about Porto wine. She lives well.")
    said = entry("h2", "We hiked. Lena, the sister, lives in Porto now.")
    assert filt.mentions("owner", [fact], [fact, spread, said]) == {"f1": ["h2"]}
