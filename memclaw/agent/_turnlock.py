"""One turn at a time per session, across processes and threads: the session's turn lock.

Processes share a session: `agent -m` and `chat` share the CLI's, and the gateway may run too. The turn lock is a
lock file beside the session file (memclaw.agent.sessions.TURN_SUFFIX). A turn holds it from before it reads the
session until its reply is appended. So each reply lands directly after its own message.
A second turn waits by polling without blocking, so a Ctrl-C or a cancellation stops it at once with nothing
written. After `NOTE_AFTER_S` it says once why it waits.

A consolidation never takes the turn lock, so whoever holds it may wait for the consolidation claim
(SessionStore.try_lock). `/new` does: turn lock, then claim. No cycle can form. A turn's own consolidation runs
after the turn lock is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from memclaw.agent.sessions import TURN_SUFFIX, Session, SessionStore

log = logging.getLogger(__name__)

POLL_S = 0.05
"""How often a turn (or a consolidation) waiting for a lock of its session held elsewhere tries it again."""
NOTE_AFTER_S = 1.5
"""A turn that has waited this long says so (once)."""
WAITING_NOTE = (
    "waiting for another memclaw turn in this session (%s/%s) to finish; your message is saved when its turn starts"
)


@contextlib.asynccontextmanager
async def turn_held(store: SessionStore, channel: str, chat_id: str) -> AsyncIterator[None]:
    """Hold the turn lock of the session (channel, chat_id) for the `async with` block, waiting while another turn
    (thread or process) holds it."""
    session = Session(channel=channel, chat_id=chat_id, path=store.path_for(channel, chat_id))
    async with lock_held(store, session, TURN_SUFFIX, note=WAITING_NOTE):
        yield


@contextlib.asynccontextmanager
async def lock_held(
    store: SessionStore, session: Session, suffix: str, *, note: str | None = None
) -> AsyncIterator[None]:
    """Hold one of the session's lock files (SessionStore.try_lock) for the `async with` block.

    While another thread or process holds it, poll every POLL_S; a Ctrl-C or a cancellation stops the wait at once.
    After NOTE_AFTER_S, `note` is logged once if given."""
    held = store.try_lock(session, suffix)
    if held is None:
        held = await _wait(store, session, suffix, note)
    with held:
        yield


async def _wait(store: SessionStore, session: Session, suffix: str, note: str | None) -> contextlib.ExitStack:
    noted = False
    since = time.monotonic()
    while True:
        await asyncio.sleep(POLL_S)
        held = store.try_lock(session, suffix)
        if held is not None:
            if noted:
                log.info("session %s/%s: the lock is free again; going on", *session.key)
            return held
        if note and not noted and time.monotonic() - since >= NOTE_AFTER_S:
            log.warning(note, *session.key)
            noted = True
