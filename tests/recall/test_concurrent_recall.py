"""Recall under a concurrent sync (issue 7): while a sync writes, queries keep answering from the previous index
state instead of waiting for it, and see the new memories once it is done.

The sync is held in the middle of embedding (its progress callback waits on an event), so the test is
deterministic: the writer holds both locks (the in-process one and the cross-process file lock) while recalls run.
A second MemoryService on the same workspace stands for another process (the gateway recalling while
`memclaw memory add` or a consolidation syncs); the same service in another thread is the in-process case.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace

OLD = ["My sister Lena lives in Porto", "I am allergic to penicillin", "I work at Solaris Energy"]
NEW = "My dentist is Dr. Okafor on Baker Street"


def _workspace(root: Path) -> Workspace:
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("# Facts\n" + "".join(f"- {t}\n" for t in OLD), "utf-8")
    return Workspace(root)


@pytest.mark.parametrize("reader", ["same service", "another service"])
def test_recall_answers_from_the_previous_state_while_a_sync_writes(tmp_path, embedder, reader):
    ws = _workspace(tmp_path / "ws")
    writer = MemoryService(ws, Config(workspace=ws.root), embedder=embedder)
    writer.sync()
    filler = [f"Note {i}: the blue folder on shelf {i} holds receipts from {2000 + i % 20}" for i in range(150)]
    with ws.memory_file("owner").open("a", encoding="utf-8") as f:
        f.write("".join(f"- {t}\n" for t in [*filler, NEW]))

    started, release = threading.Event(), threading.Event()

    def hold(_n: int) -> None:  # the sync's progress callback: pause mid-embedding, holding the writer locks
        started.set()
        release.wait(30)

    errors: list[BaseException] = []

    def run_sync() -> None:
        try:
            writer.sync(progress=hold)
        except BaseException as e:  # surfaced below
            errors.append(e)

    t = threading.Thread(target=run_sync)
    t.start()
    try:
        assert started.wait(60), "the sync never started embedding"
        svc = writer if reader == "same service" else MemoryService(ws, Config(workspace=ws.root), embedder=embedder)
        for query, want in (("where does my sister live", OLD[0]), ("drug allergy", OLD[1])):
            res = svc.recall_detailed(query, k=3)
            assert res.hits and res.hits[0].unit.text == want
            assert any("sync is running" in w for w in res.warnings)
            assert NEW not in {h.unit.text for h in res.hits}
        assert t.is_alive()  # the recalls above did not wait for the sync
    finally:
        release.set()
        t.join(60)
    assert not errors
    after = MemoryService(ws, Config(workspace=ws.root), embedder=embedder).recall_detailed("who is my dentist", k=1)
    assert after.hits[0].unit.text == NEW and not after.warnings
