"""Consolidation logic without a memory service: JSON extraction, validation, where to cut, scope grouping."""

from __future__ import annotations

import pytest

from memclaw.agent.consolidate import cut_index, parse_output
from memclaw.agent.conversation import format_conversation, group_by_scope
from memclaw.util.jsonfix import extract_json, extract_object, strip_fences


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '```json\n{"a": 1}\n```',
        '```\n{"a": 1}\n```',
        'Sure! Here is the JSON:\n```json\n{"a": 1}\n```\nHope it helps.',
        'Here you go: {"a": 1} -- done',
        '{"a": 1,}',
        '```json\n{"a": 1}',  # unclosed fence
        'Done (see [note} below): {"a": 1}',  # a stray mismatched bracket before the JSON
    ],
)
def test_extract_json_variants(text):
    assert extract_json(text) == {"a": 1}


def test_extract_json_respects_strings_and_nesting():
    assert extract_json('x {"t": "a } b {", "n": [1, {"m": 2}]} y') == {"t": "a } b {", "n": [1, {"m": 2}]}
    assert strip_fences("  plain  ") == "plain"
    with pytest.raises(ValueError, match="empty"):
        extract_json("   ")
    with pytest.raises(ValueError, match="not valid JSON"):
        extract_json("no json here at all")
    with pytest.raises(ValueError, match="JSON object"):
        extract_object("[1, 2]")


def test_consolidation_errors_live_in_memclaw_errors_and_name_the_fix():
    from memclaw import errors
    from memclaw.agent import consolidate

    assert consolidate.ConsolidationError is errors.ConsolidationError
    assert issubclass(errors.ConsolidationError, errors.LLMError) and errors.ConsolidationError.exit_code == 5


def test_consolidation_prompts_are_templates():
    from memclaw.prompts import PROMPTS_DIR

    for name in ("consolidate", "consolidate_retry", "consolidate_system"):
        assert (PROMPTS_DIR / f"{name}.md").is_file()
    src = (PROMPTS_DIR.parent / "agent" / "consolidate.py").read_text("utf-8")
    assert "strict JSON" not in src  # the system prompt is memclaw/prompts/consolidate_system.md


def test_parse_output_validates_ops_and_ids():
    ok = parse_output(
        '{"history_entry": "  Talked  about Porto. ", "facts": ['
        '{"op": "add", "text": "Sister Lena lives in Porto", "section": "Family"},'
        '{"op": "update", "id": "f1", "text": "Works at Solaris"}, {"op": "delete", "id": "f2"}]}',
        {"f1", "f2"},
    )
    assert ok.history_entry == "Talked about Porto."
    assert [o.op for o in ok.facts] == ["add", "update", "delete"]
    with pytest.raises(ValueError, match="unknown fact id"):
        parse_output('{"history_entry": "x", "facts": [{"op": "delete", "id": "f9"}]}', {"f1"})
    with pytest.raises(ValueError, match="needs a non-empty 'text'"):
        parse_output('{"history_entry": "x", "facts": [{"op": "add"}]}', set())
    with pytest.raises(ValueError, match="needs the 'id'"):
        parse_output('{"history_entry": "x", "facts": [{"op": "update", "text": "y"}]}', set())
    with pytest.raises(ValueError, match="expected shape"):
        parse_output('{"history_entry": "x", "facts": [{"op": "rewrite_everything"}]}', set())
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_output("I summarised it for you!", set())
    assert parse_output('{"history_entry": ""}', set()).facts == []


def _turn(i: int, tools: bool = False, scope: str = "owner") -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": f"q{i}", "scope": scope}]
    if tools:
        call = {"id": f"c{i}", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "x"},
        ]
    msgs.append({"role": "assistant", "content": f"a{i}"})
    return msgs


def test_cut_index_never_splits_a_turn():
    msgs = [m for i in range(10) for m in _turn(i, tools=i % 2 == 0)]  # 30 messages
    assert cut_index(msgs, 0, window=40) == 0  # under the window: nothing
    cut = cut_index(msgs, 0, window=12)
    assert 0 < cut < len(msgs) and msgs[cut]["role"] == "user"
    assert len(msgs) - cut <= 12
    assert cut_index(msgs, 0, window=12, everything=True) == len(msgs)
    # from a pointer: only what follows it counts
    assert cut_index(msgs, 24, window=12) == 24
    # one giant turn with no later user message: cut back to the last turn start, else nothing
    one = _turn(0) + [{"role": "assistant", "content": "more"}] * 20
    assert cut_index(one, 0, window=4) == 0


def test_group_by_scope_keeps_outsider_turns_apart():
    msgs = _turn(1) + _turn(2, scope="people/discord:7") + _turn(3, tools=True)
    groups = group_by_scope(msgs, "owner")
    assert [m["content"] for m in groups["people/discord:7"]] == ["q2", "a2"]
    assert [m["content"] for m in groups["owner"] if m["role"] == "user"] == ["q1", "q3"]


def test_format_conversation_shows_names_tools_and_times():
    msgs = [
        {"role": "user", "content": "I moved to Porto", "sender_name": "Ana", "ts": "2026-03-02T18:10:00+00:00"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "remember", "arguments": '{"text": "x"}'}}],
        },
        {"role": "tool", "name": "remember", "content": "y" * 1000},
        {"role": "assistant", "content": "Noted!"},
    ]
    text = format_conversation(msgs, "memclaw")
    assert "Ana: I moved to Porto" in text and "[2026-03-02" in text
    assert "memclaw used tool remember" in text and "[...]" in text and "memclaw: Noted!" in text
