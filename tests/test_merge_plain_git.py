"""Merging one memory changed on two branches: with plain git alone (a host's merge button:
files carry no line every write changes, so edits of different lines merge), and with
``gitmem sync`` and the registered driver, which rank the two sides by the version and
time a reader of each side sees, derived from its history (docs/format.md).

Every ranking test writes the earlier change with the larger bytes, so a merge that fell
back to the bytes would keep the wrong side. Real repositories, the real git binary."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

import gitmem
from gitmem import FixedClock, Store
from gitmem.format.layout import memory_path
from gitmem.store import merge as M
from gitmem.store import mergedriver

T0 = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
BODY = "first line\nsecond line\nthird line\nfourth line\nfifth line\n"
EARLY, LATE = 60, 120
"""Minutes after T0 of the two sides' writes."""


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def at(minutes: int) -> FixedClock:
    return FixedClock(T0 + dt.timedelta(minutes=minutes))


def stored_text(store: Store, memory_id: str) -> str:
    data = store.db().snapshot().read(memory_path(memory_id))
    assert data is not None
    return data.decode()


def no_index(store: Store) -> Store:
    store.use_index = False  # the reference path: everything from git's history
    return store


# -- plain git: a host's merge button --------------------------------------------------------


def two_pull_requests(tmp_path: Path) -> tuple[Path, str, subprocess.CompletedProcess[str]]:
    """A memory at version 1 on main; branch a changes its title (front-matter), branch b
    its fourth body line, each as gitmem writes (one update each, an hour apart); then
    `git merge b` on a, by git alone (no merge driver registered)."""
    path = tmp_path / "store"
    store = gitmem.init(path, clock=at(0))
    git(path, "config", "--remove-section", "merge.gitmem")
    memory = store.create(BODY, title="The rule", tags=["x"])
    git(path, "branch", "a")
    git(path, "branch", "b")
    gitmem.open(path, branch="a", clock=at(60)).update(memory.id, title="The rule, revised")
    gitmem.open(path, branch="b", clock=at(120)).update(
        memory.id, body=BODY.replace("fourth line", "fourth line, edited")
    )
    git(path, "checkout", "-q", "a")
    merged = git(path, "merge", "--no-edit", "b", check=False)
    return path, memory.id, merged


