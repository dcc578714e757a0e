"""Staleness: fresh / aging / stale at the edges, thresholds from gitmem.yaml, index = scan."""

from __future__ import annotations

import datetime as dt

import pytest
from clitools import Gitmem, make_runner
from storetools import plant

import gitmem
from gitmem import FixedClock, Store, SystemClock
from gitmem.features.lifecycle.prune import LifecycleConfigError
from gitmem.features.lifecycle.staleness import (
    Staleness,
    StalenessPolicy,
    classify,
    days_since,
    staleness_report,
    store_staleness,
)

NOW = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)


def _ago(days: float) -> dt.datetime:
    return NOW - dt.timedelta(days=days)


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (0, Staleness.FRESH),
        (30, Staleness.FRESH),
        (30.999, Staleness.FRESH),
        (31, Staleness.AGING),
        (90, Staleness.AGING),
        (90.5, Staleness.AGING),
        (91, Staleness.STALE),
        (400, Staleness.STALE),
        (-3, Staleness.FRESH),  # a clock ahead of ours: not stale
    ],
)
def test_edges(days: float, expected: Staleness) -> None:
    assert classify(_ago(days), NOW) is expected


def test_no_timestamp_is_stale() -> None:
    assert classify(None, NOW) is Staleness.STALE
    report = staleness_report([("x", "x.md", None)], NOW)
    assert [e.id for e in report.stale] == ["x"]
    assert report.stale[0].days_since_update is None
    assert report.to_dict()["stale"][0]["days_since_update"] is None


def test_days_since_is_whole_days() -> None:
    assert days_since(_ago(30.999), NOW) == 30
    assert days_since(_ago(31), NOW) == 31


def test_policy_from_config() -> None:
    assert StalenessPolicy.from_config({}) == StalenessPolicy(30, 90)
    policy = StalenessPolicy.from_config({"lifecycle": {"staleness": {"fresh_days": 7}}})
    assert policy == StalenessPolicy(7, 90)
    assert classify(_ago(8), NOW, policy) is Staleness.AGING
    for bad in (
        {"lifecycle": {"staleness": {"fresh_days": -1}}},
        {"lifecycle": {"staleness": {"fresh_days": "x"}}},
        {"lifecycle": {"staleness": {"fresh_days": 20, "aging_days": 10}}},
        {"lifecycle": []},
    ):
        with pytest.raises(LifecycleConfigError):
            StalenessPolicy.from_config(bad)


def _populate(store: Store, clock: FixedClock, now: dt.datetime = NOW) -> dict[int, str]:
    ids = {}
    for days in (0, 30, 31, 90, 91, 200):
        clock.current = now - dt.timedelta(days=days)
        ids[days] = store.create(f"written {days} days ago", title=f"d{days}").id
    clock.current = now
    return ids


def test_store_report_edges(store: Store, clock: FixedClock) -> None:
    ids = _populate(store, clock)
    report = store_staleness(store)
    assert {e.id for e in report.fresh} == {ids[0], ids[30]}
    assert {e.id for e in report.aging} == {ids[31], ids[90]}
    assert [e.id for e in report.stale] == [ids[200], ids[91]]  # oldest first
    assert report.stale[0].days_since_update == 200
    data = report.to_dict()
    assert data["counts"] == {"fresh": 2, "aging": 2, "stale": 2}
    assert set(data["stale"][0]) == {"id", "path", "updated_at", "days_since_update", "staleness"}


def test_index_equals_scan(store: Store, clock: FixedClock) -> None:
    _populate(store, clock)
    served = store_staleness(store).to_dict()
    store.use_index = False
    assert store_staleness(store).to_dict() == served


def test_thresholds_from_committed_config(store: Store, clock: FixedClock) -> None:
    ids = _populate(store, clock)
    text = (store.path / "gitmem.yaml").read_text()
    plant(
        store,
        "gitmem.yaml",
        text + "lifecycle:\n  staleness:\n    fresh_days: 0\n    aging_days: 31\n",
    )
    reopened = gitmem.open(store.path, clock=clock)
    report = store_staleness(reopened)
    assert {e.id for e in report.fresh} == {ids[0]}
    assert {e.id for e in report.aging} == {ids[30], ids[31]}
    assert len(report.stale) == 3


def test_cli_stale(store: Store, clock: FixedClock) -> None:
    # The command line runs on the system clock: written relative to it, with an hour to spare.
    ids = _populate(store, clock, SystemClock().now() - dt.timedelta(hours=1))
    run = Gitmem(store.path, make_runner())
    data = run.json("stale")
    assert data["counts"] == {"fresh": 2, "aging": 2, "stale": 2}
    out = run("stale").stdout
    assert "2 fresh, 2 aging, 2 stale" in out
    assert ids[91] in out and ids[0] not in out
    assert ids[0] in run("stale", "--all").stdout
