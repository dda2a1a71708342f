"""The provider embeddings' query cache (memclaw.embedding._query_cache): vectors by (model fingerprint, text), raw
float32
in SQLite, nothing unpickled; a damaged or unwritable cache is a miss, never an error."""

from __future__ import annotations

import os
import sqlite3
import threading

import numpy as np
import pytest

from memclaw.embedding._query_cache import QueryCache


def test_vectors_round_trip_exactly_per_model_and_text(tmp_path):
    cache = QueryCache(tmp_path / "c" / "q.sqlite3")
    v = np.random.default_rng(0).standard_normal(96).astype(np.float32)
    assert cache.get("litellm:a", "where does Lena live") is None
    cache.put("litellm:a", "where does Lena live", v)
    assert np.array_equal(cache.get("litellm:a", "where does Lena live"), v)
    assert cache.get("litellm:b", "where does Lena live") is None  # another model's vectors are not these
    assert cache.get("litellm:a", "where does Lena live?") is None
    cache.set_dim("litellm:a", 96)
    cache.close()
    again = QueryCache(tmp_path / "c" / "q.sqlite3")  # a later process
    assert np.array_equal(again.get("litellm:a", "where does Lena live"), v) and again.dim("litellm:a") == 96
    again.close()


def test_a_damaged_cache_is_a_miss(tmp_path):
    path = tmp_path / "q.sqlite3"
    path.write_bytes(os.urandom(4096))
    cache = QueryCache(path)
    assert cache.get("m", "q") is None and cache.dim("m") is None
    cache.put("m", "q", np.ones(4, dtype=np.float32))  # no error
    cache.close()
    db = sqlite3.connect(tmp_path / "odd.sqlite3")
    db.execute("CREATE TABLE vectors (model TEXT, digest BLOB, vector BLOB, PRIMARY KEY (model, digest))")
    from memclaw.embedding._query_cache import digest

    db.execute("INSERT INTO vectors VALUES ('m', ?, ?)", (digest("q"), b"\x00\x01\x02"))  # not float32s
    db.commit()
    db.close()
    assert QueryCache(tmp_path / "odd.sqlite3").get("m", "q") is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_cache_folder_is_a_miss(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        cache = QueryCache(folder / "sub" / "q.sqlite3")
        cache.put("m", "q", np.ones(4, dtype=np.float32))
        assert cache.get("m", "q") is None
    finally:
        folder.chmod(0o700)


def test_threads_share_one_cache(tmp_path):
    cache = QueryCache(tmp_path / "q.sqlite3")
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(20):
                cache.put("m", f"{i}-{j}", np.full(8, i, dtype=np.float32))
                assert cache.get("m", f"{i}-{j}")[0] == i
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    cache.close()
