"""Shared fixtures: real git repositories in temporary directories, and an isolated home.

Following pre-commit's tests: an autouse fixture keeps every test away from the
real home directory and the machine's git configuration.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import ConfigLevel

import gitmem
from gitmem import FixedClock, Store
from gitmem.git import maintenance

GitRunner = Callable[..., str]

# Many tests start gitmem as a process of its own. Where the environment says
# PYTHONDONTWRITEBYTECODE, each of them would compile gitmem anew (0.1 s a process) and each
# test worker would rewrite every test module's asserts again: write the bytecode caches.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / ".gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GITMEM_HOME", str(home / ".gitmem"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in (
        "GITMEM_DIR",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EDITOR",
        "VISUAL",
        "GITMEM_CONFIG",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
    ):
        monkeypatch.delenv(var, raising=False)
    # libgit2 fixes its config search path from $HOME when pygit2 is imported and never
    # reads GIT_CONFIG_GLOBAL, so point it at the isolated home too (else the real
    # ~/.gitconfig decides who authors the library's commits).
    search_path = pygit2.settings.search_path
    saved = {level: search_path[level] for level in _CONFIG_LEVELS}
    empty = home / "no-config"
    empty.mkdir()
    search_path[ConfigLevel.GLOBAL] = str(home)
    search_path[ConfigLevel.XDG] = str(empty)
    search_path[ConfigLevel.SYSTEM] = str(empty)
    yield home
    for level, value in saved.items():
        search_path[level] = value
    # A durable store turns fsync on for all of libgit2 in this process: off again, or every
    # later test of this worker would fsync each object it writes.
    settings: Any = pygit2.settings
    if callable(settings.enable_fsync_gitdir):
        settings.enable_fsync_gitdir(False)
    else:
        settings.enable_fsync_gitdir = False


_CONFIG_LEVELS = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Under ``-n``, xdist's work-stealing schedule unless ``--dist`` names another: a worker
    that runs out of work takes tests off the end of the other's queue, where the default
    schedule's fixed chunks can leave one worker idle while the other runs a long test."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "worksteal"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The stress tests (``slow``) first, each file's in its order: under ``-n`` the longest
    tests start at once, rather than a minute-long test starting last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock("2026-11-22T10:00:00Z")


@pytest.fixture
def store(tmp_path: Path, clock: FixedClock) -> Iterator[Store]:
    """A store with a work tree."""
    yield gitmem.init(tmp_path / "store", clock=clock)


@pytest.fixture
def bare_store(tmp_path: Path, clock: FixedClock) -> Iterator[Store]:
    yield gitmem.init(tmp_path / "bare.git", bare=True, clock=clock)


@pytest.fixture(params=["worktree", "bare"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Store:
    """Both kinds of store, for behaviour that must hold in each."""
    if request.param == "bare":
        return gitmem.init(tmp_path / "bare.git", bare=True, clock=clock)
    return gitmem.init(tmp_path / "store", clock=clock)


def run_git(path: Path | str, *args: str, check: bool = True, input: str | None = None) -> str:
    """Run the real git binary in ``path`` and return its stdout.

    ``git fsck`` runs under the packing lock: a ``git gc --auto`` a test's writes started
    may still be repacking, and fsck reading loose objects the repack is moving into a
    pack reports them missing (a race in the check, not in the store).
    """
    packing_lock: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if args and args[0] == "fsck":
        gitdir = Path(path) / ".git" if (Path(path) / ".git").is_dir() else Path(path)
        if (gitdir / "objects").is_dir():
            packing_lock = maintenance.exclusive(gitdir)
    with packing_lock:
        result = subprocess.run(
            ["git", "-C", str(path), *args],
            capture_output=True,
            text=True,
            check=False,
            input=input,
            env={**os.environ, "GIT_PAGER": "cat", "LC_ALL": "C"},
        )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result.stdout


@pytest.fixture
def git() -> GitRunner:
    return run_git
