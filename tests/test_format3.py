"""Format 3: version and updated_at derived from history, so pull requests merge with
plain git (issue 15). Real repositories, the real git binary, no merge driver registered."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import ConflictError, UnsupportedFormatError
from gitmem.features.migrate import migrate
from gitmem.format.layout import legacy_path

T0 = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
BODY = "first line\nsecond line\nthird line\nfourth line\nfifth line\n"


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def at(minutes: int) -> FixedClock:
    return FixedClock(T0 + dt.timedelta(minutes=minutes))


def make_store(path: Path, fmt: int) -> Store:
    store = gitmem.init(path, format=fmt, clock=at(0))
    # The host's merge button: git alone, no gitmem merge driver and no attributes for it.
    git(path, "config", "--unset", "merge.gitmem.driver", check=False)
    git(path, "config", "--remove-section", "merge.gitmem", check=False)
    return store


def no_index(store: Store) -> Store:
    store.use_index = False  # the reference path: everything from git's history
    return store


def file_text(store: Store, memory_id: str) -> str:
    data = store.db().snapshot().read(legacy_path(memory_id))
    assert data is not None
    return data.decode()


def two_pull_requests(
    tmp_path: Path, fmt: int
) -> tuple[Path, str, subprocess.CompletedProcess[str]]:
    """A memory at version 1 on main; branch a changes its title (front-matter), branch b
    its fourth body line, each as gitmem writes (one update each, an hour apart); then
    `git merge b` on a, by git alone."""
    path = tmp_path / "store"
    store = make_store(path, fmt)
    memory = store.create(BODY, title="The rule", tags=["x"])
    git(path, "branch", "a")
    git(path, "branch", "b")
    on_a = gitmem.open(path, branch="a", clock=at(60))
    on_a.update(memory.id, title="The rule, revised")
    on_b = gitmem.open(path, branch="b", clock=at(120))
    on_b.update(memory.id, body=BODY.replace("fourth line", "fourth line, edited"))
    git(path, "checkout", "-q", "a")
    merged = git(path, "merge", "--no-edit", "b", check=False)
    return path, memory.id, merged


def test_two_pull_requests_merge_with_plain_git_in_format_3(tmp_path: Path) -> None:
    path, memory_id, merged = two_pull_requests(tmp_path, 3)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert not (path / ".git" / "MERGE_HEAD").exists()
    text = (path / legacy_path(memory_id)).read_text()
    assert "title: The rule, revised\n" in text and "fourth line, edited" in text
    assert "<<<<<<<" not in text
    store = gitmem.open(path, branch="a")
    memory = store.read(memory_id)
    # version 1 + one update on each side; updated_at the later of the two.
    assert memory.version == 3
    assert memory.updated_at == T0 + dt.timedelta(minutes=120)
    assert memory.title == "The rule, revised" and "fourth line, edited" in memory.body
    # The index and the history walk agree (list is served by the index).
    (listed,) = store.list()
    assert (listed.version, listed.updated_at) == (3, memory.updated_at)
    plain = no_index(gitmem.open(path, branch="a"))
    (scanned,) = plain.list()
    assert (scanned.version, scanned.updated_at) == (3, memory.updated_at)
    assert plain.read(memory_id).version == 3


def test_the_same_pull_requests_conflict_in_format_2(tmp_path: Path) -> None:
    """What format 3 fixes: format 2 rewrites updated_at and version on every write."""
    _, _, merged = two_pull_requests(tmp_path, 2)
    assert merged.returncode != 0
    assert "CONFLICT" in merged.stdout


def test_updates_leave_the_stored_lines_alone(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", 3)
    memory = store.create(BODY, title="t")
    before = file_text(store, memory.id)
    later = gitmem.open(tmp_path / "s", clock=at(5))
    updated = later.update(memory.id, title="t2")
    assert (updated.version, updated.updated_at) == (2, T0 + dt.timedelta(minutes=5))
    appended = later.append(memory.id, "sixth line\n")
    assert appended.version == 3
    after = file_text(store, memory.id)
    changed = {
        line.split(":")[0]
        for line in set(before.splitlines()) ^ set(after.splitlines())
        if ":" in line
    }
    assert changed == {"title"}  # not version, not updated_at
    again = gitmem.open(tmp_path / "s")
    assert again.read(memory.id).version == 3
    assert again.read(memory.id, at="HEAD~1").version == 2
    assert again.read(memory.id, at="HEAD~2").version == 1


def test_expected_version_is_the_derived_one(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", 3)
    memory = store.create(BODY)
    store.update(memory.id, title="one", expected_version=1)
    with pytest.raises(ConflictError):
        store.update(memory.id, title="two", expected_version=1)
    assert store.update(memory.id, title="two", expected_version=2).version == 3
    fresh = gitmem.open(tmp_path / "s")  # no cache: from the index or history
    assert fresh.update(memory.id, title="three", expected_version=3).version == 4
    assert fresh.read(memory.id).version == 4


def test_a_transaction_is_one_version(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", 3)
    memory = store.create(BODY)
    with store.transaction(message="two edits, one commit"):
        assert store.update(memory.id, title="a").version == 2
        assert store.update(memory.id, title="b").version == 2
    assert gitmem.open(tmp_path / "s").read(memory.id).version == 2


def test_migrate_2_to_3_keeps_every_memory_and_its_history(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = make_store(path, 2)
    ids = [store.create(f"memory {i}\n", title=f"m{i}").id for i in range(5)]
    for n, memory_id in enumerate(ids[:3]):
        gitmem.open(path, clock=at(10 + n)).update(memory_id, title=f"changed {n}")
    before = {m.id: (m.version, m.updated_at, m.title, m.body) for m in store.list()}
    files = {i: file_text(store, i) for i in ids}
    history = {i: [v.commit for v in store.history(i).versions] for i in ids}
    assert migrate(store) == []  # the default target is format 2: nothing to do
    (step,) = migrate(store, to=3)
    assert (step.from_format, step.to_format, step.moved) == (2, 3, [])
    migrated = gitmem.open(path, clock=at(30))
    assert migrated.config().format == 3
    assert {i: file_text(migrated, i) for i in ids} == files  # no memory file changed
    after = {m.id: (m.version, m.updated_at, m.title, m.body) for m in migrated.list()}
    assert after == before
    for memory_id in ids:
        commits = [v.commit for v in migrated.history(memory_id).versions]
        assert commits == history[memory_id]
    # Writes after the migration count on top of what the files say.
    assert migrated.update(ids[0], title="after").version == before[ids[0]][0] + 1
    assert gitmem.open(path).read(ids[0]).version == before[ids[0]][0] + 1
    assert migrate(migrated, to=3) == []


def test_format_2_stores_write_as_before(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", 2)
    memory = store.create(BODY)
    gitmem.open(tmp_path / "s", clock=at(5)).update(memory.id, title="t")
    text = file_text(store, memory.id)
    assert "version: 2\n" in text and "updated_at: 2026-11-22T10:05:00Z" in text


def test_delete_and_restore_start_the_count_again(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", 3)
    memory = store.create(BODY)
    store.update(memory.id, title="a")
    store.delete(memory.id)
    restored = store.restore(memory.id)
    assert restored.version == 3
    assert gitmem.open(tmp_path / "s").read(memory.id).version == 3
    assert no_index(gitmem.open(tmp_path / "s")).read(memory.id).version == 3


def test_cli_init_and_migrate_take_the_format(tmp_path: Path) -> None:
    from gitmem.cli import main

    with pytest.raises(SystemExit) as done:
        main(["init", str(tmp_path / "three"), "--format", "3"])
    assert done.value.code == 0
    assert gitmem.open(tmp_path / "three").config().format == 3
    gitmem.init(tmp_path / "two", format=2)
    with pytest.raises(SystemExit) as done:
        main(["--store", str(tmp_path / "two"), "migrate", "--to", "3"])
    assert done.value.code == 0
    assert gitmem.open(tmp_path / "two").config().format == 3


def test_an_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError):
        gitmem.init(tmp_path / "s", format=5)
    assert not (tmp_path / "s").exists()


def test_history_counts_the_versions(tmp_path: Path) -> None:
    path, memory_id, merged = two_pull_requests(tmp_path, 3)
    assert merged.returncode == 0
    for store in (gitmem.open(path, branch="a"), no_index(gitmem.open(path, branch="a"))):
        steps = store.history(memory_id).versions
        assert [s.version for s in steps] == [1, 2, 3, 3]  # create, a, b, the merge
        assert steps[-1].memory is not None and steps[-1].memory.version == 3


def test_a_rebuilt_index_derives_the_same(tmp_path: Path) -> None:
    path, memory_id, merged = two_pull_requests(tmp_path, 3)
    assert merged.returncode == 0
    store = gitmem.open(path, branch="a")
    store.reindex()
    (listed,) = store.list()
    assert (listed.version, listed.updated_at) == (3, T0 + dt.timedelta(minutes=120))
    # a write on top of the merge counts from there, with or without the index
    after = gitmem.open(path, branch="a", clock=at(180)).update(memory_id, title="after")
    assert after.version == 4
    assert no_index(gitmem.open(path, branch="a")).read(memory_id).version == 4


def test_hostile_files_are_still_refused_in_format_3(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = make_store(path, 3)
    memory = store.create(BODY)
    target = path / legacy_path(memory.id)
    target.write_text(target.read_text().replace("version:", "x: &a [1]\ny: *a\nversion:", 1))
    git(path, "commit", "-qam", "an alias bomb by hand")
    reopened = gitmem.open(path)
    with pytest.raises(gitmem.InvalidMemoryError):
        reopened.read(memory.id)
    assert [p.path for p in reopened.problems()] == [legacy_path(memory.id)]
    assert reopened.list() == []
