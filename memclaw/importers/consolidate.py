"""`memclaw import --consolidate`: the imported conversations consolidated by the user's model, as memclaw's agent
consolidates a session (memclaw.agent.consolidate), so facts and history entries are written the one way.

Each conversation becomes a session of its own under `sessions/import/`, holding exactly the messages the import
archived, so its consolidation id is the archive chunk's and the archive step is found done. The consolidator keeps
the model's answers in the session before it writes (a crash or Ctrl-C resumes them without a new model call);
a conversation done is noted in `sessions/import/done.txt` and its session file removed. Run again, the import
consolidates only the conversations not noted.

`estimate` is what it will cost before it starts: the prompt of each conversation counted with the model's tokenizer
(memclaw.llm.tokens), plus the prompt template and an answer of ANSWER_TOKENS, priced with litellm's offline price
list when it knows the model.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.importers.run import Item

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService

ANSWER_TOKENS = 400
"""The answer assumed per conversation and scope (a history entry and a few facts) for the estimate."""
TEMPLATE_TOKENS = 900
"""The consolidation prompt around the conversation (instructions, the scope's facts) for the estimate."""
CHANNEL = "import"
DONE_FILE = "done.txt"


@dataclass
class Estimate:
    conversations: int
    input_tokens: int
    output_tokens: int
    # USD; None when litellm has no price for the model
    cost: float | None
    model: str

    def line(self) -> str:
        price = f"about ${self.cost:,.2f}" if self.cost is not None else "cost unknown (no price for this model)"
        return (
            f"consolidating {self.conversations:,} conversations with {self.model}: about {self.input_tokens:,} "
            f"input and {self.output_tokens:,} output tokens, {price}"
        )

    def to_json(self) -> dict[str, Any]:
        return {"conversations": self.conversations, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": self.cost, "model": self.model}  # fmt: skip


def conversations(items: list[Item], done: set[str]) -> list[tuple[str, tuple[dict[str, Any], ...]]]:
    """(id, session messages) of each conversation among `items` not consolidated yet, in order."""
    seen: dict[str, tuple[dict[str, Any], ...]] = {}
    for i in items:
        if i.kind == "conversation" and i.record.cid not in done and i.record.cid not in seen:
            seen[i.record.cid] = i.messages
    return list(seen.items())


def estimate(config: Config, convs: list[tuple[str, tuple[dict[str, Any], ...]]]) -> Estimate:
    from memclaw.agent.conversation import format_conversation, group_by_scope
    from memclaw.llm.client import model_info
    from memclaw.llm.tokens import count_tokens
    from memclaw.markdown.units import OWNER_SCOPE

    model = config.agent.model
    tokens_in = tokens_out = 0
    for _, msgs in convs:
        for part in group_by_scope(list(msgs), OWNER_SCOPE).values():
            tokens_in += count_tokens(format_conversation(part, config.agent.name), model) + TEMPLATE_TOKENS
            tokens_out += ANSWER_TOKENS
    info = model_info(model)
    cin, cout = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    cost = tokens_in * float(cin) + tokens_out * float(cout) if cin is not None and cout is not None else None
    return Estimate(len(convs), tokens_in, tokens_out, cost, model)


def done_path(memory: MemoryService) -> Path:
    return memory.workspace.sessions_dir / CHANNEL / DONE_FILE


def read_done(memory: MemoryService) -> set[str]:
    try:
        return set(done_path(memory).read_text("utf-8").split())
    except FileNotFoundError:
        return set()


def _note_done(path: Path, cid: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(cid + "\n")
        f.flush()
        os.fsync(f.fileno())


def consolidate(
    memory: MemoryService, config: Config, convs: list[tuple[str, tuple[dict[str, Any], ...]]], *, advance: Any = None
) -> int:
    """Consolidate each conversation with the configured model; how many were. LLMError or ConsolidationError
    (exit 5) stops at the first that fails: those done stay done."""
    return asyncio.run(_consolidate(memory, config, convs, advance))


async def _consolidate(memory: MemoryService, config: Config, convs: list[Any], advance: Any) -> int:
    from memclaw.agent.consolidate import Consolidator
    from memclaw.agent.sessions import SessionStore
    from memclaw.errors import ConsolidationError
    from memclaw.llm.client import LLMClient

    llm = LLMClient(config)
    llm.check_key()
    store = SessionStore(memory.workspace.sessions_dir / CHANNEL)
    store.root.mkdir(parents=True, exist_ok=True)
    consolidator = Consolidator(config, llm, memory, store)
    done_file = done_path(memory)
    n = 0
    for cid, msgs in convs:
        session = store.load(CHANNEL, cid)
        if not session.messages:
            store.append(session, *msgs)
        report = await consolidator.consolidate(session, everything=True)
        if not report.ok:
            raise ConsolidationError(
                f"consolidating an imported conversation failed: {report.error}; the {n} done are kept: run the "
                "same import again to go on"
            )
        _note_done(done_file, cid)
        for suffix in ("", ".lock", ".consolidation.lock", ".turn.lock"):
            Path(f"{session.path}{suffix}").unlink(missing_ok=True)
        n += 1
        if advance is not None:
            advance(1)
    return n
