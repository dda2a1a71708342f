"""Offline token counting, cached per (encoding family, text).

Two families exist: `o200k` (gpt-4o, gpt-4.1, gpt-5, o1/o3/o4) and `cl100k` (every other model). Models outside the
OpenAI family (Claude, Llama, Gemini, ...) are counted with the OpenAI cl100k encoding too: an approximation,
never a download. Counts are litellm's `token_counter` to the token (tests/llm/test_tokens.py compares them), without
importing litellm (3-8 s): tiktoken on the BPE files litellm ships, encoded in chunks of CHUNK_CHARS characters
and extrapolated from samples above MAX_EXACT_CHARS, as litellm does. Without tiktoken or those files, litellm's
own counter is used.
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

_ENCODINGS = {"o200k": "o200k_base", "cl100k": "cl100k_base"}
CHUNK_CHARS = 1024
"""litellm's TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS: a text is encoded in pieces of this many characters."""
MAX_EXACT_CHARS = 4_000_000
"""litellm's TOKEN_COUNTER_MAX_EXACT_CHARS: longer texts are counted on EXTRAPOLATION_SAMPLES evenly spaced samples."""
EXTRAPOLATION_SAMPLES = 16

_lock = threading.Lock()
_counter: Callable[..., int] | None = None
_encodings: dict[str, Any] = {}


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
        # another provider's model: counted with the OpenAI cl100k encoding
        if "/" in name:
            return "cl100k"
    return "o200k" if name.startswith(_O200K_PREFIXES) else "cl100k"


def _bpe_dir() -> str | None:
    """The folder of BPE files litellm ships (and points tiktoken at), found without importing litellm."""
    custom = os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR")
    if custom:
        return custom
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    for base in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(base, "litellm_core_utils", "tokenizers")
        if os.path.isdir(path):
            return path
    return None


def encoding(family: str) -> Any:
    """The tiktoken encoding of a family ('o200k' or 'cl100k'), loaded once from litellm's bundled BPE files; None
    when tiktoken or those files are missing."""
    with _lock:
        if family not in _encodings:
            _encodings[family] = _load_encoding(_ENCODINGS[family])
    return _encodings[family]


def _load_encoding(name: str) -> Any:
    bpe = _bpe_dir()
    if bpe is None:
        return None
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - a dependency of litellm
        return None
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    # tiktoken reads its files from here (never the network)
    os.environ["TIKTOKEN_CACHE_DIR"] = bpe
    try:
        return tiktoken.get_encoding(name)
    # a file missing or damaged: litellm's own counter
    except Exception as e:
        log.info("tiktoken %s unavailable from %s (%s)", name, bpe, e)
        return None
    finally:
        if before is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


def _tiktoken_count(enc: Any, text: str) -> int:
    """litellm's count: the text in CHUNK_CHARS pieces, or samples of it above MAX_EXACT_CHARS."""

    def exact(t: str) -> int:
        pieces = (t[i : i + CHUNK_CHARS] for i in range(0, len(t), CHUNK_CHARS))
        return sum(len(enc.encode(piece, disallowed_special=())) for piece in pieces)

    if len(text) <= MAX_EXACT_CHARS:
        return exact(text)
    n = min(EXTRAPOLATION_SAMPLES, MAX_EXACT_CHARS)
    size = MAX_EXACT_CHARS // n
    last = len(text) - size
    samples = [text[s : s + size] for s in (last * i // max(n - 1, 1) for i in range(n))]
    return round(sum(exact(s) for s in samples) * len(text) / sum(len(s) for s in samples))


def _load_counter() -> Callable[..., int]:
    """litellm's token_counter (imports litellm): only when tiktoken cannot count."""
    global _counter
    with _lock:
        if _counter is None:
            try:
                from memclaw.llm.client import litellm_module

                _counter = litellm_module().token_counter
            except Exception as e:  # pragma: no cover - litellm is a hard dependency
                log.warning("litellm unavailable (%s); estimating tokens as bytes/3", e)
                _counter = _estimate
    return _counter


def _estimate(*, model: str, text: str) -> int:  # pragma: no cover - fallback only
    return (len(text.encode("utf-8")) + 2) // 3


@lru_cache(maxsize=32768)
def _count_cached(family: str, text: str) -> int:
    enc = encoding(family)
    if enc is not None:
        return _tiktoken_count(enc, text)
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
