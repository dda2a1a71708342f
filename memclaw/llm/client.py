"""The LLM seam: one async call over litellm with timeouts, bounded retries and a clear error.

Any litellm model string works (`openai/...`, `anthropic/...`, `openrouter/...`, `ollama/...`). Endpoint and key come
from `agent.api_base` / `agent.api_key` (or `agent.model_overrides[model]`), else from the provider's usual
environment variables (`OPENAI_API_BASE`, `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, ...), which litellm reads itself.

A missing or rejected API key (litellm reports it as AuthenticationError, or as a 500 "Missing credentials" for
some providers) is never retried: `LLMError` names the environment variable to set for the provider. Rate limits
(429), server errors (5xx, including unparseable bodies, which litellm reports as 500), timeouts and dropped
connections are retried with exponential backoff (honouring Retry-After, bounded). A refused connection is not
retried: that address is not asked again in this process (a circuit breaker per endpoint). A failure is said as
what happened: could not connect, closed without answering, timed out, or the server's status. Anything else, or
running out of retries, raises `LLMError` with a one-line message that says what to do. Keys never appear in logs or
messages. litellm is imported on first use (it is slow to import), or beside a command's start-up
(`import_in_background`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import re
import threading
import time
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from memclaw.errors import LLMError
from memclaw.llm import providers
from memclaw.llm._openai_compat import complete as complete_direct
from memclaw.llm._openai_compat import serves as serves_direct
from memclaw.markdown.formats import clean_text
from memclaw.runtime import set_offline_env

if TYPE_CHECKING:
    from memclaw.config import Config

log = logging.getLogger(__name__)

# A malformed reply makes litellm's pydantic models warn on stderr (several lines, a source line among them); the
# reply is refused in one line by `_parse` and `_error` instead.
warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
MAX_BACKOFF_S = 20.0
# Keys of `agent.model_overrides[model]` this client understands (others, e.g. context_window and vision, are
# read by the ContextBuilder). `params` is a dict passed to litellm as-is (e.g. {"reasoning_effort": "low"}).
_OVERRIDE_KEYS = {"api_base", "api_key", "temperature", "max_tokens", "timeout_s", "max_retries", "params"}
# How providers say "no key" when litellm does not raise AuthenticationError (e.g. openai: InternalServerError 500).
_NO_KEY_RE = re.compile(r"missing credentials|missing [\w ]*api key|api_key client option must be set", re.I)
_KEY_SETTING = "agent.api_key in config.toml"
_CONNECT_FIX = "check agent.api_base and that the server is running"
# How OpenAI-compatible servers say the conversation does not fit (OpenAI, vLLM, llama.cpp).
_WINDOW_RE = re.compile(r"context_length_exceeded|maximum context length|context length|exceeds? the context", re.I)
_SECRET_RE = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+[A-Za-z0-9_\-\.]{8,}|key=[A-Za-z0-9_\-]{8,})")

_litellm: Any = None
_import_lock = threading.Lock()


def litellm_module() -> Any:
    """litellm, imported once with the offline switches and quiet settings (no "Provider List" banner on an unknown
    model). Every use of litellm in memclaw goes through here."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            set_offline_env()
            import litellm

            litellm.disable_hf_tokenizer_download = True
            litellm.suppress_debug_info = True
            # e.g. temperature on models that do not take it
            litellm.drop_params = True
            litellm.telemetry = False
            _litellm = litellm
    return _litellm


def import_in_background() -> None:
    """Start importing litellm (~2.8 s) in a background thread (memclaw.util.background) while the caller prepares
    its first request: the request then finds it imported, or waits under the import lock for the rest. A failed
    import is left for the request to meet and say."""
    if _litellm is not None:
        return
    from memclaw.util.background import background_thread

    background_thread(_import_quietly, "memclaw-litellm-import").start()


def _import_quietly() -> None:
    try:
        litellm_module()
    except Exception:
        log.debug("litellm import in the background failed", exc_info=True)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    # raw JSON text as the model produced it (may be invalid: the tool layer reports that)
    arguments: str

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # USD, when litellm knows the model's price
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens, cost)

    def to_json(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "cost": self.cost}


