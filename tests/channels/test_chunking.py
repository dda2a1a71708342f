"""Splitting long answers under Discord's limit without breaking code fences."""

from __future__ import annotations

import re

import pytest

from memclaw.channels._chunking import DISCORD_LIMIT, split_message, text_len

FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$", re.M)

PARA = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. " * 6).strip()


def fences_balanced(chunk: str) -> bool:
    return len(FENCE.findall(chunk)) % 2 == 0


def unsplit(chunks: list[str]) -> str:
    """Undo the split: drop each closing fence added at a chunk end and the reopening at the next start."""
    out = chunks[0]
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        opened = _open_at_end(prev)
        # A chunk ending in a fence that closes an open block was either cut there (then the next chunk
        # reopens the same block) or the block really ended there.
        if opened is not None and nxt.startswith(opened[0] + opened[1] + "\n"):
            assert out.endswith("\n" + opened[0])
            out = out[: -len(opened[0]) - 1]
            reopen = opened[0] + opened[1]
            out += "\n" + nxt[len(reopen) + 1 :]
        else:
            out += "\n\n" + nxt
    return out


def _open_at_end(chunk: str) -> tuple[str, str] | None:
    """(marker, lang) of a fence the splitter closed at the end of `chunk`, else None."""
    lines = chunk.split("\n")
    if not FENCE.match(lines[-1]):
        return None
    state = None
    for ln in lines[:-1]:
        m = FENCE.match(ln)
        if m:
            state = None if state else (m.group(1), m.group(2).strip())
    return state


def norm(s: str) -> str:
    return re.sub(r"\n{2,}", "\n\n", s.strip())


def test_short_text_is_one_chunk():
    assert split_message("hello") == ["hello"]
    assert split_message("  \n\n ") == []


def test_4500_char_answer_with_code_block():
    code = "\n".join(f"    result_{i} = compute_something({i}) + offset_{i}  # step {i}" for i in range(40))
    text = f"{PARA}\n\n{PARA}\n\n```python\ndef main():\n{code}\n```\n\n{PARA}\n\n{PARA}\n\n{PARA}"
    assert 4500 <= len(text) <= 6000
    chunks = split_message(text)
    assert len(chunks) >= 3
    for c in chunks:
        assert text_len(c) <= DISCORD_LIMIT
        assert fences_balanced(c), c
    # The code block was cut: closed at the end of one chunk, reopened with its language tag.
    cut = [i for i, c in enumerate(chunks[:-1]) if _open_at_end(c) and chunks[i + 1].startswith("```python")]
    assert cut, "expected the code block to span chunks"
    for i in cut:
        assert chunks[i].endswith("\n```")
        assert chunks[i + 1].startswith("```python\n")
    assert norm(unsplit(chunks)) == norm(text)


def test_prefers_paragraph_boundaries():
    paras = [f"Paragraph {i}. " + ("word " * 60).strip() for i in range(20)]
    text = "\n\n".join(paras)
    chunks = split_message(text)
    assert len(chunks) > 1
    for c in chunks:
        assert text_len(c) <= DISCORD_LIMIT
        # every chunk is made of whole paragraphs
        for p in c.split("\n\n"):
            assert p in paras
    assert "\n\n".join(chunks) == text


def test_falls_back_to_line_boundaries_and_hard_cuts():
    lines = [f"line {i} " + "x" * 70 for i in range(80)]  # no blank lines at all
    chunks = split_message("\n".join(lines))
    assert all(text_len(c) <= DISCORD_LIMIT for c in chunks)
    assert "\n".join(chunks) == "\n".join(lines)
    long_word_line = "word " * 900  # one 4500-char line
    chunks = split_message(long_word_line.strip())
    assert all(text_len(c) <= DISCORD_LIMIT for c in chunks)
    assert " ".join(chunks).split() == long_word_line.split()


def test_tilde_fences_and_untagged_code():
    body = "\n".join(f"row {i:04d} " + "." * 60 for i in range(70))
    text = f"intro\n\n~~~~\n{body}\n~~~~\n\noutro"
    chunks = split_message(text, limit=1000)
    assert all(text_len(c) <= 1000 and fences_balanced(c) for c in chunks)
    assert chunks[1].startswith("~~~~\n")
    assert norm(unsplit(chunks)) == norm(text)


def test_astral_characters_count_double():
    text = "😀" * 1500  # 3000 UTF-16 units
    chunks = split_message(text)
    assert len(chunks) == 2
    assert all(text_len(c) <= DISCORD_LIMIT for c in chunks)
    assert "".join(chunks) == text


@pytest.mark.parametrize("limit", [200, 500, 2000])
def test_never_exceeds_limit_on_mixed_content(limit):
    parts = []
    for i in range(30):
        parts.append(f"## Section {i}\n\n" + ("text " * (i * 7 % 50 + 5)).strip())
        if i % 4 == 0:
            parts.append("```js\n" + "\n".join(f"console.log({j});" for j in range(i + 3)) + "\n```")
    text = "\n\n".join(parts)
    chunks = split_message(text, limit=limit)
    assert all(text_len(c) <= limit for c in chunks)
    assert all(fences_balanced(c) for c in chunks)
    # over-long lines were cut at spaces (a line break instead of a space): compare the words
    assert unsplit(chunks).split() == text.split()
