"""Code-aware staleness: ``gitmem check --project`` against a real project repository."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from storetools import commit_count

from gitmem import FixedClock, Store
from gitmem.features.lifecycle.anchors import anchors_of, backtick_paths, check_project


def _git(repo: Path, *args: str, when: str = "2026-11-01T12:00:00Z") -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "LC_ALL": "C"}
    out = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout


def _write(repo: Path, path: str, text: str) -> None:
    full = repo / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)


LONG = "".join(f"line {i} of a file long enough for git's rename detection\n" for i in range(40))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    for name in ("src/app.py", "src/old.py", "src/gone.py", "src/same.py", "README.md"):
        _write(repo, name, f"# {name}\n{LONG}")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first", when="2026-11-01T12:00:00Z")
    return repo


def _second_commit(repo: Path) -> None:
    _git(repo, "rm", "-q", "src/gone.py")
    _git(repo, "mv", "src/old.py", "src/new.py")
    _write(repo, "src/app.py", "# changed\n" + LONG)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "second", when="2026-11-15T12:00:00Z")


def _memories(store: Store, clock: FixedClock) -> dict[str, str]:
    clock.current = dt.datetime(2026, 11, 10, tzinfo=dt.UTC)
    ids = {
        "deleted": store.create("About gone.", title="deleted", extra={"anchors": ["src/gone.py"]}),
        "renamed": store.create("About old.", title="renamed", extra={"anchors": "./src/old.py"}),
        "changed": store.create("Entry point is in `src/app.py:12`.", title="changed"),
        "same": store.create(
            "Read `README.md` first.", title="same", extra={"anchors": ["src/same.py"]}
        ),
        "plain": store.create("Use `sample_user` and `os.path`; see `docs/none.md`.", title="p"),
        "missing": store.create("x", title="missing", extra={"anchors": ["src/nope.py"]}),
    }
    clock.current = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    ids["later"] = store.create("Since the change: `src/app.py`.", title="later")
    clock.current = dt.datetime(2026, 11, 22, 10, tzinfo=dt.UTC)
    return {k: m.id for k, m in ids.items()}


def _kinds(report_dict: dict[str, object]) -> dict[str, list[tuple[str, str]]]:
    out = {}
    for m in report_dict["memories"]:  # type: ignore[attr-defined]
        out[m["title"]] = [(f["path"], f["kind"]) for f in m["findings"]]
    return out


def test_backtick_paths() -> None:
    body = (
        "See `src/app.py`, `./lib/x.ts:10:2`, `tests/conftest.py#L3-L9`, `README.md`, `docs/`,\n"
        "not `sample_user`, `foo()`, `a b/c.py`, `https://x.org/a.md`, `/etc/passwd`, `../up.py`,\n"
        "`1.2`, ``double/tick.py``, and `src/app.py` again.\n"
        "```python\nimport `fenced/path.py`\n```\n"
    )
    assert backtick_paths(body) == [
        "src/app.py",
        "lib/x.ts",
        "tests/conftest.py",
        "README.md",
        "docs",
    ]


def test_anchors_of() -> None:
    assert anchors_of({"anchors": ["./a.py", "b/c", "/abs", "../x", 3, "a.py"]}) == ["a.py", "b/c"]
    assert anchors_of({"anchors": "x.py"}) == ["x.py"]
    assert anchors_of({}) == []


def test_check_reports_deleted_renamed_changed(
    store: Store, clock: FixedClock, project: Path
) -> None:
    ids = _memories(store, clock)
    before = check_project(store, project)
    assert _kinds(before.to_dict()) == {"missing": [("src/nope.py", "missing")]}
    _second_commit(project)
    report = check_project(store, project)
    kinds = _kinds(report.to_dict())
    assert kinds == {
        "deleted": [("src/gone.py", "deleted")],
        "renamed": [("src/old.py", "renamed")],
        "changed": [("src/app.py", "changed")],
        "missing": [("src/nope.py", "missing")],
    }
    renamed = next(m for m in report.memories if m.id == ids["renamed"])
    assert renamed.findings[0].new_path == "src/new.py"
    assert renamed.findings[0].source == "anchor"
    changed = next(m for m in report.memories if m.id == ids["changed"])
    assert changed.findings[0].source == "body"
    assert report.checked == 7  # every memory naming a path, "plain" included
    assert report.head == _git(project, "rev-parse", "HEAD").strip()


def test_flag_is_one_commit_and_not_repeated(
    store: Store, clock: FixedClock, project: Path
) -> None:
    ids = _memories(store, clock)
    _second_commit(project)
    commits = commit_count(store)
    report = check_project(store, project, flag=True)
    assert sorted(report.flagged) == sorted(
        ids[k] for k in ("deleted", "renamed", "changed", "missing")
    )
    assert commit_count(store) == commits + 1
    assert len(report.commits) == 1
    flagged = store.read(ids["renamed"])
    assert flagged.extra["verify"] is True
    assert "src/old.py renamed to src/new.py" in flagged.extra["verify_reason"]
    assert store.read(ids["same"]).extra.get("verify") is None

    again = check_project(store, project, flag=True)
    assert again.flagged == [] and again.commits == []
    assert commit_count(store) == commits + 1
    assert {m.id for m in again.memories if m.already_flagged} == set(report.flagged)

    # Verified and cleared by a person: compared from its new updated_at, so no finding.
    store.update(
        ids["renamed"], extra={"verify": None, "verify_reason": None, "anchors": ["src/new.py"]}
    )
    assert ids["renamed"] not in {m.id for m in check_project(store, project).memories}


def test_folders_added_anchors_and_a_file_become_a_folder(
    store: Store, clock: FixedClock, project: Path
) -> None:
    _write(project, "tools/run.sh", "#!/bin/sh\n" + LONG)
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "tools", when="2026-11-02T12:00:00Z")
    clock.current = dt.datetime(2026, 11, 10, tzinfo=dt.UTC)
    store.create("x", title="folder", extra={"anchors": ["src/", "tools"]})
    store.create("x", title="untouched", extra={"anchors": ["src/same.py"]})
    store.create("x", title="new", extra={"anchors": ["lib/new.py"]})
    store.create("See `README.md` and `lib/new.py`.", title="moved")
    _git(project, "rm", "-q", "-r", "tools", "README.md")
    _write(project, "README.md/part.md", f"# README.md\n{LONG}")
    _write(project, "src/app.py", "# changed\n" + LONG)
    _write(project, "lib/new.py", "new\n")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "second", when="2026-11-15T12:00:00Z")
    report = check_project(store, project)
    assert _kinds(report.to_dict()) == {
        "folder": [("src", "changed"), ("tools", "deleted")],
        "new": [("lib/new.py", "added")],
        "moved": [("README.md", "renamed")],  # a body path only counts if it was there
    }
    moved = next(m for m in report.memories if m.title == "moved")
    assert moved.findings[0].new_path == "README.md/part.md"


def test_a_rename_target_appearing_later_is_seen(
    store: Store, clock: FixedClock, project: Path
) -> None:
    """A file deleted since the memory, then its text added under another name: the
    finding turns from deleted to renamed."""
    clock.current = dt.datetime(2026, 11, 10, tzinfo=dt.UTC)
    memory = store.create("About `src/gone.py`.", title="g")
    text = (project / "src/gone.py").read_text()
    _git(project, "rm", "-q", "src/gone.py")
    _git(project, "commit", "-q", "-m", "delete", when="2026-11-15T12:00:00Z")
    report = check_project(store, project)
    assert [f.kind for f in report.memories[0].findings] == ["deleted"]
    _write(project, "src/moved.py", text)
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "re-add", when="2026-11-16T12:00:00Z")
    found = check_project(store, project).memories[0]
    assert found.id == memory.id
    assert [(f.kind, f.new_path) for f in found.findings] == [("renamed", "src/moved.py")]


def test_index_and_scan_agree(store: Store, clock: FixedClock, project: Path) -> None:
    _memories(store, clock)
    _second_commit(project)
    served = check_project(store, project).to_dict()
    store.use_index = False
    assert check_project(store, project).to_dict() == served


def test_empty_project(store: Store, tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    _git(repo, "init", "-q")
    report = check_project(store, repo)
    assert report.head is None and report.memories == []
    assert "no commits" in report.summary()


def test_cli_check(store: Store, clock: FixedClock, project: Path) -> None:
    ids = _memories(store, clock)
    _second_commit(project)
    run = Gitmem(store.path, make_runner())
    out = run("check", "--project", str(project)).stdout
    assert out.startswith("gitmem check: 4 of 7 anchored memories need verification")
    assert len(out.splitlines()) == 1
    data = run.json("check", "--project", str(project))
    assert set(data) == {"project", "head", "checked", "counts", "memories", "flagged", "commits"}
    assert data["counts"] == {"changed": 1, "deleted": 1, "missing": 1, "renamed": 1}
    first = data["memories"][0]
    assert set(first) == {
        "id",
        "path",
        "title",
        "updated_at",
        "base",
        "already_flagged",
        "reason",
        "findings",
    }
    assert set(first["findings"][0]) == {"path", "kind", "source", "new_path"}
    flagged = run.json("check", "--project", str(project), "--flag")
    assert sorted(flagged["flagged"]) == sorted(
        ids[k] for k in ("deleted", "renamed", "changed", "missing")
    )
    out = run("check", "--project", str(project), "--flag", "-v").stdout
    assert "4 flagged earlier" in out and "flagged 4" not in out
    run.fails(2, "check")  # --project is required


def test_named_paths_follow_edits(store: Store, clock: FixedClock, project: Path) -> None:
    ids = _memories(store, clock)
    _second_commit(project)
    clock.current = dt.datetime(2026, 11, 14, tzinfo=dt.UTC)
    store.update(ids["plain"], "Now about `src/gone.py`.")
    clock.current = dt.datetime(2026, 11, 22, 10, tzinfo=dt.UTC)
    report = check_project(store, project)
    plain = next(m for m in report.memories if m.id == ids["plain"])
    assert [(f.path, f.kind, f.source) for f in plain.findings] == [
        ("src/gone.py", "deleted", "body")
    ]
    store.use_index = False
    assert check_project(store, project).to_dict() == report.to_dict()
