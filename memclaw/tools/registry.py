"""The agent's tools: JSON-schema definitions for the model, argument validation, and execution.

Tools by sender: the owner gets the file tools (`read_file`, `write_file`, `edit_file`, `list_dir`), `exec` (when
`agent.exec_enabled`) and the memory tools; anyone else gets only `memory_search` and `remember`, on their own
scope. A tool the sender may not use is reported as unknown.

Nothing a model sends can crash a turn: an unknown tool, arguments that are not JSON or do not validate, or a tool
that fails all come back as a tool result starting with "Error:" so the model can correct itself.

File tools are confined to the workspace (`agent.restrict_to_workspace`) and never follow a symlink inside it (a
link could lead outside it or into another person's memory: see memclaw.util.safepath); the derived index and the
session files are never writable through them.
A write into `memory/` is followed by an index sync of that scope. `exec` runs in the workspace with a timeout, an
output cap, an environment without secrets, and a deny list for destructive commands; it is a guard against
accidents, not a sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memclaw.config import config_secrets
from memclaw.errors import MemclawError
from memclaw.util.files import replace_atomically
from memclaw.util.jsonfix import extract_json
from memclaw.util.redact import environment_without_secrets
from memclaw.util.safepath import read_nofollow, symlink_below

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 16_000
MAX_READ_BYTES = 200_000
MAX_EXEC_OUTPUT = 10_000
MAX_LIST_ENTRIES = 300

DENY_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"\brm\s+(?:-\S+\s+)*-[a-zA-Z]*[rRf][a-zA-Z]*\s+(?:-\S+\s+)*(?:/\*?|~/?|\$HOME/?|\.\./?|\*|\.)(?:\s|;|&|\||$)"
        ),
        "recursive/forced rm of /, ~, .., . or *",
    ),
    (re.compile(r"\brm\s+(?:-\S+\s+)*--no-preserve-root\b"), "rm --no-preserve-root"),
    (
        re.compile(r"\b(?:mkfs(?:\.\w+)?|wipefs|fdisk|sfdisk|parted|diskpart)\b"),
        "formatting or partitioning disks",
    ),
    (re.compile(r"\bdd\b[^|;&]*\b(?:if|of)=/dev/"), "dd on a device"),
    (re.compile(r">\s*/dev/(?:sd|nvme|hd|vd|xvd|mmcblk|disk)"), "writing to a block device"),
    (
        re.compile(
            r"(?:^|[;&|(`]|\bsudo|\bexec)\s*(?:shutdown|reboot|poweroff|halt|init\s+[06])(?:\s|;|&|\||\)|$)"
            r"|\bsystemctl\s+(?:poweroff|reboot|halt)\b"
        ),
        "shutting down or rebooting the machine",
    ),
    (re.compile(r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:[^}]*\}\s*;?\s*:"), "a fork bomb"),
    (re.compile(r"\bchmod\s+(?:-\S+\s+)*-[a-zA-Z]*R[a-zA-Z]*\s+\S+\s+/(?:\s|$)"), "recursive chmod of /"),
    (re.compile(r"\bchown\s+(?:-\S+\s+)*-[a-zA-Z]*R[a-zA-Z]*\s+\S+\s+/(?:\s|$)"), "recursive chown of /"),
]


def denied_reason(command: str) -> str | None:
    """Why `command` is refused by the deny list, or None."""
    for pat, why in DENY_PATTERNS:
        if pat.search(command):
            return why
    return None


@dataclass
class ToolContext:
    """Who is calling and with what: the workspace root, config, the caller's memory scope and owner flag."""

    root: Path
    config: Config
    scope: str
    is_owner: bool
    memory: MemoryService | None = None


