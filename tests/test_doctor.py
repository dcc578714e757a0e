"""gitmem doctor and gitmem secrets: each check against a store damaged the way it happens."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from storetools import memory_text, plant, run_git, tip

import gitmem
from gitmem import Store
from gitmem.entry import doctor as D
from gitmem.entry import doctor_context as C
from gitmem.entry import hooks as gh
from gitmem.entry import team
from gitmem.format.layout import memory_path
from gitmem.store import mergedriver

FAKE_TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
ID_A = "mem_0a000000-0000-4000-8000-0000000000a1"
ID_B = "mem_0b000000-0000-4000-8000-0000000000b2"
ID_C = "mem_0c000000-0000-4000-8000-0000000000c3"
MISSING = "mem_0d000000-0000-4000-8000-0000000000d4"


def unregister_driver(store: Store) -> None:
    """Forget the merge driver (init may register it): the state of a clone made by plain git."""
    run_git(store.db().gitdir, "config", "--unset-all", "merge.gitmem.driver", check=False)


def findings(store: Store, check: str, *, fix: bool = False) -> list[D.Finding]:
    return D.diagnose(store, checks=[check], fix=fix).findings


def make_old(path: Path, seconds: float = 120) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_new_store_is_healthy_once_the_safe_fixes_are_applied(any_store: Store) -> None:
    any_store.create("one", title="a")
    report = D.diagnose(any_store, fix=True)
    assert report.healthy, [f.message for f in report.remaining]
    again = D.diagnose(any_store)
    assert again.healthy
    assert [f.check for f in again.findings] == ["hooks"]  # only the optional hooks, as info
    assert again.findings[0].severity == C.INFO


def test_unknown_check_is_an_error(store: Store) -> None:
    with pytest.raises(gitmem.StoreError, match="unknown check"):
        D.diagnose(store, checks=["nope"])


# -- fsck ------------------------------------------------------------------------------------


def test_fsck_reports_a_damaged_object(any_store: Store) -> None:
    memory = any_store.create("a body that will be damaged on disk")
    assert findings(any_store, "fsck") == []
    blob = run_git(any_store.db().gitdir, "rev-parse", f"main:{memory.path}").strip()
    obj = any_store.db().gitdir / "objects" / blob[:2] / blob[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"not a zlib stream")
    (found,) = findings(any_store, "fsck")
    assert found.severity == C.ERROR
    assert "fsck" in found.message and found.fix is not None and "fetch" in found.fix
    assert not found.safe


def test_fsck_is_reported_in_its_place_among_the_checks(store: Store) -> None:
    memory = store.create("first version")
    store.update(memory.id, body="second version")
    plant(store, memory_path(ID_A), "no front-matter\n")
    assert findings(store, "index") == []  # the index holds the history already
    old_blob = run_git(store.db().gitdir, "rev-parse", f"main~2:{memory.path}").strip()
    obj = store.db().gitdir / "objects" / old_blob[:2] / old_blob[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"not a zlib stream")  # an old version: today's reads never need it
    checked = D.diagnose(store, checks=["schema", "fsck", "index"])
    assert [f.check for f in checked.findings] == ["schema", "fsck"]
    assert checked.findings[1].severity == C.ERROR
    report = D.diagnose(store)
    assert report.findings[0].check == "fsck"
    assert [f.check for f in report.findings if f.check in ("fsck", "schema")] == [
        "fsck",
        "schema",
    ]
    fixing = D.diagnose(store, fix=True)
    assert [f.check for f in fixing.findings if f.check in ("fsck", "schema")] == [
        "fsck",
        "schema",
    ]


# -- locks and leftovers ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["refs/heads/main.lock", "index.lock", "HEAD.lock"])
def test_a_stale_git_lock_is_removed_by_fix(store: Store, name: str) -> None:
    lock = store.db().gitdir / name
    lock.write_text("")
    make_old(lock)
    (found,) = findings(store, "locks")
    assert found.severity == C.WARNING and found.safe and found.fix == f"rm {lock}"
    (fixed,) = findings(store, "locks", fix=True)
    assert fixed.fixed and not lock.exists()
    store.create("writes work again")


def test_a_live_lock_is_never_stolen(store: Store) -> None:
    lock = store.db().gitdir / "refs" / "heads" / "main.lock"
    lock.write_text("")
    (found,) = findings(store, "locks", fix=True)
    assert found.severity == C.INFO and not found.fixed
    assert lock.exists()


def test_a_lock_retaken_between_check_and_fix_is_left_alone(store: Store) -> None:
    lock = store.db().gitdir / "index.lock"
    lock.write_text("")
    make_old(lock)
    (found,) = findings(store, "locks")
    lock.touch()  # someone's git took it again
    assert found.apply is not None
    with pytest.raises(gitmem.StoreError):
        found.apply()
    assert lock.exists()


def test_a_dead_writers_temporary_file_is_a_leftover(store: Store) -> None:
    memory = store.create("whole")
    path = store.path / (memory.path or "")
    dead = path.with_name(f".{path.name}.999999999.tmp")  # no such pid
    dead.write_text("half of a memo")  # just now: the pid in its name says no one writes it
    (found,) = findings(store, "leftovers")
    assert found.safe and str(dead) in found.message
    findings(store, "leftovers", fix=True)
    assert not dead.exists() and path.read_text().endswith("whole")


def test_a_temporary_file_of_a_live_writer_is_not_touched(store: Store) -> None:
    memory = store.create("whole")
    path = store.path / (memory.path or "")
    live = path.with_name(f".{path.name}.{os.getppid()}.tmp")
    live.write_text("being written")
    make_old(live)
    assert findings(store, "leftovers", fix=True) == []
    assert live.exists()


# -- work tree ---------------------------------------------------------------------------------


def test_a_work_tree_left_behind_by_a_dead_writer_is_synced_by_fix(store: Store) -> None:
    memory = store.create("first")
    before = tip(store)
    store.update(memory.id, body="second")
    # What a writer killed between moving the branch and writing the files leaves behind.
    marker = store.db().state_dir / "worktree-synced"
    marker.write_text(f"{before}\n")
    file = store.path / (memory.path or "")
    file.write_bytes(store.db().snapshot(before).read(memory.path or "") or b"")
    (found,) = findings(store, "worktree")
    assert found.severity == C.WARNING and found.safe and "behind" in found.message
    findings(store, "worktree", fix=True)
    assert file.read_text().endswith("second")
    assert marker.read_text().strip() == tip(store)
    assert run_git(store.path, "status", "--porcelain") == ""
    assert findings(store, "worktree") == []


def test_uncommitted_edits_are_reported_not_touched(store: Store) -> None:
    memory = store.create("committed")
    file = store.path / (memory.path or "")
    file.write_text(file.read_text() + "\nan edit\n")
    (found,) = findings(store, "worktree", fix=True)
    assert found.severity == C.WARNING and not found.safe and "uncommitted" in found.message
    assert found.fix is not None and "git -C" in found.fix
    assert file.read_text().endswith("an edit\n")


def _hand_commit(root: Path, memory_id: str, line: str) -> None:
    """A person's edit of a memory, committed with plain git (hooks on)."""
    file = root / memory_path(memory_id)
    file.write_text(file.read_text() + f"{line}\n")
    run_git(root, "commit", "-qam", line)


