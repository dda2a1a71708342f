"""The inputs of a prompt that are not the sender: bootstrap files (cached until they change), the assistant's
name, the machine, the time, the recall query of a follow-up, and the history as whole turns."""

from __future__ import annotations

import logging
import platform
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from memclaw.context.senders import clean_name
from memclaw.context.tag_guard import own_message
from memclaw.errors import ConfigError, MemoryFileError
from memclaw.util.filecache import FileCache
from memclaw.util.safepath import NotRegularFileError, read_regular

log = logging.getLogger(__name__)


def _read_text(path: Path) -> str | None:
    """A bootstrap file's text, stripped; None (with a warning) when unreadable."""
    try:
        raw = read_regular(path, follow=True)
    except NotRegularFileError as e:
        raise MemoryFileError(f"cannot read {path}: {e.strerror}; memclaw reads only regular files") from e
    except OSError as e:
        log.warning("cannot read %s (%s); leaving it out of the prompt", path, e.strerror)
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("%s is not UTF-8; undecodable bytes replaced", path)
        text = raw.decode("utf-8", errors="replace")
    return text.strip()


_bootstrap_files: FileCache[str] = FileCache(_read_text)


def read_cached(path: Path) -> str | None:
    """File text, cached until the file changes; None when absent or unreadable (with a warning)."""
    return _bootstrap_files.get(path)


# (spaces and tabs only: an empty `- Name:` must not take the next line for the name)
_NAME_RE = re.compile(
    r"^[ \t]*[-*]?[ \t]*\**[ \t]*name[ \t]*\**[ \t]*:[ \t]*\**[ \t]*(.+?)[ \t]*\**[ \t]*$", re.I | re.M
)


def profile_name(profile_md: str | None, default: str) -> str:
    """The name a profile gives (a `Name: X` line of IDENTITY.md or USER.md), else `default`."""
    if profile_md:
        m = _NAME_RE.search(profile_md)
        if m:
            name = clean_name(m.group(1).strip("*_ "))
            if name:
                return name
    return default


def agent_name(identity_md: str | None, default: str) -> str:
    """The assistant's name from IDENTITY.md (a `Name: X` line), else `default`."""
    return profile_name(identity_md, default)


@lru_cache(maxsize=1)
def runtime_info() -> tuple[str, str]:
    return f"{platform.system()} {platform.release()} ({platform.machine()})", platform.python_version()


def format_time(now: datetime, tz_name: str | None) -> str:
    """'2026-11-22 19:58 (Sunday), Europe/Berlin (UTC+01:00)'."""
    if tz_name:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            now = now.astimezone(ZoneInfo(tz_name))
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown timezone {tz_name!r} in context.timezone; use an IANA name") from None
        label = tz_name
    else:
        now = now.astimezone()
        label = now.tzname() or "local"
    off = now.strftime("%z")
    off = f"UTC{off[:3]}:{off[3:]}" if off else "UTC"
    return f"{now:%Y-%m-%d %H:%M} ({now:%A}), {label} ({off})"


def content_text(content: Any, sep: str = "\n") -> str:
    """The text of a message's content: a string as it is, the text parts of a list joined by `sep`."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return sep.join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def recall_query(text: str, history: Sequence[Mapping[str, Any]], followup_max_words: int) -> str:
    """The message, preceded by the previous user turn when the message is a short follow-up ("and then?")."""
    text = text.strip()
    if len(text.split()) > followup_max_words:
        return text
    for m in reversed(history):
        if m.get("role") != "user":
            continue
        prev = content_text(m.get("content")).strip()
        if prev and not prev.startswith("[Runtime Context"):
            return f"{prev}\n{text}".strip()
    return text


def history_turns(history: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group history into turns that are kept or dropped whole: a user message and everything after it until
    the next user message, so an assistant tool call always stays with its tool results. A user's text never
    carries the runtime tag (memclaw.context.tag_guard)."""
    turns: list[list[dict[str, Any]]] = []
    for m in history:
        role = m.get("role")
        if role == "system":
            continue
        if role == "user" or not turns:
            turns.append([own_message(m)])
        else:
            turns[-1].append(own_message(m))
    return turns
