"""The cooldown shared by the embedding provider and the re-ranker: down after a failure, for its seconds only."""

import threading

from memclaw.util.cooldown import Cooldown


def test_a_cooldown_says_why_until_its_time_is_up() -> None:
    long, short = Cooldown(3600.0), Cooldown(0.0)
    assert long.down() is None and short.down() is None
    long.trip("could not connect to http://127.0.0.1:9")
    short.trip("timed out")
    assert long.down() == "could not connect to http://127.0.0.1:9"
    # a zero-second cooldown is over as soon as it starts
    assert short.down() is None
    long.trip("the server answered 503")
    assert long.down() == "the server answered 503"


def test_a_cooldown_tripped_from_many_threads_keeps_one_whole_reason() -> None:
    c = Cooldown(3600.0)
    whys = [f"reason {n} " * 50 for n in range(8)]
    threads = [threading.Thread(target=c.trip, args=(w,)) for w in whys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.down() in whys
