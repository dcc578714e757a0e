"""The read commands' fast path: a current index, read without opening git through libgit2.

``gitmem ls``, ``show`` and ``search`` are called by agents in loops and by people many
times a day. Opening a :class:`~gitmem.store.core.Store` loads libgit2 (pygit2: ~60 ms
of a process that should answer in 100) and PyYAML, though when the derived index is
already at the branch tip neither is needed: the index holds every current memory, and
the tip is one small file in the git directory.

:func:`open_quick` opens the index of the store at a path read-only, and only when it
can answer exactly as the full path would: a plain repository layout (a bare store or
a work tree with its ``.git`` directory), no git setting that moves the work tree or
changes how objects and refs are stored, the branch tip read from the ref files
(:mod:`gitmem.git.plain`), and an index whose schema, commit and recorded store config
(format and scope) match that tip. Anything else, and anything this module cannot
answer for certain (a problem file under an id, a deleted memory, a query that is not
FTS5 syntax), is answered with ``None``: the caller takes the full path, which catches
the index up and reports problems. Nothing here writes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gitmem.base import paths
from gitmem.format.config import FORMAT
from gitmem.format.layout import id_prefix, is_path_id, memory_paths, one_by_prefix
from gitmem.format.model import Memory, Scope
from gitmem.git import plain
from gitmem.store import lexical, queries
from gitmem.store.providers import provider_key
from gitmem.store.results import Problem

__all__ = ["QuickIndex", "open_quick"]


# Settings that make git (and so the full path) see this repository differently from
# its plain layout: another work tree, other files' settings, another object or ref format.
_UNUSUAL_CONFIG = (b"worktree", b"include", b"objectformat", b"refstorage")


def _vectors_version() -> int:
    from gitmem.store import vectors

    return vectors.VECTORS_VERSION


_VERSIONS = {lexical.PROVIDER: lambda: lexical.LEXICAL_VERSION, "vectors": _vectors_version}
"""The row providers the fast path reads, and where their versions are (imported on use)."""


class QuickIndex:
    """The current index of one store, read-only, in one read transaction (a snapshot)."""

    def __init__(self, gitdir: Path, conn: sqlite3.Connection, scope: Scope, tip: str) -> None:
        self.gitdir = gitdir
        self.conn = conn
        self.scope = scope
        self.tip = tip

    def close(self) -> None:
        self.conn.close()

    # -- the questions, as the full path's reader asks them ----------------------------

    def rows(
        self,
        columns: Sequence[str],
        *,
        include_superseded: bool,
        include_archived: bool,
        after: tuple[int, str] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[tuple[Any, ...]]:
        return queries.column_rows(
            self.conn,
            columns,
            include_superseded=include_superseded,
            include_archived=include_archived,
            after=after,
            limit=limit,
            offset=offset,
        )

    def problems(self) -> list[Problem]:
        """Files under the memory folders that are not valid memories."""
        found = queries.problem_rows(self.conn)
        return [Problem(path, message, self.scope) for path, message in found]

    def full_text(
        self, query: str, terms: Sequence[str], title: str, limit: int, filters: Mapping[str, Any]
    ) -> list[tuple[float, Memory]]:
        found = queries.fts_hits(
            self.conn, self.scope, query, title_text=title, limit=limit, filters=dict(filters)
        )
        return [(hit.score, hit.memory) for hit in found]

    def resolve_id(self, prefix: str) -> str | None:
        """What ``Store.resolve_id`` answers, where the index alone can tell: an id of a
        current memory, or the one current id starting with ``prefix`` (several raise
        AmbiguousIdError, a bad id InvalidIdError). None: ask the full path (no current
        memory matches, or a file that is not a valid memory sits at the id's path)."""
        wanted = id_prefix(prefix)
        if is_path_id(wanted) or self._has(wanted):
            return wanted
        if any(p.path in memory_paths(wanted) for p in self.problems()):
            return None
        found = [
            str(row[0])
            for row in self.conn.execute(
                "SELECT id FROM memories WHERE substr(id, 1, ?) = ?", (len(wanted), wanted)
            )
        ]
        return one_by_prefix(wanted, found)

    def stored_file(self, memory_id: str) -> bytes | None:
        """The bytes of a current memory's file at the tip, or None (ask the full path)."""
        row = self.conn.execute("SELECT blob FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return None if row is None else plain.blob(self.gitdir, str(row[0]))

    def _has(self, memory_id: str) -> bool:
        found = self.conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory_id,))
        return found.fetchone() is not None


def open_quick(path: Path, *, providers: Sequence[str] = ()) -> QuickIndex | None:
    """The store at ``path``'s index, when it is current and the layout is plain; else None.

    ``providers``: row providers whose tables the caller reads, which must be current too
    (``"lexical"`` to search, and ``"vectors"`` to recall).
    """
    located = _locate(path)
    if located is None:
        return None
    gitdir, branch = located
    tip = plain.ref_target(gitdir, f"refs/heads/{branch}")
    if tip is None:
        return None
    db = paths.state_dir(gitdir) / paths.index_name(branch)
    if not db.is_file():
        return None
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
        conn.execute("BEGIN")  # one snapshot for the checks and the answers
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        scope = _current(meta, tip, providers)
        if scope is None:
            conn.close()
            return None
        return QuickIndex(gitdir, conn, scope, tip)
    except (sqlite3.Error, ValueError):
        if conn is not None:
            conn.close()
        return None


def _locate(path: Path) -> tuple[Path, str] | None:
    """(git directory, branch) of a plainly laid-out store at ``path``."""
    if path.name == ".git":
        return None
    if (path / ".git").is_dir():
        gitdir, work_tree = path / ".git", True
    elif (path / "HEAD").is_file() and (path / "objects").is_dir():
        gitdir, work_tree = path, False
    else:
        return None
    data = plain.read_regular(gitdir / "config")
    if data is None:
        return None
    config = data.lower()
    if any(word in config for word in _UNUSUAL_CONFIG):
        return None
    if work_tree and b"bare = true" in config:  # git would not see the work tree
        return None
    branch = paths.DEFAULT_BRANCH
    if work_tree:  # a work-tree store writes to (and reads) the branch checked out
        head = plain.symbolic_head(gitdir)
        if head is not None and head.startswith("refs/heads/"):
            branch = head[len("refs/heads/") :]
    return gitdir, branch


def _current(meta: Mapping[str, str], tip: str, providers: Sequence[str]) -> Scope | None:
    """The store's scope when the index reflects ``tip`` in a format this gitmem reads."""
    if meta.get("schema") != str(queries.SCHEMA_VERSION) or meta.get("commit") != tip:
        return None
    for name in providers:
        if meta.get(provider_key(name)) != f"{_VERSIONS[name]()} {tip}":
            return None
    try:
        store = json.loads(meta.get(queries.STORE_CONFIG_KEY) or "{}")
        if not isinstance(store, dict) or not isinstance(store.get("format"), int):
            return None
        if not 1 <= store["format"] <= FORMAT:
            return None
        return Scope(str(store.get("scope")))
    except ValueError:
        return None
