"""The read commands answered from a current index, without opening git.

``gitmem ls``, ``show``, ``search`` and ``recall`` read the index read-only when the
commit it holds is the branch tip as git's ref files name it (gitmem.store.index_queries,
``open_current``). What matters: they answer exactly what the full path answers (same
bytes, same errors), a stale index never answers (a commit by plain git, a moved or
packed ref), and an answered read does not load libgit2.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git

import gitmem
from gitmem import Store
from gitmem.base import paths
from gitmem.base.errors import AmbiguousIdError, InvalidIdError
from gitmem.store.index_queries import branch_tip, open_current


@pytest.fixture
def filled(bare_store: Store) -> Store:
    for n in range(12):
        bare_store.create(
            f"Memory number {n} about migration and deploys.\nSecond line {n}.",
            title=f"note {n}",
            category="notes" if n % 2 else None,
        )
    first = bare_store.list()[0]
    bare_store.supersede(first.id, "A newer take on migration.", title="newer")
    bare_store.index().catch_up()
    return bare_store


def _current(store: Store, *providers: str) -> bool:
    found = open_current(store.path, providers=providers)
    if found is not None:
        found.close()
    return found is not None


# -- a stale index never answers ---------------------------------------------------------


def _commit_by_hand(gitdir: Path) -> str:
    tree = run_git(gitdir, "rev-parse", "main^{tree}").strip()
    return run_git(gitdir, "commit-tree", tree, "-p", "main", "-m", "by hand").strip()


def test_a_branch_moved_by_plain_git_is_not_current(filled: Store) -> None:
    assert _current(filled, "lexical")
    run_git(filled.path, "update-ref", "refs/heads/main", _commit_by_hand(filled.path))
    assert not _current(filled)
    filled.index().catch_up()
    assert _current(filled, "lexical")


def test_a_packed_ref_is_read_and_a_moved_packed_ref_is_stale(filled: Store) -> None:
    run_git(filled.path, "pack-refs", "--all")
    assert not (filled.path / "refs" / "heads" / "main").exists()
    assert branch_tip(filled.path, "main") == run_git(filled.path, "rev-parse", "main").strip()
    assert _current(filled)
    run_git(filled.path, "update-ref", "refs/heads/main", _commit_by_hand(filled.path))
    run_git(filled.path, "pack-refs", "--all")
    assert not (filled.path / "refs" / "heads" / "main").exists()
    assert not _current(filled)


def test_a_loose_ref_wins_over_the_packed_one(filled: Store) -> None:
    tip = run_git(filled.path, "rev-parse", "main").strip()
    run_git(filled.path, "pack-refs", "--all")
    run_git(filled.path, "update-ref", "refs/heads/main", _commit_by_hand(filled.path))
    assert (filled.path / "refs" / "heads" / "main").exists()
    assert f"{tip} refs/heads/main" in (filled.path / "packed-refs").read_text()
    assert not _current(filled)  # the packed line still names the indexed tip


def test_a_commit_by_plain_git_in_a_work_tree_store_is_not_current(store: Store) -> None:
    store.create("on main", title="main one")
    store.index().catch_up()
    assert _current(store)
    (store.path / "notes.txt").write_text("by hand\n")
    run_git(store.path, "add", "notes.txt")
    run_git(store.path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
            "--no-verify", "-m", "by hand")
    assert not _current(store)


def _set_meta(store: Store, key: str, value: str) -> None:
    db = paths.state_dir(store.db().gitdir) / paths.index_name("main")
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("schema", "4"),
        ("store", json.dumps({"format": 99, "scope": "repo"})),
        ("store", "{}"),
        ("store", "not json"),
        ("provider:lexical", "1 0000"),
    ],
)
def test_an_index_it_cannot_vouch_for_does_not_answer(filled: Store, key: str, value: str) -> None:
    _set_meta(filled, key, value)
    assert not _current(filled, "lexical")


def test_unusual_layouts_do_not_answer(filled: Store, tmp_path: Path) -> None:
    elsewhere = tmp_path / "x"
    assert open_current(elsewhere) is None
    db = paths.state_dir(filled.db().gitdir) / paths.index_name("main")
    db.rename(elsewhere)
    assert not _current(filled)  # no index
    elsewhere.rename(db)
    assert _current(filled)
    ref = filled.path / "refs" / "heads" / "main"
    tip = ref.read_text()
    ref.write_text("ref: refs/heads/other\n")  # a symbolic ref: left to git
    assert not _current(filled)
    ref.write_text(tip)
    run_git(filled.path, "config", "core.worktree", str(tmp_path))
    assert not _current(filled)


def test_a_fifo_where_a_ref_or_config_belongs_is_not_waited_on(filled: Store) -> None:
    for name in ("refs/heads/main", "config"):
        planted = filled.path / name
        kept = planted.read_bytes()
        planted.unlink()
        os.mkfifo(planted)  # a copied store could hold one: reading it would block forever
        try:
            assert not _current(filled)
        finally:
            planted.unlink()
            planted.write_bytes(kept)
        assert _current(filled)


def test_a_work_tree_store_reads_the_branch_checked_out(store: Store) -> None:
    store.create("on main", title="main one")
    store.index().catch_up()
    found = open_current(store.path)
    assert found is not None
    rows = found.rows(["id", "title"], include_superseded=False, include_archived=False)
    assert [title for _id, title in rows] == ["main one"]


# -- the same answers with and without it -------------------------------------------------


def _both(store: Store, *args: str, code: int = 0) -> tuple[str, str]:
    """(answered from the current index, by the full path) stdout+stderr of one command:
    --branch main takes the full path, which opens the store."""
    gm = Gitmem(store.path, make_runner())
    fast = gm(*args, code=code)
    full = gm("--branch", "main", *args, code=code)
    return fast.stdout + fast.stderr, full.stdout + full.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("ls",),
        ("ls", "--all"),
        ("ls", "--scope", "repo"),
        ("search", "migration"),
        ("search", "migration", "--all", "-n", "3"),
        ("search", '"Second line" OR deploys'),
        ("search", "how do we migrate?"),  # not FTS5 syntax: recall, on the full path
        ("search", "zzzunknownword"),
        ("search", "migration", "--json"),
    ],
)
def test_the_cli_answers_the_same_with_and_without_the_index(
    filled: Store, args: tuple[str, ...]
) -> None:
    fast, full = _both(filled, *args)
    assert fast == full
    assert fast.strip()


def test_show_prints_the_memory_as_read_with_the_version_ls_prints(filled: Store) -> None:
    memory = filled.list()[3]
    filled.update(memory.id, "changed once")
    filled.update(memory.id, "changed twice", title="retitled")
    filled.index().catch_up()
    read = filled.read(memory.id)
    assert read.version == 3
    listed = Gitmem(filled.path, make_runner())("ls").stdout
    assert any(line.startswith(memory.id) and " 3 " in line for line in listed.splitlines())
    for given in (memory.id, memory.id[:13], memory.id[:13] + "..."):
        fast, full = _both(filled, "show", given)
        assert fast == full
        assert "\nversion: 3\n" in fast and "title: retitled\n" in fast
        assert fast.endswith("\n\nchanged twice")
        assert f"updated_at: {read.updated_at:%Y-%m-%dT%H:%M:%SZ}\n" in fast
        fast, full = _both(filled, "show", given, "--json")
        assert json.loads(fast) == json.loads(full) == read.to_dict()


def test_errors_are_the_full_paths(filled: Store) -> None:
    ids = [m.id for m in filled.list(include_superseded=True)]
    common = "mem_"
    assert sum(i.startswith(common) for i in ids) > 1
    fast, full = _both(filled, "show", common, code=_code(filled, common))
    assert fast == full and "matches" in fast
    fast, full = _both(filled, "show", "../etc", code=_code(filled, "../etc"))
    assert fast == full


def _code(store: Store, given: str) -> int:
    try:
        store.resolve_id(given)
    except (AmbiguousIdError, InvalidIdError) as exc:
        return exc.exit_code
    return 0


def test_a_deleted_memory_and_a_problem_file_are_left_to_the_full_path(filled: Store) -> None:
    gone = filled.list()[5]
    filled.delete(gone.id)
    filled.index().catch_up()
    found = open_current(filled.path)
    assert found is not None
    assert found.resolve_id(gone.id[:14]) is None  # the full path looks in history
    fast, full = _both(filled, "show", gone.id[:14], code=3)
    assert fast == full


def test_recall_waits_for_pending_embeddings_then_answers_the_same(filled: Store) -> None:
    from gitmem.store.recall import recall_current

    found = open_current(filled.path, providers=["lexical", "vectors"])
    assert found is not None
    # Nothing embedded yet: the full path embeds first, so the index leaves it to it.
    assert recall_current(found, "how do we handle migration") is None
    found.close()
    for args in (
        ("recall", "how do we handle migration?"),
        ("recall", "deploys", "--explain", "-n", "3"),
        ("recall", "second line", "--all", "--budget", "60"),
        ("recall", "what?"),  # no words to look for
        ("recall", "deploys", "--json"),
    ):
        fast, full = _both(filled, *args)
        assert fast == full, args
    found = open_current(filled.path, providers=["lexical", "vectors"])
    assert found is not None
    answered = recall_current(found, "how do we handle migration")
    assert answered is not None and answered.semantic
    assert answered.ids == filled.recall("how do we handle migration").ids


# -- without loading libgit2 ----------------------------------------------------------------

_PROBE = """
import sys
from gitmem.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
loaded = [m for m in ("pygit2", "jsonschema", "numpy", "tokenizers") if m in sys.modules]
sys.stderr.write("LOADED " + ",".join(loaded) + "\\n")
"""


def _loaded(store: Store, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "--store", str(store.path), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr.rsplit("LOADED ", 1)[1].strip()


@pytest.mark.slow
def test_answered_reads_do_not_load_libgit2(filled: Store) -> None:
    memory = filled.list()[2]
    assert _loaded(filled, "ls") == ""
    assert _loaded(filled, "ls", "--all") == ""
    assert _loaded(filled, "show", memory.id[:12]) == ""
    assert _loaded(filled, "show", memory.id, "--json") == ""
    assert _loaded(filled, "search", "migration") == ""
    _loaded(filled, "recall", "migration")  # the first embeds what is new, on the full path
    # The query's vector summed in Python: numpy is not loaded (its tokens are the library's).
    assert _loaded(filled, "recall", "migration", "--explain") == "tokenizers"
    # and where the index cannot answer, the full path does (and loads them)
    assert "pygit2" in _loaded(filled, "ls", "--json")


def test_gitmem_open_still_opens_after_an_answered_read(filled: Store) -> None:
    assert gitmem.open(filled.path).list()