class ToolFailure(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


# ----- argument models (their JSON schema is what the model sees) ------------------------------------------------
class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace (or absolute inside it).")


class WriteFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace. Parent folders are created.")
    content: str = Field(description="The complete new content of the file.")


class EditFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace.")
    old_text: str = Field(description="Exact text to replace; must occur exactly once in the file.", min_length=1)
    new_text: str = Field(description="Replacement text.")


class ListDirArgs(_Args):
    path: str = Field(".", description="Directory, relative to the workspace (default: the workspace itself).")


class ExecArgs(_Args):
    command: str = Field(description="Shell command, run in the workspace directory.", min_length=1)


class MemorySearchArgs(_Args):
    query: str = Field(description="What to look for, in natural language or keywords.", min_length=1)
    k: int = Field(5, ge=1, le=20, description="How many memories to return.")
    kind: Literal["fact", "history"] | None = Field(
        None, description="Only facts (MEMORY.md) or only history entries (HISTORY.md); default both."
    )


class RememberArgs(_Args):
    text: str = Field(description="The fact, as one self-contained sentence.", min_length=1, max_length=2000)
    section: str | None = Field(None, description="Optional heading to file it under, e.g. 'Work' (default: 'Notes').")


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    s = model.model_json_schema()

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: clean(v) for k, v in node.items() if k != "title"}
            if "anyOf" in node:  # Optional[X]: show X, nullable (simpler for small models)
                non_null = [x for x in node["anyOf"] if x.get("type") != "null"]
                if len(non_null) == 1:
                    rest = {k: v for k, v in node.items() if k != "anyOf"}
                    node = {**non_null[0], **rest}
            return node
        if isinstance(node, list):
            return [clean(x) for x in node]
        return node

    s = clean(s)
    s.setdefault("properties", {})
    s["additionalProperties"] = False
    return s


# ----- tools --------------------------------------------------------------------------------------------------
_DEFINITIONS: dict[tuple[Any, ...], dict[str, Any]] = {}


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[_Args]]
    owner_only: ClassVar[bool] = True
    # A longer description the model reads lives in memclaw/prompts/<description_template>.md, not in code.
    description_template: ClassVar[str | None] = None

    def available(self, ctx: ToolContext) -> bool:
        return ctx.is_owner or not self.owner_only

    def definition(self) -> dict[str, Any]:
        """The OpenAI tool definition; built once per tool class (pydantic's JSON schema costs ~0.5 ms a tool,
        on every turn otherwise) and copied, so a caller that changes it cannot change the next turn's."""
        key = (type(self), self.name, self.description, self.description_template)
        cached = _DEFINITIONS.get(key)
        if cached is None:
            desc = self.description
            if self.description_template:
                from memclaw.prompts import render

                desc = render(self.description_template)
            cached = {
                "type": "function",
                "function": {"name": self.name, "description": desc, "parameters": _schema(self.Args)},
            }
            _DEFINITIONS[key] = cached
        return json.loads(json.dumps(cached))

    def run(self, args: Any, ctx: ToolContext) -> str:  # blocking; executed in a worker thread
        raise NotImplementedError


def _resolve(ctx: ToolContext, raw: str, *, write: bool = False) -> Path:
    """The path a file tool may use for `raw`: inside the workspace (unless agent.restrict_to_workspace is off) and
    never through a symlink inside it (a link could reach a file outside, or another person's memory), so the
    path's text says where it lands. Returned with the workspace's real location as its root."""
    root = ctx.root.resolve()
    p = Path(os.path.expanduser(raw.strip() or "."))
    if not p.is_absolute():
        p = root / p
    p = Path(os.path.normpath(p))  # lexically: with no symlink below the root, this is where the path lands
    base = next((b for b in (root, Path(os.path.abspath(ctx.root))) if p.is_relative_to(b)), None)
    if base is not None:
        p = root / p.relative_to(base)
        link = symlink_below(p, root)
        if link is not None:
            raise ToolFailure(
                f"{raw!r} goes through the symlink {_display(ctx, link)}; file tools do not follow symlinks in the "
                "workspace (a link could lead outside the workspace or into another person's memory)"
            )
    elif ctx.config.agent.restrict_to_workspace:
        raise ToolFailure(f"{raw!r} is outside the workspace; only paths under the workspace can be used")
    else:
        p = p.resolve()
        if p.is_relative_to(root / "memory"):
            raise ToolFailure(f"{raw!r} leads into the workspace's memory through a symlink; use the memory path")
    if write and p.is_relative_to(root):
        rel = p.relative_to(root).parts
        if rel and rel[0] in (".memclaw-index", "sessions"):
            raise ToolFailure(f"{raw!r} is managed by memclaw (index or sessions) and cannot be written")
        index_dir = ctx.config.memory.index_dir
        if index_dir and p.is_relative_to(Path(index_dir).resolve()):
            raise ToolFailure(f"{raw!r} is the memory index and cannot be written; edit memory/*.md instead")
    return p


