"""A test-side recorder around the real Agent: the turns it answered and the last consolidation it ran."""

from __future__ import annotations

from typing import Any

from memclaw.agent.consolidate import ConsolidationReport
from memclaw.agent.loop import Agent
from memclaw.agent.turn import AgentReply, InboundMessage, TurnRecord


class RecordingAgent(Agent):
    """The product Agent, keeping each turn's record and the last consolidation's report for assertions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turns: list[TurnRecord] = []
        self.last_consolidation: ConsolidationReport | None = None

    async def handle(self, message: InboundMessage) -> AgentReply:
        reply = await super().handle(message)
        self.turns.append(reply.record)
        return reply

    async def consolidate(self, channel: str, chat_id: str, *, everything: bool = False) -> ConsolidationReport:
        report = await super().consolidate(channel, chat_id, everything=everything)
        self.last_consolidation = report
        return report
