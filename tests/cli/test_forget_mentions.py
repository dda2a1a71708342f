"""Issue 38.1: `memory forget` forgets what a summary says too. A history entry or a fact that restated a forgotten
fact when it was forgotten (memclaw.service.forgotten.restates, the archive's rule) is masked or hidden at recall
and in the memory section; the Markdown is left as the owner wrote it, and the forget names these units. Through
the console script's entry point, real Markdown, the real model, embedded Chroma."""

from __future__ import annotations

import json

from tests.cli import test_bad_input

cli = test_bad_input.cli  # the fixtures: the console script's entry point in-process, an onboarded workspace
ws = test_bad_input.ws

PASSPORT = "My passport expires on 3 March 2031"
ENTRY = "Planned the Lisbon trip with Ana. The passport expires on 3 March 2031, so it is fine for the trip."
MASKED_ENTRY = "Planned the Lisbon trip with Ana. [forgotten]"
QUERY = "when does my passport expire"


def add(cli, text: str) -> str:
    r = cli("memory", "add", text, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)["id"]


def append_entry(ws, text: str, stamp: str = "2026-11-28 10:00") -> None:
    path = ws / "memory" / "HISTORY.md"
    path.write_text(path.read_text("utf-8") + f"\n[{stamp}] {text}\n", "utf-8")


def entry_id(cli, text: str) -> str:
    r = cli("memory", "list", "--json")
    assert r.code == 0, r.err
    return next(u["id"] for u in json.loads(r.out) if u["text"] == text)


def recalled(cli, query: str = QUERY) -> list[dict]:
    r = cli("recall", query, "--json", "-k", "20")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_a_history_entry_that_restates_a_forgotten_fact_is_masked_at_recall_and_in_the_prompt(cli, ws):
    fact = add(cli, PASSPORT)
    append_entry(ws, ENTRY)
    entry = entry_id(cli, ENTRY)
    assert recalled(cli)[0]["id"] in {fact, entry}
    history = (ws / "memory" / "HISTORY.md").read_bytes()

    forgot = cli("memory", "forget", fact, "--json")
    assert forgot.code == 0, forgot.err

    hits = recalled(cli)
    assert not [h for h in hits if "2031" in h["text"] or "passport" in h["text"].lower()]
    # it matched through the masked sentence alone: not served as a masked first hit
    assert entry not in [h["id"] for h in hits]
    # the rest of the entry stays useful
    assert {h["id"]: h["text"] for h in recalled(cli, "the Lisbon trip with Ana")}[entry] == MASKED_ENTRY
    r = cli("context", f"{QUERY} for the Lisbon trip?")
    assert r.code == 0, r.err
    assert "2031" not in r.out and "Lisbon trip with Ana. [forgotten]" in r.out
    # the forget named the entry, and the command that forgets it too
    [gone] = json.loads(forgot.out)
    assert gone["id"] == fact and gone["mentioned_in"] == [entry]
    assert gone["forget_too"] == f"memclaw memory forget {entry}"
    # the file stays the owner's; `memory list` says why the entry is served in part
    assert (ws / "memory" / "HISTORY.md").read_bytes() == history
    listed = {u["id"]: u for u in json.loads(cli("memory", "list", "--json").out)}
    assert listed[entry]["restates_forgotten"] == "masked" and listed[entry]["text"] == ENTRY


def test_a_fact_that_restates_a_forgotten_fact_is_hidden_and_named_by_the_forget(cli, ws):
    fact = add(cli, PASSPORT)
    twin = add(cli, "Passport renewal: it expires 3 March 2031")
    forgot = cli("memory", "forget", fact)
    assert forgot.code == 0, forgot.err
    assert not [h for h in recalled(cli) if "2031" in h["text"]]
    assert f"also mentioned in 1 fact: {twin}" in forgot.out
    assert f"forget it too with memclaw memory forget {twin}" in forgot.out
    r = cli("memory", "list")
    assert r.code == 0 and "restates a forgotten memory: not recalled" in " ".join(r.out.split()), r.out
    # said again after the forget, it is news: recalled as itself
    again = add(cli, PASSPORT)
    assert again in [h["id"] for h in recalled(cli)]
    # forgetting the twin too names the fact said again, which restates it
    r = cli("memory", "forget", twin)
    assert r.code == 0 and f"also mentioned in 1 fact: {again}" in r.out, r.out


def test_an_entry_that_shares_only_a_common_word_or_a_month_is_not_masked(cli, ws):
    fact = add(cli, PASSPORT)
    common = "Bought a leather cover for my passport. In March we visited Porto."
    append_entry(ws, common)
    entry = entry_id(cli, common)
    r = cli("memory", "forget", fact, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["mentioned_in"] == []
    assert {h["id"]: h["text"] for h in recalled(cli, "passport cover Porto")}[entry] == common
    listed = {u["id"]: u for u in json.loads(cli("memory", "list", "--json").out)}
    assert listed[entry]["restates_forgotten"] is None