@pytest.mark.slow
def test_doctor_is_quiet_after_every_plain_git_command(tmp_path: Path) -> None:
    """git commit, pull, pull --rebase, checkout and merge move the branch and bring the
    files along, without gitmem's synced marker: a healthy store, which doctor says."""
    hub = tmp_path / "hub.git"
    shared = gitmem.init(hub, bare=True).create("one\n", title="Shared").id
    team.clone(str(hub), tmp_path / "a")
    team.clone(str(hub), tmp_path / "b")
    a, b = tmp_path / "a", gitmem.open(tmp_path / "b")
    mine = gitmem.open(a).create("written by gitmem in a\n").id  # the marker is at this tip
    cli = Gitmem(a, make_runner())

    def teammate_pushes(text: str) -> None:
        b.create(text)
        b.sync()

    _hand_commit(a, mine, "git commit")
    cli("doctor")
    teammate_pushes("for git pull")
    _hand_commit(a, shared, "before git pull")
    run_git(a, "pull", "-q", "--no-rebase")
    cli("doctor")
    teammate_pushes("for git pull --rebase")
    _hand_commit(a, mine, "before git pull --rebase")
    run_git(a, "pull", "-q", "--rebase")
    cli("doctor")
    run_git(a, "checkout", "-q", "-b", "side")
    _hand_commit(a, shared, "on side")
    cli("doctor")
    run_git(a, "checkout", "-q", "main")
    cli("doctor")
    run_git(a, "merge", "-q", "--no-edit", "side")
    cli("doctor")
    assert run_git(a, "status", "--porcelain") == ""


