"""Project memory that follows the code's branches, driven with the git binary: project
repositories with gitmem's hooks installed, checkouts, work trees, merges, pulls, a rebase,
a squash merge landed by hand, a deleted branch pruned, two agents on two branches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import gitmem
from gitmem.entry import hooks as gh
from gitmem.store.discovery import open_store


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert result.returncode == 0, f"git {args}: {result.stderr}"
    return result.stdout + result.stderr


def gm(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "gitmem", *args], cwd=cwd, capture_output=True, text=True,
        check=False,
    )
    assert result.returncode == code, result.stderr
    return result


def titles(cwd: Path) -> set[str]:
    return {m.title for m in open_store(cwd=cwd).list(scope="repo")}


def remember(cwd: Path, title: str) -> None:
    open_store(cwd=cwd).create(f"{title}.", title=title)


def commit(cwd: Path, name: str) -> None:
    (cwd / name).write_text(f"{name}\n")
    git(cwd, "add", name)
    git(cwd, "commit", "-qm", name)


def memory_branches(project: Path) -> set[str]:
    out = git(project / ".gitmem", "branch", "--format=%(refname:short)")
    return set(out.split()) - {"main"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "a.py")
    gm(root, "init", "--project", "--follow-branches")
    gh.install(root, "project")
    remember(root, "main fact")
    return root


@pytest.mark.slow
def test_a_branch_keeps_its_memories_until_it_merges(project: Path) -> None:
    git(project, "checkout", "-q", "-b", "feat/payments")
    assert memory_branches(project) == set()  # made on the first write, not on a read
    remember(project, "payments renamed")
    assert memory_branches(project) == {"feat/payments"}
    assert titles(project) == {"main fact", "payments renamed"}
    commit(project, "b.py")
    git(project, "checkout", "-q", "main")
    assert titles(project) == {"main fact"}
    remember(project, "later on main")
    git(project, "checkout", "-q", "feat/payments")  # brought up to date with main
    assert titles(project) == {"main fact", "later on main", "payments renamed"}
    listed = json.loads(gm(project, "branches", "--json").stdout)
    assert listed == [{"name": "feat/payments", "state": "open", "memories": 1}]
    git(project, "checkout", "-q", "main")
    out = git(project, "merge", "-q", "--no-ff", "--no-edit", "feat/payments")
    assert "landed memory branch feat/payments on main" in out
    assert titles(project) == {"main fact", "later on main", "payments renamed"}
    assert memory_branches(project) == set()


def test_not_following_writes_to_main(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "a.py")
    gitmem.init_project(root)
    git(root, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    remember(tmp_path / "side", "from a work tree")  # the project's store, not the user's
    git(root, "checkout", "-q", "-b", "feat")
    remember(root, "on feat")
    assert memory_branches(root) == set()
    assert titles(root) == {"from a work tree", "on feat"}
    gm(root, "config", "branches.follow", "true")
    assert gm(root, "config", "branches.follow").stdout.strip() == "true"
    remember(root, "followed")
    assert memory_branches(root) == {"feat"}


@pytest.mark.slow
def test_detached_head_and_a_secret_branch_name_write_to_main(project: Path) -> None:
    said = git(project, "checkout", "-q", "--detach")  # by the post-checkout hook
    assert "HEAD is detached: its memories go to main" in said
    assert gm(project, "add", "detached", "--title", "detached").stderr == ""  # once
    gm(project, "add", "again", "--title", "again")
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    git(project, "checkout", "-q", "-b", secret)
    said = gm(project, "add", "secret branch", "--title", "secret branch").stderr
    assert "credential" in said and secret not in said
    assert memory_branches(project) == set()
    git(project, "checkout", "-q", "main")
    assert titles(project) == {"main fact", "detached", "again", "secret branch"}


@pytest.mark.slow
def test_work_trees_follow_their_own_branch_at_once(project: Path, tmp_path: Path) -> None:
    trees = {name: tmp_path / name.replace("/", "-") for name in ("feat/a", "feat/b")}
    for name, tree in trees.items():
        git(project, "worktree", "add", "-q", "-b", name, str(tree))

    def agent(name: str) -> None:
        for n in range(3):
            gm(trees[name], "add", f"{name} fact {n}", "--title", f"{name} {n}")

    threads = [threading.Thread(target=agent, args=(name,)) for name in trees]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, tree in trees.items():
        assert titles(tree) == {"main fact"} | {f"{name} {n}" for n in range(3)}
    assert titles(project) == {"main fact"}
    assert not (tmp_path / "home" / ".gitmem").exists()  # not the user store


@pytest.mark.slow
def test_rebase_then_fast_forward_merge_lands(project: Path) -> None:
    git(project, "checkout", "-q", "-b", "feat")
    remember(project, "feat fact")
    commit(project, "b.py")
    git(project, "checkout", "-q", "main")
    commit(project, "c.py")
    git(project, "checkout", "-q", "feat")
    git(project, "rebase", "-q", "main")
    assert titles(project) == {"main fact", "feat fact"}
    git(project, "checkout", "-q", "main")
    git(project, "merge", "-q", "--ff-only", "feat")
    assert titles(project) == {"main fact", "feat fact"}
    assert memory_branches(project) == set()


@pytest.mark.slow
def test_squash_merge_then_land_by_hand(project: Path) -> None:
    git(project, "checkout", "-q", "-b", "feat")
    remember(project, "feat fact")
    commit(project, "b.py")
    git(project, "checkout", "-q", "main")
    git(project, "merge", "-q", "--squash", "feat")
    git(project, "commit", "-qm", "squashed")
    assert titles(project) == {"main fact"}  # the hook cannot see a squash
    assert "landed feat on main" in gm(project, "branches", "land", "feat").stdout
    assert titles(project) == {"main fact", "feat fact"}
    assert memory_branches(project) == set()
    assert gm(project, "branches", "land", "feat", code=3).stderr


@pytest.mark.slow
def test_a_deleted_unmerged_branch_is_pruned(project: Path) -> None:
    git(project, "checkout", "-q", "-b", "spike")
    remember(project, "spike idea")
    git(project, "checkout", "-q", "main")
    git(project, "branch", "-q", "-D", "spike")
    assert gm(project, "branches").stdout.splitlines()[1].split() == ["spike", "gone", "1"]
    assert "would delete" in gm(project, "branches", "prune").stdout
    assert memory_branches(project) == {"spike"}
    assert "deleted spike" in gm(project, "branches", "prune", "--apply").stdout
    assert memory_branches(project) == set()
    assert titles(project) == {"main fact"}


@pytest.mark.slow
def test_a_pull_of_a_merge_made_on_the_host_lands(project: Path, tmp_path: Path) -> None:
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(hub))
    git(project, "remote", "add", "origin", str(hub))
    git(project, "push", "-q", "origin", "main")
    git(project, "checkout", "-q", "-b", "feat")
    remember(project, "feat fact")
    commit(project, "b.py")
    git(project, "push", "-q", "origin", "feat")
    host = tmp_path / "host"  # the host's merge button
    git(tmp_path, "clone", "-q", str(hub), str(host))
    git(host, "merge", "-q", "--no-ff", "--no-edit", "origin/feat")
    git(host, "push", "-q", "origin", "main")
    git(project, "checkout", "-q", "main")
    assert titles(project) == {"main fact"}
    out = git(project, "pull", "-q", "--no-rebase", "origin", "main")
    assert "landed memory branch feat on main" in out
    assert titles(project) == {"main fact", "feat fact"}


@pytest.mark.slow
def test_sync_carries_every_memory_branch(project: Path, tmp_path: Path) -> None:
    hub = tmp_path / "memory.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(hub))
    gm(project, "remote", "add", "origin", str(hub))
    for name in ("feat/a", "feat/b"):
        git(project, "checkout", "-q", "-b", name)
        remember(project, name)
    gm(project, "sync")
    heads = git(hub, "branch", "--format=%(refname:short)").split()
    assert sorted(heads) == ["feat/a", "feat/b", "main"]
    mate = tmp_path / "mate"  # a teammate with feat/a open and a clone of the memory
    git(tmp_path, "clone", "-q", str(project), str(mate))
    git(mate, "checkout", "-q", "-b", "feat/a")
    commit(mate, "x.py")
    gm(mate, "clone", str(hub), str(mate / ".gitmem"))
    gm(mate, "config", "branches.follow", "true")
    assert titles(mate) == {"main fact"}
    synced = json.loads(gm(mate, "sync", "--json").stdout)
    assert [other["branch"] for other in synced["others"]] == ["feat/a"]
    assert memory_branches(mate) == {"feat/a"}
    assert titles(mate) == {"main fact", "feat/a"}
    gm(mate, "branches", "land", "feat/a")  # as after a squash merge on the host
    gm(mate, "sync")
    assert memory_branches(mate) == set()  # the hub's copy is in main: not brought back
