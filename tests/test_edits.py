"""``gitmem edit`` through the library (gitmem.store.edits): one update, nothing typed lost.

The command only passes click's editor in; these drive the same function with an editor
of their own, so the kept-edit behaviour is tested without a terminal.
"""

from __future__ import annotations

import pytest

from gitmem import ConflictError, InvalidMemoryError, NotFoundError, Store
from gitmem.base import paths
from gitmem.store.edits import edit


def test_an_edit_is_one_update_and_no_change_commits_nothing(store: Store) -> None:
    memory = store.create("first line\n", title="t")
    result = edit(store, memory.id, lambda text: text.replace(b"first", b"second"))
    assert result.changed and result.memory.version == 2
    assert store.read(memory.id).body == "second line\n"
    same = edit(store, memory.id, lambda text: text)
    assert not same.changed and same.memory.version == 2


def test_a_refused_edit_is_kept_and_offered_again(store: Store) -> None:
    memory = store.create("body\n", title="t")
    pending, base = paths.edit_files(store.db().gitdir, memory.id)
    with pytest.raises(InvalidMemoryError) as refused:
        edit(store, memory.id, lambda text: b"no front-matter any more\n")
    assert str(pending) in (refused.value.hint or "")
    assert pending.read_bytes() == b"no front-matter any more\n"
    assert base.read_text().strip() == "1"
    assert store.read(memory.id).version == 1  # nothing written
    notices: list[str] = []
    seen: list[bytes] = []

    def fix(text: bytes) -> bytes:
        seen.append(text)
        return _valid(store, memory.id)

    result = edit(store, memory.id, fix, notice=notices.append)
    assert seen == [b"no front-matter any more\n"]  # the kept text, not the stored file
    assert any("resuming" in n for n in notices)
    assert result.changed and not pending.exists() and not base.exists()


def _valid(store: Store, memory_id: str) -> bytes:
    from gitmem.format.memfile import file_text

    return file_text(store.read(memory_id)).replace("body", "fixed").encode()


def test_someone_elses_change_meanwhile_is_a_conflict_and_the_edit_is_kept(store: Store) -> None:
    memory = store.create("body\n", title="t")
    pending, _ = paths.edit_files(store.db().gitdir, memory.id)

    def meanwhile(text: bytes) -> bytes:
        store.update(memory.id, body="changed by another\n")
        return text.replace(b"body", b"mine")

    with pytest.raises(ConflictError):
        edit(store, memory.id, meanwhile)
    assert b"mine" in pending.read_bytes()
    assert store.read(memory.id).body == "changed by another\n"
    # --discard starts again from the stored file.
    result = edit(store, memory.id, lambda text: text, discard=True)
    assert not result.changed and not pending.exists()


def test_delete_can_insist_the_memory_exists(store: Store) -> None:
    assert store.delete("mem_00000000-0000-4000-8000-000000000000") is False
    with pytest.raises(NotFoundError) as missing:
        store.delete("mem_00000000-0000-4000-8000-000000000000", missing_ok=False)
    assert "log --op delete" in (missing.value.hint or "")
