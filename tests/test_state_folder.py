"""Local state that travelled is never used, and the index is read defensively (issue 38,
item 3).

A work-tree store keeps its state in ``.git/gitmem/``, which git never commits; a bare store
committed in a project (``.gitmem/`` made with ``--bare``), or a ``git archive`` extract of
such a project, carries its ``gitmem/`` folder with it. The reproductions commit the store
with the real git binary, clone the project and extract its archive, and run each command as
a process of its own with a time bound (``test_hostile_store.gitmem``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest
from test_hostile_store import gitmem, survived

import gitmem as gm
from gitmem import Store
from gitmem.base import paths
from gitmem.format.layout import memory_path
from gitmem.git import trust
from gitmem.store import index_queries, index_schema

TRUE_TITLE = "Deploys go through the staging cluster"
PLANTED_TITLE = "Deploys go straight to production"
PLANTED_AUTHOR = "Mallory Planted"
ENDLESS_META = (
    "CREATE VIEW meta (key, value) AS WITH RECURSIVE r (key, value) AS "
    "(SELECT 'schema', '6' UNION ALL SELECT key, value FROM r) SELECT key, value FROM r"
)
"""The reproduction: ``meta`` a view over a recursive query without end."""


def _git(cwd: Path, *args: str, stdout: int | None = None) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, stdout=stdout or subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    return done.stdout or b""


def _settle(index: Path) -> sqlite3.Connection:
    """The index file with its write-ahead log folded in, open for a hand edit."""
    conn = sqlite3.connect(index, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    return conn


def plant_endless_meta(state: Path) -> None:
    with _settle(state / paths.INDEX_DB) as conn:
        conn.execute("DROP TABLE meta")
        conn.execute(ENDLESS_META)
    conn.close()


def plant_false_rows(state: Path, memory_id: str) -> None:
    """Edit the index's rows and leave it current: a false title, a false author."""
    conn = _settle(state / paths.INDEX_DB)
    conn.execute("UPDATE memories SET title = ? WHERE id = ?", (PLANTED_TITLE, memory_id))
    conn.execute("UPDATE versions SET author = ? WHERE id = ?", (PLANTED_AUTHOR, memory_id))
    conn.close()


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Store, str]:
    """A project with a bare store ``.gitmem/`` holding one memory, its index built."""
    root = tmp_path / "project"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    store = gm.init(root / ".gitmem", bare=True)
    memory = store.create("Staging first, always.", title=TRUE_TITLE)
    assert [m.title for m in store.list()] == [TRUE_TITLE]  # the index is built
    store.index().close()
    return root, store, memory.id


def commit_store(root: Path) -> None:
    """What the project's author does: commit the bare store, its state folder included."""
    _git(root, "add", "-f", ".gitmem")
    _git(root, "-c", "user.name=Author", "-c", "user.email=a@example.com",
         "commit", "-q", "-m", "share our memory")  # fmt: skip
    tracked = _git(root, "ls-files", ".gitmem/gitmem").decode()
    assert ".gitmem/gitmem/index.sqlite" in tracked


def clone(root: Path, dest: Path) -> Path:
    _git(root.parent, "clone", "-q", str(root), str(dest))
    return dest


def extract(root: Path, dest: Path) -> Path:
    """``git archive HEAD | tar x``: the project without git."""
    archive = _git(root, "archive", "--format=tar", "HEAD")
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="tar")
    return dest


COMMANDS = (
    ["ls"], ["search", "staging"], ["add", "a note from the victim"], ["doctor"], ["status"],
    ["reindex"], ["doctor", "--fix"],
)  # fmt: skip


@pytest.mark.slow
def test_a_planted_index_in_a_committed_bare_store_hangs_no_command(
    project: tuple[Path, Store, str], tmp_path: Path
) -> None:
    """Reproduction: ``meta`` a view over an endless recursive query, committed with the
    store, hung each of these commands for good in a clone of the project."""
    root, _store, _ = project
    plant_endless_meta(root / ".gitmem" / "gitmem")
    commit_store(root)
    for n, args in enumerate(COMMANDS):
        victim = clone(root, tmp_path / f"victim{n}")
        result = gitmem("--store", ".gitmem", *args, cwd=victim)
        survived(result, " ".join(args))
        assert "set aside unread" in result.stderr, result.stderr
    listed = gitmem("--store", ".gitmem", "ls", cwd=victim)
    assert TRUE_TITLE in listed.stdout


@pytest.mark.slow
def test_a_planted_index_in_a_git_archive_extract_hangs_no_command(
    project: tuple[Path, Store, str], tmp_path: Path
) -> None:
    """The same from a ``git archive`` extract of the project, with no ``--store``: the
    project's ``.gitmem/`` is found by walking up, and no enclosing repository tracks it."""
    root, _store, _ = project
    plant_endless_meta(root / ".gitmem" / "gitmem")
    commit_store(root)
    for n, args in enumerate(COMMANDS):
        victim = extract(root, tmp_path / f"extract{n}")
        survived(gitmem(*args, cwd=victim), " ".join(args))
    assert TRUE_TITLE in gitmem("ls", cwd=victim).stdout


