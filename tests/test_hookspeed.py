"""What keeps a git hook run cheap: lazy imports, the light-records index query, and
the check across store scopes. Behaviour only: the timings are in ``python -m bench``
(scenario ``hook-run``), never asserted here."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_git

import gitmem
from gitmem import FixedClock, InvalidInputError, Scope, Store
from gitmem.features.lifecycle.anchors import check_project


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def test_import_gitmem_loads_no_submodule_but_the_version() -> None:
    loaded = _modules_after("import gitmem; assert gitmem.__version__")
    assert {m for m in loaded if m.startswith("gitmem.")} == {"gitmem._version"}
    assert not {"jsonschema", "pygit2", "yaml", "click"} & loaded


def test_version_command_does_not_load_the_store() -> None:
    code = (
        "from gitmem.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit as exc:\n    assert exc.code == 0"
    )
    loaded = _modules_after(code)
    assert "gitmem.cli" in loaded
    heavy = {"gitmem.store.core", "gitmem.format.model", "gitmem.format.codec", "jsonschema"}
    assert not heavy & loaded


def test_validation_does_not_load_jsonschema() -> None:
    code = (
        "from gitmem.format.schema import validate\n"
        "from gitmem.base.errors import InvalidMemoryError\n"
        "try:\n    validate({'id': 'mem_x'})\nexcept InvalidMemoryError:\n    pass\n"
        "else:\n    raise SystemExit('not refused')"
    )
    assert "jsonschema" not in _modules_after(code)


def test_lazy_public_names() -> None:
    assert gitmem.__version__
    for name in gitmem.__all__:
        assert getattr(gitmem, name) is not None
        assert name in dir(gitmem)
    from gitmem import Store as Imported

    assert Imported is gitmem.Store is Store
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gitmem.nope  # type: ignore[attr-defined]  # noqa: B018


# -- Index.rows ------------------------------------------------------------------------------


def test_index_rows(store: Store, clock: FixedClock) -> None:
    a = store.create("first", title="a", tags=["x"])
    clock.advance(seconds=1)
    b = store.create("second", title="b")
    clock.advance(seconds=1)
    c = store.supersede(b.id, "third", title="c")
    clock.advance(seconds=1)
    d = store.create("archived", title="d", status="archived")
    index = store.index()
    rows = index.rows(("id", "title", "updated_us", "tags"))
    assert [r[:2] for r in rows] == [(a.id, "a"), (c.id, "c")]  # oldest first, current only
    assert rows[0][2] == int(a.updated_at.timestamp() * 1_000_000)
    assert rows[0][3] == '["x"]'  # JSON columns as stored
    every = index.rows(("id",), include_superseded=True, include_archived=True)
    assert [r[0] for r in every] == [a.id, b.id, c.id, d.id]
    assert index.rows(("id",), include_archived=True) == [(a.id,), (c.id,), (d.id,)]
    with pytest.raises(InvalidInputError, match="unknown index column"):
        index.rows(("id", "rowid"))
    with pytest.raises(InvalidInputError):
        index.rows(())


# -- the check across scopes ------------------------------------------------------------------


def _project(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    (repo / "src").mkdir(parents=True)
    run_git(repo, "init", "-q")
    for name in ("a.py", "b.py"):
        (repo / "src" / name).write_text(f"# {name}\n" * 30)
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-q", "-m", "first")
    return repo


def _change(repo: Path) -> None:
    """A second commit, a day from now (after the memories)."""
    (repo / "src" / "a.py").write_text("changed\n")
    run_git(repo, "rm", "-q", "src/b.py")
    when = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "-am", "second"], env=env, check=True
    )


def test_check_across_scopes_reads_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path)
    clock = FixedClock(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1))
    monkeypatch.chdir(tmp_path)
    gitmem.open(clock=clock)  # the user store
    gitmem.init_project(project, clock=clock)
    monkeypatch.chdir(project)
    store = gitmem.open(clock=clock)
    assert store.scopes == [Scope.REPO, Scope.USER]
    made = []
    for i in range(6):
        clock.advance(seconds=1)
        scope = "user" if i % 2 else "repo"
        made.append(store.create(f"Touches `src/a.py` ({i}).", scope=scope).id)
    _change(project)
    served = check_project(store, project)
    assert [m.id for m in served.memories] == made
    store.use_index = False
    assert check_project(store, project).to_dict() == served.to_dict()
    store.use_index = True
    flagged = check_project(store, project, flag=True)
    assert len(flagged.commits) == 2  # one per scope
    again = check_project(store, project)
    assert all(m.already_flagged for m in again.memories) and len(again.memories) == 6


def test_project_hook_run_loads_no_secret_patterns_merge_or_search(tmp_path: Path) -> None:
    """The post-commit hook's process imports what ``gitmem check`` needs and not the
    secret patterns, merges or searches."""
    project = _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITMEM_"))}
    env["GITMEM_HOME"] = str(tmp_path / "home")
    subprocess.run(
        [sys.executable, "-m", "gitmem", "init", "--project", str(project)],
        env=env,
        cwd=project,
        capture_output=True,
        check=True,
    )
    code = (
        "import sys\n"
        "from gitmem.cli import main\n"
        "try:\n"
        "    main(['hook-run', '--role', 'project', 'post-commit'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('gitmem'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "gitmem check:" in out
    loaded = set(out.split())
    assert "gitmem.features.lifecycle.anchors" in loaded  # the check did run in this process
    assert not {"gitmem.format.secrets", "gitmem.store.merge", "gitmem.store.search"} & loaded
