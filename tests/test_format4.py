"""Format 4: plain ids in 16-way folders (``memories/a/b/c/d/<id>.md``), read at either
layout, and the migration from format 3 (issue 17, "where the shard layout is the limit").
Real repositories; the real git binary where git's own merge is the point."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest
from conftest import run_git

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import InvalidIdError
from gitmem.base.trailers import CommitSpec
from gitmem.entry import team
from gitmem.features import audit, review
from gitmem.features.migrate import migrate
from gitmem.format.layout import (
    fanout,
    fanout_path,
    id_from_path,
    legacy_path,
    memory_path,
    memory_paths,
    shard,
)
from gitmem.git.objects import Snapshot
from gitmem.store import sync as S

CTX = multiprocessing.get_context("spawn")

T0 = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
UUID_ID = "mem_5f3a0c1e-8a4b-4c1d-9e2f-0123456789ab"


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def at(minutes: int) -> FixedClock:
    return FixedClock(T0 + dt.timedelta(minutes=minutes))


def tree_files(path: Path, rev: str = "HEAD") -> list[str]:
    out = git(path, "ls-tree", "-r", "--name-only", rev, "--", "memories").stdout
    return out.split()


def no_index(store: Store) -> Store:
    store.use_index = False
    return store


# -- the layout ---------------------------------------------------------------------------------


def test_the_16_way_path_of_a_uuid_id_is_its_first_four_hex_digits() -> None:
    assert fanout(UUID_ID) == "5/f/3/a"
    assert memory_path(UUID_ID) == f"memories/5/f/3/a/{UUID_ID}.md"
    assert memory_path(UUID_ID, 3) == f"memories/5f/{UUID_ID}.md" == legacy_path(UUID_ID)
    assert memory_paths(UUID_ID) == (fanout_path(UUID_ID), legacy_path(UUID_ID))
    # any other plain id: the first four hex digits of its SHA-1, as the legacy shard's two
    import hashlib

    digest = hashlib.sha1(b"my-note").hexdigest()
    assert memory_path("my-note") == f"memories/{'/'.join(digest[:4])}/my-note.md"
    assert shard("my-note") == digest[:2]
    # a path id is its own path in every format
    assert (
        memory_path("projects/acme/x") == "projects/acme/x.md" == memory_path("projects/acme/x", 3)
    )
    assert memory_paths("projects/acme/x") == ("projects/acme/x.md",)


def test_id_from_path_takes_both_layouts_at_the_ids_own_place_only() -> None:
    assert id_from_path(f"memories/5/f/3/a/{UUID_ID}.md") == UUID_ID
    assert id_from_path(f"memories/5f/{UUID_ID}.md") == UUID_ID
    for wrong in (
        f"memories/5/f/3/b/{UUID_ID}.md",  # another id's folder
        f"memories/5f/3a/{UUID_ID}.md",  # neither layout
        f"memories/5/f/{UUID_ID}.md",
        f"memories/5/f/3/a/0/{UUID_ID}.md",
        f"memories/00/{UUID_ID}.md",
    ):
        assert id_from_path(wrong) is None, wrong


@pytest.mark.parametrize("bad", ["../x", "a/../b", "..", "mem_../x", "memories/5/f/3/a/x", "x\\y"])
def test_hostile_ids_are_still_refused(bad: str) -> None:
    with pytest.raises(InvalidIdError):
        memory_path(bad)
    with pytest.raises(InvalidIdError):
        memory_paths(bad)


# -- new stores and both-path readers ----------------------------------------------------------


def test_new_stores_are_format_4_and_write_16_way_paths(any_store: Store) -> None:
    assert any_store.config().format == 4
    memory = any_store.create("body", title="t")
    assert memory.path == fanout_path(memory.id)
    snap = any_store.db().snapshot()
    assert snap.read(fanout_path(memory.id)) is not None
    assert snap.read(legacy_path(memory.id)) is None


def test_a_format_3_store_still_writes_legacy_paths(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", format=3)
    memory = store.create("body")
    assert memory.path == legacy_path(memory.id)
    assert tree_files(tmp_path / "s") == [legacy_path(memory.id)]


def _with_a_legacy_file(tmp_path: Path) -> tuple[Store, str]:
    """A format 4 store holding one memory at its legacy path (as a branch made before
    the migration leaves it), committed with plain git."""
    old = gitmem.init(tmp_path / "old", format=3, clock=at(0))
    memory = old.create("legacy body\n", title="legacy", id="legacy-note")
    gitmem.init(tmp_path / "s", clock=at(1))
    data = (tmp_path / "old" / legacy_path(memory.id)).read_bytes()
    target = tmp_path / "s" / legacy_path(memory.id)
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    git(tmp_path / "s", "add", "-A")
    git(tmp_path / "s", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "by hand")
    return gitmem.open(tmp_path / "s", clock=at(2)), memory.id


def test_a_legacy_file_in_a_format_4_store_is_read_and_updated_where_it_is(tmp_path: Path) -> None:
    store, memory_id = _with_a_legacy_file(tmp_path)
    for each in (store, no_index(gitmem.open(tmp_path / "s"))):
        found = each.read(memory_id)
        assert found.body == "legacy body\n" and found.path == legacy_path(memory_id)
        assert memory_id in {m.id for m in each.list()}
    assert store.resolve_id("legacy-no") == memory_id
    updated = store.update(memory_id, "legacy body, edited\n")
    assert updated.version == 2
    assert tree_files(tmp_path / "s") == [legacy_path(memory_id)]
    assert [v.version for v in store.history(memory_id)] == [1, 2]
    assert no_index(gitmem.open(tmp_path / "s")).read(memory_id).version == 2
    with pytest.raises(gitmem.AlreadyExistsError):
        store.create("again", id=memory_id)
    assert store.delete(memory_id)
    assert tree_files(tmp_path / "s") == []
    restored = store.restore(memory_id)
    # a restored memory is a new file: at its format's path
    assert restored.path == fanout_path(memory_id)
    assert tree_files(tmp_path / "s") == [fanout_path(memory_id)]


def test_an_id_at_both_paths_reads_the_format_4_file_and_lists_the_other(tmp_path: Path) -> None:
    _, memory_id = _with_a_legacy_file(tmp_path)
    root = tmp_path / "s"
    text = (root / legacy_path(memory_id)).read_text().replace("legacy body", "the 16-way one")
    (root / fanout_path(memory_id)).parent.mkdir(parents=True)
    (root / fanout_path(memory_id)).write_text(text)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "a copy by hand")
    for each in (gitmem.open(root), no_index(gitmem.open(root))):
        assert each.read(memory_id).body == "the 16-way one\n"
        assert [m.id for m in each.list()] == [memory_id]
        assert [p.path for p in each.problems()] == [legacy_path(memory_id)]
    # the 16-way file removed: the legacy one is read again
    git(root, "rm", "-q", fanout_path(memory_id))
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "copy removed")
    for each in (gitmem.open(root), no_index(gitmem.open(root))):
        assert each.read(memory_id).body == "legacy body\n"
        assert not each.problems()


# -- migrate 3 -> 4 ---------------------------------------------------------------------------


def _format_3_store(path: Path) -> tuple[Store, list[str]]:
    store = gitmem.init(path, format=3, clock=at(0))
    ids = []
    for n in range(6):
        memory = store.create(f"body {n}\n", title=f"t{n}")
        ids.append(memory.id)
    ids.append(store.create("named\n", id="a-named-one").id)
    later = gitmem.open(path, clock=at(30))
    later.update(ids[0], "body 0, second\n")
    later.update(ids[0], "body 0, third\n")
    later.update(ids[1], title="t1 again")
    return gitmem.open(path, clock=at(40)), ids


def _seen(store: Store, ids: list[str]) -> dict[str, tuple[int, dt.datetime, str]]:
    return {i: (m.version, m.updated_at, m.body) for i in ids if (m := store.read(i))}


def test_migrate_3_to_4_renames_every_file_in_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "m"
    store, ids = _format_3_store(path)
    before = _seen(store, ids)
    histories = {i: [(v.commit, v.version) for v in store.history(i)] for i in ids}
    tip = store.db().tip()
    assert tip is not None
    steps = migrate(store, to=4)
    assert [(s.from_format, s.to_format, s.moved_count) for s in steps] == [(3, 4, len(ids))]
    assert sorted(tree_files(path)) == sorted(fanout_path(i) for i in ids)
    assert "format: 4" in (path / "gitmem.yaml").read_text()
    # one commit; each file renamed with its blob unchanged (git: R100)
    log = git(path, "log", "--format=%H", f"{tip.id}..HEAD").stdout.split()
    assert len(log) == 1
    renames = git(path, "diff", "-M", "--name-status", str(tip.id), "HEAD", "--", "memories").stdout
    assert sorted(renames.splitlines()) == sorted(
        f"R100\t{legacy_path(i)}\t{fanout_path(i)}" for i in ids
    )
    # every memory reads the same, from the index and from history, and its history runs
    # through the migration (which is no step of it)
    for each in (gitmem.open(path), no_index(gitmem.open(path))):
        assert _seen(each, ids) == before
        assert {i: [(v.commit, v.version) for v in each.history(i)] for i in ids} == histories
    # a second run does nothing
    assert migrate(gitmem.open(path), to=4) == []
    assert len(git(path, "log", "--format=%H", f"{tip.id}..HEAD").stdout.split()) == 1


def test_a_commit_without_twin_paths_is_its_own_memory_changes(tmp_path: Path) -> None:
    # The version rows read a commit's file changes as memory changes. Where no id has a
    # file at both paths (a bulk import's million files), that is the diff itself; the
    # migration's renames are settled per id (no change of any memory).
    from gitmem.store.changes import memory_changes, paths_changed

    path = tmp_path / "m"
    store, ids = _format_3_store(path)
    repo = store.db().repo
    tip = store.db().tip()
    assert tip is not None and tip.parents
    changed = paths_changed(repo, tip.parents[0].tree, tip.tree)
    assert changed and memory_changes(tip.parents[0].tree, tip.tree, changed) == changed
    migrate(store, to=4)
    moved = store.db().tip()
    assert moved is not None
    renames = paths_changed(repo, moved.parents[0].tree, moved.tree)
    assert len(renames) == 2 * len(ids)  # every file: removed at one path, added at the other
    assert memory_changes(moved.parents[0].tree, moved.tree, renames) == {}


def test_the_index_and_history_agree_across_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "m"
    store, ids = _format_3_store(path)
    migrate(store, to=4)
    after = gitmem.open(path, clock=at(50))
    after.update(ids[0], "body 0, fourth\n")
    after.update(ids[2], "body 2, second\n")
    new = after.create("made at format 4\n")
    for memory_id, version in ((ids[0], 4), (ids[1], 2), (ids[2], 2), (new.id, 1)):
        walked = no_index(gitmem.open(path)).read(memory_id)
        indexed = gitmem.open(path).read(memory_id)
        assert walked.version == indexed.version == version, memory_id
        assert walked.updated_at == indexed.updated_at
        listed = {m.id: m.version for m in gitmem.open(path).list()}
        assert listed[memory_id] == version
    # a rebuilt index derives the same
    fresh = gitmem.open(path)
    fresh.index().rebuild()
    assert fresh.read(ids[0]).version == 4
    steps = [v.version for v in gitmem.open(path).history(ids[0])]
    assert steps == [1, 2, 3, 4]
    assert steps == [v.version for v in no_index(gitmem.open(path)).history(ids[0])]
    # log by id, blame, review and undo all see the memory's whole history
    assert len(gitmem.open(path).log(id=ids[0])) == 4
    blame = audit.blame(gitmem.open(path), ids[0])
    assert [line.text for line in blame] == ["body 0, fourth"]
    first = git(path, "rev-list", "--max-parents=0", "HEAD").stdout.strip()
    shown = review.review(gitmem.open(path), f"{first}..HEAD")
    changed = {c.id: c for c in shown.changes}
    assert ids[0] in changed and changed[ids[0]].path == fanout_path(ids[0])
    assert all(c.path.count("/") in (1, 5) for c in shown.changes)  # no legacy twin listed
    undone = audit.undo(gitmem.open(path, clock=at(60)), commit="HEAD~1")
    assert undone.reverted == [ids[2]]
    assert gitmem.open(path).read(ids[2]).body == "body 2\n"
    # a commit from before the migration: the migration moved its file later, so its undo
    # is refused (it would bring the legacy file back beside the moved one)
    last_before = git(path, "rev-parse", "HEAD~5").stdout.strip()
    assert "format 3 to 4" in git(path, "log", "-1", "--format=%s", "HEAD~4").stdout
    with pytest.raises(audit.UndoRefusedError, match="changed later"):
        audit.undo(gitmem.open(path, clock=at(70)), commit=last_before)


def test_the_index_keeps_its_rows_across_the_migration(tmp_path: Path) -> None:
    """The migration renames files with their blobs unchanged: the index's rows only change
    path (their ids, FTS entries and vectors stay), and search finds the same memories."""
    path = tmp_path / "m"
    store, ids = _format_3_store(path)
    found_before = [m.id for m in store.search("body")]
    with store.index().reading() as conn:
        rows_before = dict(conn.execute("SELECT id, rowid FROM memories").fetchall())
    migrate(store, to=4)
    after = gitmem.open(path)
    assert [m.id for m in after.search("body")] == found_before
    with after.index().reading() as conn:
        rows = {i: (r, p) for i, r, p in conn.execute("SELECT id, rowid, path FROM memories")}
    assert {i: r for i, (r, _) in rows.items()} == rows_before
    assert {i: p for i, (_, p) in rows.items()} == {i: fanout_path(i) for i in ids}
    assert not after.problems()
    fresh = gitmem.open(path)
    fresh.index().rebuild()
    assert [m.id for m in fresh.search("body")] == found_before


def _hand_commit(store: Store, stage: Callable[[Snapshot], None], subject: str) -> None:
    """A commit staging files as a person or another tool might (no gitmem write)."""

    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        stage(snap)
        return CommitSpec(subject), None

    store.db().write(plan)


@pytest.mark.parametrize("bare", [False, True], ids=["worktree", "bare"])
def test_the_migration_merges_what_both_layouts_hold(tmp_path: Path, bare: bool) -> None:
    """A store written by both layouts (a format 4 file put in a format 3 store, an id at
    both paths) and ids whose legacy shard is not their 16-way folder (``mem_ab-notes``:
    two hex digits, not four) migrate to exactly the tree each id's move gives; the rest
    stays; the work tree and git's index follow the commit."""
    path = tmp_path / ("m.git" if bare else "m")
    store = gitmem.init(path, format=3, bare=bare, clock=at(0))
    same = "mem_5f3a0c1e-8a4b-4c1d-9e2f-0123456789"  # one a/b/c/d folder: 5/f/3/a
    plain = [store.create(f"legacy {n}\n", id=f"{same}a{n}").id for n in range(3)]
    plain.append(store.create("named\n", id="a-named-one").id)
    misfits = [store.create(f"{i}\n", id=i).id for i in ("mem_ab-notes", "mem_5fz", "mem_5f-x")]
    assert all(fanout(i)[::2][:2] != shard(i) for i in misfits)
    ahead = store.create("moved ahead\n", id=f"{same}b0").id  # at its 16-way path already
    twin = store.create("twin\n", id=f"{same}b1").id  # at both paths
    stray = f"memories/{shard(plain[0])}/README.txt"
    elsewhere = f"memories/{shard(plain[0])}/mem_0000abcd-x.md"  # not its own shard

    def by_hand(snap: Snapshot) -> None:
        snap.move(legacy_path(ahead), fanout_path(ahead))
        data = snap.read(legacy_path(twin))
        assert data is not None
        snap.put(fanout_path(twin), data.replace(b"twin", b"the 16-way twin"))
        snap.put(stray, b"not a memory\n")
        snap.put(elsewhere, b"---\nid: mem_0000abcd-x\n---\nlost\n")

    _hand_commit(store, by_hand, "files by hand")
    ids = [*plain, *misfits, ahead, twin]
    before = {i: gitmem.open(path).read(i).body for i in ids}
    assert before[twin] == "the 16-way twin\n"
    problems = sorted(p.path for p in gitmem.open(path).problems())
    tip = store.db().tip()
    assert tip is not None

    steps = migrate(gitmem.open(path), to=4)

    moved = [*plain, *misfits]
    assert steps[0].moved_count == len(moved)
    assert sorted(new for _, new in steps[0].moved) == sorted(fanout_path(i) for i in moved)
    assert sorted(tree_files(path)) == sorted(
        [fanout_path(i) for i in [*moved, ahead, twin]] + [legacy_path(twin), stray, elsewhere]
    )
    renames = git(path, "diff", "-M", "--name-status", str(tip.id), "HEAD", "--", "memories")
    assert sorted(renames.stdout.splitlines()) == sorted(
        f"R100\t{legacy_path(i)}\t{fanout_path(i)}" for i in moved
    )
    for each in (gitmem.open(path), no_index(gitmem.open(path))):
        assert {i: each.read(i).body for i in ids} == before
        assert sorted(p.path for p in each.problems()) == problems
    if not bare:
        assert run_git(path, "status", "--porcelain", "--untracked-files=all") == ""
        assert run_git(path, "diff-index", "--cached", "HEAD") == ""
        on_disk = sorted(
            str(f.relative_to(path)) for f in (path / "memories").rglob("*") if f.is_file()
        )
        assert on_disk == sorted(tree_files(path))
        folders = [d for d in (path / "memories").rglob("*") if d.is_dir()]
        assert all(any(d.iterdir()) for d in folders)  # no empty folder left behind
    assert run_git(path, "fsck", "--strict", "--no-dangling") == ""


