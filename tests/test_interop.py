"""The store is an ordinary git repository: the git binary reads, checks, clones and edits it."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from storetools import commit_count, plant, run_git, status_porcelain, tip

import gitmem
from gitmem import DirtyWorktreeError, FixedClock, Memory, Store
from gitmem.format.layout import memory_path
from gitmem.git.objects import build_tree


def location(store: Store) -> Path:
    return store.db().gitdir if store.db().bare else store.path


def log_field(store: Store, fmt: str, *args: str) -> list[str]:
    """One line per commit, newest first: ``fmt`` with trailer values joined by commas."""
    out = run_git(store.db().gitdir, "log", f"--format={fmt}", *args)
    return out.splitlines()


def trailer(key: str) -> str:
    return f"%(trailers:key={key},valueonly,separator=%x2C)"


def a_series_of_writes(store: Store, clock: FixedClock) -> dict[str, Memory]:
    """Every kind of write, each checked for a clean work tree right after it."""
    made: dict[str, Memory] = {}

    def step() -> None:
        clock.advance(minutes=1)
        if not store.db().bare:
            assert status_porcelain(store) == ""

    made["a"] = store.create("alpha\n", title="Alpha", agent="hephaestus", session_id="sess-1",
                             tags=["x"])
    step()
    made["b"] = store.create("beta\n", title="Beta", category="patterns")
    step()
    store.update(made["a"].id, "alpha, revised\n", agent="hephaestus")
    step()
    store.append(made["b"].id, "more beta", agent="athena")
    step()
    made["c"] = store.supersede(made["a"].id, "gamma\n", agent="athena", session_id="sess-2")
    step()
    store.delete(made["b"].id, agent="hephaestus")
    step()
    store.restore(made["b"].id)
    step()
    good = tip(store)
    store.update(made["c"].id, "a mistake\n")
    step()
    store.restore(made["c"].id, at=good)
    step()
    store.update(made["c"].id)  # no-op: no commit
    step()
    with store.transaction(message="batch of two"):
        made["d"] = store.create("delta\n", title="Delta", agent="hermes")
        made["e"] = store.create("epsilon\n", title="Epsilon", agent="hermes")
    step()
    return made


# Newest first, as git log prints them; the transaction of two creates says "create" once.
OPS = ["create", "restore", "update", "restore", "delete", "supersede", "append", "update",
       "create", "create", "init"]


def test_fsck_and_log_after_a_series_of_writes(any_store: Store, clock: FixedClock) -> None:
    made = a_series_of_writes(any_store, clock)
    gitdir = any_store.db().gitdir
    fsck = run_git(gitdir, "fsck", "--strict", "--no-dangling")
    assert "error" not in fsck.lower() and "warning" not in fsck.lower()
    assert commit_count(any_store) == len(OPS)  # one commit per write, plus the init commit
    assert log_field(any_store, trailer("Gitmem-Op")) == OPS
    assert log_field(any_store, "%s")[0] == "batch of two"
    ids = log_field(any_store, trailer("Gitmem-Id"))
    assert ids[0] == f"{made['d'].id},{made['e'].id}"
    assert ids[-1] == ""  # the init commit names no memory
    assert ids[-2] == made["a"].id
    supersedes = log_field(any_store, trailer("Gitmem-Supersedes"))
    assert [s for s in supersedes if s] == [made["a"].id]
    assert supersedes[OPS.index("supersede")] == made["a"].id
    agents = log_field(any_store, trailer("Gitmem-Agent"))
    assert agents[OPS.index("supersede")] == "athena"
    assert agents[-2] == "hephaestus"
    sessions = log_field(any_store, trailer("Gitmem-Session"))
    assert sessions[-2] == "sess-1"
    assert sessions[OPS.index("supersede")] == "sess-2"


def test_git_prints_the_operations(any_store: Store, clock: FixedClock) -> None:
    """The exact command from the design: one operation per line, newest first."""
    a_series_of_writes(any_store, clock)
    out = run_git(any_store.db().gitdir, "log", "--format=%(trailers:key=Gitmem-Op,valueonly)")
    assert [line for line in out.splitlines() if line] == OPS


def test_author_is_the_agent_and_committer_the_user(any_store: Store, clock: FixedClock) -> None:
    made = a_series_of_writes(any_store, clock)
    gitdir = any_store.db().gitdir
    # The person running gitmem (git's configured identity) commits; agents author.
    assert set(log_field(any_store, "%cn <%ce>")) == {"Test User <test@example.com>"}
    by_athena = log_field(any_store, "%s", "--author=athena")
    assert by_athena == [f"supersede: {made['c'].title}", "append: Beta"]
    by_hermes = run_git(gitdir, "log", "--author=hermes", "--format=%(trailers:key=Gitmem-Id)")
    assert made["d"].id in by_hermes and made["e"].id in by_hermes
    assert log_field(any_store, "%an", "--author=Test User")  # writes without an agent
    assert log_field(any_store, "%ae", "-1", "--author=hephaestus") == [
        "hephaestus@agents.gitmem.invalid"]
    # Commit times are the store's clock, and git agrees with the library's log.
    assert [int(e.time.timestamp()) for e in any_store.log()] == [
        int(t) for t in log_field(any_store, "%at")]
    assert log_field(any_store, "%aI", "-1") == ["2026-11-22T10:10:00+00:00"]


def test_git_show_prints_the_memory(any_store: Store) -> None:
    m = any_store.create("Body with unicode: café ✓\n---\nand a rule line\n", title="Show me")
    shown = run_git(any_store.db().gitdir, "show", f"HEAD:{m.path}")
    assert shown.startswith(f"---\nid: {m.id}\ntitle: Show me\n")
    assert shown.endswith("\n---\n\nBody with unicode: café ✓\n---\nand a rule line\n")
    if not any_store.db().bare:
        assert (any_store.path / (m.path or "")).read_text() == shown
    updated = any_store.update(m.id, title="Shown again")
    # A one-field change is a small diff: the title line only (format 3 derives version and
    # updated_at from history); format 2 also rewrites those two lines.
    numstat = run_git(any_store.db().gitdir, "diff", "--numstat", "HEAD~1", "HEAD").split()
    diff = run_git(any_store.db().gitdir, "diff", "-U0", "HEAD~1", "HEAD")
    assert "+title: Shown again" in diff
    if any_store.config().format >= 3:
        assert numstat == ["1", "1", updated.path] and "version" not in diff
    else:
        assert numstat == ["2", "2", updated.path] and "+version: 2" in diff
    assert updated.version == 2


@pytest.mark.parametrize("clone_bare", [False, True], ids=["clone", "bare-clone"])
def test_a_git_clone_is_a_store(any_store: Store, clock: FixedClock, tmp_path: Path,
                                clone_bare: bool) -> None:
    a_series_of_writes(any_store, clock)
    target = tmp_path / ("clone.git" if clone_bare else "clone")
    args = ["clone", "-q", *(["--bare"] if clone_bare else []), str(location(any_store)),
            str(target)]
    run_git(tmp_path, *args)
    clone = gitmem.open(target, clock=clock)
    original = {m.id: m for m in any_store.list(include_superseded=True)}
    copied = {m.id: m for m in clone.list(include_superseded=True)}
    assert original.keys() == copied.keys() and len(original) == 5
    for mid, m in original.items():
        assert copied[mid] == m
    assert [v.commit for v in clone.history(original[next(iter(original))].id)] == [
        v.commit for v in any_store.history(next(iter(original)))]
    # The clone takes writes of its own, and stays a clean git repository.
    n = clone.create("written in the clone")
    assert clone.read(n.id).body == "written in the clone"
    if not clone_bare:
        assert status_porcelain(clone) == ""
    run_git(clone.db().gitdir, "fsck", "--strict", "--no-dangling")


def test_status_is_clean_after_every_kind_of_write(store: Store, clock: FixedClock) -> None:
    a_series_of_writes(store, clock)  # checks after each step
    assert run_git(store.path, "diff", "--cached", "--name-only") == ""
    assert run_git(store.path, "ls-files", "--others", "--exclude-standard") == ""


# -- hand edits -------------------------------------------------------------------------------


def test_uncommitted_edit_is_never_overwritten(store: Store) -> None:
    m = store.create("committed\n", title="t")
    store.update(m.id, title="t, then changed")  # a version to roll back to (HEAD~2)
    other = store.create("other\n")
    full = store.path / (m.path or "")
    edited = full.read_text().replace("committed", "edited by hand, not committed")
    full.write_text(edited)
    head = tip(store)
    writes = [
        lambda: store.update(m.id, "from the library\n"),
        lambda: store.update(m.id, title="new title"),
        lambda: store.append(m.id, "appended"),
        lambda: store.delete(m.id),
        lambda: store.restore(m.id, at="HEAD~2"),
    ]
    for write in writes:
        with pytest.raises(DirtyWorktreeError) as info:
            write()
        assert m.path in str(info.value) and info.value.hint
        assert tip(store) == head
        assert full.read_text() == edited
    # A transaction that touches the file is refused whole.
    with pytest.raises(DirtyWorktreeError), store.transaction():
        store.create("would have been fine", id="tx-bystander")
        store.update(m.id, "not this")
    assert tip(store) == head
    assert not store.exists("tx-bystander")
    # Other memories can still be written; the edit stays exactly as it is.
    store.update(other.id, "other, changed\n")
    s = store.supersede(m.id, "a successor does not touch the old file\n")
    assert full.read_text() == edited
    assert status_porcelain(store) == f" M {m.path}\n"
    assert store.read(m.id).body == "committed\n"  # the library reads what is committed
    assert store.read(s.id).supersedes == m.id


def test_staged_edit_is_never_overwritten(store: Store) -> None:
    m = store.create("committed\n")
    full = store.path / (m.path or "")
    full.write_text(full.read_text() + "staged line\n")
    run_git(store.path, "add", m.path or "")
    head = tip(store)
    with pytest.raises(DirtyWorktreeError):
        store.update(m.id, "x")
    assert tip(store) == head
    assert full.read_text().endswith("staged line\n")
    assert status_porcelain(store) == f"M  {m.path}\n"


def test_hand_deleted_file_is_not_resurrected(store: Store) -> None:
    m = store.create("will be removed by hand\n")
    (store.path / (m.path or "")).unlink()
    head = tip(store)
    with pytest.raises(DirtyWorktreeError):
        store.update(m.id, "x")
    assert tip(store) == head
    assert not (store.path / (m.path or "")).exists()


def test_untracked_file_in_the_way_is_not_overwritten(store: Store) -> None:
    path = store.path / memory_path("new-note")
    path.parent.mkdir(parents=True)
    path.write_text("a person's draft\n")
    head = tip(store)
    with pytest.raises(DirtyWorktreeError):
        store.create("the library's note", id="new-note")
    assert tip(store) == head
    assert path.read_text() == "a person's draft\n"


def test_committed_hand_edit_is_read_back(store: Store, clock: FixedClock) -> None:
    """A hand commit is a version like any other."""
    m = store.create("original body\n", title="Original", tags=["a"])
    text = (store.path / (m.path or "")).read_text()
    text = text.replace("title: Original", "title: Fixed by hand").replace(
        "original body", "body fixed by hand")
    text = text.replace("tags: [a]", "tags: [a, b]  # a comment a person wrote")
    (store.path / (m.path or "")).write_text(text)
    run_git(store.path, "commit", "-q", "-am", "fix a memory by hand")
    got = store.read(m.id)
    assert (got.title, got.body, got.tags, got.version) == (
        "Fixed by hand", "body fixed by hand\n", ("a", "b"), 2)
    assert [x.title for x in store.list()] == ["Fixed by hand"]
    # The next library write builds on the hand edit and keeps its comment.
    clock.advance(hours=1)
    u = store.append(m.id, "appended by the library")
    assert u.version == 3 and u.title == "Fixed by hand"
    on_disk = (store.path / (m.path or "")).read_text()
    assert "tags: [a, b]  # a comment a person wrote\n" in on_disk
    assert on_disk.endswith("body fixed by hand\nappended by the library")
    assert status_porcelain(store) == ""


def test_hand_commit_in_a_bare_store_through_a_clone(bare_store: Store) -> None:
    m = bare_store.create("original\n")
    hand = 1  # the hand commit is a version of its own
    text = bare_store.db().snapshot().read(m.path or "")
    assert text is not None
    plant(bare_store, m.path or "", text.decode().replace("original", "pushed from a clone"))
    assert bare_store.read(m.id).body == "pushed from a clone\n"
    assert bare_store.read(m.id).version == 1 + hand
    assert bare_store.append(m.id, "then appended").version == 2 + hand


# -- a writer killed between moving the branch and updating the work tree --------------------


def move_branch_behind_the_worktree(store: Store, changes: dict[str, bytes | None]) -> str:
    """Commit ``changes`` and move the branch with ``git update-ref``, touching no file:
    what a writer killed right after its compare-and-swap leaves behind."""
    repo = pygit2.Repository(str(store.db().gitdir))
    parent = repo.revparse_single("refs/heads/main")
    tree = build_tree(repo, parent.tree, changes)
    sig = pygit2.Signature("killed-writer", "killed@example.com")
    oid = repo.create_commit(None, sig, sig, "update: by a writer that died\n", tree,
                             [parent.id])
    run_git(store.path, "update-ref", "refs/heads/main", str(oid), str(parent.id))
    return str(oid)


def test_worktree_left_behind_is_healed_by_the_next_write(store: Store) -> None:
    changed = store.create("before\n", title="changed")
    removed = store.create("to be removed\n", title="removed")
    added_path = memory_path("added-by-the-dead-writer")
    new_text = (store.path / (changed.path or "")).read_text().replace("before", "after")
    added_text = (store.path / (removed.path or "")).read_text().replace(
        removed.id, "added-by-the-dead-writer")
    dead = move_branch_behind_the_worktree(store, {
        changed.path or "": new_text.encode(),
        removed.path or "": None,
        added_path: added_text.encode(),
    })
    assert status_porcelain(store) != ""  # the work tree is behind the branch
    assert (store.path / (changed.path or "")).read_text().count("before") == 1

    fresh = store.create("the next write\n")
    assert run_git(store.path, "log", "-1", "--format=%P").strip() == dead
    assert status_porcelain(store) == ""
    assert (store.path / (changed.path or "")).read_text() == new_text
    assert not (store.path / (removed.path or "")).exists()
    assert (store.path / added_path).read_text() == added_text
    assert (store.path / (fresh.path or "")).exists()
    assert store.read(changed.id).body == "after\n"
    assert store.get(removed.id) is None


def test_healing_never_overwrites_a_hand_edit(store: Store) -> None:
    m = store.create("before\n")
    bystander = store.create("bystander\n")
    committed_text = (store.path / (m.path or "")).read_text()
    move_branch_behind_the_worktree(store, {
        m.path or "": committed_text.replace("before", "after").encode()})
    hand_text = committed_text.replace("before", "a person's edit")
    (store.path / (m.path or "")).write_text(hand_text)
    store.update(bystander.id, "bystander, changed\n")
    assert (store.path / (m.path or "")).read_text() == hand_text
    assert status_porcelain(store) == f" M {m.path}\n"
    with pytest.raises(DirtyWorktreeError):
        store.update(m.id, "x")


def test_store_keeps_working_after_git_gc(any_store: Store, clock: FixedClock) -> None:
    """Packed objects and packed refs (git gc, git pack-refs) change nothing for the library."""
    made = a_series_of_writes(any_store, clock)
    gitdir = any_store.db().gitdir
    run_git(gitdir, "gc", "-q", "--prune=now")
    run_git(gitdir, "pack-refs", "--all")
    assert not (gitdir / "refs" / "heads" / "main").exists()  # the branch lives in packed-refs
    reopened = gitmem.open(location(any_store), clock=clock)
    assert reopened.read(made["d"].id).body == "delta\n"
    head = tip(reopened)
    u = reopened.update(made["d"].id, "delta, after gc\n")
    assert u.version == 2
    assert run_git(gitdir, "log", "-1", "--format=%P").strip() == head
    assert len(reopened.history(made["c"].id)) == len(any_store.history(made["c"].id))
    run_git(gitdir, "fsck", "--strict", "--no-dangling")
    if not any_store.db().bare:
        assert status_porcelain(reopened) == ""


def test_symlinked_directory_in_the_worktree_is_not_written_through(store: Store,
                                                                    tmp_path: Path) -> None:
    """A directory someone replaced by a link (not committed) must not carry a write out of
    the store: the library refuses instead of following it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shard_dir = (store.path / memory_path("linked-note")).parent
    shard_dir.parent.mkdir(parents=True, exist_ok=True)
    shard_dir.symlink_to(outside)
    head = tip(store)
    with pytest.raises(DirtyWorktreeError):
        store.create("must not land outside", id="linked-note")
    assert list(outside.iterdir()) == []
    assert tip(store) == head
    # The same for a memory already committed in that directory, and for a delete.
    shard_dir.unlink()
    m = store.create("inside", id="linked-note")
    (outside / "linked-note.md").write_bytes((store.path / (m.path or "")).read_bytes())
    real = store.path / "moved-away"
    shard_dir.rename(real)
    shard_dir.symlink_to(outside)
    head = tip(store)
    with pytest.raises(DirtyWorktreeError):
        store.update(m.id, "changed through the link")
    with pytest.raises(DirtyWorktreeError):
        store.delete(m.id)
    assert tip(store) == head
    assert (outside / "linked-note.md").read_text().endswith("inside")


def test_store_reached_through_a_symlinked_path(tmp_path: Path) -> None:
    """Only links inside the store are refused; the store's own path may be a link."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    gitmem.init(tmp_path / "link" / "store")
    store = gitmem.open(tmp_path / "link" / "store")
    m = store.create("through a linked home")
    assert store.update(m.id, "still fine").version == 2
    assert (tmp_path / "real" / "store" / (m.path or "")).read_text().endswith("still fine")
    assert status_porcelain(store) == ""


def test_author_follows_git_precedence(any_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an agent the author is whoever git would name: GIT_AUTHOR_* beat user.*."""
    any_store.create("by the configured user")
    assert log_field(any_store, "%an <%ae>", "-1") == ["Test User <test@example.com>"]
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Env Person")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "env@example.com")
    any_store.create("by the environment's author")
    assert log_field(any_store, "%an <%ae>", "-1") == ["Env Person <env@example.com>"]
    expected = run_git(any_store.db().gitdir, "var", "GIT_AUTHOR_IDENT").rsplit(" ", 2)[0]
    assert expected == "Env Person <env@example.com>"
    any_store.create("an agent still wins", agent="hermes")
    assert log_field(any_store, "%an", "-1") == ["hermes"]
