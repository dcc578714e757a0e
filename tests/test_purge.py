"""``gitmem purge``: a memory or every match removed from all of history, end to end.

A local bare hub and two clones, driven with the real git binary: after the purge and
the steps it prints, no object of the hub or of either clone holds the secret, and every
other memory and its history survive. The credential is FAKE, built at run time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import InvalidInputError, NotFoundError
from gitmem.features.purge import MESSAGE_PATH, REPLACEMENT, PurgeRefusedError, purge
from gitmem.store import sync as S
from gitmem.store.sync import HistoryRewrittenError

SECRET = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
PERSONAL = "Jane Q. " + "Example, born 1970-01-01"


def _objects(gitdir: Path) -> bytes:
    """Every object in the repository's database, reachable or not, uncompressed."""
    return subprocess.run(
        ["git", "-C", str(gitdir), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout


def _holds(path: Path, needle: str) -> list[str]:
    """Where ``needle`` still is: in an object, in ``git log -p --all``, or in any file under
    ``path`` that is not a (compressed) object: index database, reflogs, FETCH_HEAD..."""
    where: list[str] = []
    if needle.encode() in _objects(path):
        where.append("objects")
    if needle in run_git(path, "log", "-p", "--all", "--format=%H%n%B"):
        where.append("log")
    for file in path.rglob("*"):
        if file.is_file() and "objects" not in file.parts and needle.encode() in file.read_bytes():
            where.append(str(file.relative_to(path)))
    return where


def _run_steps(commands: list[str], clone: Path | None = None) -> None:
    for command in commands:
        if clone is not None:
            command = command.replace("CLONE", str(clone))
        assert "CLONE" not in command
        subprocess.run(["bash", "-c", command], check=True, capture_output=True)


@pytest.fixture
def hub_and_clones(tmp_path: Path, clock: FixedClock) -> tuple[Path, Store, Store]:
    hub = tmp_path / "hub.git"
    run_git(tmp_path, "init", "-q", "--bare", str(hub))
    alice = gitmem.init(tmp_path / "alice", clock=clock)
    S.add_remote(alice.db(), "origin", str(hub))
    alice.sync()
    run_git(tmp_path, "clone", "-q", str(hub), "bob")
    bob = gitmem.open(tmp_path / "bob", clock=clock)
    return hub, alice, bob


def test_a_secret_purged_from_hub_and_both_clones(
    hub_and_clones: tuple[Path, Store, Store], clock: FixedClock
) -> None:
    hub, alice, bob = hub_and_clones
    keep = alice.create("deploys go through the CI pipeline\n", title="deploys", tags=["ci"])
    with alice.secrets_allowed():
        leaked = alice.create(f"the token is {SECRET}\nrotate monthly\n", title="ci token")
        alice.update(keep.id, body="deploys go through CI; see ci token\n", message=f"was {SECRET}")
    clock.advance(seconds=5)
    alice.update(leaked.id, body="the token is in the vault\nrotate monthly\n")
    alice.sync()
    bob.sync()
    clock.advance(seconds=5)
    mine = bob.create("bob's own note\n", title="bob")
    bob.sync()
    alice.sync()
    history_before = [v.memory.body for v in alice.history(keep.id) if v.memory is not None]
    for where in (hub, alice.db().gitdir, bob.db().gitdir):
        assert _holds(where, SECRET)  # the premise: everywhere, also after the edit

    dry = purge(alice, secrets=True)
    assert not dry.applied and dry.found
    paths = {r.path for r in dry.removals}
    assert MESSAGE_PATH in paths and any(p.startswith("memories/") for p in paths)
    assert _holds(alice.db().gitdir, SECRET)  # a dry run changes nothing

    report = purge(alice, secrets=True, apply=True)
    assert report.applied and report.commits_rewritten >= 3
    assert [r[0] for r in report.refs] == ["refs/heads/main"]
    by_place = {step.where: step for step in report.steps}
    _run_steps(by_place["the hub"].commands)
    _run_steps(by_place["the hub's own copy"].commands)
    _run_steps(by_place["this store"].commands)
    clone_step = next(s for s in report.steps if s.where.startswith("every other clone"))
    _run_steps(clone_step.commands, clone=bob.path)

    for where in (hub, alice.db().gitdir, bob.db().gitdir):
        assert _holds(where, SECRET) == [], where
    # Every other memory and its history survive, in both clones, through a fresh index.
    for store in (alice, gitmem.open(bob.path)):
        assert store.read(keep.id).body == "deploys go through CI; see ci token\n"
        assert store.read(mine.id).body == "bob's own note\n"
        assert [v.memory.body for v in store.history(keep.id) if v.memory] == history_before
        versions = [v.memory.body for v in store.history(leaked.id) if v.memory is not None]
        assert sorted(versions) == sorted(
            [
                "the token is in the vault\nrotate monthly\n",
                f"the token is {REPLACEMENT}\nrotate monthly\n",
            ]
        )
        assert {m.id for m in store.list()} == {keep.id, leaked.id, mine.id}
    assert run_git(alice.path, "status", "--porcelain") == ""
    assert run_git(bob.path, "status", "--porcelain") == ""
    # And the stores keep working together afterwards.
    alice.create("after the purge\n")
    alice.sync()
    assert gitmem.open(bob.path).sync().fetched == 1


def test_a_memory_purged_from_all_history(
    hub_and_clones: tuple[Path, Store, Store], clock: FixedClock
) -> None:
    hub, alice, bob = hub_and_clones
    keep = alice.create("an ordinary fact\n", title="fact")
    gone = alice.create(f"about {PERSONAL}\n", title=f"{PERSONAL}")
    clock.advance(seconds=5)
    # Its title is in gitmem's commit subjects: the purge replaces it there too.
    alice.update(gone.id, body=f"about {PERSONAL}, updated\n", title=f"{PERSONAL} (2)")
    alice.sync()
    bob.sync()
    report = purge(alice, memory=gone.id, apply=True)
    assert [r.what for r in report.removals] == [
        "file removed",
        "file removed",
        "the memory's title replaced",
        "the memory's title replaced",
    ]
    by_place = {step.where: step for step in report.steps}
    for place in ("the hub", "the hub's own copy", "this store"):
        _run_steps(by_place[place].commands)
    clone_step = next(s for s in report.steps if s.where.startswith("every other clone"))
    _run_steps(clone_step.commands, clone=bob.path)
    for where in (hub, alice.db().gitdir, bob.db().gitdir):
        assert _holds(where, PERSONAL) == [], where
    for store in (alice, gitmem.open(bob.path)):
        assert [m.id for m in store.list()] == [keep.id]
        assert store.read(keep.id).body == "an ordinary fact\n"
        with pytest.raises(NotFoundError):
            store.read(gone.id)


def test_a_pattern_purge_and_its_bound(store: Store) -> None:
    first = store.create("order ACME-123456 shipped\n", title="orders")
    store.create("nothing here\n")
    report = purge(store, pattern=r"ACME-\d{6}", apply=True)
    assert [r.what for r in report.removals] == ["1 match replaced"]
    assert store.read(first.id).body == f"order {REPLACEMENT} shipped\n"
    assert "ACME-123456" not in run_git(store.path, "log", "-p", "--all")
    # A pattern that backtracks without end is stopped by the bound, not waited for.
    store.create("a" * 40 + "!\n")
    before = run_git(store.path, "rev-parse", "HEAD")
    with pytest.raises(InvalidInputError, match="took longer than"):
        purge(store, pattern=r"(?m)^(a|aa)+$", timeout=0.5, apply=True)
    with pytest.raises(InvalidInputError, match="does not compile"):
        purge(store, pattern="(")
    assert run_git(store.path, "rev-parse", "HEAD") == before


def test_purge_refuses_what_it_cannot_do_safely(
    hub_and_clones: tuple[Path, Store, Store], clock: FixedClock
) -> None:
    _, alice, bob = hub_and_clones
    memory = alice.create("a fact\n")
    alice.sync()
    bob.sync()
    # Uncommitted edits in the work tree.
    file = alice.path / alice.read(memory.id).path  # type: ignore[operator]
    file.write_text(file.read_text() + "edited by hand\n")
    with pytest.raises(PurgeRefusedError, match="uncommitted changes"):
        purge(alice, memory=memory.id, apply=True)
    run_git(alice.path, "checkout", "--", ".")
    # The hub has commits this store has not merged: the force-push would drop them.
    bob.create("bob's newer note\n")
    bob.sync()
    run_git(alice.path, "fetch", "-q", "origin")
    with pytest.raises(PurgeRefusedError, match="has not merged"):
        purge(alice, memory=memory.id, apply=True)
    alice.sync()
    # A merge in progress.
    (alice.db().gitdir / "MERGE_HEAD").write_text(run_git(alice.path, "rev-parse", "HEAD"))
    with pytest.raises(PurgeRefusedError, match="merge is in progress"):
        purge(alice, memory=memory.id)
    (alice.db().gitdir / "MERGE_HEAD").unlink()
    with pytest.raises(NotFoundError):
        purge(alice, memory="mem_00000000-0000-4000-8000-000000000000")


def test_the_cli_dry_run_and_apply(store: Store) -> None:
    with store.secrets_allowed():
        store.create(f"token {SECRET}\n")
    gm = Gitmem(store.path, make_runner())
    dry = gm("purge", "--secrets").stdout
    assert "Would remove every credential" in dry and "Dry run: nothing was changed" in dry
    assert SECRET not in dry
    assert SECRET in run_git(store.path, "log", "-p")
    data = json.loads(gm("purge", "--secrets", "--apply", "--json").stdout)
    assert data["applied"] and data["removals"][0]["what"] == "1 match replaced (github-token)"
    assert SECRET not in run_git(store.path, "log", "-p", "--all")
    assert "Nothing to purge" in gm("purge", "--secrets", code=1).stdout
    assert "give one of" in gm("purge", code=2).stderr


def test_a_clone_that_syncs_before_following_the_steps_is_refused(
    hub_and_clones: tuple[Path, Store, Store], clock: FixedClock
) -> None:
    """Bob syncs without resetting: merging his old history would push the secret back."""
    hub, alice, bob = hub_and_clones
    with alice.secrets_allowed():
        alice.create(f"the token is {SECRET}\n")
    alice.sync()
    bob.sync()
    old = run_git(bob.path, "rev-parse", "origin/main").strip()
    report = purge(alice, secrets=True, apply=True)
    _run_steps(next(s for s in report.steps if s.where == "the hub").commands)
    bob.create("bob's unpushed note\n")
    with pytest.raises(HistoryRewrittenError, match="was rewritten"):
        bob.sync()
    # Nothing went to the hub, and bob's remote-tracking branch is where the steps expect it.
    assert SECRET not in run_git(hub, "log", "-p", "--all")
    assert run_git(bob.path, "rev-parse", "origin/main").strip() == old
    clone_step = next(s for s in report.steps if s.where.startswith("every other clone"))
    assert "bob's unpushed note" not in run_git(bob.path, "log", "-p", "origin/main")
    assert run_git(bob.path, "log", "--oneline", "origin/main..main").strip()
    _run_steps(clone_step.commands, clone=bob.path)
    assert gitmem.open(bob.path).sync().fetched == 0


def test_a_bare_store_is_purged_too(bare_store: Store) -> None:
    with bare_store.secrets_allowed():
        memory = bare_store.create(f"token {SECRET}\n", title="t")
    report = purge(bare_store, secrets=True, apply=True)
    assert report.applied and report.refs
    gitdir = bare_store.db().gitdir
    _run_steps(next(s for s in report.steps if s.where == "this store").commands)
    assert _holds(gitdir, SECRET) == []
    assert gitmem.open(gitdir).read(memory.id).body == f"token {REPLACEMENT}\n"


def test_purge_removes_every_branchs_index_and_prints_only_what_remains(
    tmp_path: Path,
) -> None:
    """A proposal branch's index (``index@feat.sqlite`` and its WAL, 0644) held the token
    after ``purge --secrets --apply`` and the printed steps: purge deleted main's index only.
    Separate processes, as a user runs them."""
    store = gitmem.init(tmp_path / "s")
    env = {**os.environ, "GITMEM_DIR": str(store.path)}

    def gm(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "gitmem", *args], capture_output=True, text=True, env=env
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    store.create("an ordinary fact\n")
    gm("--branch", "feat", "--allow-secrets", "add", f"the token is {SECRET}")
    gm("--branch", "feat", "ls")
    gm("ls")
    state = store.db().gitdir / "gitmem"
    assert any(SECRET.encode() in f.read_bytes() for f in state.glob("index@feat.sqlite*"))
    out = gm("purge", "--secrets", "--apply")
    assert "rm " not in out  # this store's derived state is gone already: not a user's step
    assert "after the push" not in out  # there is no push to wait for
    steps = out.split("Then, to make the old objects really go:\n", 1)[1]
    _run_steps([line.strip() for line in steps.splitlines() if line.startswith("     git ")])
    assert _holds(store.db().gitdir, SECRET) == []
    assert not list(state.glob("index*"))
    # Every branch still reads, through a fresh index.
    assert REPLACEMENT in gm("--branch", "feat", "search", "token")
    assert "an ordinary fact" in gm("search", "ordinary")
