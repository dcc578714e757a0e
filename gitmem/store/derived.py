"""Format 3: a memory's ``version`` and ``updated_at`` derived from history.

A format 3 file keeps the ``version`` and ``updated_at`` lines it was created with (or that
the migration to format 3 found in it): later writes leave those lines as they are, so two
branches that change different parts of one memory change different lines and merge with
plain git, no driver (docs/format.md, "Format 3"). What a reader sees is

- ``version`` = the stored version + the *bumps*: the non-merge commits reachable from the
  commit read that changed the file while it existed in their parent, in a format 3 tree,
  after the file last came into being (created, restored after a delete);
- ``updated_at`` = the author time of the newest bump (gitmem dates a commit by the
  store's clock), or the stored value when there is none.

Both sides' updates of a merged pair are both reachable, so the merged memory counts both
(two branches with one update each over version 1 read as version 3). A merge commit is
never a bump: it made no new version of its own. The index derives the same numbers from
its version rows (``versions.bump``, see :func:`bump_kind`); this module is the reference
it is tested against and serves reads the index cannot (``at=``, transactions,
``use_index=False``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pygit2
from pygit2.enums import SortMode

from gitmem.base.errors import GitmemError
from gitmem.format import codec, memfile
from gitmem.format.config import DERIVED_FORMAT as DERIVED_FORMAT  # re-exported
from gitmem.format.config import StoreConfig
from gitmem.format.layout import CONFIG_FILE, MEMORY_ROOTS, id_from_path, path_twins
from gitmem.format.model import Memory
from gitmem.git.diff import blob_at, memory_blob
from gitmem.git.objects import Snapshot, blob_data
from gitmem.store.changes import changed_memory_files

BUMP, RESET, NEUTRAL = 1, -1, 0
"""What one commit's change of one file is to its derived version (``versions.bump``)."""


@dataclass(frozen=True)
class Bumps:
    """The bumps of one file as of one commit."""

    count: int = 0
    newest: int | None = None
    """Author time (seconds since the epoch) of the newest bump, None without one."""

    def apply(self, memory: Memory) -> Memory:
        """``memory`` as stored, with its derived ``version`` and ``updated_at``."""
        if self.count == 0:
            return memory
        updated = memory.updated_at
        if self.newest is not None:
            updated = dt.datetime.fromtimestamp(self.newest, dt.UTC)
        return replace(memory, version=memory.version + self.count, updated_at=updated)

    def plus_one(self, when: dt.datetime) -> Bumps:
        newest = int(when.timestamp())
        return Bumps(self.count + 1, max(newest, self.newest or newest))


class FormatCache:
    """The store format of trees, by the blob id of their ``gitmem.yaml``."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self._by_blob: dict[pygit2.Oid | None, int] = {}

    def of(self, tree: pygit2.Tree | None) -> int:
        blob = blob_at(tree, CONFIG_FILE) if tree is not None else None
        found = self._by_blob.get(blob)
        if found is None:
            found = 1
            if blob is not None:
                try:
                    text = codec.decode(blob_data(self.repo, blob), what=CONFIG_FILE)
                    found = StoreConfig.from_text(text).format
                except GitmemError:
                    found = 1  # an unreadable config counts as the oldest format: no bumps
            self._by_blob[blob] = found
        return found


def bump_kind(
    parents: int, before: pygit2.Oid | None, now: pygit2.Oid | None, parent_format: int
) -> int:
    """What a commit with ``parents`` parents that changed a file from ``before`` (in its
    first parent) to ``now`` is to the file's derived version."""
    if parents > 1:
        return NEUTRAL  # a merge brings versions made elsewhere; it makes none
    if before is None or now is None:
        return RESET  # created, restored or deleted: the stored lines start again
    return BUMP if parent_format >= DERIVED_FORMAT else NEUTRAL


def bumps(
    repo: pygit2.Repository, commit: pygit2.Commit | None, paths: Iterable[str]
) -> dict[str, Bumps]:
    """The bumps of each of ``paths`` as of ``commit``: one walk of its history, oldest
    first (a reset forgets what came before it). A plain id is followed across both of its
    paths (at each commit its blob is the one at format 4's path, else at the legacy one),
    so the migration to format 4, a rename with the blob unchanged, is no change at all."""
    wanted = list(dict.fromkeys(paths))
    out = {path: Bumps() for path in wanted}
    if commit is None or not wanted:
        return out
    key_of = {twin: path for path in wanted for twin in path_twins(path)}
    formats = FormatCache(repo)
    few = len(wanted) <= 8
    for each in repo.walk(commit.id, SortMode.TOPOLOGICAL | SortMode.REVERSE):
        parents = each.parents
        if len(parents) > 1:
            continue
        parent_tree = parents[0].tree if parents else None
        tree = each.tree
        if few:  # a few lookups per commit beat a tree diff
            candidates: Iterable[str] = wanted
        else:  # the diff skips unchanged subtrees: the cost follows the commit's change
            candidates = list(
                dict.fromkeys(
                    key_of[p]
                    for p, _ in changed_memory_files(repo, parent_tree, tree)
                    if p in key_of
                )
            )
        for path in candidates:
            now = memory_blob(tree, path)
            before = memory_blob(parent_tree, path)
            if now == before:
                continue
            kind = bump_kind(1, before, now, formats.of(parent_tree))
            if kind == RESET:
                out[path] = Bumps()
            elif kind == BUMP:
                prev = out[path]
                time = each.author.time
                out[path] = Bumps(prev.count + 1, max(time, prev.newest or time))
    return out


