"""The re-ranking seam: after fusion, a re-ranker the user configures (recall.rerank) may reorder the first
`top_n` hits. Off by default; see docs/decisions/0042-a-re-ranking-seam.md.

A `Reranker` scores candidates (id, text, date) for a query. Three kinds fill it: a provider's rerank API through
litellm (memclaw.llm.rerank), a local cross-encoder (memclaw.embedding.cross_encoder), and the user's chat model
(`ChatReranker`, which gives an order and costs tokens). `RerankStage` applies one to a recall:

- the first `top_n` fused hits are ordered by the re-ranker's score, best first; a hit it leaves unscored follows
  the scored ones in fused order, and the hits after `top_n` keep theirs;
- a re-ranker that fails (RerankError, LLMError) changes nothing: the fused order stands, the report says why, and
  the failure is logged once. It is not asked again for COOLDOWN_S, so a dead server costs one timeout per command,
  not one per recall.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memclaw.errors import LLMError, RerankError
from memclaw.recall.results import RerankReport
from memclaw.util.cooldown import Cooldown

if TYPE_CHECKING:
    from memclaw.config import Config, RerankConfig

log = logging.getLogger(__name__)

COOLDOWN_S = 60.0
"""How long a re-ranker that failed is not asked again (as memclaw.llm.client.CIRCUIT_S for a refused address)."""
CHAT_ID_PREFIX = "m"
"""The chat kind names candidates m1, m2, ... (short, and nothing a memory's text can pass for)."""
MAX_ANSWER_TOKENS_PER_CANDIDATE = 8
"""The chat kind's answer budget: about this many tokens per id, plus a little for the JSON around them."""


@dataclass(frozen=True)
class Candidate:
    """A hit as a re-ranker sees it: its unit id, its text (cut to recall.rerank.max_chars) and date."""

    id: str
    text: str
    date: str | None = None


@dataclass(frozen=True)
class Scores:
    """A re-ranker's answer: one score per candidate in their order (None: not scored), and what it cost."""

    scores: list[float | None]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    unknown_ids: int = 0
    repeated_ids: int = 0


class Reranker(Protocol):
    """Scores candidates for a query, higher is better. Raises RerankError or LLMError when it cannot."""

    name: str

    def score(self, query: str, candidates: Sequence[Candidate]) -> Scores: ...


class ProviderReranker:
    """A provider's rerank API through litellm (memclaw.llm.rerank)."""

    def __init__(self, cfg: RerankConfig) -> None:
        assert cfg.model is not None
        self.model = cfg.model
        self.name = f"provider:{cfg.model}"
        self._cfg = cfg

    def score(self, query: str, candidates: Sequence[Candidate]) -> Scores:
        from memclaw.llm.rerank import rerank_scores

        c = self._cfg
        key = c.api_key.get_secret_value() if c.api_key else None
        return Scores(rerank_scores(model=self.model, query=query, documents=[x.text for x in candidates],
                                    api_base=c.api_base, api_key=key, timeout_s=c.timeout_s))  # fmt: skip


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder saved in a local directory (memclaw.embedding.cross_encoder)."""

    def __init__(self, cfg: RerankConfig) -> None:
        assert cfg.model is not None
        self.path = cfg.model
        self.name = f"cross_encoder:{cfg.model}"

    def score(self, query: str, candidates: Sequence[Candidate]) -> Scores:
        from memclaw.embedding.cross_encoder import cross_encoder_scores

        return Scores(list(cross_encoder_scores(self.path, query, [x.text for x in candidates])))


class ChatReranker:
    """The user's chat model orders the candidates (memclaw/prompts/rerank.md), through memclaw.llm.client.

    The candidates go in as JSON objects, one a line, with `<`, `>` and `&` escaped: a memory's text can neither end
    the block that quotes it nor pass for another candidate. The answer is read as data: only ids of candidates
    count, each once, in the order given; anything else in it is ignored and counted."""

    def __init__(self, config: Config) -> None:
        from memclaw.llm.client import LLMClient

        cfg = config.recall.rerank
        self._client = LLMClient(config, model=cfg.model or config.agent.model)
        # one attempt, bounded: recall's hot path
        self._client.timeout_s = cfg.timeout_s
        self._client.max_retries = 0
        self.timeout_s = cfg.timeout_s
        self.name = f"chat:{self._client.model}"

    def score(self, query: str, candidates: Sequence[Candidate]) -> Scores:
        from memclaw.llm.client import chat_sync
        from memclaw.prompts import render
        from memclaw.util.jsonfix import extract_object

        lines = []
        for n, c in enumerate(candidates, 1):
            item = {"id": f"{CHAT_ID_PREFIX}{n}"} | ({"date": c.date} if c.date else {}) | {"text": c.text}
            lines.append(_quoted(item))
        prompt = render("rerank", query=_quoted(query), candidates="\n".join(lines))
        budget = 16 + MAX_ANSWER_TOKENS_PER_CANDIDATE * len(candidates)
        if not self._client.direct:
            from memclaw.llm.client import litellm_module

            # imported once, outside the request's time bound
            litellm_module()
        resp = chat_sync(self._client, [{"role": "user", "content": prompt}], timeout_s=self.timeout_s,
                         temperature=0.0, max_tokens=budget)  # fmt: skip
        usage = resp.usage
        try:
            ranking = extract_object(resp.content).get("ranking")
        except ValueError:
            ranking = None
        if not isinstance(ranking, list):
            raise RerankError(
                f"the chat re-ranker {self._client.model} answered no ranking "
                f"({usage.prompt_tokens} + {usage.completion_tokens} tokens spent)"
            )
        place: dict[str, int] = {}
        unknown = repeated = 0
        ids = {f"{CHAT_ID_PREFIX}{n}": n - 1 for n in range(1, len(candidates) + 1)}
        for item in ranking:
            if not isinstance(item, str) or item.strip() not in ids:
                unknown += 1
            elif item.strip() in place:
                repeated += 1
            else:
                place[item.strip()] = len(place)
        if not place:
            raise RerankError(
                f"the chat re-ranker {self._client.model} named none of the candidates "
                f"({usage.prompt_tokens} + {usage.completion_tokens} tokens spent)"
            )
        scores: list[float | None] = [None] * len(candidates)
        for cid, p in place.items():
            # the first named scores highest
            scores[ids[cid]] = float(len(candidates) - p)
        return Scores(scores, usage.prompt_tokens, usage.completion_tokens, unknown, repeated)


def _quoted(value: object) -> str:
    """`value` as JSON with no `<`, `>` or `&` in it (escaped as \\u003c and so on): quoted text cannot close or
    open a tag of the prompt."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def failure_line(why: str) -> str:
    """The one warning line of a re-ranker that failed."""
    return f"re-ranking failed, the fused order stands: {why}"


def needs_litellm(config: Config) -> bool:
    """Whether the configured re-ranker asks through litellm (a provider's, or a chat model that is not asked over
    the direct OpenAI-compatible transport)."""
    cfg = config.recall.rerank
    if cfg.kind == "provider":
        return True
    if cfg.kind == "chat":
        from memclaw.llm.client import direct_transport

        return not direct_transport(config, cfg.model or config.agent.model)
    return False


def reranker_for(config: Config) -> Reranker | None:
    """The re-ranker `recall.rerank` configures, or None when it is off. Nothing is loaded or asked here."""
    cfg = config.recall.rerank
    if cfg.kind == "provider":
        return ProviderReranker(cfg)
    if cfg.kind == "cross_encoder":
        return CrossEncoderReranker(cfg)
    if cfg.kind == "chat":
        return ChatReranker(config)
    return None


class RerankStage:
    """The configured re-ranker of one Recall, and when it last failed (COOLDOWN_S)."""

    def __init__(self, config: Config, reranker: Reranker | None = None) -> None:
        self.config = config
        self.reranker = reranker if reranker is not None else reranker_for(config)
        self._down = Cooldown(COOLDOWN_S)

    @property
    def top_n(self) -> int:
        return self.config.recall.rerank.top_n

    def order(self, query: str, candidates: Sequence[Candidate]) -> tuple[list[tuple[int, float | None]], RerankReport]:
        """The new order of `candidates` as (index into candidates, score), and the report. When the re-ranker
        fails, or failed less than COOLDOWN_S ago, the order is the candidates' own and the report says why."""
        assert self.reranker is not None
        by = self.reranker.name
        fused: list[tuple[int, float | None]] = [(i, None) for i in range(len(candidates))]
        down = self._down.down()
        if down is not None:
            return fused, RerankReport(by, ok=False, skipped=True, error=f"not asked: {down} (less than a minute ago)")
        t = time.perf_counter()
        try:
            got = self.reranker.score(query, candidates)
            if len(got.scores) != len(candidates):
                raise RerankError(f"the re-ranker {by} scored {len(got.scores)} of {len(candidates)} candidates")
        except (RerankError, LLMError) as e:
            why: str | None = str(e) or type(e).__name__
        # a re-ranker is the user's component at a boundary: whatever it raises, the recall stands
        except Exception as e:
            log.debug("the re-ranker %s raised", by, exc_info=True)
            why = f"the re-ranker {by} failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
        else:
            why = None
        if why is not None:
            self._down.trip(why)
            log.warning(failure_line(why))
            return fused, RerankReport(by, ok=False, error=why, ms=(time.perf_counter() - t) * 1000)
        ms = (time.perf_counter() - t) * 1000
        # sorted is stable: ties keep the fused order
        scored = sorted(((i, s) for i, s in enumerate(got.scores) if s is not None), key=lambda x: -x[1])
        rest = [(i, None) for i, s in enumerate(got.scores) if s is None]
        report = RerankReport(by, ok=True, reranked=len(scored), prompt_tokens=got.prompt_tokens,
                              completion_tokens=got.completion_tokens, ms=ms, unknown_ids=got.unknown_ids,
                              repeated_ids=got.repeated_ids)  # fmt: skip
        cost = f", {got.prompt_tokens} + {got.completion_tokens} tokens" if got.prompt_tokens is not None else ""
        log.info("re-ranked %d hits with %s in %.0f ms%s", len(scored), by, ms, cost)
        return [*scored, *rest], report
