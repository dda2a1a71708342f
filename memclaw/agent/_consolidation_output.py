"""The model's consolidation answer and its validation: the one place where what the model wants written to memory
is checked, before anything is kept or written.

    {"history_entry": "...", "facts": [{"op": "add", "text": ..., "section": ...},
                                        {"op": "update", "id": ..., "text": ...}, {"op": "delete", "id": ...}]}

A reply that does not hold raises ValueError, with words fit to send back to the model. It does not hold when it is
not JSON, or an op lacks its text or id. It does not hold either when an id is not among the facts the prompt showed.
A fact or history entry over the size limit of a memory, or a section over that of a heading path, is refused too
(memclaw.markdown.unit_size). The consolidator then asks once more; a second bad reply fails the consolidation, and
the session is kept whole.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memclaw.markdown.archive import CID_LEN
from memclaw.markdown.unit_size import MAX_UNIT_CHARS, section_too_long, too_long
from memclaw.service.learned import mark_fact
from memclaw.util.jsonfix import extract_object

SHORTER_FACT = "write it as a short fact (long text belongs in a file, not in memory)"
SHORTER_ENTRY = "write a summary of a few sentences"
# Every consolidation id has this length
_PROBE_CID = "c" + "0" * (CID_LEN - 1)


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
        refused = (fact_too_long(self.text) if self.op != "delete" else None) or section_too_long(self.section)
        if refused:
            raise ValueError(refused)
        return self


class ConsolidationOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    history_entry: str = ""
    facts: list[FactOpIn] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> ConsolidationOut:
        self.history_entry = " ".join(self.history_entry.split())
        refused = too_long(self.history_entry, "history entry", SHORTER_ENTRY)
        if refused:
            raise ValueError(refused)
        return self


def fact_too_long(text: str | None) -> str | None:
    """Why a fact the model wrote cannot be kept: over the limit as it will be written (relative dates resolved,
    the learned-mark ` (YYYY-MM-DD #cid)` at its end: memclaw.service.learned), or None when it fits."""
    if not text:
        return None
    written = text if len(text) > MAX_UNIT_CHARS else mark_fact(text, date.today(), _PROBE_CID)
    return too_long(written, "fact", SHORTER_FACT)


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
            f"{'.'.join(str(x) for x in err['loc']) or '(object)'}: {err['msg'].removeprefix('Value error, ')}"
            for err in e.errors()[:5]
        )
        raise ValueError(f"the JSON does not match the expected shape ({problems})") from None
    unknown = [op.id for op in out.facts if op.op != "add" and op.id not in known_ids]
    if unknown:
        raise ValueError(f"unknown fact id(s) {', '.join(map(str, unknown))}: use only the ids listed")
    return out


def usable(answer: object) -> bool:
    """Whether an answer kept in a session (by an earlier attempt, maybe an older memclaw) still validates."""
    try:
        ConsolidationOut.model_validate(answer or {})
    except ValidationError:
        return False
    return True


def to_fact_ops(ops: list[FactOpIn]) -> list[Any]:
    """Our validated ops -> memclaw.markdown.fact_ops.FactOp (the memory layer's type)."""
    from memclaw.markdown.fact_ops import FactOp

    return [FactOp(op=o.op, id=o.id, text=o.text, section=o.section) for o in ops]
