"""Membership in a list of ids for a caller that asks about a few (a sync that appends one fact)."""

from __future__ import annotations


class FewLookups:
    """Membership in a list of ids for a caller that asks about a few: a C-level scan of the list for the
    first lookups, a set once there are more (a sync that appends one fact asks about one or two ids, where
    hashing 100k ids into a set would cost more than the whole append)."""

    __slots__ = ("_ids", "_set", "_scans")

    def __init__(self, ids: list[str]) -> None:
        self._ids = ids
        self._set: set[str] | None = None
        self._scans = 0

    def __contains__(self, uid: object) -> bool:
        if self._set is None:
            self._scans += 1
            if self._scans <= 8:
                return uid in self._ids
            self._set = set(self._ids)
        return uid in self._set
