"""Readers of other assistants' memory: each turns its files into `Source` (conversations, facts, history entries).

Each format follows its public definition; docs/import.md maps each file and cites its source.

* nanobot: `memory/MEMORY.md`, `memory/history.jsonl` or the older `memory/HISTORY.md`, and `sessions/*.jsonl`.
* OpenClaw: `MEMORY.md`, daily notes `memory/YYYY-MM-DD[-slug].md`, and `agents/<agent>/sessions/<id>.jsonl`.
* ChatGPT: `conversations.json`; the branch shown is the path from `current_node` up to the root of `mapping`.
* jsonl: one message a line (`role`, `content`, `ts`, and optionally `conversation`, `sender`, `name`).

Every reader validates the whole source before anything is written.
A broken file raises ImportSourceError naming the file and the fix.
Nothing below the source folder is followed through a symlink.
No line longer than MAX_LINE_BYTES is read whole, and no JSON file larger than MAX_JSON_BYTES is loaded.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memclaw.errors import ImportSourceError
from memclaw.markdown.formats import clean_text
from memclaw.util.safepath import O_NOFOLLOW

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest JSONL line read (a longer one is refused before it is held in memory)."""
MAX_JSON_BYTES = 1024 * 1024 * 1024
"""The largest JSON document loaded whole (a ChatGPT export's conversations.json)."""
MAX_MD_BYTES = 64 * 1024 * 1024
"""The largest Markdown file read (MEMORY.md, HISTORY.md, a daily note)."""

KINDS = ("nanobot", "openclaw", "chatgpt", "jsonl")
_DAY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:-[^/]*)?\.md$")
_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}):(\d{2}))?[^\]]*\]\s*")


@dataclass(frozen=True)
class Message:
    # "user" or "assistant"
    role: str
    text: str
    # Aware, when it was said
    at: datetime
    # "channel:id" of a user message from someone else than the owner
    sender: str | None = None
    # The sender's display name
    name: str | None = None


@dataclass(frozen=True)
class Conversation:
    # Unique within its source (a file and an id)
    key: str
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Dated:
    """A fact or a history entry with the time it was learned or written."""

    text: str
    # Naive local time
    at: datetime
    section: str | None = None


@dataclass
class Source:
    kind: str
    root: Path
    conversations: list[Conversation] = field(default_factory=list)
    facts: list[Dated] = field(default_factory=list)
    history: list[Dated] = field(default_factory=list)
    files: int = 0


# ----- reading files safely -------------------------------------------------------------------------------------
def _refuse_links(path: Path, root: Path) -> None:
    """Refuse `path` if it, or a folder between `root` and it, is a symlink (the root itself may be one)."""
    cur = root
    for part in path.relative_to(root).parts:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise ImportSourceError(
                f"{cur} is a symlink: memclaw import does not follow links inside the folder it imports (one could "
                "reach a file outside it); nothing was imported: copy the real file there, or remove the link"
            )


def _open(path: Path, root: Path, limit: int) -> Any:
    _refuse_links(path, root)
    try:
        fd = os.open(path, os.O_RDONLY | O_NOFOLLOW)
    except OSError as e:
        raise ImportSourceError(f"cannot read {path}: {e.strerror or e}; check that it exists and is readable") from e
    f = os.fdopen(fd, "rb")
    size = os.fstat(fd).st_size
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise ImportSourceError(f"{path} is not a regular file; point memclaw import at the export's files")
    if limit and size > limit:
        f.close()
        raise ImportSourceError(
            f"{path} is {size / 2**20:,.0f} MiB, more than the {limit / 2**20:,.0f} MiB memclaw import reads; "
            "split it into smaller files"
        )
    return f


def read_text(path: Path, root: Path) -> str:
    with _open(path, root, MAX_MD_BYTES) as f:
        return clean_text(f.read().decode("utf-8", "replace"))


def read_json(path: Path, root: Path) -> Any:
    with _open(path, root, MAX_JSON_BYTES) as f:
        raw = f.read()
    try:
        return json.loads(raw)
    except UnicodeDecodeError as e:
        raise ImportSourceError(f"{path} is not UTF-8 text ({e.reason}); export it again") from None
    except json.JSONDecodeError as e:
        raise ImportSourceError(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}; truncated?): "
            "download or export it again; nothing was imported"
        ) from None