@dataclass
class LLMResponse:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_content: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    attempts: int = 1

    def assistant_message(self) -> dict[str, Any]:
        """The OpenAI-style assistant message to append to the conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_message() for tc in self.tool_calls]
        return msg


def direct_transport(config: Config, model: str | None = None) -> bool:
    """Whether `model` is asked without litellm: an `openai/` model at a server the user named, with
    `agent.transport = "auto"` (docs/decisions/0031-direct-openai-transport.md)."""
    a = config.agent
    model = model or a.model
    return a.transport == "auto" and serves_direct(model, configured_api_base(config, model))


def configured_api_base(config: Config, model: str) -> str | None:
    """The endpoint the config names for `model`: its `model_overrides` entry, else `agent.api_base`."""
    return config.agent.model_overrides.get(model, {}).get("api_base") or config.agent.api_base


def scrub(text: str, secrets: list[str] | None = None) -> str:
    """Remove API keys and bearer tokens from a message before it is logged or shown."""
    for s in secrets or []:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return _SECRET_RE.sub("***", text)


class LLMClient:
    """Chat completions for one configured model. Stateless apart from settings; safe to share."""

    def __init__(
        self,
        config: Config,
        *,
        model: str | None = None,
        backoff_base_s: float = 1.0,
        max_backoff_s: float = MAX_BACKOFF_S,
    ) -> None:
        a = config.agent
        self.model = model or a.model
        ov = dict(a.model_overrides.get(self.model, {}))
        self.api_base = configured_api_base(config, self.model)
        key = ov.get("api_key")
        self._api_key: str | None = str(key) if key else (a.api_key.get_secret_value() if a.api_key else None)
        self.timeout_s = float(ov.get("timeout_s", a.timeout_s))
        self.max_retries = int(ov.get("max_retries", a.max_retries))
        self.temperature = ov.get("temperature", a.temperature)
        self.max_tokens = int(ov.get("max_tokens", a.max_tokens))
        self.params: dict[str, Any] = dict(ov.get("params") or {})
        self.direct = direct_transport(config, self.model)
        self.backoff_base_s = backoff_base_s
        self.max_backoff_s = max_backoff_s

    # never the key
    def __repr__(self) -> str:
        return f"LLMClient(model={self.model!r}, api_base={self.api_base!r})"

    def missing_key(self) -> str | None:
        """A one-line note when no API key for this model is configured or in the environment, else None (known
        without importing litellm)."""
        return self._local_hint(providers.missing_key(self.model, self._api_key, _KEY_SETTING))

    def check_key(self) -> None:
        """LLMError (one line naming the variable) when the provider needs a key and none is set: known before any
        request and without importing litellm."""
        no_key = self._local_hint(providers.required_key_missing(self.model, self._api_key, _KEY_SETTING))
        if no_key:
            raise LLMError(no_key)

    def _local_hint(self, note: str | None) -> str | None:
        """A missing-key note, saying that any value works when the endpoint is a server on this machine (the
        provider's client refuses to send a request without a key, whatever the server asks for)."""
        if note is None or not providers.is_local_url(self.api_base or providers.env_api_base(self.model)):
            return note
        names = providers.key_vars(self.model)[0]
        example = f"{names[0]}=local" if names else "agent.api_key = 'local'"
        return f"{note}; the endpoint is a local server, so any value works, e.g. {example}"

    def _kwargs(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, **over: Any) -> dict:
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "timeout": self.timeout_s,
            # retries are ours (the provider SDK's own retries would multiply them)
            "max_retries": 0,
            "max_tokens": over.pop("max_tokens", None) or self.max_tokens,
            **self.params,
        }
        temperature = over.pop("temperature", None)
        temperature = self.temperature if temperature is None else temperature
        if temperature is not None:
            kw["temperature"] = temperature
        if self.api_base:
            kw["api_base"] = self.api_base
        if self._api_key:
            kw["api_key"] = self._api_key
        if tools:
            kw["tools"] = tools
            kw["tool_choice"] = "auto"
        kw.update({k: v for k, v in over.items() if v is not None})
        return kw

    async def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> LLMResponse:
        """One completion, retried on transient failures. Raises LLMError when the model stays unavailable, at once
        (before litellm is imported) when the provider needs a key and none is set."""
        self.check_key()
        lib = None
        if not self.direct:
            # the slow first import, off the loop
            lib = _litellm if _litellm is not None else await asyncio.to_thread(litellm_module)
        kw = self._kwargs(
            messages, tools, temperature=temperature, max_tokens=max_tokens, response_format=response_format
        )
        circuit = circuit_key(self.model, self.api_base)
        down = circuit_open(circuit)
        # refused earlier in this command: not asked again
        if down is not None:
            raise LLMError(f"the model {self.model} is unavailable: {down}; {_CONNECT_FIX}")
        attempts = 1 + self.max_retries
        last: BaseException | None = None
        for attempt in range(1, attempts + 1):
            try:
                if lib is None:
                    resp = self._parse(_namespace(await self._direct(kw)), cost=False)
                else:
                    resp = self._parse(await lib.acompletion(**kw))
                resp.attempts = attempt
                return resp
            except asyncio.CancelledError:
                raise
            # litellm maps provider errors to its own exception classes
            except Exception as e:
                last, attempts = e, attempt
                failed = describe_failure(e, api_base=self.api_base, timeout_s=self.timeout_s)
                trip_circuit(circuit, failed)
                if not retryable(e) or attempt == 1 + self.max_retries or failed.kind == CONNECT_FAILED:
                    break
                wait = self._backoff(attempt, e)
                log.warning(
                    "LLM call to %s failed (%s); retry %d/%d in %.1fs",
                    self.model,
                    self._describe(e),
                    attempt,
                    self.max_retries,
                    wait,
                )
                await asyncio.sleep(wait)
        assert last is not None
        raise self._error(last, attempts) from None

    # ----- helpers ---------------------------------------------------------------------------------------
    async def _direct(self, kw: dict[str, Any]) -> dict[str, Any]:
        try:
            return await complete_direct(kw)
        except ValueError as e:
            # litellm's words for a reply it cannot read, so both transports say it alike
            raise _JunkResponse(f"Invalid response object: {e}") from None

    def _backoff(self, attempt: int, e: BaseException) -> float:
        return backoff_seconds(attempt, e, self.backoff_base_s, self.max_backoff_s)

    def _describe(self, e: BaseException) -> str:
        text = describe_failure(e, api_base=self.api_base, timeout_s=self.timeout_s).text
        return scrub(text, [self._api_key or ""])

    def _error(self, e: BaseException, attempts: int) -> LLMError:
        # Only an imported litellm can have raised its own exception classes.
        lib = _litellm
        status = getattr(e, "status_code", None)
        what = self._describe(e)
        if _auth_failure(e):
            no_key = self.missing_key()
            if no_key:
                return LLMError(no_key)
            where = _KEY_SETTING if self._api_key else providers.key_env_names(self.model) or "the provider's API key"
            return LLMError(f"the model {self.model} rejected the API key ({what}); check {where}")
        if "LLM Provider NOT provided" in str(e):
            return LLMError(
                f"litellm does not know the provider of model {self.model!r}: name it as provider/model, e.g. "
                "openai/gpt-4o-mini or anthropic/claude-3-5-haiku-latest (https://docs.litellm.ai/docs/providers); "
                "check agent.model"
            )
        if (lib is not None and isinstance(e, lib.NotFoundError)) or status == 404:
            return LLMError(f"model {self.model} was not found ({what}); check agent.model and agent.api_base")
        if (lib is not None and isinstance(e, lib.ContextWindowExceededError)) or _window_exceeded(e):
            return LLMError(
                f"the conversation is too long for {self.model} ({what}); start over with /new "
                "or set agent.context_window lower"
            )
        if retryable(e):
            failed = describe_failure(e, api_base=self.api_base, timeout_s=self.timeout_s)
            fix = _CONNECT_FIX if failed.kind == CONNECT_FAILED else "try again later or check your provider's status"
            return LLMError(f"the model {self.model} is unavailable after {attempts} attempt(s) ({what}); {fix}")
        return LLMError(f"the model {self.model} refused the request ({what}); check agent.model and its settings")

    def _parse(self, raw: Any, *, cost: bool = True) -> LLMResponse:
        choices = getattr(raw, "choices", None) or []
        if not choices:
            raise _JunkResponse("the provider returned no choices")
        choice = choices[0]
        msg = getattr(choice, "message", None)
        if msg is None:
            raise _JunkResponse("the provider returned no message")
        tool_calls = []
        for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
            fn = getattr(tc, "function", None)
            name = getattr(fn, "name", None) or ""
            args = getattr(fn, "arguments", None)
            if not isinstance(args, str):
                import json

                args = json.dumps(args or {})
            tool_calls.append(ToolCall(id=getattr(tc, "id", None) or f"call_{i}", name=clean_text(name),
                                       arguments=clean_text(args)))  # fmt: skip
        reasoning = getattr(msg, "reasoning_content", None)
        if not reasoning:
            psf = getattr(msg, "provider_specific_fields", None) or {}
            reasoning = psf.get("reasoning_content") or psf.get("reasoning") if isinstance(psf, dict) else None
        u = getattr(raw, "usage", None)
        usage = Usage(
            prompt_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(u, "completion_tokens", 0) or 0),
            cost=_cost(raw) if cost else None,
        )
        content = getattr(msg, "content", None)
        return LLMResponse(
            content=clean_text(content) if isinstance(content, str) else None,
            tool_calls=tool_calls,
            reasoning_content=clean_text(reasoning) if isinstance(reasoning, str) and reasoning else None,
            usage=usage,
            model=getattr(raw, "model", "") or self.model,
            finish_reason=getattr(choice, "finish_reason", None),
        )


