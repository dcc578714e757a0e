"""Joining a team's store: gitmem clone of real hubs, gitmem join of a personal store.

Hubs are bare repositories made the way people make them (`git init --bare`, whose HEAD
names master, with the store pushed to main), cloned through the real git binary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git

import gitmem
from gitmem import StoreError
from gitmem.entry import team
from gitmem.store import branchmerge
from gitmem.store import sync as S
from gitmem.store.core import Store
from gitmem.store.mergedriver import driver_registered


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    """A hub made with `git init --bare` (HEAD: master) holding a store on main."""
    path = tmp_path / "hub.git"
    run_git(tmp_path, "init", "-q", "--bare", "-b", "master", "hub.git")
    seed = gitmem.init(tmp_path / "seed")
    for n in range(3):
        seed.create(f"team fact {n}", title=f"fact {n}")
    S.add_remote(seed.db(), "origin", str(path))
    seed.sync()
    assert (path / "HEAD").read_text().strip() == "ref: refs/heads/master"
    return path


def test_plain_git_clone_of_such_a_hub_is_empty(hub: Path, tmp_path: Path) -> None:
    """Why gitmem clone exists: git checks out nothing (HEAD names a missing branch)."""
    run_git(tmp_path, "clone", "-q", str(hub), "plain")
    assert not (tmp_path / "plain" / "gitmem.yaml").exists()


def test_clone_checks_out_the_store_and_makes_it_ready(hub: Path, tmp_path: Path) -> None:
    result = team.clone(str(hub), tmp_path / "mine")
    assert result.branch == "main" and result.memories == 3
    store = gitmem.open(tmp_path / "mine")
    assert len(store.list()) == 3
    assert driver_registered(tmp_path / "mine")
    assert {"pre-commit", "post-merge", "post-checkout"} <= set(result.hooks)
    assert (tmp_path / "mine" / ".git" / "gitmem" / "index.sqlite").exists()
    branch = run_git(tmp_path / "mine", "rev-parse", "--abbrev-ref", "main@{upstream}")
    assert branch.strip() == "origin/main"
    # A write and a sync go straight back to the hub.
    store.create("learned on my machine")
    assert store.sync().pushed


def test_clone_work_tree_is_gits_checkout(hub: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    team.clone(str(hub), mine)
    staged = run_git(mine, "ls-files", "-s").splitlines()
    tree = run_git(mine, "ls-tree", "-r", "origin/main").splitlines()
    assert staged and staged == [
        f"{mode} {oid} 0\t{path}"
        for mode, _, rest in (line.split(" ", 2) for line in tree)
        for oid, path in [rest.split("\t", 1)]
    ]
    for line in tree:
        mode, _, rest = line.split(" ", 2)
        oid, path = rest.split("\t", 1)
        assert (mine / path).read_bytes() == run_git(mine, "cat-file", "blob", oid).encode()
        assert oct((mine / path).stat().st_mode)[-6:] == mode
    assert run_git(mine, "status", "--porcelain") == ""
    assert run_git(mine, "diff", "HEAD") == ""


def test_clone_interrupted_in_its_checkout_leaves_nothing(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = team.run_git

    def interrupted(args: Any, **kwargs: Any) -> Any:
        if args[0] == "checkout":
            raise KeyboardInterrupt
        return real(args, **kwargs)

    monkeypatch.setattr(team, "run_git", interrupted)
    with pytest.raises(KeyboardInterrupt):
        team.clone(str(hub), tmp_path / "mine")
    assert not (tmp_path / "mine").exists()


def test_clone_interrupted_in_its_index_build_leaves_nothing(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(self: Store, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "reindex", interrupted)
    with pytest.raises(KeyboardInterrupt):
        team.clone(str(hub), tmp_path / "mine")
    assert not (tmp_path / "mine").exists()


def test_clone_whose_checkout_fails_fails_and_leaves_nothing(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's checkout failing (here: a setting git refuses to read) fails the clone with
    git's message, and leaves no folder."""
    real = team.run_git

    def bad_setting(args: Any, **kwargs: Any) -> Any:
        if args[0] == "checkout":
            kwargs["config"] = (("core.packedGitWindowSize", "lots"),)
        return real(args, **kwargs)

    monkeypatch.setattr(team, "run_git", bad_setting)
    with pytest.raises(StoreError, match=r"git checkout failed: .*bad numeric config value"):
        team.clone(str(hub), tmp_path / "mine")
    assert not (tmp_path / "mine").exists()


def test_clone_counts_what_ls_lists(hub: Path, tmp_path: Path) -> None:
    seed = gitmem.open(tmp_path / "seed")
    old = seed.list()[0]
    seed.supersede(old.id, "team fact, corrected")
    seed.update(seed.list()[1].id, status="archived")
    seed.sync()
    result = team.clone(str(hub), tmp_path / "mine")
    listed = gitmem.open(tmp_path / "mine").list()
    assert result.memories == len(listed) == 2  # 4 files: one superseded, one archived


