"""A memory's version and updated_at: derived from history, never written into its file
(docs/format.md). Every reader shows the same values: the library, the index, the walk of
history without it, ``gitmem show``, review, diff, export, undo. Real repositories."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import ConflictError
from gitmem.features import audit as A
from gitmem.features import transfer as T
from gitmem.features.review import review
from gitmem.format.layout import memory_path

T0 = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
BODY = "first line\nsecond line\nthird line\nfourth line\nfifth line\n"


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def at(minutes: int) -> FixedClock:
    return FixedClock(T0 + dt.timedelta(minutes=minutes))


def no_index(store: Store) -> Store:
    store.use_index = False  # the reference path: everything from git's history
    return store


def file_text(store: Store, memory_id: str) -> str:
    data = store.db().snapshot().read(memory_path(memory_id))
    assert data is not None
    return data.decode()


def three_versions(path: Path) -> tuple[Store, str]:
    """A store whose one memory was created at T0 and updated at +5 and +10."""
    store = gitmem.init(path, clock=at(0))
    memory = store.create(BODY, title="The rule")
    gitmem.open(path, clock=at(5)).update(memory.id, title="The rule, revised")
    gitmem.open(path, clock=at(10)).update(memory.id, body=BODY.replace("third", "3rd"))
    return gitmem.open(path, clock=at(20)), memory.id


def test_files_carry_neither_line_and_every_reader_derives_both(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", clock=at(0))
    memory = store.create(BODY, title="t")
    assert (memory.version, memory.updated_at) == (1, T0)
    later = gitmem.open(tmp_path / "s", clock=at(5))
    updated = later.update(memory.id, title="t2")
    assert (updated.version, updated.updated_at) == (2, T0 + dt.timedelta(minutes=5))
    assert later.append(memory.id, "sixth line\n").version == 3
    text = file_text(store, memory.id)
    assert "version:" not in text and "updated_at:" not in text
    assert "created_at: 2026-11-22T10:00:00Z" in text
    for reader in (gitmem.open(tmp_path / "s"), no_index(gitmem.open(tmp_path / "s"))):
        assert reader.read(memory.id).version == 3
        assert reader.read(memory.id, at="HEAD~1").version == 2
        assert reader.read(memory.id, at="HEAD~2").version == 1
        assert [m.version for m in reader.list()] == [3]
        steps = reader.history(memory.id).versions
        assert [(s.version, s.op) for s in steps] == [(1, "create"), (2, "update"), (3, "append")]


def test_expected_version_is_the_derived_one(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", clock=at(0))
    memory = store.create(BODY)
    store.update(memory.id, title="one", expected_version=1)
    with pytest.raises(ConflictError):
        store.update(memory.id, title="two", expected_version=1)
    assert store.update(memory.id, title="two", expected_version=2).version == 3
    fresh = gitmem.open(tmp_path / "s")  # another Store: from the index or history
    assert fresh.update(memory.id, title="three", expected_version=3).version == 4
    assert no_index(gitmem.open(tmp_path / "s")).update(memory.id, title="4").version == 5


def test_a_transaction_is_one_version(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", clock=at(0))
    memory = store.create(BODY)
    with store.transaction(message="two edits, one commit"):
        assert store.update(memory.id, title="a").version == 2
        assert store.update(memory.id, title="b").version == 2
        assert store.read(memory.id).version == 2
    assert gitmem.open(tmp_path / "s").read(memory.id).version == 2


def test_delete_and_restore_count_on(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", clock=at(0))
    memory = store.create(BODY)
    store.update(memory.id, title="a")
    store.delete(memory.id)
    restored = gitmem.open(tmp_path / "s", clock=at(3)).restore(memory.id)
    assert (restored.version, restored.updated_at) == (3, T0 + dt.timedelta(minutes=3))
    assert gitmem.open(tmp_path / "s").read(memory.id).version == 3
    assert no_index(gitmem.open(tmp_path / "s")).read(memory.id).version == 3
    rolled = store.restore(memory.id, at="HEAD~3")  # back to the created text
    assert (rolled.version, rolled.title) == (4, None)


def test_a_superseding_memory_is_a_new_memory(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", clock=at(0))
    old = store.create(BODY)
    store.update(old.id, title="a")
    new = store.supersede(old.id, "newer\n")
    assert new.version == 1
    steps = store.history(new.id).versions
    assert [(s.memory_id, s.version) for s in steps] == [(old.id, 1), (old.id, 2), (new.id, 1)]


def test_a_merge_that_kept_a_side_is_no_version(tmp_path: Path) -> None:
    """Order independence: the same tip reads the same in every clone, caught up one
    commit at a time or rebuilt, with or without the index."""
    path = tmp_path / "s"
    store = gitmem.init(path, clock=at(0))
    memory = store.create(BODY)
    git(path, "branch", "side")
    gitmem.open(path, branch="side", clock=at(5)).update(memory.id, title="side")
    gitmem.open(path, clock=at(7)).create("other\n")
    store.index().catch_up()  # the index follows main one commit at a time
    git(path, "merge", "-q", "--no-edit", "side")
    reads = [
        gitmem.open(path).read(memory.id),
        no_index(gitmem.open(path)).read(memory.id),
    ]
    rebuilt = gitmem.open(path)
    rebuilt.reindex()
    reads.append(rebuilt.read(memory.id))
    assert {(m.version, m.updated_at) for m in reads} == {(2, T0 + dt.timedelta(minutes=5))}


def test_show_prints_the_derived_values(tmp_path: Path) -> None:
    from tests.clitools import Gitmem, make_runner

    store, memory_id = three_versions(tmp_path / "s")
    gm = Gitmem(tmp_path / "s", make_runner())
    store.index().catch_up()  # show answers from a current index: the same output
    for store_read in ((), ("--at", "HEAD")):
        out = gm("show", memory_id, *store_read).stdout
        assert "\nupdated_at: 2026-11-22T10:10:00Z\nversion: 3\n" in out
        assert out.endswith(BODY.replace("third", "3rd"))
    old = gm("show", memory_id, "--at", "HEAD~1").stdout
    assert "\nupdated_at: 2026-11-22T10:05:00Z\nversion: 2\n" in old
    shown = gm.json("show", memory_id)
    assert (shown["version"], shown["updated_at"]) == (3, "2026-11-22T10:10:00Z")
    assert "version" not in file_text(store, memory_id)


def test_review_and_diff_show_the_derived_versions(tmp_path: Path) -> None:
    store, memory_id = three_versions(tmp_path / "s")
    (change,) = review(store, "HEAD~2..HEAD").changes
    shown = {f.name: (f.before, f.after) for f in change.fields}
    assert shown["version"] == (1, 3)
    assert shown["updated_at"] == ("2026-11-22T10:00:00Z", "2026-11-22T10:10:00Z")
    assert shown["title"] == ("The rule", "The rule, revised")
    (entry,) = A.diff(store, "HEAD~2", "HEAD~1", memory_id)
    assert {f.name: (f.before, f.after) for f in entry.fields}["version"] == (1, 2)


def test_export_writes_the_derived_values_and_import_drops_them(tmp_path: Path) -> None:
    store, memory_id = three_versions(tmp_path / "s")
    stored = file_text(store, memory_id)
    report = T.export_files(store, tmp_path / "out")
    assert report.ok, report.mismatches
    (exported,) = (tmp_path / "out").rglob("*.md")
    text = exported.read_text()
    assert "version: 3\n" in text and "updated_at: 2026-11-22T10:10:00Z\n" in text
    changed = set(text.splitlines()) ^ set(stored.splitlines())
    assert {line.split(":")[0] for line in changed} == {"version", "updated_at"}
    other = gitmem.init(tmp_path / "other", clock=at(30))
    assert T.import_files(other, tmp_path / "out").ok
    imported = gitmem.open(tmp_path / "other").read(memory_id)
    assert (imported.version, imported.updated_at) == (1, T0 + dt.timedelta(minutes=30))
    assert imported.created_at == T0
    assert file_text(other, memory_id) == stored


def test_undo_is_a_new_version(tmp_path: Path) -> None:
    store, memory_id = three_versions(tmp_path / "s")
    A.undo(store, commit="HEAD")
    memory = gitmem.open(tmp_path / "s").read(memory_id)
    assert memory.body == BODY and memory.title == "The rule, revised"
    assert (memory.version, memory.updated_at) == (4, T0 + dt.timedelta(minutes=20))
    store.delete(memory_id)
    A.undo(gitmem.open(tmp_path / "s", clock=at(30)), commit="HEAD")
    back = gitmem.open(tmp_path / "s").read(memory_id)
    assert (back.version, back.updated_at) == (5, T0 + dt.timedelta(minutes=30))


def test_blame_after_two_pull_requests_merged_by_git(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = gitmem.init(path, clock=at(0))
    git(path, "config", "--remove-section", "merge.gitmem")  # the host's button: git alone
    memory = store.create(BODY, title="The rule")
    git(path, "branch", "a")
    git(path, "branch", "b")
    gitmem.open(path, branch="a", clock=at(5)).update(memory.id, body=BODY.replace("first", "1st"))
    gitmem.open(path, branch="b", clock=at(10)).update(memory.id, body=BODY.replace("fifth", "5th"))
    git(path, "checkout", "-q", "a")
    git(path, "merge", "-q", "--no-edit", "b")
    merged = gitmem.open(path, branch="a")
    assert merged.read(memory.id).version == 3
    by = {line.text: line.origin.commit for line in A.blame(merged, memory.id)}
    revs = (git(path, "rev-parse", r).stdout.strip() for r in ("a^1", "a^2", "a~2"))
    ours, theirs, created = revs
    assert (by["1st line"], by["5th line"], by["third line"]) == (ours, theirs, created)


def test_a_file_at_the_tip_with_the_lines_is_named_and_a_write_drops_them(
    tmp_path: Path,
) -> None:
    from gitmem.entry.doctor import diagnose

    path = tmp_path / "s"
    store = gitmem.init(path, clock=at(0))
    memory = store.create(BODY)
    target = path / memory_path(memory.id)
    text = target.read_text()
    planted = text.replace(
        "created_at:", "version: 7\nupdated_at: 2020-01-01T00:00:00Z\ncreated_at:"
    )
    target.write_text(planted)
    git(path, "add", "-A")
    refused = git(path, "commit", "-qm", "by hand", check=False)  # the pre-commit hook (none)
    if refused.returncode != 0:  # hooks installed: the hook names it
        assert "version and updated_at" in refused.stderr
        git(path, "commit", "-qm", "by hand", "--no-verify")
    reopened = gitmem.open(path)
    assert reopened.read(memory.id).version == 2  # the line is ignored: two versions
    findings = [f for f in diagnose(reopened, checks=["schema"]).findings if f.path]
    assert [f.path for f in findings] == [memory_path(memory.id)]
    reopened.update_from_text(memory.id, planted)
    assert "version:" not in target.read_text()


def test_the_pre_commit_hook_names_a_file_with_the_lines(tmp_path: Path) -> None:
    from gitmem.entry.hooks import install

    path = tmp_path / "s"
    store = gitmem.init(path, clock=at(0))
    install(path, "memory")
    memory = store.create(BODY)
    target = path / memory_path(memory.id)
    target.write_text(target.read_text().replace("created_at:", "version: 2\ncreated_at:"))
    git(path, "add", "-A")
    refused = git(path, "commit", "-qm", "by hand", check=False)
    assert refused.returncode == 1
    assert "carries version, which gitmem derives from history" in refused.stderr


def test_hostile_files_are_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = gitmem.init(path, clock=at(0))
    memory = store.create(BODY)
    target = path / memory_path(memory.id)
    target.write_text(target.read_text().replace("created_at:", "x: &a [1]\ny: *a\ncreated_at:", 1))
    git(path, "commit", "-qam", "an alias bomb by hand")
    reopened = gitmem.open(path)
    with pytest.raises(gitmem.InvalidMemoryError):
        reopened.read(memory.id)
    assert [p.path for p in reopened.problems()] == [memory_path(memory.id)]
    assert reopened.list() == []
