"""The session's turn lock (memclaw.agent._turnlock) within one process: cheap when idle, exclusive across tasks and
threads, a note when a turn waits long, and a waiting turn cancelled cleanly."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from memclaw.agent import _turnlock as turnlock
from memclaw.agent._turnlock import turn_held
from memclaw.agent.sessions import SessionStore


def test_an_idle_session_takes_the_turn_lock_at_once(tmp_path):
    store = SessionStore(tmp_path / "sessions")

    async def many() -> float:
        t = time.perf_counter()
        for _ in range(200):
            async with turn_held(store, "cli", "cli"):
                pass
        return (time.perf_counter() - t) / 200

    assert asyncio.run(many()) < 0.01


def test_a_second_turn_waits_for_the_first_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(turnlock, "NOTE_AFTER_S", 0.1)
    store = SessionStore(tmp_path / "sessions")
    order: list[str] = []
    holding = threading.Event()

    def other_thread() -> None:  # another thread (own event loop), like a second Agent in this process
        async def turn() -> None:
            async with turn_held(store, "cli", "cli"):
                order.append("first in")
                holding.set()
                await asyncio.sleep(0.4)
                order.append("first out")

        asyncio.run(turn())

    async def second() -> None:
        async with turn_held(store, "cli", "cli"):
            order.append("second in")

    t = threading.Thread(target=other_thread)
    t.start()
    assert holding.wait(10)
    with caplog.at_level(logging.WARNING, logger="memclaw"):
        asyncio.run(second())
    t.join()
    assert order == ["first in", "first out", "second in"]
    assert any("waiting for another memclaw turn in this session" in r.getMessage() for r in caplog.records)


def test_a_waiting_turn_cancelled_leaves_the_lock_free(tmp_path):
    store = SessionStore(tmp_path / "sessions")

    async def scenario() -> None:
        async with turn_held(store, "cli", "cli"):
            waiter = asyncio.create_task(asyncio.wait_for(_take(store), 0.2))
            with pytest.raises(TimeoutError):
                await waiter
        await asyncio.wait_for(_take(store), 1)  # free again: nothing left held by the cancelled waiter

    asyncio.run(scenario())


async def _take(store: SessionStore) -> None:
    async with turn_held(store, "cli", "cli"):
        pass
