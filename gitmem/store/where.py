"""Where the stores are, by path alone: the user store, a project's ``.gitmem/``.

Kept apart from :mod:`gitmem.store.discovery` (which opens and creates stores through
libgit2) so that the command line can say which store a command would use, and the
read commands can find its current index (``index_queries.open_current``), without loading
libgit2.
"""

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
    """Walk up from ``start`` to the first directory holding a ``.gitmem/`` store."""
    current = start.resolve()
    for directory in (current, *current.parents):
        candidate = directory / ".gitmem"
        if candidate.is_dir() and is_store(candidate):
            return candidate
    return None