def test_clone_bare_and_by_branch(hub: Path, tmp_path: Path) -> None:
    result = team.clone(str(hub), tmp_path / "agent.git", bare=True, hooks=False)
    assert result.memories == 3
    assert gitmem.open(tmp_path / "agent.git").db().branch == "main"
    # A hub whose store lives on another branch: named, it is cloned onto main.
    run_git(hub, "branch", "-m", "main", "memory")
    with pytest.raises(StoreError, match="no branch 'nope'"):
        team.clone(str(hub), tmp_path / "x", branch="nope")
    assert not (tmp_path / "x").exists()
    result = team.clone(str(hub), tmp_path / "y")  # its only branch
    assert result.memories == 3


def test_clone_refuses_what_is_not_a_store(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q", "--bare", "empty.git")
    with pytest.raises(StoreError, match="hub is empty"):
        team.clone(str(tmp_path / "empty.git"), tmp_path / "a")
    assert not (tmp_path / "a").exists()
    run_git(tmp_path, "init", "-q", "-b", "main", "code")
    (tmp_path / "code" / "README").write_text("code\n")
    run_git(tmp_path / "code", "add", "README")
    run_git(tmp_path / "code", "commit", "-qm", "code")
    with pytest.raises(StoreError, match="not a gitmem store"):
        team.clone(str(tmp_path / "code"), tmp_path / "b")
    assert not (tmp_path / "b").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    with pytest.raises(StoreError, match="not empty"):
        team.clone(str(tmp_path / "code"), tmp_path / "full")
    assert (tmp_path / "full" / "file").read_text() == "x"


def test_cli_clone(hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cli = Gitmem(None, make_runner())
    out = cli("clone", str(hub), "team").stdout
    assert "3 memories on main" in out and "merge driver registered" in out
    data = cli.json("clone", str(hub), "team2", "--bare")
    assert data["memories"] == 3 and data["branch"] == "main"


def test_join_brings_a_personal_store_into_the_team_store(hub: Path, tmp_path: Path) -> None:
    personal = gitmem.init(tmp_path / "me", scope="user")
    mine = personal.create("my own preference", title="mine")
    personal.update(mine.id, "my own preference, refined")
    # A plain sync of two stores made apart with different configs stops, and says how.
    S.add_remote(personal.db(), "origin", str(hub))
    with pytest.raises(branchmerge.MergeConflictError) as caught:
        personal.sync()
    assert "gitmem join" in (caught.value.hint or "")
    result = team.join(personal, str(hub))
    assert result.pushed and result.merge == "merge"
    ids = {m.id for m in personal.list()}
    assert mine.id in ids and len(ids) == 4
    # The team's configuration won; the personal history is all there.
    assert "scope: repo" in (tmp_path / "me" / "gitmem.yaml").read_text()
    assert [v.memory.version for v in personal.history(mine.id) if v.memory] == [1, 2]
    # Teammates see it.
    other = team.clone(str(hub), tmp_path / "teammate")
    assert other.memories == 4
    assert gitmem.open(tmp_path / "teammate").read(mine.id).body == "my own preference, refined"


def test_join_keeps_versions(tmp_path: Path) -> None:
    """Every memory reads with the version and time it had, here and at a teammate's (both
    are derived from history, which the join keeps)."""
    path = tmp_path / "hub.git"
    run_git(tmp_path, "init", "-q", "--bare", "-b", "main", "hub.git")
    seed = gitmem.init(tmp_path / "seed")
    seed.create("team fact", title="fact")
    S.add_remote(seed.db(), "origin", str(path))
    seed.sync()
    personal = gitmem.init(tmp_path / "me", scope="user")
    mine = personal.create("v1", title="mine")
    personal.update(mine.id, "v2")
    personal.update(mine.id, "v3")
    before = personal.read(mine.id)
    assert before.version == 3
    team.join(personal, str(path))
    after = gitmem.open(tmp_path / "me").read(mine.id)
    assert (after.version, after.updated_at, after.body) == (3, before.updated_at, "v3")
    theirs = team.clone(str(path), tmp_path / "teammate")
    assert theirs.memories == 2
    seen = gitmem.open(tmp_path / "teammate").read(mine.id)
    assert (seen.version, seen.updated_at) == (3, before.updated_at)
    assert gitmem.open(tmp_path / "teammate").update(mine.id, "v4").version == 4


def test_join_into_a_team_store_of_an_old_format_is_refused(tmp_path: Path) -> None:
    from storetools import old_store

    from gitmem.base.errors import OldFormatError

    old_store(tmp_path / "hub.git", 4, bare=True)
    personal = gitmem.init(tmp_path / "me", scope="user")
    personal.create("mine")
    tip = personal.db().tip()
    with pytest.raises(OldFormatError, match="format 4 store"):
        team.join(personal, str(tmp_path / "hub.git"))
    assert personal.db().tip() == tip


def test_init_in_a_plain_clone_registers_the_driver(hub: Path, tmp_path: Path) -> None:
    run_git(tmp_path, "clone", "-q", "-b", "main", str(hub), "plain")
    assert not driver_registered(tmp_path / "plain")
    gitmem.init(tmp_path / "plain")
    assert driver_registered(tmp_path / "plain")
    assert run_git(tmp_path / "plain", "status", "--porcelain").strip() == ""