def is_derived(repo: pygit2.Repository, commit: pygit2.Commit | None) -> bool:
    """Whether ``commit``'s tree is a format 3 (or later) store."""
    return commit is not None and FormatCache(repo).of(commit.tree) >= DERIVED_FORMAT


def as_read(
    repo: pygit2.Repository, commit: pygit2.Commit | None, memories: Mapping[str, Memory | None]
) -> dict[str, Memory | None]:
    """Memories as stored in ``commit`` (by path) -> as a reader of ``commit`` sees them:
    in a format 3 tree with the derived ``version`` and ``updated_at`` (one walk for all of
    them), otherwise as they are. For tools that read files of a commit (review, diff,
    export) rather than going through a Store."""
    wanted = [path for path, memory in memories.items() if memory is not None]
    if commit is None or not wanted or not is_derived(repo, commit):
        return dict(memories)
    found = bumps(repo, commit, wanted)
    return {
        path: found[path].apply(memory) if memory is not None else None
        for path, memory in memories.items()
    }


def memory_files(snap: Snapshot) -> dict[str, bytes]:
    """Every memory file of ``snap`` (path -> bytes): what :func:`files_as_read` is given
    by export and by a join into an older-format store."""
    files: dict[str, bytes] = {}
    for root in MEMORY_ROOTS:
        for path in snap.iter_files(root):
            if id_from_path(path) is None:
                continue
            data = snap.read(path)
            if data is not None:
                files[path] = data
    return files


def files_as_read(
    repo: pygit2.Repository, commit: pygit2.Commit | None, files: Mapping[str, bytes]
) -> dict[str, bytes]:
    """``files`` of ``commit`` (path -> bytes) with format 3's derived ``version`` and
    ``updated_at`` lines written in, so each file says its version wherever it goes (an
    export, a format 2 store it is merged into). Only those two lines change; a file that
    does not read as a memory, and every file of a format 2 commit, is returned as it is."""
    if not is_derived(repo, commit):
        return dict(files)
    stored = {path: memfile.read(data, path)[0] for path, data in files.items()}
    read = as_read(repo, commit, stored)
    out = dict(files)
    for path, memory in read.items():
        was = stored[path]
        if memory is None or was is None or was.document is None:
            continue
        if (memory.version, memory.updated_at) != (was.version, was.updated_at):
            meta = dict(was.document.metadata)
            meta["version"], meta["updated_at"] = memory.version, memory.updated_at
            out[path] = codec.serialize(was.document.with_changes(meta, was.body)).encode()
    return out


class BumpCache:
    """:func:`bumps`, remembered per file: a later commit a few first-parent steps on (the
    next write of a writer, a read after it) adds the bumps of those steps only, instead of
    walking the whole history again."""

    LIMIT = 4096
    STEPS = 64

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], tuple[pygit2.Oid, Bumps]] = {}

    def bumps(
        self, repo: pygit2.Repository, commit: pygit2.Commit | None, paths: Iterable[str]
    ) -> dict[str, Bumps]:
        wanted = list(dict.fromkeys(paths))
        if commit is None:
            return {path: Bumps() for path in wanted}
        out: dict[str, Bumps] = {}
        missing: list[str] = []
        for path in wanted:
            hit = self._known.get((repo.path, path))
            found = self._forward(repo, commit, path, hit) if hit is not None else None
            if found is None:
                missing.append(path)
            else:
                out[path] = found
        if missing:
            out.update(bumps(repo, commit, missing))
        if len(self._known) + len(wanted) > self.LIMIT:
            self._known.clear()
        for path in wanted:
            self._known[(repo.path, path)] = (commit.id, out[path])
        return out

    def peek(self, repo: pygit2.Repository, commit: pygit2.Commit, path: str) -> Bumps | None:
        """The bumps of ``path`` as of ``commit`` when they follow from what is remembered
        in a few first-parent steps; None otherwise (nothing walked)."""
        hit = self._known.get((repo.path, path))
        found = self._forward(repo, commit, path, hit) if hit is not None else None
        if found is not None:
            self.remember(repo, commit, path, found)
        return found

    def remember(
        self, repo: pygit2.Repository, commit: pygit2.Commit, path: str, bumps: Bumps
    ) -> None:
        if len(self._known) >= self.LIMIT:
            self._known.clear()
        self._known[(repo.path, path)] = (commit.id, bumps)

    def _forward(
        self,
        repo: pygit2.Repository,
        commit: pygit2.Commit,
        path: str,
        hit: tuple[pygit2.Oid, Bumps],
    ) -> Bumps | None:
        known_id, result = hit
        chain: list[pygit2.Commit] = []
        each = commit
        for _ in range(self.STEPS):
            if each.id == known_id:
                break
            if len(each.parents) != 1:
                return None  # a merge or a root: walk the history instead
            chain.append(each)
            each = each.parents[0]
        else:
            return None
        formats = FormatCache(repo)
        for step in reversed(chain):
            parent = step.parents[0]
            before, now = memory_blob(parent.tree, path), memory_blob(step.tree, path)
            if before == now:
                continue
            kind = bump_kind(1, before, now, formats.of(parent.tree))
            if kind == RESET:
                result = Bumps()
            elif kind == BUMP:
                time = step.author.time
                result = Bumps(result.count + 1, max(time, result.newest or time))
        return result