_KILL_AT = """
import os, signal, sys
import gitmem
from gitmem.git.worktree import WorkTree

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

for name in sys.argv[2].split(","):
    setattr(WorkTree, name, die)
store = gitmem.open(sys.argv[1])
store.update(sys.argv[3], "second")
"""


@pytest.mark.parametrize(
    ("moment", "behind"),
    [
        ("update", True),  # branch moved, nothing else
        ("_stage", True),  # files written, not git's index
        ("_mark_synced", False),  # all synced but the marker: a plain git command's state
    ],
)
def test_a_writer_killed_after_moving_the_branch_is_caught(
    store: Store, moment: str, behind: bool
) -> None:
    memory = store.create("first")
    before = tip(store)
    killed = subprocess.run(
        [sys.executable, "-c", _KILL_AT, str(store.path), moment, memory.id], check=False
    )
    assert killed.returncode == -signal.SIGKILL
    assert tip(store) != before  # the branch moved before the kill
    found = findings(store, "worktree")
    if not behind:
        assert found == []
        return
    (lag,) = found
    assert lag.severity == C.WARNING and lag.safe and "behind" in lag.message
    findings(store, "worktree", fix=True)
    assert (store.path / (memory.path or "")).read_text().endswith("second")
    assert run_git(store.path, "status", "--porcelain") == ""
    assert findings(store, "worktree") == []


# -- the index ----------------------------------------------------------------------------------


def _tamper_index(store: Store, sql: str) -> None:
    store.index().close()
    path = store.db().state_dir / "index.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE memories SET title = 'wrong'",
        "DELETE FROM memories",
    ],
    ids=["stale-row", "missing-rows"],
)
def test_an_index_that_disagrees_with_git_is_rebuilt_by_fix(any_store: Store, sql: str) -> None:
    any_store.create("one", title="right")
    any_store.create("two", title="right")
    assert findings(any_store, "index") == []
    _tamper_index(any_store, sql)
    (found,) = findings(any_store, "index")
    assert found.safe and "disagrees" in found.message and "reindex" in (found.fix or "")
    (fixed,) = findings(any_store, "index", fix=True)
    assert fixed.fixed
    assert findings(any_store, "index") == []
    assert [m.title for m in any_store.list()] == ["right", "right"]


def test_an_index_row_for_a_memory_git_does_not_have(store: Store) -> None:
    store.create("one")
    store.list()  # the index is made
    store.index().close()
    # A row git has no file for: copy one row under another id.
    conn = sqlite3.connect(store.db().state_dir / "index.sqlite")
    columns = [r[1] for r in conn.execute("PRAGMA table_info(memories)")]
    ghost = {"rowid": "NULL", "id": "?", "path": "'memories/zz/ghost.md'"}
    select = ", ".join(ghost.get(c, c) for c in columns)
    conn.execute(f"INSERT INTO memories SELECT {select} FROM memories LIMIT 1", (MISSING,))
    conn.commit()
    conn.close()
    (found,) = findings(store, "index")
    assert "1 not in git" in found.message and MISSING in found.message


def test_an_index_row_made_from_another_blob_is_stale(any_store: Store) -> None:
    memory = any_store.create("first words")
    any_store.create("another")
    any_store.update(memory.id, body="second words")
    old_blob = run_git(any_store.db().gitdir, "rev-parse", f"main~1:{memory.path}").strip()
    assert findings(any_store, "index") == []
    _tamper_index(any_store, f"UPDATE memories SET blob = '{old_blob}' WHERE id = '{memory.id}'")
    (found,) = findings(any_store, "index")
    assert f"1 stale ({memory.id})" in found.message
    findings(any_store, "index", fix=True)
    assert findings(any_store, "index") == []


def test_unreadable_files_the_index_sees_differently(store: Store) -> None:
    plant(store, memory_path(ID_A), "no front-matter\n")
    good = store.create("fine")
    assert findings(store, "index") == []
    _tamper_index(store, "DELETE FROM problems")  # the broken file forgotten
    (found,) = findings(store, "index")
    assert found.message.endswith("1 unreadable file(s) seen differently")
    findings(store, "index", fix=True)
    _tamper_index(store, f"INSERT INTO problems VALUES ('{good.path}', 'said to be broken')")
    (found,) = findings(store, "index")
    assert "1 unreadable file(s) seen differently" in found.message
    findings(store, "index", fix=True)
    assert findings(store, "index") == []


