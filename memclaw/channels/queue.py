"""Per-key ordered execution on one asyncio loop: jobs with the same key (a chat) run one at a time in the order
they were submitted; different keys run concurrently. A worker exists only while its key has work, so thousands of
quiet channels cost nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from memclaw.errors import UsageError

log = logging.getLogger(__name__)

T = TypeVar("T")
Job = Callable[[], Awaitable[Any]]


class ChannelQueue:
    def __init__(self, *, max_pending_per_key: int = 1000) -> None:
        self._max_pending = max_pending_per_key
        self._pending: dict[str, deque[tuple[Job, asyncio.Future[Any]]]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._idle: asyncio.Event | None = None
        self._closed = False
        self._aborted: list[asyncio.Task[None]] = []
        # Keys whose worker is inside a job
        self._running: set[str] = set()

    # ----- submit ------------------------------------------------------------------------------------------
    def submit(self, key: str, job: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """Queue `job` (a zero-argument coroutine function) behind earlier jobs of `key`. Must be called on the
        loop. Returns a future for its result; a failing job fails only its own future."""
        if self._closed:
            raise UsageError("the channel queue is closed: the gateway is shutting down")
        q = self._pending.setdefault(key, deque())
        if len(q) >= self._max_pending:
            raise UsageError(f"too many queued messages for {key}: wait for the earlier ones to be answered")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        q.append((job, fut))
        self._idle_event().clear()
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key), name=f"memclaw-chat-{key}")
        return fut

    async def _work(self, key: str) -> None:
        q = self._pending[key]
        try:
            while q:
                job, fut = q.popleft()
                if fut.cancelled():
                    continue
                self._running.add(key)
                try:
                    result = await job()
                except asyncio.CancelledError:
                    fut.cancel()
                    raise
                # The job's own problem: report it on its future only
                except Exception as e:
                    log.exception("job for %s failed", key)
                    if not fut.done():
                        fut.set_exception(e)
                else:
                    if not fut.done():
                        fut.set_result(result)
                finally:
                    self._running.discard(key)
        finally:
            # No await between the last emptiness check and this cleanup: submit() cannot slip in between.
            for _, fut in q:
                fut.cancel()
            self._pending.pop(key, None)
            self._workers.pop(key, None)
            if not self._workers:
                self._idle_event().set()

    def _idle_event(self) -> asyncio.Event:
        if self._idle is None:
            self._idle = asyncio.Event()
            self._idle.set()
        return self._idle

    # ----- state -------------------------------------------------------------------------------------------
    def pending(self, key: str) -> int:
        """Jobs of `key` not yet started."""
        return len(self._pending.get(key, ()))

    @property
    def closed(self) -> bool:
        return self._closed

    # ----- shutdown ----------------------------------------------------------------------------------------
    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued and running job has finished. True if idle, False on timeout."""
        if not self._workers:
            return True
        try:
            await asyncio.wait_for(self._idle_event().wait(), timeout)
        except TimeoutError:
            return False
        return True

    def abort(self) -> int:
        """Stop accepting jobs and cancel every queued and running one now (a forced shutdown). Returns how many
        were cancelled; `close()` then waits for the cancelled workers to unwind."""
        self._closed = True
        workers = list(self._workers.values())
        n = sum(len(q) for q in self._pending.values()) + len(self._running)
        for q in self._pending.values():
            for _, fut in q:
                fut.cancel()
            q.clear()
        # A worker cancelled before its first step never runs its cleanup: do it here
        for t in workers:
            t.cancel()
        self._aborted.extend(workers)
        self._pending.clear()
        self._workers.clear()
        self._idle_event().set()
        return n

    async def close(self, timeout: float | None = None) -> bool:
        """Stop accepting jobs, let the queued ones finish (up to `timeout`), then cancel what is left.
        Returns True if everything finished."""
        self._closed = True
        done = await self.drain(timeout)
        if not done:
            workers = list(self._workers.values())
            for t in workers:
                t.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        await asyncio.gather(*self._aborted, return_exceptions=True)
        return done