def read_jsonl(path: Path, root: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; a line that is not a JSON object, or too long, is refused."""
    with _open(path, root, 0) as f:
        n = 0
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            n += 1
            if len(line) > MAX_LINE_BYTES:
                raise ImportSourceError(
                    f"{path}: line {n} is longer than {MAX_LINE_BYTES // 2**20} MiB (not a message); "
                    "remove it or split the file; nothing was imported"
                )
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ImportSourceError(
                    f"{path}: line {n} is not valid JSON ({getattr(e, 'msg', e)}; truncated?): fix or remove "
                    "that line; nothing was imported"
                ) from None
            if not isinstance(rec, dict):
                raise ImportSourceError(f"{path}: line {n} is not a JSON object; fix or remove that line")
            yield n, rec


def _files(root: Path, pattern: str) -> list[Path]:
    """Files matching `pattern` below `root`, sorted; a symlink among them is refused, not followed."""
    found = sorted(root.glob(pattern))
    for p in found:
        _refuse_links(p, root)
    return [p for p in found if p.is_file()]


# ----- times and texts ------------------------------------------------------------------------------------------
def parse_time(value: object) -> datetime | None:
    """An ISO 8601 string, "YYYY-MM-DD HH:MM", or epoch seconds (milliseconds above 1e11) as an aware datetime."""
    try:
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int | float):
            secs = float(value) / (1000.0 if value > 1e11 else 1.0)
            return datetime.fromtimestamp(secs).astimezone()
        if isinstance(value, str) and value.strip():
            ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return ts if ts.tzinfo else ts.astimezone()
    except (ValueError, OverflowError, OSError):
        return None
    return None


def local(ts: datetime) -> datetime:
    return ts.astimezone().replace(tzinfo=None)


def block_text(content: object) -> str:
    """The text of a message's content: a string, or the text parts of a list of blocks or parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, str):
                parts.append(b)
            elif isinstance(b, dict) and b.get("type") in (None, "text", "input_text", "output_text"):
                t = b.get("text")
                if isinstance(t, str):
                    parts.append(t)
        return "\n".join(p for p in parts if p.strip())
    return ""


def _message(
    role: object, content: object, at: datetime, *, sender: object = None, name: object = None
) -> Message | None:
    if role not in ("user", "assistant"):
        return None
    text = clean_text(block_text(content)).strip()
    if not text:
        return None
    who = str(sender) if role == "user" and isinstance(sender, str | int) and str(sender).strip() else None
    shown = str(name) if role == "user" and isinstance(name, str) and name.strip() else None
    return Message(str(role), text, at, who, shown)


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(os.lstat(path).st_mtime).astimezone()


def split_by_day(key: str, messages: list[Message]) -> list[Conversation]:
    """Messages without a conversation id of their own, one conversation per day they were said on."""
    out: list[Conversation] = []
    run: list[Message] = []
    for m in messages:
        if run and local(m.at).date() != local(run[0].at).date():
            out.append(Conversation(f"{key}@{local(run[0].at).date()}", tuple(run)))
            run = []
        run.append(m)
    if run:
        out.append(Conversation(f"{key}@{local(run[0].at).date()}", tuple(run)))
    return out


# ----- facts and history ----------------------------------------------------------------------------------------
def memory_facts(path: Path, root: Path) -> list[Dated]:
    """The facts of a MEMORY.md (headings give sections), learned on the day each names, else the file's day."""
    from memclaw.markdown.formats import fact_date
    from memclaw.markdown.memory_md import parse_memory

    text = read_text(path, root)
    when = local(_mtime(path))
    units = parse_memory(text, scope="owner", source=path.name)
    first = next((line for line in text.splitlines() if line.strip()), "")
    title = first[2:].strip() if first.startswith("# ") else None
    out = []
    for u in units:
        day, _ = fact_date(u.text)
        section = u.section
        if title and section and (section == title or section.startswith(title + " > ")):
            # the file's title ("# Long-term Memory") is not a section of its facts
            section = section[len(title) + 3 :] or None
        out.append(Dated(u.text, day or when, section))
    return out


def history_md(path: Path, root: Path) -> list[Dated]:
    """Entries of a HISTORY.md in nanobot's (and memclaw's) shape: each starts `[YYYY-MM-DD HH:MM]`, a blank line
    between; an entry without a stamp takes the file's time."""
    text = read_text(path, root)
    fallback = local(_mtime(path))
    out: list[Dated] = []
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if not block:
            continue
        m = _STAMP.match(block)
        at = fallback
        if m:
            try:
                at = datetime.fromisoformat(f"{m.group(1)} {m.group(2) or '00'}:{m.group(3) or '00'}")
            except ValueError:
                at = fallback
            block = block[m.end() :].strip()
        if block:
            out.append(Dated(block, at))
    return out


def history_jsonl(path: Path, root: Path) -> list[Dated]:
    fallback = local(_mtime(path))
    out = []
    for _, rec in read_jsonl(path, root):
        text = rec.get("content")
        if not isinstance(text, str) or not text.strip():
            continue
        text = clean_text(text).strip()
        ts = parse_time(rec.get("timestamp"))
        m = _STAMP.match(text)
        if m:
            text = text[m.end() :].strip()
        out.append(Dated(text, local(ts) if ts else fallback))
    return out


def daily_notes(folder: Path, root: Path) -> list[Dated]:
    """OpenClaw's daily notes: each `# heading` section of `memory/YYYY-MM-DD[-slug].md` is one history entry of
    that day (the whole file when it has no headings)."""
    out: list[Dated] = []
    for p in _files(folder, "*.md"):
        m = _DAY_FILE.match(p.name)
        if not m:
            continue
        try:
            day = datetime.fromisoformat(m.group(1))
        except ValueError:
            continue
        for part in re.split(r"\n(?=#{1,6} )", "\n" + read_text(p, root)):
            head, _, body = part.strip().partition("\n")
            if not head.startswith("#"):
                head, body = "", part.strip()
            body = body.strip()
            if body:
                title = head.lstrip("#").strip()
                out.append(Dated(f"{title}: {body}" if title else body, day))
    return out


# ----- the four sources -----------------------------------------------------------------------------------------
def chatgpt_conversations(path: Path, root: Path) -> list[Conversation]:
    data = read_json(path, root)
    if not isinstance(data, list):
        raise ImportSourceError(f"{path} is not a ChatGPT export (a list of conversations); pass conversations.json")
    out = []
    for i, conv in enumerate(data):
        if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
            raise ImportSourceError(
                f"{path}: conversation {i + 1} has no message tree (`mapping`); is this a ChatGPT export?"
            )
        key = str(conv.get("conversation_id") or conv.get("id") or i)
        start = parse_time(conv.get("create_time")) or _mtime(path)
        msgs: list[Message] = []
        at = start
        for node in _branch(conv["mapping"], conv.get("current_node")):
            msg = node.get("message") if isinstance(node, dict) else None
            if not isinstance(msg, dict):
                continue
            meta = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
            if meta.get("is_visually_hidden_from_conversation"):
                continue
            at = parse_time(msg.get("create_time")) or at
            content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
            if content.get("content_type") not in ("text", "multimodal_text"):
                continue
            author = msg.get("author") if isinstance(msg.get("author"), dict) else {}
            m = _message(author.get("role"), content.get("parts"), at)
            if m:
                msgs.append(m)
        if msgs:
            out.append(Conversation(f"chatgpt:{key}", tuple(msgs)))
    return out


def _branch(mapping: dict[str, Any], current: object) -> list[dict[str, Any]]:
    """The nodes from the root to `current_node` (the branch the user saw), guarded against cycles; without a
    current node, the first child all the way down."""
    if isinstance(current, str) and current in mapping:
        path, seen, node_id = [], set(), current
        while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
            seen.add(node_id)
            path.append(mapping[node_id])
            node_id = mapping[node_id].get("parent") if isinstance(mapping[node_id], dict) else None
        return path[::-1]
    roots = [n for n in mapping.values() if isinstance(n, dict) and not n.get("parent")]
    path, seen = [], set()
    node = roots[0] if roots else None
    while isinstance(node, dict) and id(node) not in seen:
        seen.add(id(node))
        path.append(node)
        kids = node.get("children") or []
        node = mapping.get(kids[0]) if kids and isinstance(kids[0], str) else None
    return path


def jsonl_messages(path: Path, root: Path, *, nested: bool = False) -> list[tuple[str | None, Message]]:
    """(conversation id, message) of a JSONL of messages; `nested`: OpenClaw's `{"type": "message", "message":
    {...}}` entries. A message without a time takes the one before it (the file's time for the first)."""
    out: list[tuple[str | None, Message]] = []
    at = _mtime(path)
    for _, rec in read_jsonl(path, root):
        if nested:
            if rec.get("type") != "message" or not isinstance(rec.get("message"), dict):
                continue
            body = rec["message"]
            at = parse_time(rec.get("timestamp")) or parse_time(body.get("timestamp")) or at
        else:
            body = rec
            at = parse_time(rec.get("ts") or rec.get("timestamp") or rec.get("created_at")) or at
        content = body.get("content") if "content" in body else body.get("text")
        m = _message(body.get("role"), content, at, sender=body.get("sender"), name=body.get("name"))
        if m:
            conv = rec.get("conversation") or rec.get("conversation_id")
            out.append((str(conv) if isinstance(conv, str | int) else None, m))
    return out


def plain_jsonl(path: Path, root: Path) -> list[Conversation]:
    """A JSONL of messages: grouped by `conversation` when lines carry one, else one conversation per day."""
    groups: dict[str, list[Message]] = {}
    loose: list[Message] = []
    for conv, m in jsonl_messages(path, root):
        if conv is None:
            loose.append(m)
        else:
            groups.setdefault(conv, []).append(m)
    out = [Conversation(f"jsonl:{path.name}:{k}", tuple(v)) for k, v in groups.items()]
    return out + split_by_day(f"jsonl:{path.name}", loose)


def read_source(kind: str, path: Path) -> Source:
    """Everything `path` holds in format `kind`, validated whole (ImportSourceError for anything broken)."""
    path = Path(path)
    if kind not in KINDS:
        raise ImportSourceError(f"unknown source {kind!r}; use one of {', '.join(KINDS)}")
    if not path.exists():
        raise ImportSourceError(f"{path} does not exist; give the folder or file to import")
    if kind == "chatgpt":
        file = path / "conversations.json" if path.is_dir() else path
        root = file.parent
        return Source(kind, file, conversations=chatgpt_conversations(file, root), files=1)
    if kind == "jsonl":
        files = _files(path, "*.jsonl") if path.is_dir() else [path]
        root = path if path.is_dir() else path.parent
        src = Source(kind, path, files=len(files))
        for f in files:
            src.conversations += plain_jsonl(f, root)
        return src
    if not path.is_dir():
        raise ImportSourceError(f"{path} is not a folder; give the {kind} workspace folder")
    if kind == "nanobot":
        return _nanobot(path)
    if kind == "openclaw":
        return _openclaw(path)
    raise ImportSourceError(f"unknown source {kind!r}; use one of {', '.join(KINDS)}")


def _nanobot(root: Path) -> Source:
    src = Source("nanobot", root)
    mem = root / "memory"
    if (mem / "MEMORY.md").exists():
        src.facts = memory_facts(mem / "MEMORY.md", root)
        src.files += 1
    if (mem / "history.jsonl").exists():
        src.history = history_jsonl(mem / "history.jsonl", root)
        src.files += 1
    elif (mem / "HISTORY.md").exists():
        src.history = history_md(mem / "HISTORY.md", root)
        src.files += 1
    for f in _files(root, "sessions/*.jsonl"):
        src.files += 1
        src.conversations += split_by_day(f"nanobot:{f.name}", [m for _, m in jsonl_messages(f, root)])
    if not src.files:
        raise ImportSourceError(
            f"{root} holds no nanobot memory (memory/MEMORY.md, memory/history.jsonl or HISTORY.md, sessions/); "
            "give the nanobot workspace folder"
        )
    return src


def _openclaw(root: Path) -> Source:
    """`root` is OpenClaw's state folder (`~/.openclaw`, holding `workspace/` and `agents/`) or its workspace."""
    src = Source("openclaw", root)
    ws = root / "workspace" if (root / "workspace").is_dir() else root
    if ws != root:
        _refuse_links(ws, root)
    for name in ("MEMORY.md", "memory.md"):
        if (ws / name).exists():
            src.facts = memory_facts(ws / name, root)
            src.files += 1
            break
    if (ws / "memory").is_dir():
        src.history = daily_notes(ws / "memory", root)
        src.files += 1
    for f in _files(root, "agents/*/sessions/*.jsonl"):
        src.files += 1
        msgs = [m for _, m in jsonl_messages(f, root, nested=True)]
        if msgs:
            agent = f.parent.parent.name
            src.conversations.append(Conversation(f"openclaw:{agent}:{f.stem}", tuple(msgs)))
    if not src.files:
        raise ImportSourceError(
            f"{root} holds no OpenClaw memory (MEMORY.md, memory/YYYY-MM-DD.md, agents/*/sessions/*.jsonl); give "
            "the OpenClaw folder (~/.openclaw) or its workspace"
        )
    return src
