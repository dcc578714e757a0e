"""What gitmem keeps inside a repository's git directory, under ``<gitdir>/gitmem/`` (for
a store another user owns or nobody may write, in the user's own state folder instead).

Derived state only: never committed, rebuilt from git or safe to lose. Every module
that keeps a file there names it here, so one page says what the directory holds
(docs/architecture.md, "The store on disk").
"""

from __future__ import annotations

import contextlib
import hashlib
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
    """``<gitdir>/gitmem/``; for a store another user owns or this user cannot write (a
    read-only mount), their own ``stores/<hash of the git dir>`` in :func:`user_dir`
    ``"state"`` (made, owner only): the index they read is one they built, and its copies
    of the store's text stay theirs."""
    own = Path(gitdir) / STATE_DIR
    try:
        owned = Path(gitdir).stat().st_uid == os.geteuid()
    except OSError:
        owned = False
    if owned and os.access(own if own.is_dir() else gitdir, os.W_OK):
        return own
    digest = hashlib.sha256(os.fsencode(Path(gitdir).resolve())).hexdigest()[:32]
    mine = user_dir("state") / "stores" / digest
    with contextlib.suppress(OSError):
        mine.mkdir(parents=True, exist_ok=True, mode=0o700)
    return mine


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