def _display(ctx: ToolContext, p: Path) -> str:
    root = ctx.root.resolve()
    return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)


def _after_memory_write(ctx: ToolContext, p: Path) -> str:
    """Sync the index when a memory Markdown file was written by a tool; returns a note for the result."""
    root = ctx.root.resolve()
    if ctx.memory is None or not p.is_relative_to(root / "memory") or p.suffix != ".md":
        return ""
    from memclaw.markdown.units import OWNER_SCOPE, scope_from_dirname

    rel = p.relative_to(root / "memory").parts
    scope = scope_from_dirname(rel[1]) if len(rel) >= 3 and rel[0] == "people" else OWNER_SCOPE
    try:
        ctx.memory.sync([scope])
    except MemclawError as e:
        log.warning("index sync after writing %s failed: %s", p, e)
        return f" (the memory index could not be updated yet: {e})"
    return " (memory index updated)"


class ReadFile(Tool):
    name = "read_file"
    description = "Read a text file from the workspace."
    Args = ReadFileArgs

    def run(self, args: ReadFileArgs, ctx: ToolContext) -> str:
        p = _resolve(ctx, args.path)
        if not p.exists():
            raise ToolFailure(f"{args.path!r} does not exist")
        if p.is_dir():
            raise ToolFailure(f"{args.path!r} is a directory; use list_dir")
        data = read_nofollow(p, MAX_READ_BYTES + 1)
        if b"\x00" in data[:8192]:
            raise ToolFailure(f"{args.path!r} is a binary file ({p.stat().st_size} bytes)")
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            text += f"\n[... file truncated at {MAX_READ_BYTES} bytes of {p.stat().st_size}]"
        return text


class WriteFile(Tool):
    name = "write_file"
    description = "Create or overwrite a text file in the workspace with the given content."
    Args = WriteFileArgs

    def run(self, args: WriteFileArgs, ctx: ToolContext) -> str:
        p = _resolve(ctx, args.path, write=True)
        if p.is_dir():
            raise ToolFailure(f"{args.path!r} is a directory")
        data = args.content.encode("utf-8")
        replace_atomically(p, data)
        note = _after_memory_write(ctx, p)
        return f"Wrote {len(data)} bytes to {_display(ctx, p)}{note}"


class EditFile(Tool):
    name = "edit_file"
    description = "Replace one exact occurrence of old_text with new_text in a workspace file."
    Args = EditFileArgs

    def run(self, args: EditFileArgs, ctx: ToolContext) -> str:
        p = _resolve(ctx, args.path, write=True)
        if not p.is_file():
            raise ToolFailure(f"{args.path!r} does not exist or is not a file")
        text = read_nofollow(p).decode("utf-8")
        n = text.count(args.old_text)
        if n == 0:
            raise ToolFailure(f"old_text was not found in {args.path!r}; read the file and copy the text exactly")
        if n > 1:
            raise ToolFailure(f"old_text occurs {n} times in {args.path!r}; include more context to make it unique")
        replace_atomically(p, text.replace(args.old_text, args.new_text, 1).encode("utf-8"))
        note = _after_memory_write(ctx, p)
        return f"Edited {_display(ctx, p)}{note}"


