"""Prompt templates: package files `memclaw/prompts/<name>.md`, rendered with jinja2.

`render("context_identity", name="memclaw")` renders memclaw/prompts/context_identity.md. Undefined variables
are errors (StrictUndefined), so a template and its caller cannot silently drift apart.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment, Template

PROMPTS_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def _env() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(
        loader=FileSystemLoader(str(PROMPTS_DIR)),
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=True,
    )


def template(name: str) -> Template:
    """The compiled template `name` (with or without the `.md` suffix); recompiled when its file changes."""
    if not name.endswith(".md"):
        name += ".md"
    return _env().get_template(name)


def render(name: str, /, **variables: Any) -> str:
    """Render memclaw/prompts/<name>.md with `variables`; surrounding whitespace is stripped."""
    return template(name).render(**variables).strip()
