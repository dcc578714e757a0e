"""Issue 11, reproduction 8: doctor never advises a step that loses work.

Each case is made with the real git binary, the way it happens: a merge driver whose
virtualenv was deleted, a plain ``git merge`` stopped on conflict markers, case twins
from two clones, a corrupt loose object, a branch pointing at a missing commit, a store
made under umask 000.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from storetools import run_git

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import RepositoryDamagedError
from gitmem.entry import doctor as D
from gitmem.entry import doctor_context as C
from gitmem.store import mergedriver
from gitmem.store import sync as S


def _findings(store: Store, check: str, *, fix: bool = False) -> list[D.Finding]:
    return D.diagnose(store, checks=[check], fix=fix).findings


def _advice(report: D.DoctorReport) -> str:
    return "\n".join(f"{f.message}\n{f.fix or ''}" for f in report.findings)


# -- the merge driver's program gone ---------------------------------------------------------


def test_a_driver_whose_python_is_gone_is_reported_and_re_registered(store: Store) -> None:
    gone = "/nonexistent/venv/bin/python"
    driver = f"{gone} -P -m gitmem merge-driver %O %A %B %P"
    run_git(store.path, "config", mergedriver.DRIVER_CONFIG, driver)
    (found,) = _findings(store, "merge-driver")
    assert found.severity == C.WARNING and gone in found.message and found.safe
    (fixed,) = _findings(store, "merge-driver", fix=True)
    assert fixed.fixed
    command = run_git(store.path, "config", mergedriver.DRIVER_CONFIG).strip()
    assert gone not in command and Path(command.split()[0]).exists()
    assert _findings(store, "merge-driver") == []


# -- a merge stopped on conflict markers ------------------------------------------------------


@pytest.fixture
def mid_merge(store: Store) -> Iterator[tuple[Store, Path]]:
    """A plain git merge of two edits of one memory, stopped with markers in the file (the
    text merge a clone without the driver does: forced here through .git/info/attributes)."""
    memory = store.create("line one\n", title="shared")
    path = store.path / str(memory.path)
    run_git(store.path, "checkout", "-q", "-b", "other")
    path.write_text(path.read_text().replace("line one", "their side"))
    run_git(store.path, "commit", "-q", "-am", "theirs")
    run_git(store.path, "checkout", "-q", "main")
    path.write_text(path.read_text().replace("line one", "our side"))
    run_git(store.path, "commit", "-q", "-am", "ours")
    (store.db().gitdir / "info").mkdir(exist_ok=True)
    (store.db().gitdir / "info" / "attributes").write_text("*.md merge=text\n")
    run_git(store.path, "merge", "other", check=False)
    assert "<<<<<<<" in path.read_text()
    yield store, path


def test_an_unfinished_merge_is_reported_with_a_safe_way_out(
    mid_merge: tuple[Store, Path],
) -> None:
    store, path = mid_merge
    report = D.diagnose(store)
    (merge,) = [f for f in report.findings if f.check == "merge"]
    assert merge.severity == C.ERROR and not merge.safe
    assert path.relative_to(store.path).as_posix() in merge.message
    assert merge.fix is not None and "merge --abort" in merge.fix
    advice = _advice(report)
    # Nothing anywhere tells the user to add and commit the files holding markers.
    assert "&& git" not in advice and " add -- " not in advice
    assert not [f for f in report.findings if f.check == "worktree"]


def test_doctor_fix_leaves_an_unfinished_merge_alone(mid_merge: tuple[Store, Path]) -> None:
    store, path = mid_merge
    before = path.read_bytes()
    status = run_git(store.path, "status", "--porcelain")
    D.diagnose(store, fix=True)
    assert path.read_bytes() == before
    assert run_git(store.path, "status", "--porcelain") == status
    assert (store.db().gitdir / "MERGE_HEAD").exists()
    # The advice works: abort, and both sides are still there.
    run_git(store.path, "merge", "--abort")
    assert "their side" in run_git(store.path, "show", "other:" + str(path.relative_to(store.path)))
    assert "our side" in path.read_text()


# -- case twins from two clones ---------------------------------------------------------------


def test_case_twins_from_two_clones_are_reported(tmp_path: Path, clock: FixedClock) -> None:
    run_git(tmp_path, "init", "-q", "--bare", "hub.git")
    one = gitmem.init(tmp_path / "one", clock=clock)
    S.add_remote(one.db(), "origin", str(tmp_path / "hub.git"))
    one.sync()
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), "two")
    two = gitmem.open(tmp_path / "two", clock=clock)
    one.create("Alice from one\n", id="notes/Alice")
    two.create("alice from two\n", id="notes/alice")
    one.sync()
    two.sync()
    (found,) = _findings(two, "twins")
    assert "notes/Alice.md and notes/alice.md differ only in case" in found.message
    assert found.severity == C.WARNING and not found.safe


# -- a damaged object database ----------------------------------------------------------------


def _loose_object(store: Store, oid: str) -> Path:
    return store.db().gitdir / "objects" / oid[:2] / oid[2:]


def test_a_corrupt_loose_object_gives_one_line_errors_and_no_reindex_advice(store: Store) -> None:
    memory = store.create("a memory whose file will rot\n", title="rot")
    blob = run_git(store.path, "rev-parse", f"HEAD:{memory.path}").strip()
    loose = _loose_object(store, blob)
    loose.chmod(0o644)
    loose.write_bytes(b"not zlib at all")
    gm_cli = Gitmem(store.path, make_runner())
    error = gm_cli.fails(7, "show", memory.id)
    assert "cannot be read" in error and "fsck" in error and "unexpected" not in error
    assert "please report" not in error
    report = D.diagnose(gitmem.open(store.path))
    advice = _advice(report)
    assert "reindex" not in advice
    assert any(f.check == "fsck" and f.severity == C.ERROR for f in report.findings)
    # Every check that met it says so in one line and names the recovery.
    for finding in report.findings:
        assert "\n" not in finding.message
    out = gm_cli("doctor", code=1).stdout
    assert "unexpected" not in out and "reindex" not in out


def test_a_branch_pointing_at_a_missing_commit(store: Store) -> None:
    store.create("x\n")
    missing = "12345678" * 5
    (store.db().gitdir / "refs" / "heads" / "main").write_text(missing + "\n")
    gm_cli = Gitmem(store.path, make_runner())
    for command in (["ls"], ["doctor"], ["search", "x"]):
        error = gm_cli.fails(7, *command)
        assert f"the commit {missing} is missing" in error, command
        assert "fsck" in error and "fetch" in error and "unexpected" not in error
    with pytest.raises(RepositoryDamagedError):
        gitmem.open(store.path)


def test_a_store_open_when_its_branch_breaks_gets_one_finding(store: Store) -> None:
    """A long-lived process (the MCP server) opened the store before the damage: doctor
    reports the branch once, runs the checks that do not need it, and crashes on none."""
    store.create("x\n")
    opened = gitmem.open(store.path)
    missing = "9abcdef0" * 5
    (store.db().gitdir / "refs" / "heads" / "main").write_text(missing + "\n")
    report = D.diagnose(opened)
    damaged = [f for f in report.findings if f.check != "fsck" and missing in f.message]
    assert len(damaged) == 1 and damaged[0].severity == C.ERROR
    assert "the branch main" in damaged[0].message
    assert damaged[0].fix is not None and "fsck" in damaged[0].fix
    assert "reindex" not in _advice(report)
    assert any(f.check == "fsck" for f in report.findings)


# -- umask 000 -------------------------------------------------------------------------------


def test_doctor_fix_closes_the_store_root_made_under_umask_000(
    tmp_path: Path, clock: FixedClock
) -> None:
    old = os.umask(0)
    try:
        store = gitmem.init(tmp_path / "open", clock=clock)
    finally:
        os.umask(old)
    root = store.path
    assert stat.S_IMODE(root.stat().st_mode) & stat.S_IWOTH  # the premise
    (found,) = _findings(store, "permissions")
    assert str(root) in found.message
    D.diagnose(store, checks=["permissions"], fix=True)
    assert not stat.S_IMODE(root.stat().st_mode) & stat.S_IWOTH
    assert _findings(store, "permissions") == []


def test_markers_committed_by_a_plain_merge_are_reported(mid_merge: tuple[Store, Path]) -> None:
    """What reproduction 8's advice led to: the markers added and committed."""
    store, path = mid_merge
    run_git(store.path, "add", "--", str(path.relative_to(store.path)))
    run_git(store.path, "commit", "-q", "--no-edit")
    opened = gitmem.open(store.path)
    (found,) = _findings(opened, "markers")
    assert found.severity == C.WARNING and "conflict markers" in found.message
    assert found.fix is not None and " update " in found.fix
    # A clean memory is not reported, also on the next run.
    opened.create("no markers here\n=======\n")
    assert [f.path for f in _findings(opened, "markers")] == [found.path]
