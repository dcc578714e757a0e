"""A work-tree store's files and git's index, kept at the branch tip gitmem wrote: a write
over uncommitted edits is refused, touched files are written and staged so ``git status``
stays clean, and files a killed writer left behind are brought forward (:meth:`WorkTree.heal`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from gitmem.base import logs, paths
from gitmem.base.errors import DirtyWorktreeError
from gitmem.git import stage
from gitmem.git.command import run_git
from gitmem.git.locks import STALE_LOCK_AGE, clear_stale_lock, pid_alive, temp_path
from gitmem.git.objects import Snapshot, Staged, blob_data, readable

log = logs.get(__name__)

IndexMoves = dict[str, tuple[pygit2.Oid | None, pygit2.Oid | None]]
"""Paths whose index entry moves from an old blob id to a new one, the file left alone."""


class WorkTree:
    """A store's work-tree files and git's index, always under the store's writer lock."""

    def __init__(
        self, repo: Callable[[], pygit2.Repository], workdir: Path, gitdir: Path, durable: bool
    ) -> None:
        self._repo = repo
        self.workdir = workdir
        self.gitdir = gitdir
        self.durable = durable
        self._synced = paths.state_dir(gitdir) / paths.WORKTREE_SYNCED
        self._index: stage.GitIndex | None = None

    def _mark_synced(self, oid: pygit2.Oid) -> None:
        self._synced.parent.mkdir(exist_ok=True)
        tmp = self._synced.with_suffix(".tmp")
        tmp.write_text(str(oid) + "\n")
        os.replace(tmp, self._synced)

    def blob(self, path: str) -> pygit2.Oid | bool | None:
        """The blob id of the work-tree file, None if absent, False if it is not a plain file."""
        full = self.workdir / path
        # A directory on the way that is a link (or a file) would carry the write
        # out of the store: lstat only guards the last component.
        for parent in full.relative_to(self.workdir).parents[:-1]:  # not the root itself
            try:
                mode = (self.workdir / parent).lstat().st_mode
            except FileNotFoundError:
                continue  # made by the sync
            if not stat.S_ISDIR(mode):
                return False
        try:
            st = full.lstat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return False
        return pygit2.hash(full.read_bytes())

    def check_clean(self, snap: Snapshot, changes: Mapping[str, Staged]) -> None:
        """Refuse a write that would overwrite uncommitted edits in the work tree."""
        for path in changes:
            old = snap.blob_id(path)
            on_disk = self.blob(path)
            if on_disk is False:
                raise DirtyWorktreeError(
                    f"{path} in the work tree is not a regular file; refusing to replace it"
                )
            if on_disk != old:
                state = "is untracked" if old is None else "has uncommitted edits"
                if on_disk is None:
                    state = "was deleted in the work tree but not committed"
                raise DirtyWorktreeError(f"{path} {state}; refusing to overwrite it")

    def heal(self, tip: pygit2.Commit | None) -> None:
        """Bring files a writer killed after its commit left behind up to the tip: each file
        still as gitmem last synced it (nobody edited it)."""
        if tip is None:
            return
        try:
            synced = pygit2.Oid(hex=self._synced.read_text().strip())
        except (FileNotFoundError, ValueError):
            self._mark_synced(tip.id)
            return
        if synced == tip.id:
            return
        repo = self._repo()
        found = repo.get(synced)
        old = found if isinstance(found, pygit2.Commit) else None
        diff = (
            repo.diff(old.tree, tip.tree) if old is not None else tip.tree.diff_to_tree(swap=True)
        )
        changes: dict[str, bytes | None] = {}
        index_only: IndexMoves = {}
        old_snap, tip_snap = Snapshot(repo, old), Snapshot(repo, tip)
        for delta in diff.deltas:
            for path in {delta.old_file.path, delta.new_file.path}:
                self._remove_dead_temp_files(path)
                old_id, new_id = old_snap.blob_id(path), tip_snap.blob_id(path)
                if self.blob(path) == old_id:
                    changes[path] = blob_data(repo, new_id) if new_id is not None else None
                else:
                    # Edited by someone since: the file stays, but the index follows the
                    # branch, so `git status` shows their edit against the tip rather
                    # than a staged revert of the commit the dead writer left behind.
                    index_only[path] = (old_id, new_id)
        self.update(tip, changes, index_only)

    def _remove_dead_temp_files(self, path: str) -> None:
        """Remove ``.<name>.<pid>.tmp`` files a dead writer left beside ``path`` (one beside
        a healed path; a live process's are left alone)."""
        full = self.workdir / path
        try:
            candidates = list(full.parent.glob(f".{glob.escape(full.name)}.*.tmp"))
        except OSError:
            return
        for tmp in candidates:
            pid_text = tmp.name[len(full.name) + 2 : -len(".tmp")]
            if not pid_text.isdigit() or pid_alive(int(pid_text)):
                continue
            with contextlib.suppress(OSError):
                tmp.unlink()
                log.info("removed %s, left by a writer that died", tmp)

    def update(
        self,
        after: pygit2.Commit,
        changes: Mapping[str, Staged],
        index_only: IndexMoves | None = None,
    ) -> None:
        """Write the touched files and git's index so ``git status`` is clean at ``after``;
        ``index_only`` moves index entries without touching the file."""
        self._write_files(changes.items())
        self._stage(changes, index_only or {})
        self._mark_synced(after.id)

    def _write_files(self, changes: Iterable[tuple[str, Staged]]) -> None:
        """Each touched file written atomically (temp file + rename), or removed."""
        for path, data in changes:
            full = self.workdir / path
            if data is None:
                with contextlib.suppress(FileNotFoundError):
                    full.unlink()
                _prune_empty_dirs(full.parent, self.workdir)
                continue
            _make_dirs(full.parent, self.workdir)
            tmp = temp_path(full)
            # 0o664 before the umask: as git would write it, but never world-writable even
            # under umask 000 (memories are shared with people, not with everyone).
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o664)
            with os.fdopen(fd, "wb") as fh:
                if isinstance(data, pygit2.Oid) and not readable(self._repo(), data):
                    # Over the read bound: git streams it to the file, never held here.
                    run_git(["cat-file", "blob", str(data)], gitdir=self.gitdir, stdout=fh)
                else:
                    if isinstance(data, pygit2.Oid):  # a transaction's blob, written when staged
                        data = blob_data(self._repo(), data)
                    fh.write(data)
                if self.durable:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, full)

    def _stage(self, changes: Mapping[str, Staged], index_only: IndexMoves) -> None:
        """Stage the written files in git's index, with :mod:`gitmem.git.stage` or, for an
        index it does not write, libgit2; while someone's git holds ``index.lock``, again."""
        for attempt in range(50):
            try:
                try:
                    self._stage_fast(changes, index_only)
                except stage.Unsupported as exc:
                    log.debug("git index: %s; updating it through libgit2", exc)
                    self._stage_libgit2(changes, index_only)
                return
            except (pygit2.GitError, OSError):
                clear_stale_lock(self.gitdir / "index.lock", STALE_LOCK_AGE)
                if attempt == 49:
                    raise
                time.sleep(0.01 * random.uniform(0.5, 1.5))

    def _stage_fast(self, changes: Mapping[str, Staged], index_only: IndexMoves) -> None:
        if self._index is None:
            self._index = stage.GitIndex(self.gitdir / "index")
        index = self._index
        index.load()
        for path, (old_id, new_id) in index_only.items():
            if index.get(path) != (old_id.raw if old_id is not None else None):
                continue
            if new_id is None:
                index.remove(path)
            else:
                index.add_entry(path, new_id.raw)
        for path, data in changes.items():
            if data is None:
                index.remove(path)
            else:
                oid = data.raw if isinstance(data, pygit2.Oid) else stage.blob_id(data)
                index.add_file(path, self.workdir / path, oid)
        index.write(durable=self.durable)

    def _stage_libgit2(self, changes: Mapping[str, Staged], index_only: IndexMoves) -> None:
        index = self._repo().index
        index.read(False)
        for path, (old_id, new_id) in index_only.items():
            staged = index[path].id if path in index else None
            if staged != old_id:
                continue
            if new_id is None:
                index.remove(path)
            else:
                index.add(pygit2.IndexEntry(path, new_id, FileMode.BLOB))
        for path, data in changes.items():
            if data is None:
                with contextlib.suppress(OSError, KeyError):
                    index.remove(path)
            else:
                index.add(path)
        index.write()


def _make_dirs(path: Path, top: Path) -> None:
    """``mkdir -p`` below ``top`` with 0o775 before the umask: never world-writable."""
    missing: list[Path] = []
    while not path.exists() and path != top and top in path.parents:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o775)


def _prune_empty_dirs(directory: Path, root: Path) -> None:
    while directory != root and root in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