def test_the_migration_refuses_a_file_where_its_folder_goes(tmp_path: Path) -> None:
    path = tmp_path / "m"
    store = gitmem.init(path, format=3, clock=at(0))
    memory = store.create("body\n", id="mem_5f3a0c1e-8a4b-4c1d-9e2f-0123456789ab")
    _hand_commit(store, lambda snap: snap.put("memories/5/f", b"a file\n"), "a file by hand")
    head = git(path, "rev-parse", "HEAD").stdout
    with pytest.raises(gitmem.GitmemError, match="memories/5/f"):
        migrate(gitmem.open(path), to=4)
    assert git(path, "rev-parse", "HEAD").stdout == head
    assert gitmem.open(path).read(memory.id).body == "body\n"


def _migrate_child(path: str) -> None:
    migrate(gitmem.open(path), to=4)


@pytest.mark.slow
def test_a_kill_during_the_migration_leaves_format_3_or_format_4(tmp_path: Path) -> None:
    rng = random.Random(11)
    for round_ in range(3):
        path = tmp_path / f"store{round_}"
        store = gitmem.init(path, format=3)
        with store.transaction():
            ids = [store.create(f"memory {n}\n").id for n in range(400)]
        proc = CTX.Process(target=_migrate_child, args=(str(path),))
        proc.start()
        time.sleep(rng.uniform(0.3, 2.0))
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        reopened = gitmem.open(path)
        files = sorted(tree_files(path))
        if reopened.config().format == 3:
            assert files == sorted(legacy_path(i) for i in ids)
        else:
            assert reopened.config().format == 4
            assert files == sorted(fanout_path(i) for i in ids)
        assert len(reopened.list()) == len(ids)
        migrate(reopened, to=4)
        final = gitmem.open(path)
        assert final.config().format == 4 and len(final.list()) == len(ids)
        assert sorted(tree_files(path)) == sorted(fanout_path(i) for i in ids)
        assert run_git(path, "fsck", "--strict", "--no-dangling") == ""


