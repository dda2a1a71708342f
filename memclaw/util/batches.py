"""Cutting work into equal batches."""

from __future__ import annotations


def even_chunk(total: int, most: int, multiple: int = 1) -> int:
    """The size of `total` items cut into equal chunks of at most about `most`, rounded up to a `multiple`."""
    multiple = max(1, multiple)
    n_chunks = max(1, -(-total // max(most, 1)))
    size = -(-total // n_chunks)
    return max(multiple, -(-size // multiple) * multiple)