def test_a_tampered_row_outside_the_content_sample_is_found_by_deep(store: Store) -> None:
    # Blob ids are compared for every row; fields only for a spread sample, or all with deep.
    with store.transaction():
        for i in range(C.CONTENT_SAMPLE * 2 + 2):
            store.create(f"memory {i}", title="right")
    rows = store.index().rows(["id"], include_superseded=True, include_archived=True)
    victim = rows[1][0]  # the sample takes every third row from the first
    _tamper_index(store, f"UPDATE memories SET title = 'wrong' WHERE id = '{victim}'")
    assert findings(store, "index") == []
    (found,) = D.diagnose(store, checks=["index"], deep=True).findings
    assert f"1 stale ({victim})" in found.message
    _tamper_index(store, f"UPDATE memories SET title = 'wrong' WHERE id = '{rows[3][0]}'")
    (sampled,) = findings(store, "index")
    assert f"1 stale ({rows[3][0]})" in sampled.message


def test_an_index_row_under_another_id_is_stale(store: Store) -> None:
    memory = store.create("one")
    store.create("two")
    assert findings(store, "index") == []
    _tamper_index(store, f"UPDATE memories SET id = '{MISSING}' WHERE id = '{memory.id}'")
    (found,) = findings(store, "index")
    assert f"1 stale ({MISSING})" in found.message


# -- registration -----------------------------------------------------------------------------


def test_merge_driver_registration(store: Store, bare_store: Store) -> None:
    unregister_driver(store)
    unregister_driver(bare_store)
    (found,) = findings(store, "merge-driver")
    assert found.safe and "merge.gitmem.driver" in (found.fix or "")
    findings(store, "merge-driver", fix=True)
    assert mergedriver.driver_registered(store.path)
    assert findings(store, "merge-driver") == []
    assert findings(bare_store, "merge-driver") == []  # nothing merges in a bare store


def test_hooks_missing_one_or_pointing_at_a_gone_python_are_reinstalled(store: Store) -> None:
    (info,) = findings(store, "hooks")
    assert info.severity == C.INFO and not info.safe and "hooks install" in (info.fix or "")
    gh.install(store.path, "memory", python="/nonexistent/python3")
    (gone,) = findings(store, "hooks")
    assert gone.severity == C.WARNING and "no longer exists" in gone.message
    findings(store, "hooks", fix=True)
    assert findings(store, "hooks") == []
    (gh.hooks_dir(store.path) / "post-merge").unlink()
    (partial,) = findings(store, "hooks")
    assert "missing: post-merge" in partial.message
    findings(store, "hooks", fix=True)
    assert all(h.installed for h in gh.status(store.path).hooks if h.name in gh.MEMORY_HOOKS)


# -- memories ---------------------------------------------------------------------------------


def test_schema_violations_are_errors_with_the_command_to_fix(any_store: Store) -> None:
    plant(any_store, memory_path(ID_A), "no front-matter at all\n")
    (found,) = findings(any_store, "schema", fix=True)
    assert found.severity == C.ERROR and not found.fixed
    assert found.path == memory_path(ID_A) and "front-matter" in found.message
    assert "rm --" in (found.fix or "")
    if any_store.db().bare:
        assert (found.fix or "").startswith("in a clone")


def test_dangling_supersedes_and_related(store: Store) -> None:
    gone = store.create("soon deleted")
    store.delete(gone.id)
    plant(store, memory_path(ID_A), memory_text(ID_A, supersedes=MISSING))
    plant(store, memory_path(ID_B), memory_text(ID_B, supersedes=gone.id))
    plant(
        store,
        memory_path(ID_C),
        memory_text(ID_C, extra=f"related:\n- id: {MISSING}\n  relationship: refines\n"),
    )
    found = {f.message: f for f in findings(store, "links")}
    assert set(found) == {
        f"{ID_A} supersedes {MISSING}, which is not in the store",
        f"{ID_B} supersedes {gone.id}, which is deleted",
        f"{ID_C} is related (refines) to {MISSING}, which is not in the store",
    }
    assert f"restore {gone.id}" in (
        found[f"{ID_B} supersedes {gone.id}, which is deleted"].fix or ""
    )


def test_version_chain_cycles_and_forks(store: Store) -> None:
    plant(store, memory_path(ID_A), memory_text(ID_A, supersedes=ID_B))
    plant(store, memory_path(ID_B), memory_text(ID_B, supersedes=ID_A))
    root = store.create("the original")
    first = store.supersede(root.id, "one successor")
    plant(store, memory_path(ID_C), memory_text(ID_C, supersedes=root.id))
    found = findings(store, "chains")
    cycles = [f for f in found if "cycle" in f.message]
    forks = [f for f in found if "fork" in f.message]
    assert len(cycles) == 1, [f.message for f in found]  # one cycle, reported once
    assert cycles[0].severity == C.ERROR
    assert cycles[0].message.startswith(f"version chain cycle: {ID_A} -> {ID_B} -> {ID_A}")
    assert len(forks) == 1
    assert root.id in forks[0].message
    assert first.id in forks[0].message and ID_C in forks[0].message


