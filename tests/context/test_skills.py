"""memclaw.context._skills: SKILL.md loading, overrides, requirements, broken frontmatter, caching; bundled skills."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from memclaw.config import Config
from memclaw.context._skills import bundled_skills_dir, load_skills, skills_summary
from memclaw.context.builder import build_messages
from memclaw.context.senders import Sender
from tests.context.test_context_support import make_workspace


def write_skill(root: Path, dirname: str, frontmatter: str, body: str = "Do the thing.") -> Path:
    d = root / dirname
    d.mkdir(parents=True, exist_ok=True)
    p = d / "SKILL.md"
    p.write_text(f"---\n{frontmatter}\n---\n\n{body}\n", encoding="utf-8")
    return p


def test_bundled_skills_parse_cleanly_and_memory_is_always_on():
    bundled = bundled_skills_dir()
    assert bundled is not None and (bundled / "memory" / "SKILL.md").is_file()
    skills = load_skills(None, bundled)
    assert skills.warnings == []
    names = {s.name for s in skills.skills}
    assert {"memory", "skill-creator", "summarize", "weather"} <= names
    mem = skills.get("memory")
    assert mem is not None and mem.always and mem.source == "bundled"
    for needle in ("memory_search", "remember", "outdated", "not instructions", "auto-recall"):
        assert needle.lower() in mem.body.lower()
    assert skills.get("weather").requires_bins == ("curl",)


def test_workspace_skill_overrides_bundled_one(tmp_path):
    bundled, ws = tmp_path / "bundled", tmp_path / "ws"
    write_skill(bundled, "notes", "name: notes\ndescription: bundled notes")
    write_skill(bundled, "other", "name: other\ndescription: another one")
    write_skill(ws, "my-notes", "name: notes\ndescription: my own notes")
    skills = load_skills(ws, bundled)
    notes = skills.get("notes")
    assert notes.description == "my own notes" and notes.source == "workspace"
    assert notes.path == ws / "my-notes" / "SKILL.md"
    assert [s.name for s in skills.skills] == ["notes", "other"]


def test_broken_frontmatter_is_skipped_with_a_clear_warning(tmp_path, caplog):
    ws = tmp_path / "ws"
    write_skill(ws, "good", "name: good\ndescription: works")
    write_skill(ws, "broken", "name: broken\ndescription: [unclosed")
    write_skill(ws, "nodesc", "name: nodesc")
    (ws / "nofm").mkdir()
    (ws / "nofm" / "SKILL.md").write_text("# just markdown\n")
    (ws / "binary").mkdir()
    (ws / "binary" / "SKILL.md").write_bytes(b"---\nname: x\xff\xfe\n---\n")
    with caplog.at_level(logging.WARNING, logger="memclaw.context._skills"):
        skills = load_skills(ws, tmp_path / "none")
    assert [s.name for s in skills.skills] == ["good"]
    text = caplog.text
    assert "broken/SKILL.md: broken YAML frontmatter" in text and "fix the YAML syntax" in text
    assert "nodesc/SKILL.md: invalid frontmatter key 'description'" in text
    assert "nofm/SKILL.md: no YAML frontmatter" in text
    assert "binary/SKILL.md: not UTF-8" in text
    assert len(skills.warnings) == 4


def test_missing_binary_or_env_makes_a_skill_unavailable(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    write_skill(
        ws, "needs-bin", "name: needs-bin\ndescription: uses a tool\nrequires:\n  bins: [memclaw-no-such-bin-xyz]"
    )
    write_skill(ws, "needs-env", "name: needs-env\ndescription: uses a key\nrequires:\n  env: MEMCLAW_TEST_SKILL_KEY")
    write_skill(ws, "has-bin", "name: has-bin\ndescription: uses python\nrequires:\n  bins: [sh]")
    monkeypatch.delenv("MEMCLAW_TEST_SKILL_KEY", raising=False)
    skills = load_skills(ws, tmp_path / "none")
    assert skills.get("needs-bin").missing() == ["bin: memclaw-no-such-bin-xyz"]
    assert skills.get("needs-env").missing() == ["env: MEMCLAW_TEST_SKILL_KEY"]
    assert skills.get("has-bin").available
    xml = skills_summary(skills.skills)
    assert '<skill available="false">\n    <name>needs-bin</name>' in xml
    assert "<missing>bin: memclaw-no-such-bin-xyz</missing>" in xml
    assert '<skill available="true">\n    <name>has-bin</name>' in xml
    monkeypatch.setenv("MEMCLAW_TEST_SKILL_KEY", "set")
    assert skills.get("needs-env").available


def test_summary_escapes_xml(tmp_path):
    ws = tmp_path / "ws"
    write_skill(ws, "x", "name: x\ndescription: 'use <b> & </skills> tags'")
    xml = skills_summary(load_skills(ws, tmp_path / "none").skills)
    assert "use &lt;b&gt; &amp; &lt;/skills&gt; tags" in xml
    assert xml.count("</skills>") == 1


def test_an_edited_skill_is_picked_up(tmp_path):
    ws = tmp_path / "ws"
    p = write_skill(ws, "s", "name: s\ndescription: first")
    assert load_skills(ws, tmp_path / "none").get("s").description == "first"
    p.write_text("---\nname: s\ndescription: second version\n---\nbody\n")
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a coarse clock may not move by itself
    assert load_skills(ws, tmp_path / "none").get("s").description == "second version"


def test_always_on_skill_is_in_the_prompt_in_full_with_its_base_dir(tmp_path):
    root = make_workspace(tmp_path / "ws")
    bundled = tmp_path / "bundled"
    write_skill(bundled, "alpha", "name: alpha\ndescription: always here\nalways: true", body="ALPHA BODY LINE")
    write_skill(bundled, "beta", "name: beta\ndescription: listed only", body="BETA BODY LINE")
    built = build_messages(
        config=Config(), workspace=root, message="hi", sender=Sender.cli(), bundled_skills=bundled, now=None
    )
    system = built.messages[0]["content"]
    assert "## Skill: alpha" in system and "ALPHA BODY LINE" in system
    assert f"base directory: {bundled / 'alpha'}" in system
    assert "BETA BODY LINE" not in system and "<name>beta</name>" in system
    assert "<name>alpha</name>" not in system  # not listed twice
