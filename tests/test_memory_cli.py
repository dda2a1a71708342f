"""`memclaw memory add / list / forget` and read-only recall through the console script's entry point (in-process,
real workspace, real model, embedded Chroma; see test_bad_input for the `cli` and `ws` fixtures)."""

from __future__ import annotations

import json

from memclaw.markdown import parse_memory
from tests import test_bad_input

cli = test_bad_input.cli  # the fixtures: the console script's entry point in-process, an onboarded workspace
ws = test_bad_input.ws

DEMO_LIKE = """# Work
- I work at Solaris Energy

## Health
- I am allergic to penicillin
"""


def sections(path) -> list[tuple[str | None, str]]:
    return [(u.section, u.text) for u in parse_memory(path.read_text("utf-8"), scope="owner", source="m")]


def test_memory_add_files_a_fact_under_the_default_section_or_the_given_one(cli, ws):
    """Issue 13.3: without --section a fact goes under "Notes" (created once), not under the last heading."""
    mem = ws / "memory" / "MEMORY.md"
    mem.write_text(DEMO_LIKE, "utf-8")
    for args in (["My neighbour Omar has a dog"], ["Mia is my daughter", "--section", "Family"], ["The bins go out"]):
        r = cli("memory", "add", *args, "--json")
        assert r.code == 0, r.err
    assert json.loads(r.out)["text"] == "The bins go out"
    assert sections(mem) == [
        ("Work", "I work at Solaris Energy"),
        ("Work > Health", "I am allergic to penicillin"),
        ("Notes", "My neighbour Omar has a dog"),
        ("Notes", "The bins go out"),
        ("Family", "Mia is my daughter"),
    ]
    assert mem.read_text("utf-8").count("# Notes\n") == 1


def tree(root) -> dict[str, bytes | None]:
    """Every path under `root` (index included), with the bytes of the files outside the vector store."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() and "chroma" not in p.parts else None)
        for p in sorted(root.rglob("*"))
    }


def test_a_recall_for_an_unknown_sender_writes_nothing(cli, ws, memclaw_home):
    """Issue 13.5: `recall --sender discord:999` for a sender with no memory adds no folder, no index file and no
    row to `status`: reads write nothing."""
    assert cli("memory", "sync").code == 0
    before = tree(memclaw_home)
    for args in (
        ["recall", "where does my sister live", "--sender", "discord:999"],
        ["recall", "Porto", "--sender", "discord:999", "--json"],
        ["recall", "Porto", "--sender", "discord:999", "--mode", "bm25"],
        ["context", "where does my sister live", "--sender", "discord:999", "--json"],
    ):
        r = cli(*args)
        assert r.code == 0, r.err
        assert "lives in Porto" not in r.out  # the owner's memory stays the owner's
    assert tree(memclaw_home) == before
    scopes = json.loads(cli("status", "--json").out)["memory"]["scopes"]
    assert list(scopes) == ["owner"]