def test_a_cycle_reached_through_a_tail_is_reported_once(store: Store) -> None:
    plant(store, memory_path(ID_A), memory_text(ID_A, supersedes=ID_B))
    plant(store, memory_path(ID_B), memory_text(ID_B, supersedes=ID_C))
    plant(store, memory_path(ID_C), memory_text(ID_C, supersedes=ID_B))
    cycle, fork = findings(store, "chains")  # A and C both supersede B: a fork as well
    assert cycle.message.startswith(f"version chain cycle: {ID_B} -> {ID_C} -> {ID_B} (")
    assert cycle.path == memory_path(ID_B)
    assert fork.message.startswith(f"version-chain fork: {ID_B} is superseded by 2 memories")


def _damage_every_memory_check(store: Store) -> None:
    """A broken file, dangling links, a cycle, a fork and a stored credential."""
    gone = store.create("soon deleted")
    store.delete(gone.id)
    plant(store, "memories/zz/not-an-id.md", memory_text(ID_A))
    plant(store, memory_path(ID_A), memory_text(ID_A, supersedes=ID_B))
    plant(store, memory_path(ID_B), memory_text(ID_B, supersedes=ID_A))
    plant(
        store,
        memory_path(ID_C),
        memory_text(
            ID_C,
            supersedes=gone.id,
            extra=f"related:\n- id: {MISSING}\n  relationship: contradicts\n",
        ),
    )
    root = store.create("the original")
    store.supersede(root.id, "one successor")
    store.supersede(root.id, "another successor")
    store.create("a document", id="projects/acme/readme", related=[{"id": MISSING}])
    plant(store, "notes/broken.md", "a note without front-matter\n")
    with store.secrets_allowed():
        store.create(f"ci\ntoken {FAKE_TOKEN}\n")


MEMORY_CHECKS = ["schema", "links", "chains", "secrets"]


def _seen(found: list[D.Finding]) -> list[tuple[object, ...]]:
    return [(f.check, f.severity, f.message, f.fix, f.path) for f in found]


def test_the_memory_checks_find_the_same_from_the_index_as_from_git(any_store: Store) -> None:
    _damage_every_memory_check(any_store)
    fast = D.diagnose(any_store, checks=["index", *MEMORY_CHECKS]).findings
    deep = D.diagnose(any_store, checks=["index", *MEMORY_CHECKS], deep=True).findings
    assert _seen(fast) == _seen(deep)
    checks = [f.check for f in fast]  # and no index finding: the index agrees with git
    assert checks == ["schema"] * 2 + ["links"] * 3 + ["chains"] * 2 + ["secrets"], _seen(fast)
    assert any(f.path == "projects/acme/readme.md" for f in fast)
    assert any("deleted" in f.message for f in fast)


def test_when_the_index_disagrees_the_memory_checks_read_git(store: Store) -> None:
    _damage_every_memory_check(store)
    expected = _seen(D.diagnose(store, checks=MEMORY_CHECKS).findings)
    _tamper_index(store, "DELETE FROM memories")
    _tamper_index(store, "DELETE FROM problems")
    found = D.diagnose(store, checks=["index", *MEMORY_CHECKS]).findings
    assert found[0].check == "index" and "missing" in found[0].message
    assert _seen(found[1:]) == expected


def test_once_fix_rebuilds_the_index_the_memory_checks_read_it(store: Store) -> None:
    from gitmem.entry.doctor_context import Context
    from gitmem.entry.doctor_memories import check_index

    _damage_every_memory_check(store)
    expected = _seen(D.diagnose(store, checks=MEMORY_CHECKS).findings)
    count = store.index().count()
    _tamper_index(store, "DELETE FROM memories")
    ctx = Context(store, store.db(), store.scopes[0])
    try:
        (stale,) = check_index(ctx)
        # A disagreeing index: the checks ask a scratch rebuild from git, not the index.
        assert ctx.index() is ctx.rebuilt()
        assert len(ctx.entries()) == count > 0
        assert stale.apply is not None
        stale.apply()
        # Rebuilt: the store's own index is read.
        assert ctx.index() is store.index(store.scopes[0])
    finally:
        ctx.close()
    found = D.diagnose(store, checks=["index", *MEMORY_CHECKS], fix=True).findings
    assert _seen(found) == expected


