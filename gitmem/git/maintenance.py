"""Repository maintenance: packing loose objects (``gitmem gc``).

pygit2 can write packs but cannot prune loose objects or repack, so packing goes
through the ``git`` binary (``git gc``), which is the one place gitmem needs it.
Every single-memory write leaves a few loose objects (a blob, the trees along
its path, a commit); a store with many of them is larger on disk and slower to
clone until it is packed.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitmem.base.errors import StoreError
from gitmem.base.paths import STATE_DIR
from gitmem.git import autopack
from gitmem.git.command import run_git
from gitmem.git.db import GitDB


@dataclass(frozen=True)
class GcResult:
    path: str
    bytes_before: int
    bytes_after: int
    loose_before: int
    loose_after: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "loose_objects_before": self.loose_before,
            "loose_objects_after": self.loose_after,
        }


def repository_size(gitdir: Path) -> tuple[int, int]:
    """(bytes, loose object count) of a git directory, without gitmem's derived state."""
    total = 0
    loose = 0
    state = gitdir / STATE_DIR
    for root, dirs, files in os.walk(gitdir):
        if Path(root) == state:
            dirs.clear()
            continue
        in_objects = Path(root).parent == gitdir / "objects" and len(Path(root).name) == 2
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except FileNotFoundError:
                continue
            if in_objects:
                loose += 1
    return total, loose


def gc(db: GitDB, *, aggressive: bool = False) -> GcResult:
    """Pack the repository with ``git gc`` and report its size before and after."""
    if shutil.which("git") is None:
        raise StoreError(
            "gitmem gc needs the git binary (pygit2 cannot prune loose objects)",
            hint="install git, or run 'git gc' wherever git is available",
        )
    command = ["gc", "--quiet"]
    if aggressive:
        command.append("--aggressive")
    # Under the automatic packer's lock: a helper halfway through a repack would
    # otherwise race this gc (two repacks deleting each other's inputs), and the
    # figures before and after would count its work.
    try:
        with autopack.exclusive(db.gitdir):
            before, loose_before = repository_size(db.gitdir)
            result = run_git(command, gitdir=db.gitdir, check=False)
            after, loose_after = repository_size(db.gitdir)
    except TimeoutError as exc:
        raise StoreError(f"git gc not run: {exc}", hint="try again in a minute") from exc
    if result.returncode != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip()
        raise StoreError(f"git gc failed: {stderr or result.returncode}")
    return GcResult(str(db.gitdir), before, after, loose_before, loose_after)
