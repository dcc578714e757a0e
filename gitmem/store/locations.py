"""Where the stores are, by path alone (the user store, a project's ``.gitmem/``): apart from
:mod:`.discovery` so the command line can find a store's current index without libgit2."""

from __future__ import annotations

import os
from pathlib import Path


def user_store_path() -> Path:
    """The user store: ``$GITMEM_HOME``, else ``~/.gitmem``."""
    return Path(os.environ.get("GITMEM_HOME") or Path.home() / ".gitmem").expanduser()


def is_store(path: Path) -> bool:
    """Whether ``path`` holds a git repository (a store's or one gitmem could open)."""
    return (path / ".git").exists() or (path / "HEAD").is_file()


def find_project_store(start: Path) -> Path | None:
    """Walk up from ``start`` to the first directory holding a ``.gitmem/`` store. In a
    linked work tree (``git worktree add``: its ``.git`` is a file naming its git
    directory), the store beside the main work tree, found through git's common directory."""
    current = start.resolve()
    for directory in (current, *current.parents):
        candidate = directory / ".gitmem"
        if candidate.is_dir() and is_store(candidate):
            return candidate
        main = _main_work_tree(directory / ".git")
        if main is not None and is_store(main / ".gitmem"):
            return main / ".gitmem"
    return None


def _main_work_tree(dotgit: Path) -> Path | None:
    """The main work tree of the linked work tree whose ``.git`` file is ``dotgit``."""
    try:
        if not dotgit.is_file():
            return None
        first = dotgit.read_text(encoding="utf-8", errors="replace")[:4096].splitlines()[0]
        gitdir = (dotgit.parent / first.removeprefix("gitdir:").strip()).resolve()
        common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
    except (OSError, IndexError):
        return None
    return common.parent if common.name == ".git" else None
