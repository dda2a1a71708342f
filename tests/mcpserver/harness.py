"""The MCP SDK's own client against a real `memclaw mcp` process, one server per test module.

A module-scoped server outlives each test's event loop, so the client lives in a thread of its own with one loop
and one task that owns it (anyio scopes are entered and left in the same task); `McpSession.call` hands that task
a coroutine function and waits for its result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters

TOKEN = "mcp-test-token-" + "Zq8Wv3Lk5Tn0Rb7Yc2Hd"
WAIT = 300  # seconds: a safeguard against a hung server, never a synchronisation
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def memclaw_argv(*args: str) -> list[str]:
    """The console script when it sits beside this interpreter (an installed memclaw), else the module."""
    script = Path(sys.executable).with_name("memclaw")
    return [str(script), *args] if script.exists() else [sys.executable, "-m", "memclaw.cli.main", *args]


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without memclaw's variables, with MEMCLAW_HOME = `home` and the offline switches."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCLAW_")}
    return env | OFFLINE | {"MEMCLAW_HOME": str(home)} | extra


def onboard(home: Path) -> Path:
    """A fresh config and workspace under `home` (the console script's `onboard`); the workspace's root."""
    p = subprocess.run(memclaw_argv("onboard"), env=home_env(home), capture_output=True, text=True, timeout=WAIT)
    assert p.returncode == 0, p.stderr
    return home / "workspace"


def run_memclaw(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The console script, stdin empty and closed."""
    return subprocess.run(
        memclaw_argv(*args), env=home_env(home, **env), input="", capture_output=True, text=True, timeout=WAIT
    )


def stdio_params(home: Path, *args: str, **env: str) -> StdioServerParameters:
    argv = memclaw_argv("mcp", *args)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=home_env(home, **env))


class McpSession:
    """One connected MCP client on a thread of its own; `call(fn)` runs `await fn(client)` there."""

    def __init__(self, connect: Callable[[], contextlib.AbstractAsyncContextManager[Client]]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._queue: asyncio.Queue[tuple[Callable[[Client], Awaitable[Any]], concurrent.futures.Future] | None]
        self._task: asyncio.Task[None] | None = None
        try:
            asyncio.run_coroutine_threadsafe(self._start(connect), self._loop).result(WAIT)
        except BaseException:
            self._stop_loop()
            raise

    async def _start(self, connect: Callable[[], contextlib.AbstractAsyncContextManager[Client]]) -> None:
        self._queue = asyncio.Queue()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._task = asyncio.create_task(self._serve(connect, ready))
        await ready

    async def _serve(self, connect, ready: asyncio.Future[None]) -> None:
        try:
            async with connect() as client:
                ready.set_result(None)
                while (item := await self._queue.get()) is not None:
                    fn, done = item
                    try:
                        done.set_result(await fn(client))
                    except Exception as e:
                        done.set_exception(e)
        except BaseException as e:
            if ready.done():
                raise
            ready.set_exception(e)  # (said by __init__: the task itself ends quietly)

    def call(self, fn: Callable[[Client], Awaitable[Any]]) -> Any:
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (fn, done))
        return done.result(WAIT)

    def tool(self, name: str, **arguments: Any) -> Any:
        """The tool's result: its JSON (structured content), or the error text as `ToolFailed`."""
        result = self.call(lambda c: c.call_tool(name, arguments))
        if result.is_error:
            raise ToolFailed(" ".join(getattr(p, "text", "") for p in result.content))
        return result.structured_content

    def read(self, uri: str) -> str:
        result = self.call(lambda c: c.read_resource(uri))
        return "".join(getattr(p, "text", "") for p in result.contents)

    def close(self) -> None:
        async def stop() -> None:
            await self._queue.put(None)
            if self._task is not None:
                await self._task

        if self._loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(WAIT)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT)
        self._loop.close()


class ToolFailed(Exception):
    """A tool call answered with is_error: the text the model would read."""


def stdio_session(params: StdioServerParameters, errlog: Any = None) -> McpSession:
    from mcp.client.stdio import stdio_client

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        transport = stdio_client(params, errlog=errlog) if errlog is not None else stdio_client(params)
        async with Client(transport) as client:
            yield client

    return McpSession(connect)


def leaves(e: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or `e` itself."""
    if isinstance(e, BaseExceptionGroup):
        return [leaf for inner in e.exceptions for leaf in leaves(inner)]
    return [e]


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [i["id"] for i in items]


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


class HttpServer:
    """`memclaw mcp --http --port 0` in a subprocess: its URL (from its ready line) and its stderr, read whole."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            memclaw_argv("mcp", "--http", "--port", "0", *args),
            env=env if env is not None else home_env(home, MEMCLAW_MCP_TOKEN=TOKEN),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        self.lines: list[str] = []
        for line in self.proc.stderr:
            self.lines.append(line)
            if " at http://127.0.0.1:" in line:
                self.url = line.split(" at ", 1)[1].split()[0]
                break
        else:
            raise AssertionError(f"no ready line: {self.lines}")
        self._drain = threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True)
        self._drain.start()

    def stop(self) -> tuple[int, str, str]:
        """Ctrl-C; the exit code, stdout and stderr."""
        self.proc.send_signal(signal.SIGINT)
        out = self.proc.stdout.read() if self.proc.stdout else ""
        code = self.proc.wait(WAIT)
        self._drain.join(WAIT)
        return code, out, "".join(self.lines)


def http_session(url: str, token: str | None) -> McpSession:
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=WAIT)) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            yield client

    return McpSession(connect)
