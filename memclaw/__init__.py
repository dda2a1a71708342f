"""memclaw: a personal AI assistant with real long-term memory.

The layout is the pipeline (ARCHITECTURE.md): markdown -> index -> recall -> context -> agent -> channels, with one
package per external system (llm, store, embedding, channels.discord). The names below are the public surface for
code that embeds memclaw; they load lazily, so `import memclaw` imports none of the heavy libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Agent": "memclaw.agent.loop",
    "AgentReply": "memclaw.agent.turn",
    "BuiltContext": "memclaw.context.builder",
    "Config": "memclaw.config",
    "MemclawError": "memclaw.errors",
    "MemoryService": "memclaw.service.facade",
    "MemoryUnit": "memclaw.markdown.units",
    "RecallHit": "memclaw.recall.results",
    "RecallResult": "memclaw.recall.results",
    "Sender": "memclaw.context.senders",
    "Workspace": "memclaw.workspace",
    "build_messages": "memclaw.context.builder",
    "load_config": "memclaw.config",
    "resolve_workspace": "memclaw.workspace",
}

__all__ = [
    "__version__",
    "Agent",
    "AgentReply",
    "BuiltContext",
    "Config",
    "MemclawError",
    "MemoryService",
    "MemoryUnit",
    "RecallHit",
    "RecallResult",
    "Sender",
    "Workspace",
    "build_messages",
    "load_config",
    "resolve_workspace",
]

if TYPE_CHECKING:
    from memclaw.agent.loop import Agent
    from memclaw.agent.turn import AgentReply
    from memclaw.config import Config, load_config
    from memclaw.context.builder import BuiltContext, build_messages
    from memclaw.context.senders import Sender
    from memclaw.errors import MemclawError
    from memclaw.markdown.units import MemoryUnit
    from memclaw.recall.results import RecallHit, RecallResult
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace, resolve_workspace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memclaw' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
