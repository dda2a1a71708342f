"""The model's answer to a consolidation request: its shape (validated with pydantic), the check against the scope's
fact ids, and its fact operations as the memory layer takes them (memclaw.agent.consolidate sends the request)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memclaw.util.jsonfix import extract_object


class FactOpIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    op: Literal["add", "update", "delete"]
    id: str | None = None
    text: str | None = None
    section: str | None = None

    @model_validator(mode="after")
    def _check(self) -> FactOpIn:
        if self.text is not None:
            self.text = " ".join(self.text.split())
        if self.op in ("add", "update") and not self.text:
            raise ValueError(f"'{self.op}' needs a non-empty 'text'")
        if self.op in ("update", "delete") and not self.id:
            raise ValueError(f"'{self.op}' needs the 'id' of an existing fact")
        if self.section is not None:
            self.section = " ".join(self.section.split()) or None
        return self


class ConsolidationOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    history_entry: str = ""
    facts: list[FactOpIn] = Field(default_factory=list)


def parse_output(text: str | None, known_ids: set[str]) -> ConsolidationOut:
    """Validate the model's reply; raises ValueError with a message fit to send back to the model."""
    try:
        data = extract_object(text)
    except ValueError as e:
        raise ValueError(str(e)) from None
    try:
        out = ConsolidationOut.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or '(object)'}: {err['msg']}" for err in e.errors()[:5]
        )
        raise ValueError(f"the JSON does not match the expected shape ({problems})") from None
    unknown = [op.id for op in out.facts if op.op != "add" and op.id not in known_ids]
    if unknown:
        raise ValueError(f"unknown fact id(s) {', '.join(map(str, unknown))}: use only the ids listed")
    out.history_entry = " ".join(out.history_entry.split())
    return out


def to_fact_ops(ops: list[FactOpIn]) -> list[Any]:
    """Our validated ops -> memclaw.markdown.fact_ops.FactOp (the memory layer's type)."""
    from memclaw.markdown.fact_ops import FactOp

    return [FactOp(op=o.op, id=o.id, text=o.text, section=o.section) for o in ops]


def dumps_ops(ops: list[FactOpIn]) -> str:
    return json.dumps([o.model_dump(exclude_none=True) for o in ops], ensure_ascii=False)