def test_a_history_question_the_agreeing_index_fails_goes_to_the_rebuild(store: Store) -> None:
    # The index agrees with git (its memories and problems), but its version rows are gone:
    # whether a link's target ever existed is asked of the scratch rebuild instead.
    gone = store.create("soon deleted")
    store.delete(gone.id)
    plant(store, memory_path(ID_C), memory_text(ID_C, supersedes=gone.id))
    store.index().catch_up()
    _tamper_index(store, "DROP TABLE versions")
    (found,) = D.diagnose(store, checks=["links"]).findings
    assert found.message == f"{ID_C} supersedes {gone.id}, which is deleted"
    assert _scratch_folders(store) == []


def _scratch_folders(store: Store) -> list[Path]:
    from gitmem.entry.doctor_context import SCRATCH_PREFIX

    return sorted(store.db().state_dir.glob(SCRATCH_PREFIX + "*"))


def test_the_scratch_index_is_built_beside_the_store_index_and_removed(store: Store) -> None:
    from gitmem.entry.doctor_context import Context

    _damage_every_memory_check(store)
    everything = {m.id for m in store.list(include_superseded=True, include_archived=True)}
    _tamper_index(store, "DELETE FROM memories")
    ctx = Context(store, store.db(), store.scopes[0])
    try:
        ctx.view()
        rebuilt = ctx.rebuilt()
        (folder,) = _scratch_folders(store)
        assert rebuilt.path.parent == folder and rebuilt.path.is_file()
        assert folder.name.split("-")[2] == str(os.getpid())
        assert (folder.stat().st_mode & 0o777) == 0o700  # private, as mkdtemp makes it
        # The store's index is left as the tamper left it: doctor without --fix changes nothing.
        conn = sqlite3.connect(store.db().state_dir / "index.sqlite")
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        conn.close()
        # It holds what a rebuild would: the core tables at the view's commit, no providers'.
        assert rebuilt.commit == ctx.view().commit  # type: ignore[union-attr]
        rows = rebuilt.memories(include_superseded=True, include_archived=True)
        assert {m.id for m in rows} == everything
        assert not [k for k in rebuilt.meta() if k.startswith("provider:")]
    finally:
        ctx.close()
    assert _scratch_folders(store) == []
    # A whole run removes its scratch index too, findings or not.
    D.diagnose(store, checks=["index", *MEMORY_CHECKS])
    assert _scratch_folders(store) == []


def test_a_scratch_index_a_dead_run_left_is_removed_by_the_next(
    store: Store, tmp_path: Path
) -> None:
    from gitmem.entry.doctor_context import SCRATCH_PREFIX

    store.create("one")
    store.index().catch_up()
    state = store.db().state_dir
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    left = state / f"{SCRATCH_PREFIX}{dead.stdout.strip()}-abc"
    left.mkdir()
    (left / "index.sqlite").write_bytes(b"x" * 100)
    live = state / f"{SCRATCH_PREFIX}1-live"  # pid 1 is alive: another run's, kept
    live.mkdir()
    # A link under the name is not followed: what it points at stays.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept")
    link = state / f"{SCRATCH_PREFIX}{dead.stdout.strip()}-link"
    link.symlink_to(elsewhere, target_is_directory=True)
    _tamper_index(store, "DELETE FROM memories")
    D.diagnose(store, checks=["index", "links"])
    assert set(_scratch_folders(store)) == {link, live}
    assert (elsewhere / "keep.txt").read_text() == "kept"


def test_deep_compares_every_column_with_a_rebuild(store: Store) -> None:
    # The rows keep the right blobs and every field a Memory shows; only a column the
    # sample's Memory comparison cannot see (the microseconds a sort uses) is wrong.
    a = store.create("one")
    store.create("two")
    assert findings(store, "index") == []
    _tamper_index(store, f"UPDATE memories SET created_us = created_us + 1 WHERE id = '{a.id}'")
    deep = D.diagnose(store, checks=["index"], deep=True).findings
    assert [f.message for f in deep] == [f"the index disagrees with git: 1 stale ({a.id})"]
    assert _scratch_folders(store) == []


