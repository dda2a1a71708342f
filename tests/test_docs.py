"""The documentation holds: the site builds strictly, the config reference names every key with its real default,
every relative link in the repository's Markdown reaches a file, and no page names a path of one machine."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOP_PAGES = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "ARCHITECTURE.md", "benchmarks/README.md",
             "benchmarks/lab/README.md"]  # fmt: skip


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("owners", "chroma_headers", "model_overrides"):
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_the_config_reference_names_every_key_with_its_default() -> None:
    from memclaw.config import Config, dump_config

    render = runpy.run_path(str(REPO / "tools" / "config_reference.py"))["render"]
    page = render()
    keys = _flat(dump_config(Config.model_construct()))
    assert len(keys) > 50
    for key, default in keys.items():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row, f"{key} is missing from the configuration reference"
        if default is not None and not str(default).startswith("*"):
            shown = json.dumps(default, ensure_ascii=False).replace("|", "\\|").replace("<", "&lt;")
            assert f"`{shown}`" in row, (key, default, row)


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.skip("mkdocs is installed by the dev extra")
    cmd = [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    config = (tmp_path / "site" / "configuration" / "index.html").read_text("utf-8")
    assert "recall.preset" in config and "agent_turn_weight" in config and "plain-rrf" in config


def test_the_config_reference_names_every_tuning_value_of_every_preset() -> None:
    from dataclasses import asdict

    from memclaw.config.presets import PRESETS, TUNING_KEYS

    page = runpy.run_path(str(REPO / "tools" / "config_reference.py"))["render"]()
    for key in TUNING_KEYS:
        row = next((line for line in page.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row, f"{key} is missing from the presets table"
        for preset in PRESETS.values():
            assert f"`{json.dumps(asdict(preset)[key])}`" in row, (key, row)


def _markdown_files() -> list[Path]:
    return [REPO / p for p in TOP_PAGES] + sorted((REPO / "docs").rglob("*.md"))


def test_every_relative_link_reaches_a_file() -> None:
    broken = []
    for page in _markdown_files():
        # links inside code (fenced blocks, `spans`) are text, not links
        text = re.sub(r"```.*?```|`[^`]*`", "", page.read_text("utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.split("#")[0]
            if not path or re.match(r"[a-z]+:", path):
                continue
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []


def test_no_page_names_a_path_of_one_machine() -> None:
    pages = _markdown_files() + sorted((REPO / "benchmarks" / "results").rglob("*.md"))
    machine = re.compile(r"(?<![\w.$])/(work|root|home|tmp)/[\w.-]+")
    found = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in pages for m in machine.finditer(p.read_text("utf-8"))]
    assert found == []


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text("utf-8").splitlines()) <= 250
