"""Format 3 through the memory-aware merge: ``gitmem sync`` and the registered git driver
rank two sides by the version and time a reader sees (derived from each side's history),
not by the stored lines, which are equal on both sides (docs/format.md, "Format 3").

Every test writes the earlier change with the larger bytes, so a merge that fell back to the
bytes would keep the wrong side. Real repositories, the real git binary."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

import gitmem
from gitmem import FixedClock, Store
from gitmem.format.layout import legacy_path
from gitmem.store import merge as M
from gitmem.store import sync as S

T0 = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
BODY = "first line\nsecond line\nthird line\nfourth line\nfifth line\n"
EARLY, LATE = 60, 120
"""Minutes after T0 of the two sides' writes."""


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def at(minutes: int) -> FixedClock:
    return FixedClock(T0 + dt.timedelta(minutes=minutes))


def stored_text(store: Store, memory_id: str) -> str:
    data = store.db().snapshot().read(legacy_path(memory_id))
    assert data is not None
    return data.decode()


# -- gitmem sync ---------------------------------------------------------------------------


def clones(tmp_path: Path) -> tuple[str, Path, Path]:
    """A format 3 hub with one memory at version 1, and two clones of it."""
    hub = gitmem.init(tmp_path / "hub.git", bare=True, format=3, clock=at(0))
    memory = hub.create(BODY, title="The rule", tags=["x"])
    for name in ("early", "late"):
        git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), name)
    return memory.id, tmp_path / "early", tmp_path / "late"


@pytest.mark.parametrize("first", ["early", "late"])
def test_sync_gives_a_plain_field_to_the_later_write(tmp_path: Path, first: str) -> None:
    memory_id, early_path, late_path = clones(tmp_path)
    early = gitmem.open(early_path, clock=at(EARLY))
    late = gitmem.open(late_path, clock=at(LATE))
    early.update(memory_id, title="Zebra, the earlier")  # larger bytes than the later
    late.update(memory_id, title="Aardvark, the later")
    one, other = (early, late) if first == "early" else (late, early)
    S.sync(one)
    result = S.sync(other)  # merges: which side is ours depends on `first`
    assert result.merge == "merge" and result.decided == [(memory_id, "title")]
    S.sync(one)
    for store in (early, late):
        merged = gitmem.open(store.path).read(memory_id)
        assert merged.title == "Aardvark, the later"
        assert merged.extra[M.DECIDED_KEY] == {"title": "Zebra, the earlier"}
        # one update on each side over version 1; the time of the later one
        assert (merged.version, merged.updated_at) == (3, T0 + dt.timedelta(minutes=LATE))
        text = stored_text(store, memory_id)
        assert "version: 1\n" in text and "updated_at: 2026-11-22T10:00:00Z" in text
    assert early.db().tip().id == late.db().tip().id  # type: ignore[union-attr]


def test_sync_keeps_the_later_body_at_the_path_and_forks_the_earlier(tmp_path: Path) -> None:
    memory_id, early_path, late_path = clones(tmp_path)
    early = gitmem.open(early_path, clock=at(EARLY))
    late = gitmem.open(late_path, clock=at(LATE))
    early.update(memory_id, body=BODY.replace("third line", "zzz the earlier"))
    late.update(memory_id, body=BODY.replace("third line", "aaa the later"))
    S.sync(late)
    result = S.sync(early)
    (fork,) = result.forks
    store = gitmem.open(early_path)
    assert "aaa the later" in store.read(memory_id).body
    kept = store.read(fork.id)
    assert "zzz the earlier" in kept.body and kept.extra[M.FORK_KEY] == memory_id
    # The fork is a new file: it starts at the version and time its side read as.
    assert (kept.version, kept.updated_at) == (2, T0 + dt.timedelta(minutes=EARLY))
    assert "version: 2\n" in stored_text(store, fork.id)


def test_sync_of_a_format_2_store_still_counts_max_plus_one(tmp_path: Path) -> None:
    hub = gitmem.init(tmp_path / "hub.git", bare=True, format=2, clock=at(0))
    memory = hub.create(BODY, title="The rule")
    for name in ("early", "late"):
        git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), name)
    early = gitmem.open(tmp_path / "early", clock=at(EARLY))
    late = gitmem.open(tmp_path / "late", clock=at(LATE))
    early.update(memory.id, title="Zebra, the earlier")
    late.update(memory.id, title="Aardvark, the later")
    S.sync(early)
    S.sync(late)
    merged = gitmem.open(tmp_path / "late").read(memory.id)
    assert (merged.title, merged.version) == ("Aardvark, the later", 3)
    assert "version: 3\n" in stored_text(late, memory.id)