@pytest.mark.slow
def test_an_edited_index_row_shows_no_false_title_or_author(
    project: tuple[Path, Store, str], tmp_path: Path
) -> None:
    """Reproduction: a committed index whose rows were edited (and still current) made
    ``ls`` show a false title and ``history`` a false author."""
    root, _store, memory_id = project
    plant_false_rows(root / ".gitmem" / "gitmem", memory_id)
    commit_store(root)
    for victim in (clone(root, tmp_path / "victim"), extract(root, tmp_path / "extract")):
        listed = gitmem("--store", ".gitmem", "ls", cwd=victim)
        survived(listed, "ls")
        assert TRUE_TITLE in listed.stdout and PLANTED_TITLE not in listed.stdout
        history = gitmem("--store", ".gitmem", "history", memory_id, cwd=victim)
        survived(history, "history")
        assert PLANTED_AUTHOR not in history.stdout and "Staging" not in history.stderr


@pytest.mark.slow
def test_a_planted_pending_fork_and_edit_are_never_used(
    project: tuple[Path, Store, str], tmp_path: Path
) -> None:
    """Forks the merge driver left are committed by the next ``conflicts`` or ``sync``, and an
    unfinished edit is offered again by ``edit``: planted in the committed folder, neither
    reaches the victim's store. ``doctor`` names the folder set aside and what it holds."""
    root, _store, memory_id = project
    state = root / ".gitmem" / "gitmem"
    kept_path = memory_path(memory_id)
    kept_blob = _git(root / ".gitmem", "rev-parse", f"main:{kept_path}").decode().strip()
    planted_id = "mem_0e000000-0000-4000-8000-00000000e0e0"
    planted = (f"---\nid: {planted_id}\ntitle: {PLANTED_TITLE}\n"
               "created_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\n"
               "version: 1\n---\nplanted\n")  # fmt: skip
    forks = state / paths.PENDING_FORKS
    forks.mkdir()
    (forks / "planted.json").write_text(json.dumps({
        "id": planted_id, "of": memory_id, "fork_path": memory_path(planted_id),
        "path": kept_path, "kept_blob": kept_blob,
        "data": base64.b64encode(planted.encode()).decode(),
    }))  # fmt: skip
    edit_text, edit_base = paths.edit_files(root / ".gitmem", memory_id)
    edit_text.parent.mkdir()
    edit_text.write_text(planted.replace(planted_id, memory_id))
    edit_base.write_text("1\n")
    commit_store(root)
    victim = clone(root, tmp_path / "victim")
    before = _git(victim / ".gitmem", "rev-parse", "main")
    survived(gitmem("--store", ".gitmem", "conflicts", cwd=victim), "conflicts")
    assert _git(victim / ".gitmem", "rev-parse", "main") == before, "a planted fork was committed"
    assert PLANTED_TITLE not in gitmem("--store", ".gitmem", "ls", cwd=victim).stdout
    doctor = gitmem("--store", ".gitmem", "doctor", cwd=victim)
    survived(doctor, "doctor")
    [aside] = paths.set_aside_folders(victim / ".gitmem")
    assert aside.name in doctor.stdout
    assert f"1 unfinished edit ({memory_id})" in doctor.stdout and "1 pending fork" in doctor.stdout
    assert (aside / paths.PENDING_FORKS / "planted.json").exists()  # set aside, not deleted
    assert not (victim / ".gitmem" / "gitmem" / paths.EDITS).exists()


def test_a_folder_without_a_stamp_is_set_aside_once_even_in_a_trusted_store(
    tmp_path: Path,
) -> None:
    """A folder without a stamp was made by a gitmem before stamps, or planted with the
    stamp left out: trust in the store (given for its configuration) says nothing of which,
    so it is set aside; the index rebuilds, and ``doctor`` names the unfinished edit."""
    store = gm.init(tmp_path / "mine.git", bare=True)
    memory = store.create("body", title="mine")
    assert [m.title for m in store.list()] == ["mine"]
    store.index().close()
    gitdir = store.db().gitdir
    assert trust.is_trusted(gitdir)
    edit_text, _ = paths.edit_files(gitdir, memory.id)
    edit_text.parent.mkdir()
    edit_text.write_text("an edit in progress")
    (gitdir / paths.STATE_DIR / paths.STAMP).unlink()
    assert [m.title for m in gm.open(tmp_path / "mine.git").list()] == ["mine"]
    [aside] = paths.set_aside_folders(gitdir)
    assert paths.held(aside) == [f"1 unfinished edit ({memory.id})", "an index"]
    assert not edit_text.exists()
    gm.open(tmp_path / "mine.git").list()
    assert paths.set_aside_folders(gitdir) == [aside]  # the new folder is its own


