"""Time, injectable so tests can be exact: the store asks its clock for ``now()``."""

from __future__ import annotations

import datetime as dt
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The current time as an aware UTC datetime."""
        ...


class SystemClock:
    def now(self) -> dt.datetime:
        # Second precision: timestamps are written as RFC 3339 without fractions,
        # so keeping microseconds in memory would make a re-read differ.
        return dt.datetime.now(dt.UTC).replace(microsecond=0)


class FixedClock:
    """A clock that only moves when told to (``advance``), for tests and replays."""

    def __init__(self, start: dt.datetime | str = "2026-01-01T00:00:00Z") -> None:
        self.current = parse_timestamp(start) if isinstance(start, str) else to_utc(start)

    def now(self) -> dt.datetime:
        return self.current

    def advance(self, **delta: float) -> dt.datetime:
        self.current = self.current + dt.timedelta(**delta)
        return self.current


def to_utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        # Naive datetimes are taken as UTC: front-matter written by hand often omits the zone.
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def format_timestamp(value: dt.datetime) -> str:
    """RFC 3339 UTC with a ``Z`` suffix, the spelling gitmem writes."""
    # isoformat, not strftime: glibc's %Y writes year 999 as "999", not "0999".
    return to_utc(value).replace(tzinfo=None).isoformat() + "Z"


def parse_timestamp(value: str | dt.datetime | dt.date) -> dt.datetime:
    """Parse an RFC 3339 / ISO 8601 timestamp or date; raises ValueError when it is neither."""
    if isinstance(value, dt.datetime):
        return to_utc(value)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return to_utc(dt.datetime.fromisoformat(text))
