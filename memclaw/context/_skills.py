"""Skills: `<name>/SKILL.md` files with YAML frontmatter, bundled (repo `skills/`) and per workspace.

Frontmatter keys: `name`, `description` (required), `always` (include the whole skill in every prompt),
`requires: {bins: [...], env: [...]}` (binaries on PATH, environment variables). A workspace skill overrides a
bundled one of the same name. A broken SKILL.md is skipped with a warning, never fatal. Parsed files are
cached by (mtime_ns, size), so an edit is picked up on the next call.
"""

from __future__ import annotations

import dataclasses
import html
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memclaw.errors import MemoryFileError, SkillError
from memclaw.util.filecache import FileCache
from memclaw.util.safepath import NotRegularFileError, read_regular

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
Source = Literal["bundled", "workspace"]


class _Requires(BaseModel):
    model_config = ConfigDict(extra="ignore")
    bins: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)

    @field_validator("bins", "env", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v


class _Frontmatter(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str | None = None
    description: str = Field(min_length=1)
    always: bool = False
    requires: _Requires = Field(default_factory=_Requires)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    # The SKILL.md file
    path: Path
    source: Source
    # The Markdown after the frontmatter
    body: str
    always: bool = False
    requires_bins: tuple[str, ...] = ()
    requires_env: tuple[str, ...] = ()

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def missing(self) -> list[str]:
        """What keeps this skill from working here, e.g. ['bin: curl', 'env: API_KEY']; [] when available."""
        out = [f"bin: {b}" for b in self.requires_bins if not _which(b)]
        out += [f"env: {e}" for e in self.requires_env if not os.environ.get(e)]
        return out

    @property
    def available(self) -> bool:
        return not self.missing()


@dataclass
class SkillSet:
    # Sorted by name, overrides applied
    skills: list[Skill]
    warnings: list[str] = field(default_factory=list)

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def always_on(self) -> list[Skill]:
        return [s for s in self.skills if s.always]


# ----- parsing -----------------------------------------------------------------------------------------------
def parse_skill(text: str, path: Path, source: Source = "workspace") -> Skill:
    """Parse one SKILL.md. Raises SkillError naming the file and the fix."""
    import yaml

    if not text.startswith("---"):
        raise SkillError(f"{path}: no YAML frontmatter; start the file with '---', name/description, '---'")
    lines = text.split("\n")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise SkillError(f"{path}: the YAML frontmatter is not closed; add a '---' line after it")
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        raise SkillError(f"{path}: broken YAML frontmatter{at}; fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise SkillError(f"{path}: the frontmatter must be a YAML mapping with name and description")
    try:
        fm = _Frontmatter.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "frontmatter"
        raise SkillError(f"{path}: invalid frontmatter key '{key}': {first['msg']}; fix it in the YAML") from None
    name = (fm.name or path.parent.name).strip()
    return Skill(
        name=name,
        description=" ".join(fm.description.split()),
        path=path,
        source=source,
        body="\n".join(lines[end + 1 :]).strip(),
        always=fm.always,
        requires_bins=tuple(fm.requires.bins),
        requires_env=tuple(fm.requires.env),
    )


# ----- caches ------------------------------------------------------------------------------------------------
_which_cache: dict[tuple[str, str], tuple[float, bool]] = {}
_WHICH_TTL_S = 30.0


def _which(binary: str) -> bool:
    key = (binary, os.environ.get("PATH", ""))
    now = time.monotonic()
    hit = _which_cache.get(key)
    if hit and now - hit[0] < _WHICH_TTL_S:
        return hit[1]
    found = shutil.which(binary) is not None
    _which_cache[key] = (now, found)
    return found


def _parse_file(path: Path, source: Source) -> Skill | SkillError:
    try:
        text = read_regular(path, follow=True).decode("utf-8")
        result: Skill | SkillError = parse_skill(text, path, source)
    except NotRegularFileError as e:
        raise MemoryFileError(f"cannot read skill {path}: {e.strerror}; memclaw reads only regular files") from e
    except UnicodeDecodeError:
        result = SkillError(f"{path}: not UTF-8 text; re-save it as UTF-8")
    except OSError as e:
        result = SkillError(f"{path}: cannot be read ({e.strerror}); fix its permissions")
    except SkillError as e:
        result = e
    if isinstance(result, SkillError):
        log.warning("skipping skill: %s", result)
    return result


_skill_files: dict[str, FileCache[Skill | SkillError]] = {
    src: FileCache(lambda p, src=src: _parse_file(p, src)) for src in ("bundled", "workspace")
}


def _load_file(path: Path, source: Source) -> Skill | SkillError | None:
    """The parsed SKILL.md (or why it was skipped), re-parsed only when the file changes; None if absent."""
    return _skill_files[source].get(path)


def _scan(root: Path | None, source: Source) -> tuple[dict[str, Skill], list[str]]:
    found: dict[str, Skill] = {}
    warnings: list[str] = []
    if root is None:
        return found, warnings
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return found, warnings
    for entry in entries:
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        res = _load_file(Path(entry.path) / SKILL_FILE, source)
        if res is None:
            continue
        if isinstance(res, SkillError):
            warnings.append(str(res))
        elif res.name in found:
            warnings.append(f"{res.path}: duplicate skill name {res.name!r}; rename one of them")
        else:
            found[res.name] = res
    return found, warnings


def bundled_skills_dir() -> Path | None:
    """The skills shipped with memclaw: the repository's `skills/`, else a packaged copy (memclaw/data/skills)."""
    pkg = Path(__file__).resolve().parents[1]
    for cand in (pkg.parent / "skills", pkg / "data" / "skills"):
        if cand.is_dir():
            return cand
    return None


def load_skills(workspace_skills: Path | None, bundled: Path | None = None) -> SkillSet:
    """Bundled skills, then the workspace's, which override bundled ones of the same name."""
    if bundled is None:
        bundled = bundled_skills_dir()
    merged, warnings = _scan(bundled, "bundled")
    ws_skills, ws_warnings = _scan(workspace_skills, "workspace")
    if ws_skills and workspace_skills is not None:
        from memclaw.workspace import model_written_skills

        written = model_written_skills(Path(workspace_skills).parent)
        for name, skill in ws_skills.items():
            if skill.always and skill.base_dir.name in written:
                # (written by the model's file tools: listed for the owner, never in every prompt)
                ws_skills[name] = dataclasses.replace(skill, always=False)
    merged.update(ws_skills)
    return SkillSet(sorted(merged.values(), key=lambda s: s.name), warnings + ws_warnings)


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _attr(text: str) -> str:
    return '"' + html.escape(text, quote=True) + '"'


# ----- rendering ---------------------------------------------------------------------------------------------
def skills_summary(skills: list[Skill], *, show_location: bool = True) -> str:
    """The XML summary the model reads to decide which SKILL.md to open."""
    if not skills:
        return ""
    out = ["<skills>"]
    for s in skills:
        missing = s.missing()
        out.append(f"  <skill available={_attr('false' if missing else 'true')}>")
        out.append(f"    <name>{_esc(s.name)}</name>")
        out.append(f"    <description>{_esc(s.description)}</description>")
        if show_location:
            out.append(f"    <location>{_esc(str(s.path))}</location>")
        if missing:
            out.append(f"    <missing>{_esc(', '.join(missing))}</missing>")
        out.append("  </skill>")
    out.append("</skills>")
    return "\n".join(out)
