"""`memclaw context` end to end through the CLI (typer's CliRunner): real workspace, real MemoryService with the
bundled model and embedded Chroma, the repo's bundled skills. The JSON and the budget table are snapshot-tested
(tests/snapshots/context_cli.json, context_cli_table.txt; MEMCLAW_UPDATE_SNAPSHOTS=1 rewrites them).

What depends on the machine is masked: the workspace path, OS and Python in the identity section, the repository's
location in the skills sections (and so those sections' token counts and the total), the current time, and recall
scores (floats of the real model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memclaw.cli.main import app
from tests.context.test_context import check_snapshot
from tests.context.test_context_support import OWNER_ADDRESS, make_workspace

pytestmark = pytest.mark.slow

MEMORY_MD = f"""# Home
- Maya lives at {OWNER_ADDRESS}

# People
- Maya's sister Lena lives in Porto (2026-01-02)
"""
HISTORY_MD = "[2025-12-01 18:05] Talked about Lena's visit to Lyon in March; Maya booked the train.\n"
REPO = Path(__file__).resolve().parents[2]
# Sections whose text holds this machine's paths (workspace, repository checkout) or OS: their token counts vary.
MACHINE_DEPENDENT = {"identity", "skills.always", "skills.summary"}


@pytest.fixture
def cli_ws(tmp_path, monkeypatch):
    root = make_workspace(tmp_path / "ws")
    (root / "memory").mkdir()
    (root / "memory" / "MEMORY.md").write_text(MEMORY_MD, "utf-8")
    (root / "memory" / "HISTORY.md").write_text(HISTORY_MD, "utf-8")
    monkeypatch.setenv("MEMCLAW_AGENT__MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("MEMCLAW_CONTEXT__TIMEZONE", "UTC")
    monkeypatch.setenv("COLUMNS", "140")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))  # skills that need a binary are unavailable on every machine
    return root


def invoke(*args: str):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, (r.output, r.exception)
    return r


def mask_text(text: str, ws: Path) -> str:
    text = text.replace(str(ws.resolve()), "<WORKSPACE>").replace(str(ws), "<WORKSPACE>")
    text = text.replace(str(REPO / "skills"), "<BUNDLED>")
    text = re.sub(r"- OS: .*", "- OS: <OS>", text)
    text = re.sub(r"- Python: .*", "- Python: <PY>", text)
    return re.sub(r"Current time: .*", "Current time: <NOW>", text)


def test_cli_context_json_snapshot(cli_ws):
    out = invoke("context", "where does Lena live?", "-w", str(cli_ws), "--json").stdout
    data = json.loads(out)
    data["total_tokens"] = "<N>"
    for r in data["report"]:
        if r["section"] in MACHINE_DEPENDENT:
            assert r["status"] == "kept" and r["used"] > 0
            r["requested"] = r["allotted"] = r["used"] = "<N>"
    for m in data["memories"]:
        for k in ("score", "bm25", "vector", "boosts"):
            m[k] = "<masked>"
    for m in data["messages"]:
        m["content"] = mask_text(m["content"], cli_ws)
    check_snapshot("context_cli.json", json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    # the memories came from the real recall over the workspace, inside the prompt as quoted data
    system = data["messages"][0]["content"]
    block = system[system.index("<recalled-memories>") :]
    assert "Maya's sister Lena lives in Porto" in block and "Maya&#x27;s" not in block
    assert data["is_owner"] and data["scope"] == "owner" and data["recall_query"] == "where does Lena live?"


def test_cli_context_budget_table_snapshot(cli_ws):
    out = invoke("context", "where does Lena live?", "-w", str(cli_ws)).stdout
    table = normalise_table(out[out.index("Token budget:") :])
    check_snapshot("context_cli_table.txt", table)
    assert "section | priority | requested | allotted | used | status | dropped" in table
    assert "memories | 5 |" in table and "history" not in table  # no session yet: no history row


def normalise_table(text: str) -> str:
    """The rich table as `cell | cell | ...` rows, independent of the terminal width rich picked; the title
    unwrapped; the machine-dependent numbers masked (see MACHINE_DEPENDENT)."""
    title, rows, rest = [], [], []
    for line in text.splitlines():
        if line[:1] in "┏┡└":
            continue
        if line[:1] in "┃│":
            cells = [c.strip() for c in line.strip("┃│ ").replace("┃", "│").split("│")]
            if cells[0] in MACHINE_DEPENDENT:
                cells[2:5] = ["<N>"] * 3
            rows.append(" | ".join(cells))
        elif rows:
            rest.append(line.rstrip())
        else:
            title.append(line.strip())
    head = re.sub(r"Token budget: \d+ used", "Token budget: <N> used", " ".join(title))
    return "\n".join([head, *rows, *rest]).strip() + "\n"


def test_cli_context_for_an_outsider_has_none_of_the_owner(cli_ws):
    out = invoke("context", "where does Maya live?", "--sender", "discord:999", "-w", str(cli_ws), "--json").stdout
    data = json.loads(out)
    assert not data["is_owner"] and data["scope"] == "people/discord:999"
    text = json.dumps(data["messages"])
    assert OWNER_ADDRESS not in text and "Lena" not in text and data["memories"] == []


def test_context_and_recall_show_the_memory_section_cut_and_why(cli_ws, monkeypatch):
    # a budget that holds the best memory and not the others: both commands say which are out, and why
    full = json.loads(invoke("context", "where does Lena live", "-w", str(cli_ws), "--json").output)
    ranked = full["memory_section"]
    assert ranked["kept"] == 3 and ranked["skipped"] == []
    hits = json.loads(invoke("recall", "where does Lena live", "-w", str(cli_ws), "--json", "--tokens", "20").output)
    first = hits[0]["memory_section"]
    assert first["kept"] is True and first["tokens"] <= 20
    out = [h["memory_section"] for h in hits[1:]]
    assert out and all(not s["kept"] and s["reason"].startswith("no room") for s in out)
    monkeypatch.setenv("MEMCLAW_CONTEXT__MEMORY_TOKENS", "20")
    built = json.loads(invoke("context", "where does Lena live", "-w", str(cli_ws), "--json").output)
    assert [m["id"] for m in built["memories"]] == [hits[0]["id"]]
    assert [s["id"] for s in built["memory_section"]["skipped"]] == [h["id"] for h in hits[1:]]
    table = invoke("context", "where does Lena live", "-w", str(cli_ws)).output
    assert "Memory section: 1 of 3 recalled memories" in table and "no room" in table
    shown = invoke("recall", "where does Lena live", "-w", str(cli_ws), "--tokens", "20").output
    assert "memory section: 1 of 3 hits" in shown and "no room" in shown
