"""A hostile hub: what a teammate can push is all gitmem clone, join and sync ever see of it.

The hub's store carries, beside three good memories, everything a tree can hold that might
make git or gitmem run something, reach outside the store or stop: `.gitattributes` naming
filters, drivers and encodings, a `.gitmodules` whose submodule URL runs a command, an LFS
pointer where a memory should be, a memory file that is a symlink to a file outside, and fork
files with no memory or with a false id. Every command runs as a process (the real `gitmem`
and `git` binaries), so a crash, a hang or a command run shows as one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_git
from storetools import memory_text

import gitmem
from gitmem.store import sync as S

GOOD = 3
FORK_ID = "mem_00000000-0000-4000-8000-00000000f0f0"


def _gitmem(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "gitmem", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    assert result.returncode in ok, (args, result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture
def hostile_hub(tmp_path: Path) -> tuple[Path, Path]:
    """A bare hub holding a store with three good memories and every hostile file; also
    the marker path that any command the hub names would create."""
    marker = tmp_path / "ran"
    hub = tmp_path / "hub.git"
    run_git(tmp_path, "init", "-q", "--bare", "-b", "main", "hub.git")
    seed = gitmem.init(tmp_path / "seed")
    for n in range(GOOD):
        seed.create(f"team fact {n}", title=f"fact {n}")
    root = seed.path
    touch = f"touch {marker}"
    (root / ".gitmodules").write_text(
        f'[submodule "sub"]\n\tpath = sub\n\turl = ext::sh -c {touch.replace(" ", "% ")}\n'
        "\tupdate = !sh -c 'touch ran-update'\n"
    )
    lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize 12\n"
    (root / "memories" / "aa").mkdir(parents=True, exist_ok=True)
    (root / "memories" / "aa" / "mem_aaaaaaaa-0000-4000-8000-000000000001.md").write_text(lfs)
    (root / "memories" / "bb").mkdir(parents=True, exist_ok=True)
    (root / "memories" / "bb" / "mem_bbbbbbbb-0000-4000-8000-000000000002.md").symlink_to(
        "/etc/passwd"
    )
    forks = root / "memories" / "f0"
    forks.mkdir(parents=True, exist_ok=True)
    # A fork of a memory that does not exist, and a fork file claiming another memory's id.
    (forks / f"{FORK_ID}.fork-deadbeef.md").write_text(memory_text(f"{FORK_ID}.fork-deadbeef"))
    good = seed.list()[0].id
    (forks / f"{FORK_ID}.fork-cafecafe.md").write_text(memory_text(good))
    run_git(root, "add", "-A")
    sha = run_git(root, "rev-parse", "HEAD").strip()
    run_git(root, "update-index", "--add", "--cacheinfo", f"160000,{sha},sub")
    run_git(root, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--no-verify", "-m", "hostile")
    (root / ".gitattributes").write_text(
        "* filter=evil diff=evil merge=evil ident export-subst\n"
        "*.md working-tree-encoding=UTF-16LE eol=crlf\n"
    )
    run_git(root, "add", ".gitattributes")
    run_git(root, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--no-verify", "-m", "attrs")
    S.add_remote(seed.db(), "origin", str(hub))
    run_git(root, "push", "-q", "origin", "main")
    return hub, marker


def _assert_nothing_ran(tmp_path: Path, marker: Path) -> None:
    assert not marker.exists()
    assert not list(tmp_path.rglob("ran-update"))


@pytest.mark.slow
def test_clone_of_a_hostile_hub_runs_nothing_and_reads_the_good_memories(
    hostile_hub: tuple[Path, Path], tmp_path: Path
) -> None:
    hub, marker = hostile_hub
    _gitmem(tmp_path, "clone", str(hub), "mine")
    mine = tmp_path / "mine"
    assert not (mine / "sub" / ".git").exists()
    listed = json.loads(_gitmem(mine, "--store", str(mine), "ls", "--json").stdout)
    titles = {m["title"] for m in listed}
    assert {f"fact {n}" for n in range(GOOD)} <= titles
    assert "root:" not in json.dumps(listed)  # the symlink's target was never read
    for memory in listed:
        shown = _gitmem(mine, "--store", str(mine), "show", memory["id"]).stdout
        assert "root:" not in shown
    _gitmem(mine, "--store", str(mine), "search", "fact")
    _gitmem(mine, "--store", str(mine), "recall", "team fact")
    _gitmem(mine, "--store", str(mine), "conflicts", ok=(0, 6))
    _gitmem(mine, "--store", str(mine), "doctor", ok=(0, 1, 7))
    _gitmem(mine, "--store", str(mine), "add", "learned here", "--title", "mine")
    _gitmem(mine, "--store", str(mine), "sync")
    _assert_nothing_ran(tmp_path, marker)
    # The clone's memory merge is still gitmem's: the hub's attributes named another driver.
    check = run_git(mine, "check-attr", "merge", "--", "memories/aa/x.md")
    assert check.strip().endswith("merge: gitmem"), check
    assert "filter: unset" in run_git(mine, "check-attr", "filter", "--", "memories/aa/x.md")


def test_join_and_sync_against_a_hostile_hub_run_nothing(
    hostile_hub: tuple[Path, Path], tmp_path: Path
) -> None:
    hub, marker = hostile_hub
    personal = gitmem.init(tmp_path / "personal", bare=True)
    personal.create("my own fact", title="own")
    _gitmem(tmp_path, "--store", str(personal.path), "join", str(hub), ok=(0, 4, 6, 7))
    _gitmem(tmp_path, "--store", str(personal.path), "ls")
    _gitmem(tmp_path, "--store", str(personal.path), "sync", ok=(0, 6, 7))
    _assert_nothing_ran(tmp_path, marker)
