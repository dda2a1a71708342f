"""The dates a recall query names: the reader is memclaw.markdown.dates (one reader for queries and for what is
written to memory, so the index can read the days a memory's text names); recall uses it through these names."""

from __future__ import annotations

from memclaw.markdown.dates import MAX_DATE_MENTIONS, DateRange, find_date_ranges, find_date_spans, tense, without_dates

__all__ = ["MAX_DATE_MENTIONS", "DateRange", "find_date_ranges", "find_date_spans", "tense", "without_dates"]