def test_migrate_dry_run_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m"
    store, ids = _format_3_store(path)
    head = git(path, "rev-parse", "HEAD").stdout
    steps = migrate(store, to=4, dry_run=True)
    assert steps[0].moved_count == len(ids) and steps[0].commit is None
    assert git(path, "rev-parse", "HEAD").stdout == head
    assert sorted(tree_files(path)) == sorted(legacy_path(i) for i in ids)


def test_a_killed_migration_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    """The step stages every rename, then one commit moves the branch by compare-and-swap:
    a failure before the branch moves (here: the work tree refuses) leaves nothing."""
    path = tmp_path / "m"
    store, ids = _format_3_store(path)
    head = git(path, "rev-parse", "HEAD").stdout
    (path / legacy_path(ids[3])).write_text("edited by hand, not committed\n")
    with pytest.raises(gitmem.GitmemError):
        migrate(store, to=4)
    assert git(path, "rev-parse", "HEAD").stdout == head
    assert gitmem.open(path).config().format == 3


# -- merging across the migration -------------------------------------------------------------


def _pre_migration_branch(tmp_path: Path) -> tuple[Path, list[str]]:
    """main migrates to 4; branch `old`, made before, updates a memory at its legacy path
    and creates one there."""
    path = tmp_path / "m"
    _, ids = _format_3_store(path)
    git(path, "branch", "old")
    on_old = gitmem.open(path, branch="old", clock=at(45))
    on_old.update(ids[0], "body 0, on the old branch\n")
    migrate(gitmem.open(path, clock=at(46)), to=4)
    return path, ids