_sync_loop: asyncio.AbstractEventLoop | None = None
_sync_lock = threading.Lock()


def _loop_for_sync_calls() -> asyncio.AbstractEventLoop:
    """One event loop in a daemon thread for the whole process: its connections (litellm's, httpx's) stay bound
    to a loop that lives, whichever thread asks."""
    global _sync_loop
    with _sync_lock:
        if _sync_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="memclaw-llm-sync", daemon=True).start()
            _sync_loop = loop
        return _sync_loop


def chat_sync(client: LLMClient, messages: list[dict[str, Any]], *, timeout_s: float, **options: Any) -> LLMResponse:
    """`client.chat(messages, **options)` from synchronous code (recall's re-ranker), from any thread, bounded by
    `timeout_s` in all: LLMError when it fails or gives no answer in time."""
    future = asyncio.run_coroutine_threadsafe(client.chat(messages, **options), _loop_for_sync_calls())
    try:
        return future.result(timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise LLMError(f"the model {client.model} gave no answer within {timeout_s:g} s") from None


class _JunkResponse(Exception):
    """A 200 response without a usable message; retried like a server error."""

    status_code = 502


def _namespace(value: Any) -> Any:
    """A decoded JSON body read with attribute access, as `_parse` reads litellm's response objects."""
    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


def _window_exceeded(e: BaseException) -> bool:
    """A server's 400 saying the conversation is longer than the model's context window."""
    return getattr(e, "status_code", None) == 400 and bool(_WINDOW_RE.search(str(e)))


def _auth_failure(e: BaseException) -> bool:
    """A missing or rejected key: litellm's AuthenticationError, a 401/403, or a provider's "missing credentials"."""
    lib = _litellm
    if (lib is not None and isinstance(e, lib.AuthenticationError)) or getattr(e, "status_code", None) in (401, 403):
        return True
    return bool(_NO_KEY_RE.search(str(e)))


def retryable(e: BaseException) -> bool:
    """Whether a failed request is worth retrying: rate limits, 5xx, timeouts, connection errors (not a key)."""
    if isinstance(e, _JunkResponse):
        return True
    if _auth_failure(e) or _window_exceeded(e):
        return False
    # Only an imported litellm can have raised its own exception classes.
    lib = _litellm
    if lib is not None:
        if isinstance(e, lib.ContextWindowExceededError | lib.AuthenticationError | lib.NotFoundError):
            return False
        if isinstance(e, lib.Timeout | lib.APIConnectionError | lib.RateLimitError | lib.InternalServerError):
            return True
        if isinstance(e, lib.ServiceUnavailableError | lib.BadGatewayError):
            return True
    if type(e).__name__ in _CONNECT_NAMES | _DROP_NAMES | _TIMEOUT_NAMES:
        return True
    status = getattr(e, "status_code", None)
    if isinstance(status, int):
        return status in RETRY_STATUS or status >= 500
    return isinstance(e, TimeoutError | ConnectionError)


CONNECT_FAILED = "connect"
DROPPED = "dropped"
TIMED_OUT = "timeout"
_CONNECT_NAMES = {"ConnectError", "ConnectionRefusedError", "gaierror", "ConnectTimeout"}
_DROP_NAMES = {"RemoteProtocolError", "ReadError", "WriteError", "ConnectionResetError", "BrokenPipeError"}
_TIMEOUT_NAMES = {"ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException", "APITimeoutError", "Timeout"}
CIRCUIT_S = 60.0
"""How long an address that refused to connect is not asked again: a command's length (a long-running channel tries
again after it)."""
_dead: dict[str, tuple[float, str]] = {}
_dead_lock = threading.Lock()


@dataclass(frozen=True)
class Failure:
    """What a failed request met, in words: `kind` is CONNECT_FAILED, DROPPED, TIMED_OUT or "" (an answer, e.g.
    HTTP 500); `text` is one line naming the address (litellm reports a lost connection as "500 Connection error")."""

    kind: str
    text: str


def describe_failure(e: BaseException, *, api_base: str | None, timeout_s: float | None) -> Failure:
    """Read the exception chain litellm raises: could not connect, connection closed without an answer, timed out,
    or the server's own answer (its status and first line)."""
    chain: list[BaseException] = []
    c: BaseException | None = e
    while c is not None and c not in chain and len(chain) < 12:
        chain.append(c)
        c = c.__cause__ or c.__context__
    names = {type(x).__name__ for x in chain}
    where = (api_base or "").rstrip("/") or _url_of(chain) or "the provider"
    if names & _CONNECT_NAMES:
        refused = next((x for x in chain if isinstance(x, ConnectionRefusedError)), None)
        why = "connection refused" if refused is not None else (str(chain[-1]).splitlines() or ["no route"])[0][:120]
        return Failure(CONNECT_FAILED, f"could not connect to {where} ({why})")
    if names & _DROP_NAMES:
        return Failure(DROPPED, f"{where} closed the connection without answering")
    if names & _TIMEOUT_NAMES or any(isinstance(x, TimeoutError) for x in chain):
        within = f" within {timeout_s:g} s" if timeout_s else ""
        return Failure(TIMED_OUT, f"no answer from {where}{within}")
    status = getattr(e, "status_code", None)
    msg = re.sub(r"^(litellm\.\w+:\s*)?(\w+:\s*)?(\w+Exception\s*-\s*)?", "", (str(e).splitlines() or [""])[0])
    # litellm folds a traceback into some messages: a malformed reply reads "Invalid response object Traceback"
    msg = msg.split("Traceback (most recent call last)")[0].rstrip(" :")
    said = f"HTTP {status}" if status else type(e).__name__
    return Failure("", f"{where} answered {said}: {msg}"[:300] if msg else f"{where} answered {said}")


def _url_of(chain: list[BaseException]) -> str | None:
    """The address of the request that failed, without its path (an httpx or openai error carries it)."""
    # the innermost: litellm's own wrappers carry a placeholder request
    for x in reversed(chain):
        try:
            url = getattr(getattr(x, "request", None), "url", None)
        # httpx: an error raised without a request
        except RuntimeError:
            url = None
        if url is not None and getattr(url, "host", None):
            port = f":{url.port}" if url.port else ""
            return f"{url.scheme}://{url.host}{port}"
    return None


def circuit_key(model: str, api_base: str | None) -> str:
    """Which endpoint a request goes to: its api_base, else the provider's default."""
    return (api_base or "").rstrip("/") or f"provider:{model.split('/', 1)[0]}"


def circuit_open(key: str) -> str | None:
    """Why `key` is known to be unreachable in this process (it refused to connect in the last CIRCUIT_S), else
    None."""
    with _dead_lock:
        until, why = _dead.get(key, (0.0, ""))
    return why if time.monotonic() < until else None


def trip_circuit(key: str, failure: Failure) -> None:
    """Remember for CIRCUIT_S that `key` refused to connect: requests to it in this process fail at once."""
    if failure.kind == CONNECT_FAILED:
        with _dead_lock:
            _dead[key] = (time.monotonic() + CIRCUIT_S, failure.text)


def backoff_seconds(attempt: int, e: BaseException, base_s: float, max_s: float) -> float:
    """How long to wait before retry `attempt`: exponential with jitter, at least Retry-After, at most `max_s`."""
    wait = base_s * (2 ** (attempt - 1))
    wait *= 0.8 + 0.4 * random.random()
    ra = _retry_after(e)
    if ra is not None:
        wait = max(wait, ra)
    return min(wait, max_s)


def _retry_after(e: BaseException) -> float | None:
    resp = getattr(e, "response", None)
    headers = getattr(resp, "headers", None) or getattr(e, "litellm_response_headers", None) or {}
    try:
        v = headers.get("retry-after") or headers.get("Retry-After")
        return float(v) if v is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def model_info(model: str) -> dict[str, Any]:
    """litellm's offline model info for `model` (context window, input limit, prices); {} when it does not know it.
    Imports litellm."""
    try:
        info = litellm_module().get_model_info(model)
    # an unknown model
    except Exception:
        return {}
    return dict(info) if info else {}


def _cost(raw: Any) -> float | None:
    hidden = getattr(raw, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if cost is None:
        try:
            cost = litellm_module().completion_cost(completion_response=raw)
        except Exception:
            return None
    try:
        return float(cost)
    except (TypeError, ValueError):
        return None
