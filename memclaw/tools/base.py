"""What every tool is: the caller's context (ToolContext), the failure a model reads (ToolFailure), the argument
models whose JSON schema the model sees, and the Tool base class with its cached OpenAI definition."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from memclaw.markdown.formats import clean_text

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService

MAX_RESULT_CHARS = 16_000


@dataclass
class ToolContext:
    """Who is calling and with what: the workspace root, config, the caller's memory scope and owner flag,
    whether the conversation is incognito (nothing of it is to be remembered), and what this turn wrote so far.
    One per turn."""

    root: Path
    config: Config
    scope: str
    is_owner: bool
    memory: MemoryService | None = None
    incognito: bool = False
    facts_written: int = 0
    """`remember` calls that wrote a fact in this turn (memclaw.tools.memory counts them against the turn's cap)."""
    fact_chars_written: int = 0


class ToolFailure(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


class Args(BaseModel):
    """The arguments of a tool (extra fields refused)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: Any) -> Any:
        """A lone surrogate in the model's arguments (JSON's "\\ud800") becomes U+FFFD: every text can be written."""
        return _cleaned(data)


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def schema(model: type[BaseModel]) -> dict[str, Any]:
    s = model.model_json_schema()

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: clean(v) for k, v in node.items() if k != "title"}
            # Optional[X]: show X, nullable (simpler for small models)
            if "anyOf" in node:
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


_DEFINITIONS: dict[tuple[Any, ...], dict[str, Any]] = {}


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[Args]]
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
                "function": {"name": self.name, "description": desc, "parameters": schema(self.Args)},
            }
            _DEFINITIONS[key] = cached
        return json.loads(json.dumps(cached))

    # Blocking; executed in a worker thread
    def run(self, args: Any, ctx: ToolContext) -> str:
        raise NotImplementedError


def cap(text: str, limit: int) -> str:
    """`text`, with its middle left out (and said so) when longer than `limit` characters."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-limit // 3 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n{tail}"