def test_plain_git_merge_follows_the_rename(tmp_path: Path) -> None:
    path, ids = _pre_migration_branch(tmp_path)
    git(path, "config", "--unset", "merge.gitmem.driver", check=False)
    merged = git(
        path, "-c", "user.name=t", "-c", "user.email=t@x", "merge", "--no-edit", "old", check=False
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    files = tree_files(path)
    assert fanout_path(ids[0]) in files and legacy_path(ids[0]) not in files
    for each in (gitmem.open(path), no_index(gitmem.open(path))):
        memory = each.read(ids[0])
        # stored 1, two updates before the branch, one on it: version 4
        assert (memory.body, memory.version) == ("body 0, on the old branch\n", 4)
        assert memory.updated_at == T0 + dt.timedelta(minutes=45)


def test_gitmem_sync_merges_a_pre_migration_clone(tmp_path: Path) -> None:
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "hub.git")
    seed, ids = _format_3_store(tmp_path / "seed")
    S.add_remote(seed, "origin", str(hub))
    S.sync(seed)
    team.clone(str(hub), tmp_path / "b")
    b = gitmem.open(tmp_path / "b", clock=at(45))
    b.update(ids[0], "body 0, at b\n")
    b_new = b.create("made at b before the migration\n")
    migrate(gitmem.open(tmp_path / "seed", clock=at(46)), to=4)
    a = gitmem.open(tmp_path / "seed", clock=at(47))
    a.update(ids[1], "body 1, at a after the migration\n")
    S.sync(a)
    S.sync(b)  # b merges the migrated hub into its pre-migration edits, and pushes
    S.sync(a)
    for where in ("seed", "b"):
        store = gitmem.open(tmp_path / where)
        assert store.config().format == 4
        files = tree_files(tmp_path / where)
        assert fanout_path(ids[0]) in files and legacy_path(ids[0]) not in files
        for each in (store, no_index(gitmem.open(tmp_path / where))):
            assert (each.read(ids[0]).body, each.read(ids[0]).version) == ("body 0, at b\n", 4)
            assert (each.read(ids[1]).body, each.read(ids[1]).version) == (
                "body 1, at a after the migration\n",
                3,
            )
            assert each.read(b_new.id).body == "made at b before the migration\n"
        assert not store.problems()


