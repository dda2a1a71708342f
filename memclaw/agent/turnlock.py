"""One turn at a time per session, across processes and threads: the session's turn lock.

Processes share a session (`agent -m` and `chat` share the CLI's; the gateway may run too). A turn holds the
session's turn lock (a lock file beside the session file, memclaw.agent.sessions.TURN_SUFFIX, taken with
memclaw.util.files.file_lock) from before it reads the session and appends the user's message until its reply (and
any tool messages) is appended, so each reply lands directly after its own message and the next turn reads the
session as the file then is. A second turn waits: polling without blocking (an uncontended lock is taken at once,
in microseconds), so a Ctrl-C or a cancellation while waiting stops it at once with nothing written; after
`NOTE_AFTER_S` it says once why it waits.

Ordering with the consolidation claim (SessionStore.try_claim): a consolidation never takes the turn lock, so
whoever holds the turn lock may wait for the claim (`/new` does: turn lock, then claim) and no cycle can form. A
turn's own consolidation runs after the turn lock is released.
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
    """Hold one of the session's lock files (SessionStore.try_claim: the consolidation claim, or with TURN_SUFFIX the
    turn lock) for the `async with` block, polling every POLL_S while a thread or process holds it (a Ctrl-C or a
    cancellation stops the wait at once); after NOTE_AFTER_S, `note` (if any) is logged once."""
    held = store.try_claim(session, suffix)
    if held is None:
        held = await _wait(store, session, suffix, note)
    with held:
        yield


async def _wait(store: SessionStore, session: Session, suffix: str, note: str | None) -> contextlib.ExitStack:
    noted = False
    since = time.monotonic()
    while True:
        await asyncio.sleep(POLL_S)
        held = store.try_claim(session, suffix)
        if held is not None:
            if noted:
                log.info("session %s/%s: the lock is free again; going on", *session.key)
            return held
        if note and not noted and time.monotonic() - since >= NOTE_AFTER_S:
            log.warning(note, *session.key)
            noted = True
