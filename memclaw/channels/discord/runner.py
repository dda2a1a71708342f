"""The agent's own event loop in a daemon thread, so blocking work inside a turn (embedding, index sync, file I/O)
never stalls discord.py's heartbeat, and a slow model in one chat never holds up another."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class AgentThread:
    """Runs coroutines on a private event loop in a daemon thread; `await run(coro)` from any other loop."""

    def __init__(self, name: str = "memclaw-agent") -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def call(self, fn: Callable[[], Awaitable[T]] | Callable[[], T]) -> T:
        """Run `fn` on the agent loop from a plain thread and wait for it (used at shutdown)."""

        async def wrapper() -> Any:
            r = fn()
            return await r if asyncio.iscoroutine(r) else r

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result()

    def stop(self) -> None:
        if self._loop.is_closed():
            return

        async def cancel_leftovers() -> None:  # e.g. litellm's background logging worker
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._loop.shutdown_asyncgens()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_leftovers(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
