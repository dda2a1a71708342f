"""Offline token counting, cached per (encoding family, text).

Counts come from litellm's `token_counter`, which ships OpenAI's BPE files, so nothing is downloaded. Two
families exist: `o200k` (gpt-4o, gpt-4.1, gpt-5, o1/o3/o4) and `cl100k` (every other model). Models outside the
OpenAI family (Claude, Llama, Gemini, ...) are counted with the OpenAI cl100k encoding too: an approximation,
never a download (`litellm.disable_hf_tokenizer_download = True`). litellm is imported lazily (~3 s), and
`LITELLM_LOCAL_MODEL_COST_MAP=True` is set before that import so it does not try the network.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its content (role, separators), as in OpenAI's cookbook."""
REPLY_PRIMING = 3
"""Tokens every request costs once (the assistant reply priming)."""
IMAGE_TOKENS = 765
"""Estimate for one image (OpenAI 'high' detail for a 1024x1024 image); providers differ."""

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_REPRESENTATIVE = {"o200k": "gpt-4o", "cl100k": "gpt-4"}

_lock = threading.Lock()
_counter: Callable[..., int] | None = None


def token_family(model: str | None) -> str:
    """The encoding family used to count tokens for `model`: 'o200k' or 'cl100k'."""
    if not model:
        return "cl100k"
    name = model.lower()
    for prefix in ("openai/", "azure/", "openrouter/openai/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    else:
        if "/" in name:  # another provider's model: counted with the OpenAI cl100k encoding
            return "cl100k"
    return "o200k" if name.startswith(_O200K_PREFIXES) else "cl100k"


def _load_counter() -> Callable[..., int]:
    global _counter
    with _lock:
        if _counter is None:
            from memclaw.runtime import set_offline_env

            set_offline_env()
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            try:
                from memclaw.llm import litellm_module

                _counter = litellm_module().token_counter
            except Exception as e:  # pragma: no cover - litellm is a hard dependency
                log.warning("litellm unavailable (%s); estimating tokens as bytes/3", e)
                _counter = _estimate
    return _counter


def _estimate(*, model: str, text: str) -> int:  # pragma: no cover - fallback only
    return (len(text.encode("utf-8")) + 2) // 3


@lru_cache(maxsize=32768)
def _count_cached(family: str, text: str) -> int:
    counter = _counter or _load_counter()
    return int(counter(model=_REPRESENTATIVE[family], text=text))


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in `text` for `model` (see the module docstring for the encoding used). Cached."""
    if not text:
        return 0
    return _count_cached(token_family(model), text)


def counter_for(model: str | None) -> Callable[[str], int]:
    """A one-argument counter bound to `model`'s family (for budget.allocate)."""
    family = token_family(model)

    def count(text: str) -> int:
        return _count_cached(family, text) if text else 0

    return count


def _content_tokens(content: Any, count: Callable[[str], int]) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return count(content)
    total = 0
    if isinstance(content, Iterable) and not isinstance(content, bytes | Mapping):
        for part in content:
            if not isinstance(part, Mapping):
                total += count(str(part))
            elif part.get("type") == "text":
                total += count(str(part.get("text") or ""))
            elif part.get("type") in ("image_url", "input_image", "image"):
                total += IMAGE_TOKENS
            else:
                total += count(json.dumps(part, ensure_ascii=False, default=str))
        return total
    return count(str(content))


def count_message(message: Mapping[str, Any], model: str | None = None) -> int:
    """Tokens one OpenAI-style message costs: overhead + content + tool calls (name and arguments)."""
    count = counter_for(model)
    total = MESSAGE_OVERHEAD + _content_tokens(message.get("content"), count)
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        total += 3 + count(str(fn.get("name") or "")) + count(str(fn.get("arguments") or ""))
    if message.get("name"):
        total += 1 + count(str(message["name"]))
    if message.get("tool_call_id"):
        total += 2
    return total


def count_messages(messages: Iterable[Mapping[str, Any]], model: str | None = None) -> int:
    """Tokens a whole request costs (every message plus the reply priming)."""
    return REPLY_PRIMING + sum(count_message(m, model) for m in messages)


def cache_info() -> Any:
    return _count_cached.cache_info()
