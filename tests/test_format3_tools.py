"""Format 3 in the tools that read files of commits rather than going through a Store:
review, diff, export, undo and blame show (and write) the version and time a reader sees,
derived from history, not the lines the file was created with. Real repositories."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import gitmem
from gitmem import FixedClock, Store
from gitmem.features import audit as A
from gitmem.features import transfer as T
from gitmem.features.review import review
from gitmem.format.layout import legacy_path

T0 = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
BODY = "first line\nsecond line\nthird line\nfourth line\nfifth line\n"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def at(minutes: int) -> FixedClock:
    return FixedClock(T0 + dt.timedelta(minutes=minutes))


def three_versions(path: Path) -> tuple[Store, str]:
    """A format 3 store whose one memory was created at T0 and updated at +5 and +10."""
    store = gitmem.init(path, format=3, clock=at(0))
    memory = store.create(BODY, title="The rule")
    gitmem.open(path, clock=at(5)).update(memory.id, title="The rule, revised")
    gitmem.open(path, clock=at(10)).update(memory.id, body=BODY.replace("third", "3rd"))
    return gitmem.open(path, clock=at(20)), memory.id


def fields(changes: list[A.FieldChange]) -> dict[str, tuple[object, object]]:
    return {f.name: (f.before, f.after) for f in changes}


def test_review_and_diff_show_the_derived_versions(tmp_path: Path) -> None:
    store, memory_id = three_versions(tmp_path / "s")
    (change,) = review(store, "HEAD~2..HEAD").changes
    shown = fields(change.fields)
    assert shown["version"] == (1, 3)
    assert shown["updated_at"] == ("2026-11-22T10:00:00Z", "2026-11-22T10:10:00Z")
    assert shown["title"] == ("The rule", "The rule, revised")
    (last,) = review(store, "HEAD~1..HEAD").changes
    assert fields(last.fields)["version"] == (2, 3)
    (entry,) = A.diff(store, "HEAD~2")
    assert fields(entry.fields)["version"] == (1, 3)
    (one,) = A.diff(store, "HEAD~2", "HEAD~1", memory_id)
    assert fields(one.fields)["version"] == (1, 2)
    assert fields(one.fields)["updated_at"] == ("2026-11-22T10:00:00Z", "2026-11-22T10:05:00Z")


def test_export_writes_the_version_a_reader_sees(tmp_path: Path) -> None:
    store, memory_id = three_versions(tmp_path / "s")
    stored = store.db().snapshot().read(legacy_path(memory_id))
    assert stored is not None
    report = T.export_files(store, tmp_path / "out")
    assert report.ok, report.mismatches
    (exported,) = (tmp_path / "out").rglob("*.md")
    text, was = exported.read_text(), stored.decode()
    assert "version: 3\n" in text and "updated_at: 2026-11-22T10:10:00Z\n" in text
    # Every other line as stored.
    changed = set(text.splitlines()) ^ set(was.splitlines())
    assert {line.split(":")[0] for line in changed} == {"version", "updated_at"}
    # Imported into a new format 3 store, it reads as the version it was.
    other = gitmem.init(tmp_path / "other", format=3, clock=at(30))
    assert T.import_files(other, tmp_path / "out").ok
    assert gitmem.open(tmp_path / "other").read(memory_id).version == 3


def test_undo_is_a_new_version_and_leaves_the_stored_lines(tmp_path: Path) -> None:
    store, memory_id = three_versions(tmp_path / "s")
    A.undo(store, commit="HEAD")
    memory = gitmem.open(tmp_path / "s").read(memory_id)
    assert memory.body == BODY and memory.title == "The rule, revised"
    assert (memory.version, memory.updated_at) == (4, T0 + dt.timedelta(minutes=20))
    text = (tmp_path / "s" / legacy_path(memory_id)).read_text()
    assert "version: 1\n" in text and "updated_at: 2026-11-22T10:00:00Z\n" in text
    # Undoing a delete brings the memory back one above the version it had.
    store.delete(memory_id)
    A.undo(gitmem.open(tmp_path / "s", clock=at(30)), commit="HEAD")
    back = gitmem.open(tmp_path / "s").read(memory_id)
    assert (back.version, back.updated_at) == (5, T0 + dt.timedelta(minutes=30))


def test_blame_after_two_pull_requests_merged_by_git(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = gitmem.init(path, format=3, clock=at(0))
    git(path, "config", "--remove-section", "merge.gitmem")  # the host's button: git alone
    memory = store.create(BODY, title="The rule")
    git(path, "branch", "a")
    git(path, "branch", "b")
    gitmem.open(path, branch="a", clock=at(5)).update(
        memory.id, body=BODY.replace("first", "1st")
    )
    gitmem.open(path, branch="b", clock=at(10)).update(
        memory.id, body=BODY.replace("fifth", "5th")
    )
    git(path, "checkout", "-q", "a")
    git(path, "merge", "-q", "--no-edit", "b")
    merged = gitmem.open(path, branch="a")
    assert merged.read(memory.id).version == 3
    by = {line.text: line.origin.commit for line in A.blame(merged, memory.id)}
    ours, theirs, created = (git(path, "rev-parse", r).strip() for r in ("a^1", "a^2", "a~2"))
    assert (by["1st line"], by["5th line"], by["third line"]) == (ours, theirs, created)
