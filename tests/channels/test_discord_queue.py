"""Per-channel ordered execution (memclaw.channels.queue): order within a key, concurrency across keys."""

from __future__ import annotations

import asyncio

import pytest

from memclaw.channels.queue import ChannelQueue
from memclaw.errors import UsageError


def test_order_per_key_and_concurrency_across_keys():
    async def main():
        q = ChannelQueue()
        log: list[str] = []
        gate = asyncio.Event()

        def job(key: str, i: int):
            async def run() -> str:
                if key == "slow" and i == 0:
                    await gate.wait()  # held until the fast key has done all its work
                log.append(f"{key}{i}")
                if key == "fast" and i == 4:
                    gate.set()
                await asyncio.sleep(0)
                return f"{key}{i}"

            return run

        futs = []
        for i in range(5):
            for key in ("slow", "fast"):
                futs.append(q.submit(key, job(key, i)))
        results = await asyncio.gather(*futs)
        assert await q.drain()
        return log, results, await q.drain(timeout=0)

    log, results, idle = asyncio.run(main())
    assert [x for x in log if x.startswith("slow")] == [f"slow{i}" for i in range(5)]
    assert [x for x in log if x.startswith("fast")] == [f"fast{i}" for i in range(5)]
    assert log.index("fast4") < log.index("slow0")  # the slow channel did not block the fast one
    assert sorted(results) == sorted(log) and idle  # no worker left


def test_a_failing_job_fails_only_its_future():
    async def main():
        q = ChannelQueue()

        async def boom() -> None:
            raise RuntimeError("model exploded")

        async def ok() -> str:
            return "fine"

        f1 = q.submit("c", boom)
        f2 = q.submit("c", ok)
        with pytest.raises(RuntimeError):
            await f1
        return await f2

    assert asyncio.run(main()) == "fine"


def test_close_finishes_queued_work_and_refuses_new():
    async def main():
        q = ChannelQueue()
        done: list[int] = []

        def job(i: int):
            async def run() -> None:
                await asyncio.sleep(0)
                done.append(i)

            return run

        for i in range(3):
            q.submit("c", job(i))
        finished = await q.close(timeout=30)
        with pytest.raises(UsageError):
            q.submit("c", job(99))
        return finished, done

    assert asyncio.run(main()) == (True, [0, 1, 2])


def test_close_cancels_what_does_not_finish_in_time():
    async def main():
        q = ChannelQueue()
        never = asyncio.Event()

        async def stuck() -> None:
            await never.wait()

        f = q.submit("c", stuck)
        finished = await q.close(timeout=0.05)
        return finished, f.cancelled(), await q.drain(timeout=0)

    assert asyncio.run(main()) == (False, True, True)


def test_backlog_limit():
    async def main():
        q = ChannelQueue(max_pending_per_key=2)
        gate = asyncio.Event()

        async def wait() -> None:
            await gate.wait()

        q.submit("c", wait)
        await asyncio.sleep(0)  # the first job starts; two more may wait
        q.submit("c", wait)
        q.submit("c", wait)
        with pytest.raises(UsageError):
            q.submit("c", wait)
        q.submit("other", wait)  # other keys are unaffected
        gate.set()
        return await q.drain()

    assert asyncio.run(main()) is True


def test_abort_cancels_running_and_queued_jobs_and_close_unwinds_them():
    async def main():
        q = ChannelQueue()
        never = asyncio.Event()
        unwound: list[str] = []

        async def stuck() -> None:
            try:
                await never.wait()
            finally:
                unwound.append("stuck")

        running = q.submit("a", stuck)
        queued = q.submit("a", stuck)
        await asyncio.sleep(0)  # "a"'s worker starts its first job
        fresh = q.submit("b", stuck)  # its worker has not started yet
        n = q.abort()  # the second Ctrl-C
        finished = await q.close(timeout=None)  # without abort() this would wait forever
        with pytest.raises(UsageError):
            q.submit("a", stuck)
        return n, finished, [f.cancelled() for f in (running, queued, fresh)], unwound, await q.drain(timeout=0)

    n, finished, cancelled, unwound, idle = asyncio.run(main())
    assert n == 3 and cancelled == [True, True, True] and idle
    assert unwound == ["stuck"]  # the running job's cleanup ran before close() returned
    assert finished is True  # drained (by cancellation): the gateway reports an abort separately
