"""Valid time (``valid_from``/``valid_until``: when a fact held in the world) beside
knowledge time (``at``: the commits), read together, written with a reason, and recall's
contradiction flag; against real stores, through the library, the CLI and MCP."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from conftest import run_git

from gitmem import FixedClock, Store
from gitmem.base.errors import InvalidInputError, InvalidMemoryError, NotFoundError
from gitmem.base.trailers import (
    ID_TRAILER,
    OP_TRAILER,
    REASON_TRAILER,
    VALID_UNTIL_TRAILER,
    parse_trailers,
)
from gitmem.entry.mcp import call, tools
from gitmem.store.merge import merge_metadata
from tests.clitools import Gitmem, make_runner

APRIL, FEB, JULY = "2026-04-01", "2026-02-01", "2026-07-01"


def _lead(store: Store, clock: FixedClock) -> tuple[str, str]:
    """Ana leads payments from March (written in January); in mid-June we learn that Bob
    has led it since June 1st (one supersede, which ends Ana's window)."""
    clock.current = dt.datetime(2026, 1, 10, tzinfo=dt.UTC)
    ana = store.create("The payments lead is Ana\n", title="Ana", valid_from="2026-03-01").id
    clock.current = dt.datetime(2026, 6, 15, tzinfo=dt.UTC)
    bob = store.supersede(ana, "The payments lead is Bob\n", title="Bob", valid_from="2026-06-01")
    return ana, bob.id


@pytest.mark.parametrize("use_index", [True, False])
def test_reads_before_inside_and_after_a_window_with_and_without_at(
    store: Store, clock: FixedClock, use_index: bool
) -> None:
    ana, bob = _lead(store, clock)
    store.use_index = use_index

    def listed(**kwargs: object) -> list[str]:
        return [m.id for m in store.list(**kwargs)]  # type: ignore[arg-type]

    def recalled(**kwargs: object) -> list[str]:
        return store.recall("who leads payments", **kwargs).ids  # type: ignore[arg-type]

    assert listed() == recalled() == [bob]  # valid now (June 15th)
    for when, expected in ((FEB, []), (APRIL, [ana]), (JULY, [bob])):
        assert listed(valid_at=when) == recalled(valid_at=when) == expected
        found = store.search("payments", valid_at=when).matches
        assert [m.id for m in found] == expected
    # What we knew on May 1st: Ana, with no end; valid then, and (as far as we knew) in July.
    assert listed(at="2026-05-01") == recalled(at="2026-05-01") == [ana]
    assert listed(at="2026-05-01", valid_at=JULY) == recalled(at="2026-05-01", valid_at=JULY)
    assert listed(at="2026-05-01", valid_at=JULY) == [ana]
    assert listed(at="2026-05-01", valid_at=FEB) == []
    assert sorted(listed(include_superseded=True)) == sorted([ana, bob])  # --all: expired too
    assert store.read(ana, valid_at=APRIL).valid_until == dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    with pytest.raises(NotFoundError, match="not valid at 2026-07-01"):
        store.read(ana, valid_at=JULY)


def test_supersede_valid_from_ends_the_old_memory_in_the_same_commit(
    store: Store, clock: FixedClock
) -> None:
    ana, bob = _lead(store, clock)
    changed = run_git(store.path, "show", "--name-only", "--format=", "HEAD").split()
    assert len(changed) == 2 and all(p.endswith(".md") for p in changed)
    assert store.read(ana).valid_until == store.read(bob).valid_from
    steps = [(v.memory_id, v.op) for v in store.history(bob).versions]
    assert steps == [(ana, "create"), (ana, "supersede"), (bob, "supersede")]


def test_invalidate_is_one_commit_whose_trailers_carry_the_reason(
    store: Store, clock: FixedClock
) -> None:
    memory = store.create("Deploys go through the staging cluster\n", valid_from="2026-01-01")
    head = store.db().tip()
    store.invalidate(memory.id, reason="staging was retired", valid_until="2026-11-01")
    tip = store.db().tip()
    assert tip is not None and head is not None and tip.parent_ids == [head.id]
    trailers = parse_trailers(tip.message)
    for pair in [
        (OP_TRAILER, "invalidate"),
        (ID_TRAILER, memory.id),
        (REASON_TRAILER, "staging was retired"),
        (VALID_UNTIL_TRAILER, "2026-11-01T00:00:00Z"),
    ]:
        assert pair in trailers
    assert store.list() == [] and [m.id for m in store.list(valid_at="2026-10-31")] == [memory.id]
    assert store.history(memory.id).versions[-1].op == "invalidate"
    again = store.create("x\n")
    assert store.invalidate(again.id, reason="wrong").valid_until == clock.now()  # now
    with pytest.raises(InvalidInputError, match="reason"):
        store.invalidate(again.id, reason=" ")
    with pytest.raises(InvalidMemoryError, match="before valid_from"):
        store.invalidate(memory.id, reason="r", valid_until="2025-12-31")
    with pytest.raises(InvalidInputError, match="not an RFC 3339"):
        store.update(memory.id, valid_from="next tuesday")


def _contradicting(store: Store) -> tuple[str, str, str, str]:
    friday = store.create("Deploys run on Fridays\n", title="Deploy day").id
    never = store.create(
        "Deploys never run on Fridays\n", title="No deploys", related=[(friday, "contradicts")]
    ).id
    old = store.create("The release train leaves weekly\n", title="Release train").id
    side_a = store.supersede(old, "The release train leaves every two weeks\n").id
    side_b = store.supersede(old, "The release train leaves monthly\n").id  # another clone's
    return friday, never, side_a, side_b


def test_recall_flags_contradictions_and_forks(store: Store, clock: FixedClock) -> None:
    friday, never, side_a, side_b = _contradicting(store)
    found = store.recall("deploys fridays")
    assert [(set(pair[:2]), pair[2]) for pair in found.contradictions] == [
        ({friday, never}, "contradicts")
    ]
    assert any(f"contradicts {friday}" in why for why in found[found.ids.index(never)].why)
    data = store.recall("release train").to_dict()
    assert [(set(c["ids"]), c["why"]) for c in data["contradictions"]] == [
        ({side_a, side_b}, "fork")
    ]
    store.invalidate(never, reason="we deploy on Fridays now", valid_until=clock.now())
    assert store.recall("deploys fridays").contradictions == []  # not both valid now
    out = Gitmem(store.path, make_runner())("recall", "release", "train", "--explain").stdout
    assert f"note: {side_a} and {side_b} contradict each other" in out or (
        f"note: {side_b} and {side_a} contradict each other" in out
    )


def test_mcp_tools_and_the_web_view_take_valid_at(store: Store, clock: FixedClock) -> None:
    ana, bob = _lead(store, clock)
    from gitmem.entry.web.pages import View

    view = View(store)
    for params, expected in [({}, [bob]), ({"valid_at": APRIL}, [ana]), ({"q": "payments"}, [bob])]:
        shown = view.page("/", params).data()
        assert [m["id"] for m in (shown["hits"] if "q" in params else shown)] == expected
    by_name = {spec.name: spec for spec in tools(store)}
    result, failed = call(by_name["recall"], {"query": "payments lead", "valid_at": APRIL})
    assert not failed and result.structured is not None
    assert [h["id"] for h in result.structured["hits"]] == [ana]
    _, failed = call(by_name["get_memory"], {"id": ana, "valid_at": JULY})
    assert failed
    result, failed = call(
        by_name["remember"], {"content": "Carol leads payments", "valid_from": "2027-01-01"}
    )
    assert not failed and result.structured is not None
    assert result.structured["memory"]["valid_from"] == "2027-01-01T00:00:00Z"


def test_cli_valid_time(tmp_path: Path) -> None:
    gm = Gitmem(tmp_path / "s", make_runner())
    gm("init", str(tmp_path / "s"))
    old = gm("add", "Ana leads payments", "--valid-from", "2020-01-01").stdout.strip()
    new = gm("supersede", old, "Bob leads payments", "--valid-from", "2021-06-01").stdout.strip()
    later = gm("add", "Carol will lead payments", "--valid-from", "2999-01-01").stdout.strip()
    assert [m["id"] for m in gm.json("ls")] == [new]
    assert [m["id"] for m in gm.json("ls", "--valid-at", "2020-06-01")] == [old]
    assert {m["id"] for m in gm.json("ls", "--all")} == {old, new, later}
    assert "2021-06-01 .." in gm("history", new).stdout
    gm("update", new, "--valid-until", "2022-01-01")
    assert gm("ls").stdout.strip() == "No memories."
    assert gm.json("search", "payments", "--valid-at", "2021-07-01")["hits"][0]["id"] == new
    gm("invalidate", later, "--reason", "Carol declined", "--valid-until", "2999-01-01")
    assert "Gitmem-Reason: Carol declined" in run_git(tmp_path / "s", "log", "-1")
    refused = gm.fails(NotFoundError.exit_code, "show", old, "--valid-at", "2030-01-01")
    assert "not valid at" in refused


def test_the_merge_keeps_the_earlier_end_and_records_the_other() -> None:
    decided: dict[str, object] = {}
    base = {"id": "m", "created_at": "2026-01-01T00:00:00Z"}
    first = {**base, "valid_until": "2026-06-01T00:00:00Z"}
    second = {**base, "valid_until": "2026-05-01"}
    merged = merge_metadata(base, first, second, decided)
    assert merged["valid_until"] == "2026-05-01"
    assert decided == {"valid_until": "2026-06-01T00:00:00Z"}