def test_a_row_whose_fields_lie_is_stale_and_deep_reads_git(store: Store) -> None:
    # The index row keeps the right blob but loses its supersedes link: the index check
    # reports it (the sample covers every row of a small store), and --deep's memory checks
    # read git, so the dangling link is still found there.
    plant(store, memory_path(ID_A), memory_text(ID_A, supersedes=MISSING))
    assert findings(store, "index") == []  # the index is made, and agrees
    _tamper_index(store, f"UPDATE memories SET supersedes = NULL WHERE id = '{ID_A}'")
    (stale,) = findings(store, "index")
    assert f"1 stale ({ID_A})" in stale.message
    deep = D.diagnose(store, checks=["links"], deep=True).findings
    assert [f.message for f in deep] == [f"{ID_A} supersedes {MISSING}, which is not in the store"]


def test_stored_credentials_are_reported_masked(store: Store) -> None:
    with store.secrets_allowed():
        memory = store.create(f"ci\ntoken {FAKE_TOKEN}\n")
    (found,) = findings(store, "secrets")
    assert memory.id in found.message and "github-token (line" in found.message
    assert FAKE_TOKEN not in found.message
    assert "rotate" in (found.fix or "")


def test_the_credential_scan_follows_the_stores_policy(store: Store) -> None:
    memory = store.create("the door code is PIN=918273\n")
    assert findings(store, "secrets") == []
    config = store.db().snapshot().read("gitmem.yaml") or b""
    extra = "secrets:\n  patterns:\n    - kind: door-pin\n      regex: 'PIN=(\\d{6})'\n"
    plant(store, "gitmem.yaml", config.decode() + extra, "secrets policy")
    (found,) = findings(gitmem.open(store.path), "secrets")
    assert memory.id in found.message and "door-pin (line" in found.message


# -- permissions ------------------------------------------------------------------------------


def test_a_user_store_open_to_others_and_world_writable_files(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "user", scope="user")
    store.create("private")
    assert findings(store, "permissions") == []
    (tmp_path / "user").chmod(0o755)
    config = store.path / "gitmem.yaml"
    config.chmod(0o666)
    found = findings(store, "permissions")
    assert {f.check for f in found} == {"permissions"} and len(found) == 2
    findings(store, "permissions", fix=True)
    assert stat.S_IMODE((tmp_path / "user").stat().st_mode) == 0o700
    assert not config.stat().st_mode & stat.S_IWOTH
    assert findings(store, "permissions") == []


# -- the command line -------------------------------------------------------------------------


def test_cli_doctor_text_json_and_exit_codes(store: Store) -> None:
    cli = Gitmem(store.path, make_runner())
    unregister_driver(store)
    plant(store, memory_path(ID_A), "broken\n")
    result = cli("doctor", code=1)
    assert "ERROR schema:" in result.stdout and "fix:" in result.stdout
    assert "problem(s) remain" in result.stdout.splitlines()[-1]
    raw = cli("doctor", "--check", "merge-driver", "--json", code=1).stdout
    report = json.loads(raw)
    assert report["healthy"] is False and report["findings"][0]["check"] == "merge-driver"
    fixed = cli("doctor", "--check", "merge-driver", "--fix")
    assert "(fixed)" in fixed.stdout and "healthy; 1 fixed" in fixed.stdout
    cli("doctor", "--check", "merge-driver")
    assert "Invalid value" in cli("doctor", "--check", "nope", code=2).stderr


def test_cli_doctor_deep(store: Store) -> None:
    cli = Gitmem(store.path, make_runner())
    store.create("one")
    assert "healthy" in cli("doctor", "--deep", "--check", "index", "--check", "links").stdout
    _tamper_index(store, "UPDATE memories SET title = 'wrong'")
    out = cli("doctor", "--deep", "--check", "index", code=1).stdout
    assert "1 stale" in out and "reindex" in out


def test_cli_secrets_over_the_store_files_and_staged(store: Store, tmp_path: Path) -> None:
    cli = Gitmem(store.path, make_runner())
    assert cli("secrets").stdout.strip() == "No credentials found."
    with store.secrets_allowed():
        memory = store.create(f"x\n{FAKE_TOKEN}\n")
    out = cli("secrets", code=1).stdout
    assert out.startswith(f"{memory.path}:") and "github-token" in out and FAKE_TOKEN not in out
    notes = tmp_path / "notes"
    (notes / "deep").mkdir(parents=True)
    (notes / "deep" / "a.txt").write_text(f"line\nAWS {'AKIA' + 'Z7Q2LMNO3PXY4RST'}\n")
    (notes / "clean.md").write_text("nothing here\n")
    (notes / "link").symlink_to("/etc/passwd")
    (notes / "blob.bin").write_bytes(b"\0\1" + FAKE_TOKEN.encode())
    items = json.loads(cli("secrets", str(notes), "--json", code=1).stdout)
    assert [(Path(i["path"]).name, i["line"], i["kind"]) for i in items] == [
        ("a.txt", 2, "aws-access-key-id")
    ]
    missing = cli("secrets", str(tmp_path / "nope"), code=7)
    assert "no such file" in missing.stderr


