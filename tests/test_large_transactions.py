"""Transactions of many files: what they hold while staging, and how they commit.

A transaction writes each staged file's blob at once and keeps its id, and past
``REPLAY_LIMIT`` operations lets go of the operations themselves (each holds its inputs),
so a bulk import of a million memories does not hold their bytes until its one commit.
Real repositories in temporary directories; no timing.
"""

from __future__ import annotations

import tracemalloc

import pygit2
import pytest
from storetools import commit_count, run_git, tip

import gitmem
from gitmem import ConflictError, Store
from gitmem.store import index_catchup, transactions

BODY_BYTES = 16 * 1024


def _other(store: Store) -> Store:
    """The same repository through a Store of its own, as another process would open it."""
    db = store.db()
    return gitmem.open(db.gitdir if db.bare else store.path)


def _body(i: int) -> str:
    line = f"memory {i} says the retry loop backs off before it times out. "
    return (line * (BODY_BYTES // len(line) + 1))[:BODY_BYTES]


def test_a_transaction_stages_blob_ids_and_reads_them_back(any_store: Store) -> None:
    with any_store.transaction(message="ids") as tx:
        made = [any_store.create(f"body {i}", title=f"t{i}") for i in range(20)]
        staged = tx.snapshot.changes
        assert staged and all(isinstance(v, pygit2.Oid) for v in staged.values())
        # The blobs are in the object store already, unreachable until the commit.
        gitdir = any_store.db().gitdir
        some = next(iter(staged.values()))
        assert run_git(gitdir, "cat-file", "-t", str(some)).strip() == "blob"
        assert any_store.read(made[3].id).body == "body 3"
        any_store.update(made[3].id, "body 3, changed")
        assert any_store.read(made[3].id).body == "body 3, changed"
    assert tip(any_store) == tx.commit
    assert _other(any_store).read(made[3].id).body == "body 3, changed"
    assert _other(any_store).read(made[19].id).title == "t19"
    ids = run_git(any_store.db().gitdir, "log", "-1", "--format=%(trailers:key=Gitmem-Id)")
    assert len(ids.split()) == 20 * 2  # "Gitmem-Id:" and the id, once per memory


@pytest.mark.slow
def test_a_large_transaction_does_not_hold_what_it_staged(
    bare_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streaming property: once past the replay bound, staging N more files of B bytes
    each grows what the process holds by far less than N*B. Before blobs were written as
    staged, the transaction held every file's bytes (and every operation's body, for a
    replay): more than twice what it staged."""
    monkeypatch.setattr(transactions, "REPLAY_LIMIT", 50)  # the bound is reached the same way
    first_count = transactions.REPLAY_LIMIT + 1
    more_count = 250
    more_bytes = more_count * BODY_BYTES
    tracemalloc.start()
    try:
        with bare_store.transaction(message="bulk") as tx:
            first = bare_store.create(_body(0)).id
            for i in range(1, first_count):
                bare_store.create(_body(i))
            assert tx.actions is None  # past the replay bound: the operations let go
            tracemalloc.reset_peak()
            base, _ = tracemalloc.get_traced_memory()
            for i in range(more_count):
                bare_store.create(_body(first_count + i))
            assert bare_store.read(first).body == _body(0)
            _, in_block = tracemalloc.get_traced_memory()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert in_block - base < more_bytes / 4, (in_block - base, more_bytes)
    assert peak - base < more_bytes / 4, (peak - base, more_bytes)
    assert commit_count(bare_store) == 2  # the store's first commit, then the import
    assert len(bare_store.list()) == first_count + more_count
    assert _other(bare_store).read(first).body == _body(0)


def test_a_large_transaction_goes_onto_a_tip_that_moved_elsewhere(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transactions, "REPLAY_LIMIT", 3)
    other = _other(any_store)
    kept = any_store.create("kept")
    with any_store.transaction(message="bulk") as tx:
        mine = [any_store.create(f"mine {i}") for i in range(5)]
        assert tx.actions is None
        # Another writer lands first, on files the transaction does not touch.
        theirs = other.create("theirs")
        their_tip = tip(other)
    assert tip(any_store) == tx.commit
    parents = run_git(any_store.db().gitdir, "log", "-1", "--format=%P").split()
    assert parents == [their_tip]
    assert [any_store.read(m.id).body for m in mine] == [f"mine {i}" for i in range(5)]
    assert any_store.read(theirs.id).body == "theirs"
    assert any_store.read(kept.id).body == "kept"


def test_a_large_transaction_fails_cleanly_when_its_files_moved(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transactions, "REPLAY_LIMIT", 3)
    other = _other(any_store)
    shared = any_store.create("v1")
    before = commit_count(any_store)
    with pytest.raises(ConflictError, match="changed files"), any_store.transaction():
        mine = [any_store.create(f"mine {i}") for i in range(5)]
        any_store.update(shared.id, "mine")
        other.update(shared.id, "theirs")
        their_tip = tip(other)
    assert tip(any_store) == their_tip
    assert commit_count(any_store) == before + 1
    assert any_store.read(shared.id).body == "theirs"
    assert all(any_store.get(m.id) is None for m in mine)


def test_a_large_transaction_fails_on_a_case_twin_written_meanwhile(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transactions, "REPLAY_LIMIT", 3)
    other = _other(any_store)
    with pytest.raises(ConflictError), any_store.transaction(message="bulk"):
        for i in range(4):
            any_store.create(f"mine {i}")
        any_store.create("lower", id="notes/readme")
        other.create("upper", id="notes/README")
    assert any_store.get("notes/readme") is None
    assert any_store.read("notes/README").body == "upper"


def test_trailers_selected_by_key_are_the_full_parse_filtered() -> None:
    from gitmem.base.trailers import parse_trailers

    keys = ("Gitmem-Op", "Gitmem-Agent")
    ids = "".join(f"Gitmem-Id: mem_{i}\n" for i in range(50))
    good = f"import\n\nbody\n\nGitmem-Op: create\n{ids}Gitmem-Agent: bot\n"
    bad = f"import\n\nGitmem-Op: create\n{ids}not a trailer\n"
    for message in (good, bad, "subject only", "s\n\n\n\nGitmem-Op: x\n"):
        everything = parse_trailers(message)
        assert parse_trailers(message, keys) == [(k, v) for k, v in everything if k in keys]
    assert parse_trailers(good, keys) == [("Gitmem-Op", "create"), ("Gitmem-Agent", "bot")]
    assert parse_trailers(bad, keys) == []


def test_the_index_of_a_bulk_import_has_a_version_row_per_memory(
    bare_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import's one commit gives its version rows a batch at a time (VERSION_BATCH):
    more memories than that in one commit still index every row, once, caught up and
    rebuilt."""
    monkeypatch.setattr(index_catchup, "VERSION_BATCH", 50)
    with bare_store.transaction(message="bulk"):
        made = [bare_store.create(f"m{i}", title=f"t{i}").id for i in range(120)]
    assert len(bare_store.list()) == 120
    history = bare_store.history(made[119])
    assert [v.version for v in history.versions] == [1]
    index = bare_store.index()
    for _ in ("caught up", "rebuilt"):
        assert index.count() == 120
        rows = index.connect().execute("SELECT count(*), count(DISTINCT id) FROM versions")
        assert rows.fetchone() == (120, 120)
        assert {m.version for m in bare_store.list()} == {1}
        index.rebuild()


def test_a_bulk_commit_names_its_first_ids_and_counts_the_rest(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ID_TRAILERS, a commit lists no more Gitmem-Id trailers but counts them (a
    million made a 52 MB commit object, which libgit2 parses on every lookup of the tip);
    the log's id filter and prefix resolution of deleted ids ask the commit's files."""
    monkeypatch.setattr(transactions, "ID_TRAILERS", 3)
    with any_store.transaction(message="bulk"):
        made = [any_store.create(f"m{i}").id for i in range(5)]
    gitdir = any_store.db().gitdir
    listed = run_git(gitdir, "log", "-1", "--format=%(trailers:key=Gitmem-Id,valueonly)")
    assert listed.split() == made[:3]
    unlisted = run_git(gitdir, "log", "-1", "--format=%(trailers:key=Gitmem-Ids-Unlisted)")
    assert unlisted.strip() == "Gitmem-Ids-Unlisted: 2"
    [entry] = any_store.log(id=made[4])
    assert entry.commit == tip(any_store) and entry.unlisted == 2
    assert entry.to_dict()["ids_unlisted"] == 2
    assert any_store.log(id="mem_00000000-0000-4000-8000-000000000000") == []
    with any_store.transaction(message="bulk delete"):
        for memory_id in made:
            any_store.delete(memory_id)
    # A deleted id past the listed ones still resolves from a prefix (restore takes one).
    assert any_store.resolve_id(made[4][:-4]) == made[4]
    assert [e.subject for e in any_store.log(id=made[4])] == ["bulk delete", "bulk"]
