"""Bad input: each is refused with a clear error, and nothing stored changes.

"Nothing changed" is checked the strict way: the branch tip is the same commit
before and after, and in a work-tree store ``git status`` stays clean.
Broken files are planted with the git binary, as a person or another tool
would leave them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from storetools import memory_text, plant, plant_symlink, run_git, status_porcelain, tip

import gitmem
from gitmem import (
    AlreadyExistsError,
    GitmemError,
    InvalidIdError,
    InvalidInputError,
    InvalidMemoryError,
    NotFoundError,
    Store,
    TooLargeError,
)
from gitmem.format.layout import memory_path

PLANTED = "mem_11111111-1111-4111-8111-111111111111"
OTHER = "mem_22222222-2222-4222-8222-222222222222"
TIMES = "created_at: 2026-11-22T09:00:00Z\nupdated_at: 2026-11-22T09:00:00Z\nversion: 1\n"


@contextlib.contextmanager
def unchanged(store: Store) -> Iterator[None]:
    """Assert that the block leaves the branch tip (and a work tree) exactly as it was."""
    head = tip(store)
    worktree = None if store.db().bare else status_porcelain(store)
    yield
    assert tip(store) == head
    if worktree is not None:
        assert status_porcelain(store) == worktree


def refused(store: Store, error: type[GitmemError], call: Callable[[], Any]) -> GitmemError:
    """``call`` raises ``error`` with a message, and the branch tip does not move.

    (The tests that plant files also check ``git status``; one subprocess per call
    would make this the slowest file of the suite.)
    """
    head = tip(store)
    with pytest.raises(error) as info:
        call()
    assert tip(store) == head
    assert str(info.value)  # a message a person can read
    return info.value


# -- ids ------------------------------------------------------------------------------------

BAD_IDS = {
    "slash": "a/b",
    "backslash": "a\\b",
    "dotdot": "..",
    "dotdot-inside": "a..b",
    "traversal": "../../etc/passwd",
    "percent-dotdot": "%2e%2e",
    "percent-upper": "%2E%2E%2Fetc",
    "nul": "a\x00b",
    "newline": "a\nb",
    "tab": "a\tb",
    "escape-sequence": "a\x1b[31m",
    "delete-char": "a\x7f",
    "bidi-override": "a\u202eb",
    "zero-width": "a\u200bb",
    "absolute-posix": "/etc/passwd",
    "absolute-windows": "C:\\Windows\\win.ini",
    "empty": "",
    "dot": ".",
    "hidden": ".hidden",
    "space": "a b",
    "non-ascii": "café",
    "too-long": "a" * 201,
    "md-suffix": "note.md",
    "not-a-string": 42,
}


@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
def test_bad_id_is_refused_everywhere(any_store: Store, bad: Any) -> None:
    good = any_store.create("a good memory")
    calls: list[Callable[[], Any]] = [
        lambda: any_store.create("x", id=bad),
        lambda: any_store.read(bad),
        lambda: any_store.get(bad),
        lambda: any_store.exists(bad),
        lambda: any_store.update(bad, "x"),
        lambda: any_store.append(bad, "x"),
        lambda: any_store.delete(bad),
        lambda: any_store.restore(bad),
        lambda: any_store.restore(bad, at="main"),
        lambda: any_store.supersede(bad, "x"),
        lambda: any_store.supersede(good.id, "x", id=bad),
        lambda: any_store.history(bad),
        lambda: any_store.latest_version(bad),
        lambda: any_store.successors(bad),
        lambda: any_store.create("x", related=[(bad, "refines")]),
        lambda: any_store.update(good.id, related=[{"id": bad, "relationship": "refines"}]),
    ]
    with unchanged(any_store):
        for call in calls:
            refused(any_store, InvalidIdError, call)
    assert [m.id for m in any_store.list()] == [good.id]


def test_bad_id_never_touches_the_disk(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "store")
    victim = tmp_path / "victim.md"
    victim.write_text("do not touch")
    for bad in ("../../victim", str(victim.with_suffix("")), "..%2f..%2fvictim"):
        refused(store, InvalidIdError, lambda bad=bad: store.create("x", id=bad))
    assert victim.read_text() == "do not touch"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "victim.md"]


# -- caller input ------------------------------------------------------------------------------


def test_duplicate_id_on_create(any_store: Store) -> None:
    any_store.create("first", id="dup")
    refused(any_store, AlreadyExistsError, lambda: any_store.create("second", id="dup"))
    assert any_store.read("dup").body == "first"


def test_non_utf8_body_bytes(any_store: Store) -> None:
    m = any_store.create("fine")
    bad = b"caf\xe9 latin-1"
    refused(any_store, InvalidMemoryError, lambda: any_store.create(bad))
    refused(any_store, InvalidMemoryError, lambda: any_store.update(m.id, bad))
    refused(any_store, InvalidMemoryError, lambda: any_store.append(m.id, bad))
    refused(any_store, InvalidMemoryError, lambda: any_store.supersede(m.id, bad))


def test_body_with_nul(any_store: Store) -> None:
    m = any_store.create("fine")
    for bad in ("a\x00b", b"a\x00b"):
        refused(any_store, InvalidInputError, lambda bad=bad: any_store.create(bad))
        refused(any_store, InvalidInputError, lambda bad=bad: any_store.update(m.id, bad))
        refused(any_store, InvalidInputError, lambda bad=bad: any_store.append(m.id, bad))
        refused(any_store, InvalidInputError, lambda bad=bad: any_store.supersede(m.id, bad))


def test_body_that_is_not_text(any_store: Store) -> None:
    refused(any_store, InvalidInputError, lambda: any_store.create(123))  # type: ignore[arg-type]
    refused(any_store, InvalidInputError, lambda: any_store.create(["a"]))  # type: ignore[arg-type]


def set_max_body(store: Store, limit: int) -> Store:
    """Commit a changed gitmem.yaml with the git binary and open the store again."""
    config = store.db().snapshot().read("gitmem.yaml")
    assert config is not None
    text = config.decode().replace("max_body_bytes: 1048576", f"max_body_bytes: {limit}")
    assert f"max_body_bytes: {limit}\n" in text
    plant(store, "gitmem.yaml", text, "policy: smaller memories")
    reopened = gitmem.open(store.db().gitdir if store.db().bare else store.path, clock=store.clock)
    assert reopened.config().max_body_bytes == limit
    return reopened


def test_body_over_the_configured_bound(any_store: Store) -> None:
    store = set_max_body(any_store, 100)
    exact = store.create("x" * 100)  # the bound itself is allowed
    refused(store, TooLargeError, lambda: store.create("x" * 101))
    refused(store, TooLargeError, lambda: store.create("é" * 51))  # 102 bytes, 51 characters
    assert store.create("é" * 50).body == "é" * 50
    refused(store, TooLargeError, lambda: store.update(exact.id, "y" * 101))
    refused(store, TooLargeError, lambda: store.append(exact.id, "one more"))
    refused(store, TooLargeError, lambda: store.supersede(exact.id, "z" * 500))
    assert store.read(exact.id).version == 1


def test_a_committed_bound_applies_without_reopening(any_store: Store) -> None:
    """A policy change that lands while a store is open (a long-lived server) governs its
    next write: the bound is the one committed at the tip being written to."""
    first = any_store.create("x" * 150)
    set_max_body(any_store, 100)  # committed by someone else; any_store is not reopened
    refused(any_store, TooLargeError, lambda: any_store.create("y" * 101))
    refused(any_store, TooLargeError, lambda: any_store.append(first.id, "more"))
    with pytest.raises(TooLargeError), any_store.transaction():
        any_store.create("z" * 101)
    assert any_store.config().max_body_bytes == 100
    assert any_store.create("y" * 100).body == "y" * 100


def test_broken_config_is_refused_on_open(any_store: Store) -> None:
    config = any_store.db().snapshot().read("gitmem.yaml")
    assert config is not None
    text = config.decode().replace("max_body_bytes: 1048576", "max_body_bytes: -5")
    plant(any_store, "gitmem.yaml", text, "a bad policy")
    with pytest.raises(InvalidMemoryError, match="max_body_bytes"):
        gitmem.open(any_store.db().gitdir if any_store.db().bare else any_store.path)


def test_front_matter_over_the_bound(any_store: Store) -> None:
    m = any_store.create("small body")
    huge = {"notes": "n" * 70_000}
    refused(any_store, TooLargeError, lambda: any_store.create("x", extra=huge))
    refused(any_store, TooLargeError, lambda: any_store.update(m.id, extra=huge))
    assert any_store.problems() == []


def test_supersedes_naming_a_missing_memory(any_store: Store) -> None:
    refused(any_store, NotFoundError,
            lambda: any_store.supersede("mem_00000000-0000-4000-8000-000000000000", "new"))
    m = any_store.create("old")
    any_store.delete(m.id)
    refused(any_store, NotFoundError, lambda: any_store.supersede(m.id, "new"))
    assert any_store.list() == []


def test_supersedes_cannot_be_set_by_hand(any_store: Store) -> None:
    m = any_store.create("x")
    refused(any_store, InvalidInputError, lambda: any_store.update(m.id, supersedes="mem_x"))
    refused(any_store, InvalidInputError,
            lambda: any_store.create("x", extra={"supersedes": m.id}))


@pytest.mark.parametrize(
    "field", ["colour", "supersedes", "version", "created_at", "updated_at", "scope", "path",
              "body_text"]
)
def test_unknown_or_managed_field_in_update(any_store: Store, field: str) -> None:
    m = any_store.create("x")
    error = refused(any_store, InvalidInputError, lambda: any_store.update(m.id, **{field: "v"}))
    assert field in str(error)


BAD_ENUMS: dict[str, dict[str, Any]] = {
    "scope": {"scope": "team"},
    "trigger": {"trigger": "sometimes"},
    "status": {"status": "deleted"},
    "relationship": {"related": [("mem_x", "likes")]},
    "relationship-in-mapping": {"related": [{"id": "mem_x", "relationship": "SUPERSEDES"}]},
}


@pytest.mark.parametrize("fields", list(BAD_ENUMS.values()), ids=list(BAD_ENUMS))
def test_bad_enum_value(any_store: Store, fields: dict[str, Any]) -> None:
    m = any_store.create("x")
    refused(any_store, InvalidInputError, lambda: any_store.create("y", **fields))
    if "scope" not in fields:
        refused(any_store, InvalidInputError, lambda: any_store.update(m.id, **fields))
        refused(any_store, InvalidInputError, lambda: any_store.supersede(m.id, "y", **fields))
    assert [x.id for x in any_store.list()] == [m.id]


BAD_FIELDS: dict[str, dict[str, Any]] = {
    "title-two-lines": {"title": "line one\nline two"},
    "title-control-char": {"title": "bell\x07"},
    "title-not-text": {"title": 5},
    "category-not-text": {"category": ["a"]},
    "tag-not-text": {"tags": [1]},
    "tag-with-newline": {"tags": ["a\nb"]},
    "agent-with-newline": {"agent": "evil\nGitmem-Op: delete"},
    "session-with-newline": {"session_id": "s\r\nx"},
    "related-not-a-pair": {"related": [42]},
    "extra-not-a-mapping": {"extra": ["a"]},
    "extra-known-key": {"extra": {"version": 9}},
    "extra-id-key": {"extra": {"id": "other"}},
    "extra-non-string-key": {"extra": {1: "x"}},
    "extra-empty-key": {"extra": {"": "x"}},
    "title-too-long": {"title": "t" * 501},
    # Values YAML would write with a tag the safe reader refuses: never stored unreadable.
    "extra-set": {"extra": {"s": {1, 2}}},
    "extra-bytes": {"extra": {"b": b"raw"}},
    "extra-nested-set": {"extra": {"n": [{"deep": frozenset({"x"})}]}},
    "extra-object": {"extra": {"o": object()}},
}


@pytest.mark.parametrize("fields", list(BAD_FIELDS.values()), ids=list(BAD_FIELDS))
def test_bad_field_value(any_store: Store, fields: dict[str, Any]) -> None:
    m = any_store.create("x")
    refused(any_store, InvalidInputError, lambda: any_store.create("y", **fields))
    refused(any_store, InvalidInputError, lambda: any_store.update(m.id, **fields))
    assert any_store.read(m.id).version == 1
    assert any_store.problems() == []


def test_bad_revision_or_date(any_store: Store) -> None:
    m = any_store.create("x")
    refused(any_store, NotFoundError, lambda: any_store.read(m.id, at="no-such-branch"))
    refused(any_store, NotFoundError, lambda: any_store.list(at="HEAD~999"))
    refused(any_store, InvalidInputError, lambda: any_store.log(since="last tuesday"))
    refused(any_store, InvalidInputError, lambda: any_store.log(until="soon"))


# -- broken files in the store ---------------------------------------------------------------


def assert_unreadable(store: Store, memory_id: str, path: str, error: type[GitmemError]) -> None:
    """Reading fails with ``error``; listing skips the file and problems() names it;
    writes that need to read it fail and change nothing."""
    good = store.create("a good neighbour")
    with pytest.raises(error):
        store.read(memory_id)
    with pytest.raises(error):
        store.get(memory_id)
    assert [m.id for m in store.list(include_superseded=True, include_archived=True)] == [good.id]
    problems = store.problems()
    assert [p.path for p in problems] == [path]
    assert problems[0].message
    blob = run_git(store.path, "rev-parse", f"main:{path}")
    refused(store, error, lambda: store.update(memory_id, "fixed?"))
    refused(store, error, lambda: store.update(memory_id, title="fixed?"))
    refused(store, error, lambda: store.append(memory_id, "more"))
    refused(store, error, lambda: store.supersede(memory_id, "replacement"))
    assert run_git(store.path, "rev-parse", f"main:{path}") == blob
    # The way out is always open: deleting a broken file works, and history keeps it.
    assert store.delete(memory_id) is True
    assert store.problems() == []
    assert status_porcelain(store) == ""


BROKEN_FILES: dict[str, tuple[str | bytes, type[GitmemError]]] = {
    "malformed-yaml": (f"---\nid: {PLANTED}\ntags: [unclosed\n{TIMES}---\n\nbody\n",
                       InvalidMemoryError),
    "tab-indented-yaml": (f"---\nid: {PLANTED}\nrelated:\n\t- id: x\n{TIMES}---\nbody\n",
                          InvalidMemoryError),
    "front-matter-is-a-list": ("---\n- id\n- title\n---\n\nbody\n", InvalidMemoryError),
    "front-matter-is-a-scalar": ("---\njust a sentence\n---\n\nbody\n", InvalidMemoryError),
    "front-matter-is-a-number": ("---\n42\n---\n\nbody\n", InvalidMemoryError),
    "front-matter-empty": ("---\n---\n\nbody\n", InvalidMemoryError),
    "no-front-matter": ("just some markdown\n", InvalidMemoryError),
    "front-matter-never-closed": (f"---\nid: {PLANTED}\n{TIMES}\nbody\n", InvalidMemoryError),
    "missing-id": (f"---\ntitle: no id\n{TIMES}---\n\nbody\n", InvalidMemoryError),
    "missing-created-at": (f"---\nid: {PLANTED}\n---\nbody\n", InvalidMemoryError),
    "duplicate-key-id": (f"---\nid: {PLANTED}\nid: {OTHER}\n{TIMES}---\nbody\n",
                         InvalidMemoryError),
    "duplicate-key-title": (f"---\nid: {PLANTED}\ntitle: a\ntitle: b\n{TIMES}---\nbody\n",
                            InvalidMemoryError),
    "id-not-a-string": (f"---\nid: [{PLANTED}]\n{TIMES}---\nbody\n", InvalidMemoryError),
    "id-does-not-match-path": (f"---\nid: {OTHER}\n{TIMES}---\nbody\n", InvalidMemoryError),
    "alias-bomb": (
        f"---\nid: {PLANTED}\n{TIMES}"
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n"
            for i in range(8)
        )
        + "---\nbody\n",
        InvalidMemoryError,
    ),
    "single-alias": (f"---\nid: {PLANTED}\n{TIMES}x: &x 1\ny: *x\n---\nbody\n",
                     InvalidMemoryError),
    "deep-nesting": (f"---\nid: {PLANTED}\n{TIMES}deep: " + "[" * 200 + "]" * 200
                     + "\n---\nbody\n", InvalidMemoryError),
    "very-deep-nesting": (f"---\nid: {PLANTED}\n{TIMES}deep: " + "{a: " * 5000 + "1"
                          + "}" * 5000 + "\n---\nbody\n", InvalidMemoryError),
    "python-object-tag": (
        f"---\nid: {PLANTED}\n{TIMES}x: !!python/object/apply:os.system ['touch PWNED']\n"
        "---\nbody\n",
        InvalidMemoryError,
    ),
    "python-name-tag": (f"---\nid: {PLANTED}\n{TIMES}x: !!python/name:os.system\n---\nbody\n",
                        InvalidMemoryError),
    "non-utf8-body": (f"---\nid: {PLANTED}\n{TIMES}---\n\n".encode() + b"caf\xe9\n",
                      InvalidMemoryError),
    "utf16-file": (f"---\nid: {PLANTED}\n{TIMES}---\nbody\n".encode("utf-16"),
                   InvalidMemoryError),
    "nul-in-body": (f"---\nid: {PLANTED}\n{TIMES}---\n\n".encode() + b"a\x00b\n",
                    InvalidMemoryError),
    "front-matter-too-large": (f"---\nid: {PLANTED}\n{TIMES}notes: {'n' * 70_000}\n---\nbody\n",
                               TooLargeError),
    "bad-timestamp": (f"---\nid: {PLANTED}\ncreated_at: yesterday\n"
                      "updated_at: 2026-11-22T09:00:00Z\nversion: 1\n---\nbody\n",
                      InvalidMemoryError),
    "impossible-date": (f"---\nid: {PLANTED}\ncreated_at: 2026-02-30T09:00:00Z\n"
                        "updated_at: 2026-11-22T09:00:00Z\nversion: 1\n---\nbody\n",
                        InvalidMemoryError),
    "version-zero": (f"---\nid: {PLANTED}\n{TIMES.replace('version: 1', 'version: 0')}---\nb\n",
                     InvalidMemoryError),
    "version-text": (f"---\nid: {PLANTED}\n{TIMES.replace('version: 1', 'version: two')}---\nb\n",
                     InvalidMemoryError),
    "bad-scope": (f"---\nid: {PLANTED}\n{TIMES}scope: team\n---\nb\n", InvalidMemoryError),
    "bad-trigger": (f"---\nid: {PLANTED}\n{TIMES}trigger: whenever\n---\nb\n", InvalidMemoryError),
    "bad-status": (f"---\nid: {PLANTED}\n{TIMES}status: gone\n---\nb\n", InvalidMemoryError),
    "bad-relationship": (f"---\nid: {PLANTED}\n{TIMES}related:\n- id: {OTHER}\n"
                         "  relationship: likes\n---\nb\n", InvalidMemoryError),
    "tags-not-a-list": (f"---\nid: {PLANTED}\n{TIMES}tags: {{a: 1}}\n---\nb\n",
                        InvalidMemoryError),
}


@pytest.mark.parametrize(
    ("content", "error"), list(BROKEN_FILES.values()), ids=list(BROKEN_FILES)
)
def test_broken_file_in_the_store(
    store: Store, content: str | bytes, error: type[GitmemError], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    plant(store, memory_path(PLANTED), content, "a broken file, by hand")
    assert_unreadable(store, PLANTED, memory_path(PLANTED), error)
    assert not (tmp_path / "PWNED").exists()
    assert not (store.path / "PWNED").exists()


def test_id_mismatch_is_reported_with_both_ids(store: Store) -> None:
    plant(store, memory_path(PLANTED), memory_text(OTHER))
    with pytest.raises(InvalidMemoryError) as info:
        store.read(PLANTED)
    assert PLANTED in str(info.value) and OTHER in str(info.value)
    # The id it claims does not exist either: nothing is found by scanning.
    assert store.get(OTHER) is None
    (problem,) = store.problems()
    assert problem.path == memory_path(PLANTED)
    assert OTHER in problem.message


def test_duplicate_ids_in_two_files(store: Store) -> None:
    original = store.create("the real one", id=PLANTED)
    text = run_git(store.path, "show", f"main:{original.path}")
    copy_path = memory_path(OTHER)
    plant(store, copy_path, text, "copy a memory by hand")
    wrong_shard = f"memories/zz/{PLANTED}.md"
    plant(store, wrong_shard, text, "and another copy in the wrong shard")
    assert [m.id for m in store.list()] == [PLANTED]
    assert store.read(PLANTED).body == "the real one"
    assert sorted(p.path for p in store.problems()) == sorted([copy_path, wrong_shard])
    # Reading the copy's id is an error, not a second memory called PLANTED.
    with pytest.raises(InvalidMemoryError):
        store.read(OTHER)
    # And a create cannot make a third copy.
    refused(store, AlreadyExistsError, lambda: store.create("again", id=PLANTED))


def test_file_outside_the_memory_layout(store: Store) -> None:
    m = store.create("real")
    plant(store, "memories/README.txt", "notes for people\n")
    plant(store, "memories/ab/cd/deep.md", memory_text("deep"))
    assert [x.id for x in store.list()] == [m.id]
    assert sorted(p.path for p in store.problems()) == ["memories/README.txt",
                                                        "memories/ab/cd/deep.md"]


def test_symlink_is_never_followed(store: Store, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text(memory_text(PLANTED, "a secret outside the store\n"))
    plant_symlink(store, memory_path(PLANTED), str(secret))
    with unchanged(store):
        assert store.get(PLANTED) is None
        with pytest.raises(NotFoundError):
            store.read(PLANTED)
        assert store.list() == []
        with pytest.raises(AlreadyExistsError):
            store.create("over the link", id=PLANTED)
        with pytest.raises(NotFoundError):
            store.update(PLANTED, "through the link")
    assert secret.read_text() == memory_text(PLANTED, "a secret outside the store\n")


def test_hand_written_supersedes_naming_a_missing_memory_is_tolerated(store: Store) -> None:
    plant(store, memory_path(PLANTED), memory_text(PLANTED, supersedes=OTHER))
    m = store.read(PLANTED)
    assert m.supersedes == OTHER
    assert [x.id for x in store.list()] == [PLANTED]
    history = store.history(PLANTED)
    assert [v.memory_id for v in history] == [PLANTED]
    assert any(OTHER in w and "not in the store" in w for w in history.warnings)
    # Writes to it still work: the dangling link is kept as written.
    assert store.update(PLANTED, "edited").supersedes == OTHER
