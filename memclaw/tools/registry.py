"""The agent's tools: which there are, which a sender may use, argument validation, and execution (the tools
themselves: .files, .exec, .memory; their base: .base).

Tools by sender: the owner gets the file tools (`read_file`, `write_file`, `edit_file`, `list_dir`), `exec` (when
`agent.exec_enabled`) and the memory tools; anyone else gets only `memory_search` and `remember`, on their own
scope. A tool the sender may not use is reported as unknown.

Nothing a model sends can crash a turn. An unknown tool, arguments that do not validate, or a tool that fails all
come back as a tool result starting with "Error:", so the model can correct itself.

File tools are confined to the workspace (`agent.restrict_to_workspace`) and never follow a symlink inside it
(memclaw.util.safepath). The derived index and the session files are never writable through them.
A write into `memory/` is followed by an index sync of that scope. `exec` (off by default) runs in the workspace
inside a bubblewrap sandbox, with a timeout, an output cap and a deny list for destructive commands
(memclaw.tools.exec).
Every tool result is masked for the secret values memclaw knows before anyone sees it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from memclaw.config import config_secrets
from memclaw.errors import MemclawError
from memclaw.tools.base import MAX_RESULT_CHARS, Tool, ToolContext, ToolFailure, cap
from memclaw.tools.exec import Exec
from memclaw.tools.files import EditFile, ListDir, ReadFile, WriteFile
from memclaw.tools.memory import MemorySearch, Remember
from memclaw.util.jsonfix import extract_json
from memclaw.util.redact import redact_text

log = logging.getLogger(__name__)


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
        """Run a tool; every failure becomes an "Error: ..." result, never an exception. Every known secret value in
        the result (the config's keys and tokens, the environment's secrets, URL credentials) is masked, so none
        reaches the model, the session file or the terminal."""
        res = await self._execute(name, arguments, ctx)
        return ToolResult(redact_text(res.content, config_secrets(ctx.config)), res.ok)

    async def _execute(self, name: str, arguments: str | dict[str, Any] | None, ctx: ToolContext) -> ToolResult:
        try:
            tool, args = self.validate(name, arguments, ctx)
            out = await asyncio.to_thread(tool.run, args, ctx)
            return ToolResult(cap(out, MAX_RESULT_CHARS), True)
        except asyncio.CancelledError:
            raise
        except ToolFailure as e:
            return ToolResult(f"Error: {e}", False)
        except MemclawError as e:
            return ToolResult(f"Error: {name} failed: {e}", False)
        except (OSError, UnicodeDecodeError) as e:
            return ToolResult(f"Error: {name} failed: {getattr(e, 'strerror', None) or e}", False)
        # A bug in a tool must not end the conversation
        except Exception as e:
            log.exception("tool %s crashed", name)
            return ToolResult(f"Error: {name} failed unexpectedly ({type(e).__name__}: {e})", False)