class ListDir(Tool):
    name = "list_dir"
    description = "List a workspace directory (folders end with '/')."
    Args = ListDirArgs

    def run(self, args: ListDirArgs, ctx: ToolContext) -> str:
        p = _resolve(ctx, args.path)
        if not p.is_dir():
            raise ToolFailure(f"{args.path!r} is not a directory")
        entries = sorted(p.iterdir(), key=lambda e: (not e.is_dir(), e.name.lower()))
        lines = []
        for e in entries[:MAX_LIST_ENTRIES]:
            if e.is_dir():
                lines.append(e.name + "/")
            else:
                with contextlib.suppress(OSError):
                    lines.append(f"{e.name} ({e.stat().st_size} bytes)")
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries]")
        return "\n".join(lines) if lines else "(empty directory)"


class Exec(Tool):
    name = "exec"
    description = "Run a shell command in the workspace directory and return its output (with a timeout)."
    Args = ExecArgs

    def available(self, ctx: ToolContext) -> bool:
        return ctx.is_owner and ctx.config.agent.exec_enabled

    def run(self, args: ExecArgs, ctx: ToolContext) -> str:
        why = denied_reason(args.command)
        if why:
            raise ToolFailure(f"command refused by the safety deny list ({why})")
        env = environment_without_secrets(os.environ, config_secrets(ctx.config))
        timeout = ctx.config.agent.exec_timeout_s
        proc = subprocess.Popen(
            args.command,
            shell=True,
            cwd=ctx.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # Read both pipes as they fill, keeping only a head and a tail of each: a command that prints gigabytes
        # (`yes`, `cat /dev/urandom | base64`) costs bounded memory until the timeout kills it.
        out, err = _BoundedReader(proc.stdout), _BoundedReader(proc.stderr)
        code: int | None = None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)  # the shell is not reaped yet, so its group id cannot have been reused
            proc.wait()
        finally:
            if code is None and proc.returncode is None:  # interrupted: never leave the command running
                _kill_group(proc.pid)
                proc.wait()
        if not (out.join(2.0) and err.join(2.0)):  # a background child still holds a pipe: end it (its group
            _kill_group(proc.pid)  # exists while that child lives, so the id is still ours)
        text = _fmt_exec(out.result(), err.result(), code)
        text = _cap(text)
        if code is None:
            text += f"\n[killed after the {timeout:g}s timeout]"
        return text


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _BoundedReader:
    """Drains a pipe in a thread, keeping the first and last `limit // 2` bytes and counting the rest."""

    def __init__(self, pipe: Any, limit: int = MAX_EXEC_OUTPUT) -> None:
        import threading

        self.pipe = pipe
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._run, name="exec-output", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536):
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > self.half:
                        del self.tail[: len(self.tail) - self.half]
        with contextlib.suppress(OSError):
            self.pipe.close()

    def join(self, timeout: float) -> bool:
        """Wait for the pipe's end of file; False if it is still open after `timeout` seconds."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def result(self) -> bytes:
        self.thread.join(timeout=5)
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return bytes(self.head + self.tail)
        return bytes(self.head) + f"\n[... {omitted} bytes omitted ...]\n".encode() + bytes(self.tail)


def _fmt_exec(out: bytes, err: bytes, code: int | None) -> str:
    parts = []
    if out:
        parts.append(out.decode("utf-8", "replace").rstrip())
    if err:
        parts.append("[stderr]\n" + err.decode("utf-8", "replace").rstrip())
    if code is not None:
        parts.append(f"[exit code {code}]")
    return "\n".join(parts) if parts else "(no output)"


def _cap(text: str, limit: int = MAX_EXEC_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-limit // 3 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n{tail}"


class MemorySearch(Tool):
    name = "memory_search"
    description = "Search long-term memory."  # the model sees memclaw/prompts/tool_memory_search.md
    description_template = "tool_memory_search"
    Args = MemorySearchArgs
    owner_only = False

    def run(self, args: MemorySearchArgs, ctx: ToolContext) -> str:
        if ctx.memory is None:
            raise ToolFailure("memory is not available in this session")
        hits = ctx.memory.recall(args.query, scope=ctx.scope, k=args.k, kind=args.kind)
        hits = [h for h in hits if h.unit.scope == ctx.scope]
        if not hits:
            return "No matching memories."
        lines = []
        for i, h in enumerate(hits, 1):
            u = h.unit
            meta = [u.kind]
            if u.timestamp:
                meta.append(u.timestamp.strftime("%Y-%m-%d %H:%M" if u.kind == "history" else "%Y-%m-%d"))
            if u.section:
                meta.append(u.section)
            lines.append(f"{i}. [{u.id}] ({', '.join(meta)}) {u.text}")
        return "\n".join(lines)


class Remember(Tool):
    name = "remember"
    description = "Save one durable fact to long-term memory right away (e.g. a preference, a name, a date)."
    Args = RememberArgs
    owner_only = False

    def run(self, args: RememberArgs, ctx: ToolContext) -> str:
        if ctx.memory is None:
            raise ToolFailure("memory is not available in this session")
        unit = ctx.memory.add_fact(args.text, scope=ctx.scope, section=args.section)
        return f"Remembered [{unit.id}]: {unit.text}"


DEFAULT_TOOLS: tuple[type[Tool], ...] = (ReadFile, WriteFile, EditFile, ListDir, Exec, MemorySearch, Remember)


def outsider_tool_names() -> list[str]:
    """The tools a non-owner may use (the outsider's prompt names these and no others)."""
    return [t.name for t in DEFAULT_TOOLS if not t.owner_only]


@dataclass
class ToolResult:
    content: str
    ok: bool


class ToolRegistry:
    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools if tools is not None else [cls() for cls in DEFAULT_TOOLS]:
            self._tools[t.name] = t

    def register(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def available(self, ctx: ToolContext) -> list[Tool]:
        return [t for t in self._tools.values() if t.available(ctx)]

    def names(self, ctx: ToolContext) -> list[str]:
        return [t.name for t in self.available(ctx)]

    def definitions(self, ctx: ToolContext) -> list[dict[str, Any]]:
        return [t.definition() for t in self.available(ctx)]

    def validate(self, name: str, arguments: str | dict[str, Any] | None, ctx: ToolContext) -> tuple[Tool, Any]:
        """The tool and its validated arguments; raises ToolFailure with a message for the model."""
        tool = self._tools.get(name)
        if tool is None or not tool.available(ctx):
            raise ToolFailure(f"unknown tool {name!r}; available tools: {', '.join(self.names(ctx)) or 'none'}")
        if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
            data: Any = {}
        elif isinstance(arguments, str):
            try:
                data = extract_json(arguments)
            except ValueError as e:
                raise ToolFailure(f"arguments for {name} are not valid JSON ({e}); send a JSON object") from None
        else:
            data = arguments
        if not isinstance(data, dict):
            raise ToolFailure(f"arguments for {name} must be a JSON object")
        try:
            return tool, tool.Args.model_validate(data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in err['loc']) or '(arguments)'}: {err['msg']}" for err in e.errors()[:5]
            )
            params = ", ".join(tool.Args.model_fields)
            raise ToolFailure(f"invalid arguments for {name}: {problems} (parameters: {params})") from None

    async def execute(self, name: str, arguments: str | dict[str, Any] | None, ctx: ToolContext) -> ToolResult:
        """Run a tool; every failure becomes an "Error: ..." result, never an exception."""
        try:
            tool, args = self.validate(name, arguments, ctx)
            out = await asyncio.to_thread(tool.run, args, ctx)
            return ToolResult(_cap(out, MAX_RESULT_CHARS), True)
        except asyncio.CancelledError:
            raise
        except ToolFailure as e:
            return ToolResult(f"Error: {e}", False)
        except MemclawError as e:
            return ToolResult(f"Error: {name} failed: {e}", False)
        except (OSError, UnicodeDecodeError) as e:
            return ToolResult(f"Error: {name} failed: {getattr(e, 'strerror', None) or e}", False)
        except Exception as e:  # a bug in a tool must not end the conversation
            log.exception("tool %s crashed", name)
            return ToolResult(f"Error: {name} failed unexpectedly ({type(e).__name__}: {e})", False)