@pytest.mark.parametrize(("team_format", "my_format"), [(3, 4), (4, 3), (2, 4)])
def test_join_across_the_layouts(tmp_path: Path, team_format: int, my_format: int) -> None:
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "hub.git")
    seed = gitmem.init(tmp_path / "seed", format=team_format)
    fact = seed.create("team fact", title="fact")
    S.add_remote(seed, "origin", str(hub))
    S.sync(seed)
    personal = gitmem.init(tmp_path / "me", scope="user", format=my_format, clock=at(0))
    mine = personal.create("v1", title="mine")
    gitmem.open(tmp_path / "me", clock=at(5)).update(mine.id, "v2")
    before = gitmem.open(tmp_path / "me").read(mine.id)
    team.join(gitmem.open(tmp_path / "me"), str(hub))
    joined = gitmem.open(tmp_path / "me")
    assert joined.config().format == team_format
    files = tree_files(tmp_path / "me")
    if team_format < 4:
        # a gitmem from before format 4 looks at the legacy path only
        assert legacy_path(mine.id) in files and fanout_path(mine.id) not in files
    for each in (joined, no_index(gitmem.open(tmp_path / "me"))):
        seen = each.read(mine.id)
        assert (seen.body, seen.version, seen.updated_at) == ("v2", 2, before.updated_at)
        assert each.read(fact.id).body == "team fact"
    theirs = team.clone(str(hub), tmp_path / "teammate")
    assert theirs.memories == 2
    other = gitmem.open(tmp_path / "teammate")
    assert other.read(mine.id).version == 2
    assert other.update(mine.id, "v3").version == 3


def test_cli_migrate_to_4(tmp_path: Path) -> None:
    from clitools import Gitmem, make_runner

    path = tmp_path / "m"
    _, ids = _format_3_store(path)
    out = Gitmem(path, make_runner())("migrate", "--to", "4")
    assert f"Moved {len(ids)} file(s)" in out.stdout, out.stdout + out.stderr
    assert gitmem.open(path).config().format == 4


def test_the_migration_renames_without_reading_blobs(tmp_path: Path) -> None:
    path = tmp_path / "m"
    _, ids = _format_3_store(path)
    repo = pygit2.Repository(str(path))
    blobs = {i: repo.revparse_single(f"HEAD:{legacy_path(i)}").id for i in ids}
    migrate(gitmem.open(path), to=4)
    repo = pygit2.Repository(str(path))
    assert {i: repo.revparse_single(f"HEAD:{fanout_path(i)}").id for i in ids} == blobs