def test_cli_secrets_staged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    run_git(repo, "init", "-q")
    (repo / "config.env").write_text(f"GH={FAKE_TOKEN}\n")
    (repo / "unstaged.env").write_text(f"GH={FAKE_TOKEN}\n")
    run_git(repo, "add", "config.env")
    monkeypatch.chdir(repo)
    cli = Gitmem(None, make_runner())
    out = cli("secrets", "--staged", code=1).stdout
    assert out.startswith("config.env:1: github-token:") and "unstaged" not in out
    run_git(repo, "rm", "-q", "--cached", "config.env")
    assert "No credentials" in cli("secrets", "--staged").stdout
    assert "give one of PATHs" in cli("secrets", "--staged", "x", code=2).stderr
    monkeypatch.chdir(tmp_path)
    assert "not a git repository" in cli("secrets", "--staged", code=7).stderr


def test_doctor_through_the_real_console_script(store: Store) -> None:
    unregister_driver(store)
    plant(store, memory_path(ID_A), "broken\n")
    result = subprocess.run(
        [sys.executable, "-m", "gitmem", "--store", str(store.path), "doctor", "--fix"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "(fixed)" in result.stdout  # the merge driver
    assert mergedriver.driver_registered(store.path)


# -- progress ---------------------------------------------------------------------------------


def test_doctor_reports_progress_over_the_memories_it_checks(any_store: Store) -> None:
    from storetools import assert_progress

    for n in range(30):
        any_store.create(f"memory {n}", title=f"m{n}")
    calls: list[tuple[int, int]] = []
    report = D.diagnose(any_store, progress=lambda done, total: calls.append((done, total)))
    assert report.healthy or all(f.check == "hooks" for f in report.remaining)
    assert_progress(calls)
    total = calls[-1][1]
    # Each of the seven checks that go through the memories counts each of the 30, the
    # other eight one each.
    assert total == 7 * 30 + 8
    # --deep, --fix, a check named twice, a chosen few: the same rules.
    for kwargs in ({"deep": True, "fix": True}, {"checks": ["index", "index", "locks"]}):
        calls.clear()
        D.diagnose(any_store, progress=lambda done, total: calls.append((done, total)), **kwargs)
        assert_progress(calls)
    assert calls[-1] == (30 + 30 + 1, 30 + 30 + 1)


def test_doctor_progress_ends_at_the_total_on_a_broken_branch(store: Store) -> None:
    from storetools import assert_progress

    store.create("x\n")
    opened = gitmem.open(store.path)
    (store.db().gitdir / "refs" / "heads" / "main").write_text("9abcdef0" * 5 + "\n")
    calls: list[tuple[int, int]] = []
    D.diagnose(opened, progress=lambda done, total: calls.append((done, total)))
    assert_progress(calls)
    assert calls[-1][1] == len(D.CHECKS)  # no memory could be counted: one unit each


# -- paths that sort apart, twin folders --------------------------------------------------


def test_folders_and_files_whose_names_sort_apart_agree_with_the_index(store: Store) -> None:
    # The index check walks the index's rows by path beside git's files in the same order;
    # a folder sorts as "name/", so notes/a/x.md comes after notes/a-b.md and notes/a.md
    # (a walk that sorted the folder "a" before "a-b" would pair the wrong files).
    with store.transaction():
        for memory_id in ("notes/a-b", "notes/a/x", "notes/a.c", "notes/a0", "notes/a/b/c"):
            store.create(f"body of {memory_id}", id=memory_id)
    store.create("a plain memory")
    assert findings(store, "index") == []
    _tamper_index(store, "DELETE FROM memories WHERE path = 'notes/a/x.md'")
    (found,) = findings(store, "index")
    assert "1 missing (notes/a/x)" in found.message


def test_case_twins_in_twin_folders_are_reported(store: Store) -> None:
    # A case-insensitive file system makes notes/Team and notes/team one folder: the two
    # x.md files in them are twins, though no folder holds both.
    store.create("one", id="notes/Team/x")
    store.create("unrelated", id="notes/Team/y")
    plant(store, "notes/team/x.md", memory_text("notes/team/x"))
    (found,) = findings(store, "twins")
    assert found.message.startswith("notes/Team/x.md and notes/team/x.md differ only in case")
