"""The library's small courtesies: a Store says what it is, closes, and is a context
manager; it refuses an empty body as the command line does (one check for both); a listing
with superseded memories says which are; a memory's history follows its renames back to its
first version, as git log --follow does."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Gitmem, make_runner

import gitmem
from gitmem import InvalidInputError, Store
from gitmem.entry.memtool import MemoryTool


def test_a_store_names_its_path_and_branch_and_closes(tmp_path: Path) -> None:
    with gitmem.init(tmp_path / "notes") as store:
        assert repr(store) == f"Store({str(tmp_path / 'notes')!r}, branch='main')"
        store.create("x")
        assert [m.body for m in store.list()] == ["x"]
    store.close()  # twice is fine, and so is using it again
    assert [m.body for m in store.list()] == ["x"]
    with gitmem.open(tmp_path / "notes") as again:
        assert [m.body for m in again.list()] == ["x"]


@pytest.mark.parametrize("body", ["", "  \n", b""])
def test_the_library_refuses_an_empty_body_as_the_cli_does(store: Store, body: str | bytes) -> None:
    with pytest.raises(InvalidInputError, match="empty") as err:
        store.create(body)
    assert "--allow-empty" in (err.value.hint or "")
    memory = store.create("x")
    for write in (store.update, store.append, store.supersede):
        with pytest.raises(InvalidInputError, match="empty"):
            write(memory.id, body)
    assert store.list() == [store.read(memory.id)] and store.read(memory.id).version == 1
    assert store.create(body, allow_empty=True).body.strip() == ""
    assert store.update(memory.id, body, allow_empty=True).body.strip() == ""


def test_list_with_superseded_says_which_are(store: Store) -> None:
    old = store.create("old")
    new = store.supersede(old.id, "new")
    listed = {m.id: str(m.status) for m in store.list(include_superseded=True)}
    assert listed == {old.id: "superseded", new.id: "active"}
    shown = Gitmem(store.path, make_runner()).json("ls", "--all")
    assert {m["id"]: m.get("status", "active") for m in shown} == listed
    assert store.read(old.id).status == "active"  # the file says nothing of it
    with pytest.raises(InvalidInputError, match="supersede"):
        store.update(new.id, status="superseded")


def test_history_follows_renames_back_to_the_first_version(store: Store) -> None:
    tool = MemoryTool(store)
    tool.create("/memories/a.md", "one")
    tool.str_replace("/memories/a.md", "one", "two")
    tool.rename("/memories/a.md", "/memories/b/c.md")
    tool.str_replace("/memories/b/c.md", "two", "three")
    steps = [(v.memory_id, v.memory.body) for v in store.history("notes/b/c").versions if v.memory]
    assert steps == [("notes/a", "one"), ("notes/a", "two"), ("notes/b/c", "two"),
                     ("notes/b/c", "three")]  # fmt: skip
    assert len(store.history("notes/b/c").versions) == 4  # the rename is one step
    out = Gitmem(store.path, make_runner())("history", "notes/b/c").stdout
    assert "notes/a" in out and "notes/b/c" in out
    pytest.importorskip("mcp")
    from gitmem.entry.mcp import call, tools

    [history] = [t for t in tools(store) if t.name == "memory_history"]
    result, failed = call(history, {"id": "notes/b/c"})
    assert not failed and result.structured is not None
    assert len(result.structured["versions"]) == 4