def test_two_pull_requests_merge_with_plain_git(tmp_path: Path) -> None:
    path, memory_id, merged = two_pull_requests(tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert not (path / ".git" / "MERGE_HEAD").exists()
    text = (path / memory_path(memory_id)).read_text()
    assert "title: The rule, revised\n" in text and "fourth line, edited" in text
    assert "<<<<<<<" not in text and "version:" not in text and "updated_at:" not in text
    store = gitmem.open(path, branch="a")
    memory = store.read(memory_id)
    # create + one update on each side; updated_at the later of the two.
    assert (memory.version, memory.updated_at) == (3, T0 + dt.timedelta(minutes=120))
    assert memory.title == "The rule, revised" and "fourth line, edited" in memory.body
    (listed,) = store.list()  # served by the index
    assert (listed.version, listed.updated_at) == (3, memory.updated_at)
    plain = no_index(gitmem.open(path, branch="a"))
    (scanned,) = plain.list()
    assert (scanned.version, scanned.updated_at) == (3, memory.updated_at)
    for each in (store, plain):
        steps = each.history(memory_id).versions
        assert [s.version for s in steps] == [1, 2, 3, 3]  # create, a, b, the merge
        assert steps[-1].memory is not None and steps[-1].memory.version == 3
    store.reindex()
    assert store.list()[0].version == 3
    # a write on top of the merge counts from there, with or without the index
    after = gitmem.open(path, branch="a", clock=at(180)).update(memory_id, title="after")
    assert after.version == 4
    assert no_index(gitmem.open(path, branch="a")).read(memory_id).version == 4


# -- gitmem sync ---------------------------------------------------------------------------


def clones(tmp_path: Path) -> tuple[str, Path, Path]:
    """A hub with one memory at version 1, and two clones of it."""
    hub = gitmem.init(tmp_path / "hub.git", bare=True, clock=at(0))
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
    one.sync()
    result = other.sync()  # merges: which side is ours depends on `first`
    assert result.merge == "merge" and result.decided == [(memory_id, "title")]
    one.sync()
    for store in (early, late):
        merged = gitmem.open(store.path).read(memory_id)
        assert merged.title == "Aardvark, the later"
        assert merged.extra[M.DECIDED_KEY] == {"title": "Zebra, the earlier"}
        # one update on each side over version 1; the time of the later one
        assert (merged.version, merged.updated_at) == (3, T0 + dt.timedelta(minutes=LATE))
        assert "version:" not in stored_text(store, memory_id)
    assert early.db().tip().id == late.db().tip().id  # type: ignore[union-attr]


def test_sync_keeps_the_later_body_at_the_path_and_forks_the_earlier(tmp_path: Path) -> None:
    memory_id, early_path, late_path = clones(tmp_path)
    early = gitmem.open(early_path, clock=at(EARLY))
    late = gitmem.open(late_path, clock=at(LATE))
    early.update(memory_id, body=BODY.replace("third line", "zzz the earlier"))
    late.update(memory_id, body=BODY.replace("third line", "aaa the later"))
    late.sync()
    result = early.sync()
    (fork,) = result.forks
    store = gitmem.open(early_path)
    assert "aaa the later" in store.read(memory_id).body
    kept = store.read(fork.id)
    assert "zzz the earlier" in kept.body and kept.extra[M.FORK_KEY] == memory_id
    # The fork is a new memory, made by the merge commit: its first version.
    merge_time = store.db().tip().author.time  # type: ignore[union-attr]
    assert (kept.version, int(kept.updated_at.timestamp())) == (1, merge_time)
    assert "version:" not in stored_text(store, fork.id)


# -- the registered driver, run by git -------------------------------------------------------


def branches(tmp_path: Path) -> tuple[Path, str]:
    """A work-tree store (driver registered, as gitmem init leaves it) and one memory
    changed on two branches: `early` and `late`, each with the same field."""
    path = tmp_path / "store"
    store = gitmem.init(path, clock=at(0))
    assert mergedriver.driver_registered(path)
    memory = store.create(BODY, title="The rule")
    git(path, "branch", "early")
    git(path, "branch", "late")
    gitmem.open(path, branch="early", clock=at(EARLY)).update(memory.id, title="Zebra, the earlier")
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
    assert "version:" not in (path / memory_path(memory_id)).read_text()


def test_a_rebase_names_the_replayed_commit(tmp_path: Path) -> None:
    path, memory_id = branches(tmp_path)
    git(path, "checkout", "-q", "early")
    done = git(path, "rebase", "late", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    memory = gitmem.open(path, branch="early").read(memory_id)
    assert memory.title == "Aardvark, the later"
    assert memory.extra[M.DECIDED_KEY] == {"title": "Zebra, the earlier"}


def test_a_cherry_pick_falls_back_to_the_bytes(tmp_path: Path) -> None:
    """A cherry-pick names no commit for the picked side while the driver runs: the bytes
    decide, whichever side is ours, and the other value stays in the file."""
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
    rel = memory_path(memory_id)
    ours = (path / rel).read_bytes()
    theirs = git(path, "show", f"late:{rel}").stdout.encode()
    (path / ".git" / "MERGE_HEAD").write_text(git(path, "rev-parse", "main").stdout)
    sides = mergedriver.driver_sides(path, rel, ours, theirs)
    assert sides is not None and sides.ours is not None and sides.ours.count == 2
    assert sides.theirs is None and not sides.known
    (path / ".git" / "MERGE_HEAD").write_text(git(path, "rev-parse", "late").stdout)
    sides = mergedriver.driver_sides(path, rel, ours, theirs)
    assert sides is not None and sides.known
