"""Staleness: fresh / aging / stale by whole days since ``updated_at`` (docs/lifecycle.md),
over plain ``(id, path, updated_at)`` triples so memories and layered documents both plug in.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from gitmem.base.clock import format_timestamp, to_utc
from gitmem.features.lifecycle.prune import LifecycleConfigError, whole_number
from gitmem.features.lifecycle.rules import lifecycle_settings

if TYPE_CHECKING:
    from gitmem.format.model import Scope
    from gitmem.store.core import Store

DEFAULT_FRESH_DAYS = 30
DEFAULT_AGING_DAYS = 90
_DAY = dt.timedelta(days=1)


class Staleness(enum.StrEnum):
    FRESH = "fresh"
    AGING = "aging"
    STALE = "stale"


@dataclass(frozen=True)
class StalenessPolicy:
    """Up to ``fresh_days`` whole days: fresh; up to ``aging_days``: aging; beyond: stale."""

    fresh_days: int = DEFAULT_FRESH_DAYS
    aging_days: int = DEFAULT_AGING_DAYS

    def __post_init__(self) -> None:
        for name in ("fresh_days", "aging_days"):
            whole_number(getattr(self, name), f"lifecycle.staleness.{name}", 0)
        if self.aging_days < self.fresh_days:
            raise LifecycleConfigError(
                "gitmem.yaml lifecycle.staleness.aging_days must not be below fresh_days"
            )

    @classmethod
    def from_config(cls, raw: Mapping[str, Any] | None) -> StalenessPolicy:
        """From a raw store config: committed thresholds only lower the built-in ones (a
        later "stale" would hide what aged); the user's own settings apply as given."""
        return cls(**lifecycle_settings(raw, "staleness", asdict(cls())))


@dataclass(frozen=True)
class StalenessEntry:
    id: str
    path: str | None
    updated_at: dt.datetime | None
    days_since_update: int | None
    staleness: Staleness

    def to_dict(self) -> dict[str, Any]:
        updated = None if self.updated_at is None else format_timestamp(self.updated_at)
        return {**asdict(self), "updated_at": updated, "staleness": str(self.staleness)}


@dataclass(frozen=True)
class StalenessReport:
    now: dt.datetime
    policy: StalenessPolicy
    fresh: list[StalenessEntry] = field(default_factory=list)
    aging: list[StalenessEntry] = field(default_factory=list)
    stale: list[StalenessEntry] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        buckets: dict[str, list[StalenessEntry]] = {str(s): getattr(self, s) for s in Staleness}
        return {
            "now": format_timestamp(self.now),
            "fresh_days": self.policy.fresh_days,
            "aging_days": self.policy.aging_days,
            "counts": {name: len(bucket) for name, bucket in buckets.items()},
            **{name: [e.to_dict() for e in b] for name, b in buckets.items()},
        }


def days_since(updated_at: dt.datetime, now: dt.datetime) -> int:
    """Whole days elapsed (floor); a timestamp in the future counts as 0."""
    elapsed = to_utc(now) - to_utc(updated_at)
    return max(0, elapsed // _DAY)


def classify(
    updated_at: dt.datetime | None, now: dt.datetime, policy: StalenessPolicy | None = None
) -> Staleness:
    policy = policy or StalenessPolicy()
    if updated_at is None:
        return Staleness.STALE
    days = days_since(updated_at, now)
    if days <= policy.fresh_days:
        return Staleness.FRESH
    if days <= policy.aging_days:
        return Staleness.AGING
    return Staleness.STALE


def staleness_report(
    records: Iterable[tuple[str, str | None, dt.datetime | None]],
    now: dt.datetime,
    policy: StalenessPolicy | None = None,
) -> StalenessReport:
    """Sort ``(id, path, updated_at)`` into fresh / aging / stale; each bucket oldest first
    (no timestamp first)."""
    policy = policy or StalenessPolicy()
    report = StalenessReport(now=to_utc(now), policy=policy)
    for memory_id, path, updated_at in records:
        state = classify(updated_at, now, policy)
        days = None if updated_at is None else days_since(updated_at, now)
        getattr(report, state).append(StalenessEntry(memory_id, path, updated_at, days, state))
    for bucket in (report.fresh, report.aging, report.stale):
        bucket.sort(
            key=lambda e: (e.days_since_update is not None, -(e.days_since_update or 0), e.id)
        )
    return report


def store_staleness(
    store: Store,
    *,
    scope: Scope | str | None = None,
    include_superseded: bool = False,
    include_archived: bool = False,
) -> StalenessReport:
    """Staleness of a store's memories under its policy, at the store clock's ``now``."""
    policy = StalenessPolicy.from_config(store.config(scope).raw)
    memories = store.list(
        scope=scope, include_superseded=include_superseded, include_archived=include_archived
    )
    return staleness_report(
        ((m.id, m.path, m.updated_at) for m in memories), store.clock.now(), policy
    )