# -- the registered driver, run by git -------------------------------------------------------


def branches(tmp_path: Path) -> tuple[Path, str]:
    """A format 3 work-tree store (driver registered, as gitmem init leaves it) and one
    memory changed on two branches: `early` and `late`, each with the same field."""
    path = tmp_path / "store"
    store = gitmem.init(path, format=3, clock=at(0))
    assert M.driver_registered(path)
    memory = store.create(BODY, title="The rule")
    git(path, "branch", "early")
    git(path, "branch", "late")
    gitmem.open(path, branch="early", clock=at(EARLY)).update(
        memory.id, title="Zebra, the earlier"
    )
    gitmem.open(path, branch="late", clock=at(LATE)).update(memory.id, title="Aardvark, the later")
    return path, memory.id


@pytest.mark.parametrize(("on", "other"), [("early", "late"), ("late", "early")])
def test_git_merge_with_the_driver_gives_the_field_to_the_later_write(
    tmp_path: Path, on: str, other: str
) -> None:
    path, memory_id = branches(tmp_path)
    git(path, "checkout", "-q", on)
    merged = git(path, "merge", "--no-edit", other, check=False)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    memory = gitmem.open(path, branch=on).read(memory_id)
    assert memory.title == "Aardvark, the later"
    assert memory.extra[M.DECIDED_KEY] == {"title": "Zebra, the earlier"}
    assert (memory.version, memory.updated_at) == (3, T0 + dt.timedelta(minutes=LATE))
    assert "version: 1\n" in (path / legacy_path(memory_id)).read_text()


def test_a_rebase_names_the_replayed_commit(tmp_path: Path) -> None:
    path, memory_id = branches(tmp_path)
    git(path, "checkout", "-q", "early")
    done = git(path, "rebase", "late", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    memory = gitmem.open(path, branch="early").read(memory_id)
    assert memory.title == "Aardvark, the later"
    assert memory.extra[M.DECIDED_KEY] == {"title": "Zebra, the earlier"}


def test_a_cherry_pick_falls_back_to_the_bytes(tmp_path: Path) -> None:
    """A cherry-pick names no commit for the picked side while the driver runs: both sides
    rank by their stored lines (equal), so the bytes decide, whichever side is ours, and
    the other value stays in the file (docs/format.md, "Format 3")."""
    path, memory_id = branches(tmp_path)
    for on, other in (("early", "late"), ("late", "early")):
        git(path, "checkout", "-q", on)
        picked = git(path, "cherry-pick", other, check=False)
        assert picked.returncode == 0, picked.stdout + picked.stderr
        memory = gitmem.open(path, branch=on).read(memory_id)
        assert memory.title == "Zebra, the earlier"  # the larger bytes
        assert memory.extra[M.DECIDED_KEY] == {"title": "Aardvark, the later"}
        git(path, "reset", "-q", "--hard", "HEAD~1")


def test_the_driver_ignores_a_named_commit_that_does_not_hold_the_side(tmp_path: Path) -> None:
    """git's names are candidates only: a commit whose file is not the side's is no side."""
    path, memory_id = branches(tmp_path)
    git(path, "checkout", "-q", "early")
    rel = legacy_path(memory_id)
    ours = (path / rel).read_bytes()
    theirs = git(path, "show", f"late:{rel}").stdout.encode()
    (path / ".git" / "MERGE_HEAD").write_text(git(path, "rev-parse", "main").stdout)
    sides = M.driver_sides(path, rel, ours, theirs)
    assert sides is not None and sides.ours is not None and sides.ours.count == 1
    assert sides.theirs is None and not sides.known
    (path / ".git" / "MERGE_HEAD").write_text(git(path, "rev-parse", "late").stdout)
    sides = M.driver_sides(path, rel, ours, theirs)
    assert sides is not None and sides.known


def test_the_driver_in_a_format_2_store_merges_as_before(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = gitmem.init(path, format=2, clock=at(0))
    memory = store.create(BODY, title="The rule")
    git(path, "branch", "other")
    gitmem.open(path, branch="other", clock=at(EARLY)).update(memory.id, title="Zebra")
    gitmem.open(path, clock=at(LATE)).update(memory.id, title="Aardvark")
    assert M.driver_sides(path, legacy_path(memory.id), b"", b"") is None
    merged = git(path, "merge", "--no-edit", "other", check=False)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    read = gitmem.open(path).read(memory.id)
    assert (read.title, read.version) == ("Aardvark", 3)