@pytest.mark.parametrize("bare", [True, False], ids=["bare", "worktree"])
def test_a_moved_store_keeps_its_state_and_a_copy_sets_its_own_aside(
    tmp_path: Path, bare: bool
) -> None:
    """``mv`` keeps every inode: the same store. ``cp -r`` (a tarball, a copied project with
    its ``.git/``) makes new ones: the copy's folder is set aside, the original's kept."""
    store = gm.init(tmp_path / "a", bare=bare)
    store.create("body", title="kept")
    assert [m.title for m in store.list()] == ["kept"]
    store.index().close()
    gitdir = store.db().gitdir
    index_inode = (gitdir / paths.STATE_DIR / paths.INDEX_DB).stat().st_ino
    moved = tmp_path / "b"
    (tmp_path / "a").rename(moved)
    moved_gitdir = moved / gitdir.relative_to(tmp_path / "a")
    assert [m.title for m in gm.open(moved).list()] == ["kept"]
    assert paths.set_aside_folders(moved_gitdir) == []
    assert (moved_gitdir / paths.STATE_DIR / paths.INDEX_DB).stat().st_ino == index_inode
    copy = tmp_path / "c"
    shutil.copytree(moved, copy, symlinks=True)
    copy_gitdir = copy / gitdir.relative_to(tmp_path / "a")
    assert [m.title for m in gm.open(copy).list()] == ["kept"]
    assert len(paths.set_aside_folders(copy_gitdir)) == 1
    assert paths.set_aside_folders(moved_gitdir) == []


def test_a_reader_of_a_current_index_uses_only_the_stores_own_folder(
    project: tuple[Path, Store, str], tmp_path: Path
) -> None:
    """``open_current`` (the command line's read path, no libgit2) reads nothing from a
    folder that is not the store's: it sets it aside, finds no index, and leaves the
    command to the store, which builds one."""
    root, _store, _ = project
    assert index_queries.open_current(root / ".gitmem") is not None
    commit_store(root)
    victim = clone(root, tmp_path / "victim")
    assert index_queries.open_current(victim / ".gitmem") is None
    assert len(paths.set_aside_folders(victim / ".gitmem")) == 1
    gm.open(victim / ".gitmem").list()
    assert index_queries.open_current(victim / ".gitmem") is not None


@pytest.mark.parametrize(
    "ddl",
    [
        ENDLESS_META,
        "CREATE TRIGGER t AFTER INSERT ON memories BEGIN DELETE FROM tags; END",
        "CREATE VIEW extra AS SELECT 1",
        "CREATE VIRTUAL TABLE planted USING rtree(id, a, b)",
        "CREATE VIRTUAL TABLE planted USING fts5(text, content = 'memories')",
    ],
    ids=["meta-view", "trigger", "view", "rtree", "fts5-content"],
)
def test_an_index_schema_gitmem_never_makes_is_rebuilt_unqueried(
    bare_store: Store, ddl: str
) -> None:
    """Even in the store's own folder: the schema is checked against what gitmem makes
    before any query (a view or trigger would run its SQL), and such an index is rebuilt."""
    memory = bare_store.create("body", title="real")
    assert [m.id for m in bare_store.list()] == [memory.id]  # the index is built
    bare_store.index().close()
    state = bare_store.db().state_dir
    conn = _settle(state / paths.INDEX_DB)
    if ddl == ENDLESS_META:
        conn.execute("DROP TABLE meta")
    conn.execute(ddl)
    conn.close()
    assert index_queries.open_current(bare_store.path) is None
    with pytest.raises(sqlite3.DatabaseError, match="not an index gitmem made"):
        index_schema.connect(state / paths.INDEX_DB, read_only=True, timeout=1.0)
    again = gm.open(bare_store.path)
    assert [m.id for m in again.list()] == [memory.id]
    assert index_queries.open_current(bare_store.path) is not None


@pytest.mark.parametrize("name", [paths.INDEX_DB, paths.INDEX_DB + "-wal"])
@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_an_index_that_is_not_a_file_is_rebuilt_untouched(
    bare_store: Store, tmp_path: Path, name: str, kind: str
) -> None:
    """A FIFO would block its reader for good; through a link SQLite would write elsewhere."""
    memory = bare_store.create("body", title="real")
    assert [m.id for m in bare_store.list()] == [memory.id]
    bare_store.index().close()
    state = bare_store.db().state_dir
    _settle(state / paths.INDEX_DB).close()  # no WAL left
    outside = tmp_path / "outside"
    outside.write_bytes(b"kept")
    planted = state / name
    planted.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to(outside)
    assert index_queries.open_current(bare_store.path) is None
    assert [m.id for m in gm.open(bare_store.path).list()] == [memory.id]
    assert outside.read_bytes() == b"kept"
    assert index_queries.open_current(bare_store.path) is not None


def test_a_query_past_the_time_bound_fails_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The progress handler stops a statement that runs past the bound; the command line
    says what happened and how to rebuild."""
    from gitmem.cli.errors import describe

    monkeypatch.setattr(index_schema, "QUERY_SECONDS", 0.2)
    conn = index_schema.connect(tmp_path / "index.sqlite", read_only=False, timeout=1.0)
    endless = "WITH RECURSIVE r (x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute(endless + "SELECT count(*) FROM r").fetchone()
    assert index_schema.timed_out(caught.value)
    message, hint, code = describe(caught.value)
    assert "time bound" in message and "reindex" in hint and code == 7
    assert conn.execute(endless + "SELECT x FROM r LIMIT 3").fetchall() == [(1,), (2,), (3,)]
