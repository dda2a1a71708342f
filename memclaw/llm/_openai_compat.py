"""Chat completions sent straight to an OpenAI-compatible server the user runs or names, without importing litellm.

litellm takes 3 s or more to import, longer than a local model takes to answer. For an `openai/` model with a base
URL the user set, litellm sends a plain OpenAI request through the OpenAI SDK. This module sends the same request
with httpx and returns the decoded JSON body. Retries, error messages and parsing stay in `llm.client`.

Invariants: only `serves()` decides which requests come here; a non-2xx answer raises `StatusError` with the
server's status, first message line and headers; a transport failure raises httpx's own exception unchanged.
See docs/decisions/0031-direct-openai-transport.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from typing import Any

import httpx

# Request fields litellm passes to the OpenAI SDK that are not part of the JSON body.
_NOT_BODY = {"api_base", "api_key", "timeout", "max_retries"}
MAX_CONNECTIONS = 16
"""Requests in flight at once per event loop; more wait for a free connection instead of flooding the server."""
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


class StatusError(Exception):
    """A non-2xx answer: `status_code`, the server's message, and `response` for its headers (Retry-After)."""

    def __init__(self, status_code: int, message: str, response: httpx.Response) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response = response


def base_url(model: str, api_base: str | None) -> str | None:
    """The base URL an `openai/` request goes to when the user named one: the config, else the environment."""
    if not model.startswith("openai/"):
        return None
    return api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or None


def serves(model: str, api_base: str | None) -> bool:
    """Whether this model's requests go straight to a user-named OpenAI-compatible server.

    OpenAI's own API stays on litellm: it maps parameters per model (reasoning models, `max_completion_tokens`) and
    knows prices."""
    base = base_url(model, api_base)
    return bool(base) and "api.openai.com" not in base


def api_key(configured: str | None) -> str | None:
    """The key the OpenAI SDK would send: the config's, else OPENAI_API_KEY."""
    return configured or os.environ.get("OPENAI_API_KEY") or None


async def complete(kwargs: dict[str, Any]) -> dict[str, Any]:
    """POST litellm-style `kwargs` (model, messages, api_base, api_key, timeout, ...) as one chat completion.

    Returns the decoded body of a 2xx answer; raises `StatusError` for any other status and `ValueError` for a body
    that is not a chat completion."""
    base = base_url(kwargs["model"], kwargs.get("api_base"))
    if base is None:
        raise ValueError(f"{kwargs['model']} has no OpenAI-compatible base URL")
    body = {k: v for k, v in kwargs.items() if k not in _NOT_BODY and v is not None}
    body["model"] = kwargs["model"].split("/", 1)[1]
    headers = {"Content-Type": "application/json"}
    key = api_key(kwargs.get("api_key"))
    if key:
        headers["Authorization"] = f"Bearer {key}"
    url = base.rstrip("/") + "/chat/completions"
    seconds = kwargs.get("timeout")
    # A request waits for a free connection as long as it takes: only the server's own time counts.
    timeout = httpx.Timeout(seconds, pool=None)
    resp = await _client().post(url, content=json.dumps(body), headers=headers, timeout=timeout)
    if not 200 <= resp.status_code < 300:
        raise StatusError(resp.status_code, _message(resp), resp)
    try:
        data = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError):
        raise ValueError("the answer is not JSON") from None
    _check_completion(data)
    return data


def _client() -> httpx.AsyncClient:
    """This event loop's client: its connections are kept alive and at most MAX_CONNECTIONS are open."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        limits = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS)
        client = _clients[loop] = httpx.AsyncClient(limits=limits)
    return client


def _check_completion(data: Any) -> None:
    """ValueError naming the first field of a 2xx body that is not a chat completion's, as the OpenAI SDK refuses."""
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("choices is not a list of objects")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        raise ValueError("choices[0].message is not an object")
    if msg.get("content") is not None and not isinstance(msg["content"], str):
        raise ValueError("message.content is not text")
    calls = msg.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise ValueError("message.tool_calls is not a list")
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError("a tool call has no function name")
        if not isinstance(fn.get("arguments"), str | dict | None):
            raise ValueError("a tool call's arguments are neither text nor an object")


def _message(resp: httpx.Response) -> str:
    """The first line of the server's error message: `error.message` of an OpenAI error body, else the text."""
    text = resp.text
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = err["message"]
        elif isinstance(err, str):
            text = err
        elif isinstance(data.get("message"), str):
            text = data["message"]
    first = (text.strip().splitlines() or [""])[0]
    return first[:300] or resp.reason_phrase or f"HTTP {resp.status_code}"
