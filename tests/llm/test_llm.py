"""LLMClient over real HTTP to the scripted OpenAI-compatible server, through each transport: litellm, and the
direct one an `openai/` model at a named server takes (llm/_openai_compat.py). Both must behave the same."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from memclaw.config import Config
from memclaw.errors import LLMError
from memclaw.llm.client import LLMClient, scrub
from tests.llm_server import scripted_server

TRANSPORT = {"name": "auto"}


@pytest.fixture(autouse=True, params=["auto", "litellm"])
def transport(request):
    """Every test here runs through both transports (`agent.transport`)."""
    TRANSPORT["name"] = request.param
    yield request.param
    TRANSPORT["name"] = "auto"


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


MSGS = [{"role": "user", "content": "hi"}]


def client(**agent) -> LLMClient:
    cfg = Config()
    cfg.agent.model = "openai/gpt-4o-mini"
    cfg.agent.transport = TRANSPORT["name"]
    for k, v in agent.items():
        setattr(cfg.agent, k, v)
    return LLMClient(cfg, backoff_base_s=0.01, max_backoff_s=0.05)


def run(coro):
    return asyncio.run(coro)


def test_plain_reply_with_usage_reasoning_and_cost(llm_server, transport):
    llm_server.reply("Hello!", reasoning="the user greets me", usage={"prompt_tokens": 100, "completion_tokens": 20})
    c = client()
    assert c.direct == (transport == "auto")
    r = run(c.chat(MSGS))
    assert r.content == "Hello!"
    assert r.tool_calls == []
    assert r.reasoning_content == "the user greets me"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (100, 20)
    if transport == "litellm":
        # litellm's offline price map knows gpt-4o-mini
        assert r.usage.cost is not None and r.usage.cost > 0
    else:
        # the direct transport knows no prices: the server is the user's
        assert r.usage.cost is None
    sent = llm_server.requests[0]
    assert sent["model"] == "gpt-4o-mini" and sent["messages"] == MSGS
    # the key came from OPENAI_API_KEY (the fixture), the endpoint from OPENAI_API_BASE
    assert llm_server.headers[0]["authorization"] == "Bearer sk-test-not-a-real-key"


def test_config_endpoint_and_key_win_over_env(llm_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")  # nothing listens there
    llm_server.reply("ok")
    c = client(api_base=llm_server.url, api_key="sk-from-config-123456")
    assert run(c.chat(MSGS)).content == "ok"
    assert llm_server.headers[0]["authorization"] == "Bearer sk-from-config-123456"
    assert "sk-from-config" not in repr(c)


def test_tool_calls_are_parsed_and_tools_sent(llm_server):
    llm_server.tool_calls([("memory_search", {"query": "Anna"}), ("list_dir", "{bad json")])
    tools = [{"type": "function", "function": {"name": "memory_search", "parameters": {"type": "object"}}}]
    r = run(client().chat(MSGS, tools))
    assert [t.name for t in r.tool_calls] == ["memory_search", "list_dir"]
    assert json.loads(r.tool_calls[0].arguments) == {"query": "Anna"}
    assert r.tool_calls[1].arguments == "{bad json"  # passed through raw: the tool layer reports it
    assert llm_server.requests[0]["tools"] == tools
    msg = r.assistant_message()
    assert msg["tool_calls"][0]["function"]["name"] == "memory_search"


def test_5xx_then_success_is_retried(llm_server, caplog):
    llm_server.status(500, times=2).reply("finally")
    with caplog.at_level(logging.WARNING, logger="memclaw.llm.client"):
        r = run(client(max_retries=3).chat(MSGS))
    assert r.content == "finally" and r.attempts == 3
    assert len(llm_server.requests) == 3
    assert "retry 1/3" in caplog.text


def test_rate_limit_then_success(llm_server):
    llm_server.status(429, headers={"Retry-After": "0"}).reply("ok")
    assert run(client().chat(MSGS)).content == "ok"
    assert len(llm_server.requests) == 2


def test_5xx_forever_gives_clear_error_after_bounded_retries(llm_server):
    llm_server.status(503, times=10)
    with pytest.raises(LLMError) as ei:
        run(client(max_retries=2).chat(MSGS))
    assert len(llm_server.requests) == 3
    msg = str(ei.value)
    assert "unavailable after 3 attempt(s)" in msg and "try again later" in msg
    assert "\n" not in msg


def test_malformed_json_body_is_retried_then_reported(llm_server):
    llm_server.raw("{not json").reply("recovered")
    assert run(client().chat(MSGS)).content == "recovered"
    llm_server.raw('{"id": "x", "choices": []}', times=5)
    with pytest.raises(LLMError, match="unavailable"):
        run(client(max_retries=1).chat(MSGS))


def test_timeout_is_retried_then_reported(llm_server):
    llm_server.reply("too late", delay=3, times=2)
    with pytest.raises(LLMError, match="unavailable after 2 attempt"):
        run(client(timeout_s=0.3, max_retries=1).chat(MSGS))
    assert len(llm_server.requests) == 2


def test_auth_error_is_not_retried_and_never_shows_the_key(llm_server, caplog):
    llm_server.status(401, times=5)
    c = client(api_key="sk-very-secret-key-0042")
    with caplog.at_level(logging.DEBUG), pytest.raises(LLMError) as ei:
        run(c.chat(MSGS))
    assert len(llm_server.requests) == 1
    assert "api_key" in str(ei.value) or "API key" in str(ei.value)
    assert "sk-very-secret-key-0042" not in str(ei.value)
    assert "sk-very-secret-key-0042" not in caplog.text


def test_no_key_is_not_retried_and_names_the_variable(llm_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")  # litellm: InternalServerError 500 "Missing credentials"
    c = client(max_retries=3)
    assert c.missing_key() is not None and "OPENAI_API_KEY" in c.missing_key()
    with pytest.raises(LLMError, match=r"^no API key for openai/gpt-4o-mini: set OPENAI_API_KEY in the environment"):
        run(c.chat(MSGS))
    assert llm_server.requests == []
    # a rejected key from the environment: the variable is named too
    monkeypatch.setenv("OPENAI_API_KEY", "sk-rejected-0000000")
    llm_server.status(403, times=4)
    with pytest.raises(LLMError, match="rejected the API key .*; check OPENAI_API_KEY$"):
        run(client(max_retries=3).chat(MSGS))
    assert len(llm_server.requests) == 1 and client().missing_key() is None


def test_connection_refused_is_reported(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    c = client(api_base="http://127.0.0.1:9/v1", max_retries=1)
    with pytest.raises(LLMError, match="unavailable"):
        run(c.chat(MSGS))


def test_model_overrides_apply(llm_server):
    cfg = Config()
    cfg.agent.model = "openai/gpt-4o-mini"
    cfg.agent.transport = TRANSPORT["name"]
    cfg.agent.model_overrides = {"openai/gpt-4o-mini": {"temperature": 0.3, "max_tokens": 77, "params": {"seed": 5}}}
    llm_server.reply("ok")
    run(LLMClient(cfg).chat(MSGS))
    sent = llm_server.requests[0]
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 77 and sent["seed"] == 5


def test_scrub_masks_keys():
    assert "sk-abcdef123456" not in scrub("bad key sk-abcdef123456 given")
    assert "tok-xyz" not in scrub("secret tok-xyz here", ["tok-xyz"])


def test_context_window_exceeded_is_said_and_not_retried(llm_server):
    error = {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}
    llm_server.raw(json.dumps({"error": error}), status=400, times=3)
    with pytest.raises(LLMError, match="too long for openai/gpt-4o-mini"):
        run(client(max_retries=2).chat(MSGS))
    assert len(llm_server.requests) == 1


def test_not_found_names_the_model(llm_server):
    llm_server.raw(json.dumps({"error": {"message": "model 'gpt-4o-mini' not found"}}), status=404)
    with pytest.raises(LLMError, match="model openai/gpt-4o-mini was not found"):
        run(client(max_retries=2).chat(MSGS))
    assert len(llm_server.requests) == 1


def test_the_direct_transport_never_imports_litellm(tmp_path):
    """A reply, a retried 500, a refused key and a refused connection: litellm is never imported."""
    import subprocess
    import sys

    code = """
import asyncio, sys
from memclaw.config import Config
from memclaw.errors import LLMError
from memclaw.llm.client import LLMClient
from tests.llm_server import ScriptedLLMServer
s = ScriptedLLMServer().start()
cfg = Config()
cfg.agent.model, cfg.agent.api_base, cfg.agent.api_key = "openai/local-model", s.url, "local"
s.status(500).reply("hi")
assert asyncio.run(LLMClient(cfg, backoff_base_s=0.01).chat([{"role": "user", "content": "x"}])).content == "hi"
s.status(401)
for base in (s.url, "http://127.0.0.1:9/v1"):
    cfg.agent.api_base = base
    try:
        asyncio.run(LLMClient(cfg, backoff_base_s=0.01).chat([{"role": "user", "content": "x"}]))
    except LLMError as e:
        print("error:", e)
print("litellm imported:", "litellm" in sys.modules)
s.stop()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "litellm imported: False" in out.stdout
    assert "rejected the API key" in out.stdout and "could not connect to http://127.0.0.1:9/v1" in out.stdout
