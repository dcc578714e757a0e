"""Store.update_from_text: the library side of ``gitmem edit``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import GitRunner, run_git

import gitmem
from gitmem import (
    ConflictError,
    FixedClock,
    InvalidIdError,
    InvalidInputError,
    InvalidMemoryError,
    NotFoundError,
    Store,
    TooLargeError,
)
from gitmem.format import codec


def stored_text(store: Store, memory_id: str) -> str:
    memory = store.read(memory_id)
    assert memory.document is not None
    return codec.serialize(memory.document)


def commits(git: GitRunner, store: Store) -> int:
    return int(git(store.db().gitdir, "rev-list", "--count", "main").strip())


def test_edit_keeps_what_the_person_wrote(any_store: Store, clock: FixedClock) -> None:
    m = any_store.create("old\n", title="Old", tags=["a"], agent="alice")
    clock.advance(hours=1)
    text = stored_text(any_store, m.id)
    edited = (
        text.replace("title: Old", "title: 'New'   # quoted, with a comment")
        .replace("tags: [a]", "tags: [a, b]\nreviewer: bob\nconfidence: 0.75")
        .replace("old\n", "new body\r\nwith crlf")
    )
    result = any_store.update_from_text(m.id, edited)
    assert result.version == 2
    assert result.title == "New"
    assert result.tags == ("a", "b")
    assert result.extra == {"reviewer": "bob", "confidence": 0.75}
    assert result.body == "new body\r\nwith crlf"
    assert result.updated_at == clock.now()
    assert result.created_at == m.created_at
    assert stored_text(any_store, m.id) == edited
    assert any_store.read(m.id) == result


def test_store_managed_fields_are_the_stores(
    store: Store, clock: FixedClock, git: GitRunner
) -> None:
    m = store.create("body\n", title="T")
    clock.advance(minutes=1)
    text = stored_text(store, m.id)
    before = commits(git, store)
    # Only managed fields differ: nothing to commit.
    fiddled = text.replace(
        "created_at: 2026-11-22T10:00:00Z",
        "created_at: 1999-01-01T00:00:00Z\nupdated_at: 1999-01-01T00:00:00Z\nversion: 42",
    )
    same = store.update_from_text(m.id, fiddled)
    assert same.version == 1
    assert commits(git, store) == before
    assert store.update_from_text(m.id, text.encode()).version == 1
    assert commits(git, store) == before
    # A real change: version + 1 and the stored created_at, whatever the text says.
    changed = store.update_from_text(m.id, fiddled.replace("body", "new"))
    assert changed.version == 2
    assert changed.created_at == m.created_at
    assert commits(git, store) == before + 1


def test_one_commit_with_the_update_trailers(store: Store, git: GitRunner) -> None:
    m = store.create("body\n", title="T")
    store.update_from_text(m.id, stored_text(store, m.id) + "more\n", message="by hand")
    log = git(store.path, "log", "-1", "--format=%B")
    assert log.startswith("update: T\n\nby hand\n")
    assert f"Gitmem-Op: update\nGitmem-Id: {m.id}" in log
    assert git(store.path, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (lambda t, i: t.replace(f"id: {i}", "id: mem_other"), InvalidMemoryError, "cannot change"),
        (lambda t, i: t.replace(f"id: {i}\n", ""), InvalidMemoryError, "cannot change"),
        (lambda t, i: t.replace("title: T", "title: [open"), InvalidMemoryError, "not valid YAML"),
        (
            lambda t, i: t.replace("title: T", "title: !!python/name:os.system"),
            InvalidMemoryError,
            "tag",
        ),
        (lambda t, i: t.replace("scope: repo", "scope: moon"), InvalidMemoryError, "scope"),
        (lambda t, i: t.replace("title: T", "tags: notalist"), InvalidMemoryError, "tags"),
        (lambda t, i: t.split("---\n", 2)[2], InvalidMemoryError, "no front-matter"),
        (lambda t, i: "---\n- a list\n---\nbody", InvalidMemoryError, "mapping"),
        (lambda t, i: t + "\x00", InvalidInputError, "NUL"),
        (
            lambda t, i: t.replace("title: T", "supersedes: mem_nowhere"),
            InvalidInputError,
            "supersedes",
        ),
        (lambda t, i: t.replace("title: T", f"supersedes: {i}"), InvalidIdError, "itself"),
        (lambda t, i: t + "x" * 300, TooLargeError, "limit"),
    ],
)
def test_bad_edits_change_nothing(
    store: Store,
    git: GitRunner,
    change: Callable[[str, str], str],
    error: type[Exception],
    words: str,
) -> None:
    m = store.create("body\n", title="T")
    if error is TooLargeError:
        store = _small_store(store)
    before = commits(git, store)
    file_before = (store.path / str(m.path)).read_bytes()
    with pytest.raises(error, match=words):
        store.update_from_text(m.id, change(stored_text(store, m.id), m.id))
    assert commits(git, store) == before
    assert (store.path / str(m.path)).read_bytes() == file_before


def _small_store(store: Store) -> Store:
    """The same store, with limits.max_body_bytes lowered to 100 by a committed config change."""
    config = store.path / "gitmem.yaml"
    config.write_text(config.read_text().replace("max_body_bytes: 1048576", "max_body_bytes: 100"))
    run_git(store.path, "commit", "-qam", "smaller limit")
    return gitmem.open(store.path, clock=store.clock)


def test_non_utf8_bytes_are_refused(store: Store) -> None:
    m = store.create("body\n")
    with pytest.raises(InvalidMemoryError, match="UTF-8"):
        store.update_from_text(m.id, b"---\nid: x\n---\n\xff")


def test_supersedes_may_name_an_existing_memory(store: Store) -> None:
    older = store.create("older\n")
    m = store.create("body\n", title="T")
    text = stored_text(store, m.id).replace("title: T", f"title: T\nsupersedes: {older.id}")
    assert store.update_from_text(m.id, text).supersedes == older.id
    assert [x.id for x in store.list()] == [m.id]


def test_expected_version_and_missing(store: Store) -> None:
    m = store.create("body\n")
    text = stored_text(store, m.id)
    store.append(m.id, "someone else")
    with pytest.raises(ConflictError):
        store.update_from_text(m.id, text.replace("body", "mine"), expected_version=1)
    assert "mine" not in store.read(m.id).body
    store.update_from_text(m.id, text.replace("body", "mine"), expected_version=2)
    with pytest.raises(NotFoundError):
        store.update_from_text("mem_missing", text)


def test_inside_a_transaction(store: Store, git: GitRunner) -> None:
    """Two writes in one transaction: one commit, one version."""
    m = store.create("body\n", title="T")
    text = stored_text(store, m.id)
    before = commits(git, store)
    with store.transaction(message="two edits"):
        store.update_from_text(m.id, text.replace("title: T", "title: U"))
        store.update(m.id, "new body\n")
    assert commits(git, store) == before + 1
    assert (store.read(m.id).title, store.read(m.id).version) == ("U", 2)
