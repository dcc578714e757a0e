"""Appends by many agents to one document merge without forking (issue 15).

Agents append entries to shared documents (review histories, known issues, a log of
decisions) from the command line, whose bodies carry no final newline, and sync at different
moments. Whatever the order, every entry must land once, nothing may fork, and an entry one
clone already published must never be moved in front of by a later merge.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from conftest import run_git

import gitmem
from gitmem import FixedClock, Store
from gitmem.store import merge as M


def clone(tmp_path: Path, name: str, clock: FixedClock) -> Store:
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), name)
    return gitmem.open(tmp_path / name, clock=clock)


def forks(store: Store) -> list[str]:
    return [m.id for m in store.list(include_superseded=True) if ".fork-" in m.id]


@pytest.fixture
def team(tmp_path: Path) -> tuple[list[Store], str, FixedClock]:
    clock = FixedClock("2026-11-22T10:00:00Z")
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    # A body written from the command line: no final newline.
    doc = origin.create("# Decisions", id="notes/team/decisions", title="Decisions").id
    stores = [clone(tmp_path, name, clock) for name in ("a", "b", "c")]
    return stores, doc, clock


def test_three_agents_appending_in_turn_never_fork(
    team: tuple[list[Store], str, FixedClock],
) -> None:
    (a, b, c), doc, clock = team
    # c is in step with a's first entry; b is not. b's entry is dated before a's.
    a.append(doc, "## 2026-11-22T10:05:00Z a\nfrom a", agent="a")
    a.sync()
    c.sync()
    clock.advance(seconds=60)
    b.append(doc, "## 2026-11-22T10:01:00Z b\nfrom b", agent="b")
    b.sync()  # merges b's entry with a's: dated earlier, it must still not move a's
    clock.advance(seconds=60)
    c.append(doc, "## 2026-11-22T10:09:00Z c\nfrom c", agent="c")
    c.sync()
    for store in (a, b, c):
        store.sync()
    bodies = {store.read(doc).body for store in (a, b, c)}
    assert len(bodies) == 1
    body = bodies.pop()
    assert [body.count(f"from {x}") for x in "abc"] == [1, 1, 1]
    assert forks(a) == forks(b) == forks(c) == []


@pytest.mark.parametrize(
    "seed", [pytest.param(n, marks=[pytest.mark.slow] if n >= 2 else []) for n in range(6)]
)
def test_random_appends_and_syncs_converge_without_forks(
    team: tuple[list[Store], str, FixedClock], seed: int
) -> None:
    stores, doc, clock = team
    rng = random.Random(seed)
    entries: list[str] = []
    for n in range(12):
        store = rng.choice(stores)
        if rng.random() < 0.6:
            minute = rng.randrange(60)
            heading = f"## 2026-11-22T11:{minute:02d}:00Z entry {n}" if rng.random() < 0.7 else ""
            text = f"{heading}\n- item {n}" if heading else f"- item {n}"
            store.append(doc, text, agent=f"agent{stores.index(store)}")
            entries.append(f"item {n}")
        else:
            store.sync()
        clock.advance(seconds=30)
    for store in itertools.chain(stores, stores):
        store.sync()
    bodies = {store.read(doc).body for store in stores}
    assert len(bodies) == 1
    body = bodies.pop()
    for entry in entries:
        assert body.count(entry + "\n") + body.endswith(entry) == 1, (entry, body)
    assert all(forks(store) == [] for store in stores)


def test_sections_inserted_by_both_sides_at_one_place_keep_both() -> None:
    base = "# Log\n## 1\none\n## 3\nthree"
    ours = "# Log\n## 1\none\n## 2a\nmine\n## 3\nthree"
    theirs = "# Log\n## 1\none\n## 2b\nyours\n## 3\nthree\n## 4\nfour"
    merged = M.merge_sections(base, ours, theirs, ("2026-11-22", "2026-11-23"))
    assert merged == "# Log\n## 1\none\n## 2a\nmine\n## 2b\nyours\n## 3\nthree\n## 4\nfour"
    # Undated entries take their side's date: the earlier side's insert goes first.
    later = M.merge_sections(base, ours, theirs, ("2026-11-24", "2026-11-23"))
    assert later == "# Log\n## 1\none\n## 2b\nyours\n## 2a\nmine\n## 3\nthree\n## 4\nfour"


def test_a_section_changed_by_both_sides_is_not_section_merged() -> None:
    base = "## 1\none\n## 2\ntwo\n"
    ours, theirs = "## 1\nONE\n## 2\ntwo\n", "## 1\nuno\n## 2\ntwo\n"
    assert M.merge_sections(base, ours, theirs, ("a", "b")) is None
    # One side edits a section, the other appends: both kept.
    merged = M.merge_sections(base, "## 1\nONE\n## 2\ntwo\n", base + "## 3\nthree\n", ("a", "b"))
    assert merged == "## 1\nONE\n## 2\ntwo\n## 3\nthree\n"


def test_appends_to_a_capped_review_history_merge(tmp_path: Path) -> None:
    """Both sides append at the cap: each prunes the same oldest review into the archive."""
    import datetime as dt

    from gitmem.features.layered import LayeredStore

    clock = FixedClock("2026-11-22T10:00:00Z")
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    days = [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in range(10)]
    text = "# Review history\n\n" + "".join(f"## Review {d}\n\n- finding {d}\n\n" for d in days)
    LayeredStore(origin).create(
        {"layer": "shared-project", "project": "acme", "fileType": "review_history",
         "content": text}
    )
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    doc = "projects/acme/review_history"
    LayeredStore(a).append(doc, "## Review 2026-02-01\n\n- from a\n")
    LayeredStore(b).append(doc, "## Review 2026-02-02\n\n- from b\n")
    assert "2026-01-01" not in a.read(doc).body  # each side pruned the oldest review
    a.sync()
    b.sync()
    a.sync()
    body = a.read(doc).body
    assert body == b.read(doc).body
    assert "- from a" in body and "- from b" in body and "2026-01-01" not in body
    archive = a.read(f"{doc}_archive").body
    assert archive.count("## Review 2026-01-01") == 1
    assert forks(a) == forks(b) == []


def _move(store: Store, old: str, new: str) -> None:
    """A person moves a layered document with git mv, fixing its id line."""
    root = store.path
    (root / new).parent.mkdir(parents=True, exist_ok=True)
    run_git(root, "mv", old + ".md", new + ".md")
    path = root / (new + ".md")
    path.write_text(path.read_text().replace(f"id: {old}\n", f"id: {new}\n"))
    run_git(root, "commit", "-qam", f"move {old} to {new}")


@pytest.mark.parametrize("mover", ["first", "second"])
def test_a_moved_document_merged_with_an_edit_stays_moved(tmp_path: Path, mover: str) -> None:
    clock = FixedClock("2026-11-22T10:00:00Z")
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    old, new = "projects/old-name/known_issues", "projects/new-name/known_issues"
    body = "# Known issues\n\n- flaky login test\n\n- slow build\n"
    origin.create(body, id=old, title="Known issues")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    moving, editing = (a, b) if mover == "first" else (b, a)
    _move(moving, old, new)
    editing.update(old, body.replace("slow build", "slow build (fixed in 2.3)"))
    a.sync()
    b.sync()
    a.sync()
    for store in (a, b):
        assert store.get(old) is None, "the edit brought the old path back"
        moved = store.read(new)
        assert "fixed in 2.3" in moved.body and moved.id == new
    assert forks(a) == forks(b) == []
