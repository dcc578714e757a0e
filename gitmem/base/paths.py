"""What gitmem keeps inside a repository's git directory, under ``<gitdir>/gitmem/``.

Derived state only: never committed, rebuilt from git or safe to lose. Every module
that keeps a file there names it here, so one page says what the directory holds
(docs/architecture.md, "The store on disk").
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_BRANCH = "main"
"""The branch a store writes to unless told otherwise; its index is plain ``index.sqlite``."""
STATE_DIR = "gitmem"
"""``<gitdir>/gitmem/``: derived state, never committed."""

WRITE_LOCK = "write.lock"
"""``flock`` that serializes a store's writers (the kernel drops it with its process, so it
is never stale)."""
WORKTREE_SYNCED = "worktree-synced"
"""The commit the work tree was last brought up to (a killed writer's next write heals)."""
GC_LOCK = "gc.lock"
"""``flock`` held by the ``git gc`` that packs the store (automatic or ``gitmem gc``) and by
doctor's fsck: one packer at a time."""
PENDING_FORKS = "pending-forks"
"""Forks the git merge driver saved during a plain ``git merge``, committed once it lands."""
EDITS = "edits"
"""``gitmem edit``'s unfinished edits: ``<id>.md`` (the text) and ``<id>.base`` (its version)."""
INDEX_DB = "index.sqlite"
"""The derived SQLite index of the branch ``main`` (WAL mode)."""
DERIVED_COPIES = ("index*.sqlite*", "lifecycle-named.sqlite*", "doctor-*")
"""What in the state folder copies memory text (indexes with their WAL, older versions'
named-paths cache, doctor's caches): ``gitmem purge`` deletes them."""


def state_dir(gitdir: str | os.PathLike[str]) -> Path:
    """``<gitdir>/gitmem/``."""
    return Path(gitdir) / STATE_DIR


def user_dir(kind: str) -> Path:
    """The user's own folder of ``kind`` ``"cache"`` (``$XDG_CACHE_HOME/gitmem``, else
    ``~/.cache/gitmem``) or ``"state"`` (``$XDG_STATE_HOME/gitmem``, else
    ``~/.local/state/gitmem``): what gitmem keeps per user, outside every store."""
    xdg = os.environ.get(f"XDG_{kind.upper()}_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "gitmem"
    return Path.home() / (".cache" if kind == "cache" else ".local/state") / "gitmem"


def index_name(branch: str) -> str:
    """The index file's name for ``branch``: one index per branch (``index@<branch>.sqlite``,
    a ``/`` in the name spelled ``%2F``), ``index.sqlite`` for main."""
    return INDEX_DB if branch == DEFAULT_BRANCH else f"index@{branch.replace('/', '%2F')}.sqlite"


def edit_files(gitdir: str | os.PathLike[str], memory_id: str) -> tuple[Path, Path]:
    """Where ``gitmem edit`` keeps an unfinished edit of ``memory_id``: (text, base version)."""
    edits = state_dir(gitdir) / EDITS
    return edits / f"{memory_id}.md", edits / f"{memory_id}.base"
