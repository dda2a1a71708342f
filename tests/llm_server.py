"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

Real HTTP, standard library only: litellm talks to it exactly as to a provider. Tests queue what it should answer
(plain text, tool calls, raw/malformed bodies, HTTP errors, delays) and read back every request body it received.

    server.reply("hello")                                   # assistant text
    server.tool_call("memory_search", {"query": "Anna"})    # one tool call (arguments dict or raw string)
    server.status(500, times=2)                             # two HTTP 500s
    server.raw("{not json")                                 # a malformed body with status 200
    server.reply("late", delay=5)                           # answer after 5 s (client timeouts)
    server.requests[-1]["messages"]                         # what the client sent

When the queue is empty it answers HTTP 500 with "script exhausted" (or `server.default`, if set), so a test that
makes more calls than it scripted fails loudly instead of hanging.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    status: int = 200
    body: bytes | None = None  # raw body; None -> built from `message`
    message: dict[str, Any] | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 11, "completion_tokens": 7})
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None
    fn: Any = None  # callable(request_body) -> Scripted, for replies that depend on the request


def _completion(item: Scripted, model: str) -> bytes:
    msg = dict(item.message or {"role": "assistant", "content": ""})
    finish = item.finish_reason or ("tool_calls" if msg.get("tool_calls") else "stop")
    usage = dict(item.usage)
    usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    body = {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": usage,
    }
    return json.dumps(body).encode()


class _Server(ThreadingHTTPServer):
    # A listen backlog like a real model server's (uvicorn, llama.cpp): the standard library's 5 drops a burst.
    request_queue_size = 128


class ScriptedLLMServer:
    paths: tuple[str, ...] = ("/v1/chat/completions", "/chat/completions")

    def answer(self, item: Scripted, req: dict[str, Any]) -> bytes:
        """The body of a scripted 200 answer to `req`."""
        return _completion(item, req.get("model", "scripted"))

    def __init__(self) -> None:
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.default: Scripted | None = None
        self.server_seconds = 0.0  # time spent inside the handler (for benchmarks)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> ScriptedLLMServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                t0 = time.perf_counter()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.rstrip("/") not in owner.paths:
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                try:
                    req = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    req = {"_unparsed": raw.decode("utf-8", "replace")}
                with owner._lock:
                    owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                item = owner._next(req)
                if item.fn is not None:
                    item = item.fn(req)
                if item.delay:
                    owner._stop.wait(item.delay)
                if item.status != 200 and item.body is None:
                    err = {"error": {"message": f"scripted status {item.status}", "type": "server_error"}}
                    body = json.dumps(err).encode()
                else:
                    body = item.body if item.body is not None else owner.answer(item, req)
                if req.get("stream") and item.status == 200 and item.body is None:
                    self._stream(item)
                else:
                    self._send(item.status, body, item.headers)
                owner.server_seconds += time.perf_counter() - t0 - item.delay

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

            def _stream(self, item: Scripted) -> None:
                msg = item.message or {}
                chunks = [{"role": "assistant", "content": msg.get("content") or ""}]
                if msg.get("tool_calls"):
                    chunks.append({"tool_calls": [dict(tc, index=i) for i, tc in enumerate(msg["tool_calls"])]})
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for delta in chunks:
                        ev = {
                            "id": "chatcmpl-s",
                            "object": "chat.completion.chunk",
                            "created": int(time.time()),
                            "model": "scripted",
                            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                        }
                        self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
                    fin = "tool_calls" if msg.get("tool_calls") else "stop"
                    ev = {
                        "id": "chatcmpl-s",
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": "scripted",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": fin}],
                    }
                    self.wfile.write(f"data: {json.dumps(ev)}\n\ndata: [DONE]\n\n".encode())
                    self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """The api_base to give an OpenAI-compatible client."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ----- the script ------------------------------------------------------------------------------------
    def _next(self, req: dict[str, Any]) -> Scripted:
        with self._lock:
            self.requests.append(req)
            if self._queue:
                return self._queue.popleft()
        return self.default or Scripted(status=500, body=b'{"error": {"message": "script exhausted"}}')

    def push(self, item: Scripted, times: int = 1) -> ScriptedLLMServer:
        with self._lock:
            for _ in range(times):
                self._queue.append(item)
        return self

    def reply(
        self,
        text: str | None,
        *,
        reasoning: str | None = None,
        usage: dict[str, int] | None = None,
        delay: float = 0.0,
        times: int = 1,
    ) -> ScriptedLLMServer:
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning is not None:
            msg["reasoning_content"] = reasoning
        item = Scripted(message=msg, delay=delay)
        if usage:
            item.usage = usage
        return self.push(item, times)

    def tool_calls(
        self, calls: list[tuple[str, dict[str, Any] | str]], *, content: str | None = None, delay: float = 0.0
    ) -> ScriptedLLMServer:
        tcs = []
        for name, args in calls:
            arg_s = args if isinstance(args, str) else json.dumps(args)
            tcs.append(
                {
                    "id": "call_" + uuid.uuid4().hex[:10],
                    "type": "function",
                    "function": {"name": name, "arguments": arg_s},
                }
            )
        return self.push(Scripted(message={"role": "assistant", "content": content, "tool_calls": tcs}, delay=delay))

    def tool_call(self, name: str, args: dict[str, Any] | str, **kw: Any) -> ScriptedLLMServer:
        return self.tool_calls([(name, args)], **kw)

    def status(self, code: int, *, times: int = 1, headers: dict[str, str] | None = None) -> ScriptedLLMServer:
        return self.push(Scripted(status=code, headers=headers or {}), times)

    def raw(self, body: str | bytes, *, status: int = 200, times: int = 1) -> ScriptedLLMServer:
        return self.push(Scripted(status=status, body=body.encode() if isinstance(body, str) else body), times)

    def dynamic(self, fn: Any, *, times: int = 1) -> ScriptedLLMServer:
        """Answer with `fn(request_body) -> Scripted` (e.g. echo what was sent)."""
        return self.push(Scripted(fn=fn), times)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()


@contextmanager
def scripted_server(monkeypatch: Any) -> Iterator[ScriptedLLMServer]:
    """A fresh scripted server; OPENAI_API_BASE/OPENAI_API_KEY point litellm's `openai/...` models at it.

    Test modules wrap it in a fixture:
        @pytest.fixture
        def llm_server(monkeypatch):
            with scripted_server(monkeypatch) as s:
                yield s
    """
    server = ScriptedLLMServer().start()
    monkeypatch.setenv("OPENAI_API_BASE", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    try:
        yield server
    finally:
        server.stop()
