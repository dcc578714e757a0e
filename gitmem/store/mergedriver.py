"""gitmem as git's merge driver: a memory file merged inside a plain ``git merge``
(``gitmem merge-driver %O %A %B %P``, registered by :func:`register_driver`),
each side's derived version found from the merge in progress, and the forks it cannot write
into one file saved until a commit takes them (``commit_pending_forks``)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitmem.base import paths
from gitmem.base.errors import InvalidInputError, StoreError
from gitmem.format.layout import id_from_path
from gitmem.git.command import run_git
from gitmem.git.diff import blob_at
from gitmem.git.localconfig import read_limit
from gitmem.store.memory_versions import Versions
from gitmem.store.memory_versions import walk as versions_at
from gitmem.store.merge import DerivedSides, Fork, merge_file

DRIVER_CONFIG = "merge.gitmem.driver"

PENDING_DIR = paths.PENDING_FORKS
"""Forks made by the git merge driver wait in ``<gitdir>/gitmem/pending-forks/`` until a
gitmem command commits them (a driver can only write the one file git asks it for)."""


def run_driver(
    base_file: str, ours_file: str, theirs_file: str, path: str, *, cwd: Path | None = None
) -> int:
    """``gitmem merge-driver %O %A %B %P``: the merged memory written to ``%A``, a fork saved
    under :data:`PENDING_DIR` for the next sync, conflicts or resolve; a file that is not a
    memory gets ``git merge-file``. Returns git's exit code."""
    if id_from_path(path) is not None:
        where = cwd or Path.cwd()
        try:
            gitdir: str | Path = open_repo(where).path
        except StoreError:  # run by hand outside a repository: the built-in bound
            gitdir = where
        limit = read_limit(gitdir)
        if any(Path(f).stat().st_size > limit for f in (base_file, ours_file, theirs_file)):
            # Never read: ours stays, and git reports the path as conflicted.
            sys.stderr.write(f"gitmem: {path} is over the read limit of {limit}: kept ours\n")
            return 1
    base = Path(base_file).read_bytes()
    ours = Path(ours_file).read_bytes()
    theirs = Path(theirs_file).read_bytes()
    if id_from_path(path) is None:
        # merge-file reads no repository settings; it runs under the one git policy anyway.
        result = run_git(
            [
                *("merge-file", "-L", "ours", "-L", "base", "-L", "theirs", "--"),
                *(ours_file, base_file, theirs_file),
            ],
            cwd=cwd,
            check=False,
            trusted=True,
        )
        if result.stderr:
            sys.stderr.write(result.stderr.decode("utf-8", "replace"))
        return 1 if result.returncode != 0 else 0
    # git passes an empty file for a missing base (an add/add): no memory is empty.
    sides = driver_sides(cwd or Path.cwd(), path, ours, theirs)
    outcome = merge_file(path, base or None, ours, theirs, derived=sides)
    if outcome.data is not None:
        Path(ours_file).write_bytes(outcome.data)
    if outcome.forks:
        gitdir = open_repo(cwd or Path.cwd()).path
        kept = str(pygit2.hash(outcome.data or b""))
        for fork in outcome.forks:
            save_pending(Path(gitdir), fork, path, kept, sides.theirs_commit if sides else None)
        print(
            f"gitmem: {path}: both sides changed the same lines; kept "
            f"{', '.join(f.id for f in outcome.forks)} as a fork (see gitmem conflicts)",
            file=sys.stderr,
        )
    if outcome.conflict is not None:
        print(f"gitmem: {outcome.conflict}", file=sys.stderr)
        return 1
    return 0


_SIDE_FILES = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REBASE_HEAD")
_HEX_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SHORT_HEX_RE = re.compile(r"[0-9a-f]{7,64}")


def _named(repo: pygit2.Repository, name: str) -> pygit2.Commit | None:
    try:
        commit: pygit2.Commit = repo.revparse_single(name).peel(pygit2.Commit)
        return commit
    except (ValueError, KeyError, pygit2.GitError, pygit2.InvalidSpecError):
        return None


def _theirs_candidates(repo: pygit2.Repository) -> list[tuple[str, bool]]:
    """Commit ids git names for the other side, each with whether it is merged (not
    replayed): ``GITHEAD_<id>`` (set by ``git merge`` while the driver runs), the
    ``*_HEAD`` files, the commit a rebase replays. Each is a candidate (:func:`driver_sides`)."""
    out = [
        (key[len("GITHEAD_") :], True)
        for key in sorted(os.environ)
        if key.startswith("GITHEAD_") and _HEX_RE.fullmatch(key[len("GITHEAD_") :])
    ]
    gitdir = Path(repo.path)
    for name in _SIDE_FILES:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            words = (gitdir / name).read_text().split()
            out += [(x, name == "MERGE_HEAD") for x in words if _HEX_RE.fullmatch(x)]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        # A rebase names the commit it is replaying only as the last line of its done list
        # ("pick <id> subject"), possibly abbreviated.
        done = (gitdir / "rebase-merge" / "done").read_text().splitlines()
        words = done[-1].split() if done else []
        if len(words) > 1 and _SHORT_HEX_RE.fullmatch(words[1]):
            out.append((words[1], False))
    return out


def driver_sides(cwd: Path, path: str, ours: bytes, theirs: bytes) -> DerivedSides | None:
    """What the driver knows of the sides' histories (None: not in a repository): ours is HEAD,
    theirs a commit git names (:func:`_theirs_candidates`), each only when its blob at ``path``
    is that side's file byte for byte (a stale ``*_HEAD`` lends no history); else None."""
    try:
        repo = pygit2.Repository(os.fspath(cwd))
    except (pygit2.GitError, KeyError):
        return None
    head = _named(repo, "HEAD")
    ours_commit = head if head is not None and _holds(head, path, ours) else None
    theirs_commit, merged = None, False
    for candidate, merging in _theirs_candidates(repo):
        commit = _named(repo, candidate)
        if commit is not None and _holds(commit, path, theirs):
            theirs_commit, merged = commit, merging
            break
    return DerivedSides(
        ours=_versions(repo, ours_commit, path),
        theirs=_versions(repo, theirs_commit, path),
        theirs_commit=str(theirs_commit.id) if theirs_commit is not None and merged else None,
    )


def _versions(repo: pygit2.Repository, commit: pygit2.Commit | None, path: str) -> Versions | None:
    found = versions_at(repo, commit, [path]) if commit is not None else None
    return found[path] if found is not None else None


def _holds(commit: pygit2.Commit, path: str, data: bytes) -> bool:
    return blob_at(commit.tree, path) == pygit2.hash(data)


@dataclass(frozen=True)
class PendingFork:
    fork: Fork
    path: str
    """The memory path the other side kept."""
    kept_blob: str
    """The blob the driver wrote at ``path``: once the branch has it there, the merge landed
    (where git named no commit for theirs)."""
    file: Path
    theirs: str | None = None
    """The commit git merged (:attr:`DerivedSides.theirs_commit`), when it named one."""


def pending_dir(gitdir: Path) -> Path:
    return paths.state_dir(gitdir) / PENDING_DIR


def save_pending(
    gitdir: Path, fork: Fork, path: str, kept_blob: str, theirs: str | None = None
) -> None:
    directory = pending_dir(gitdir)
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "id": fork.id,
        "of": fork.of,
        "fork_path": fork.path,
        "path": path,
        "kept_blob": kept_blob,
        "theirs": theirs,
        "data": base64.b64encode(fork.data).decode("ascii"),
    }
    name = hashlib.sha1(fork.id.encode()).hexdigest() + ".json"
    tmp = directory / f".{name}.tmp"
    tmp.write_text(json.dumps(record))
    tmp.replace(directory / name)


def load_pending(gitdir: Path) -> list[PendingFork]:
    directory = pending_dir(gitdir)
    if not directory.is_dir():
        return []
    out: list[PendingFork] = []
    for file in sorted(directory.glob("*.json")):
        try:
            record = json.loads(file.read_text())
            fork = Fork(
                record["id"], record["of"], record["fork_path"], base64.b64decode(record["data"])
            )
            theirs = record.get("theirs") if isinstance(record.get("theirs"), str) else None
            out.append(PendingFork(fork, record["path"], record["kept_blob"], file, theirs))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"unreadable pending fork {file}: {exc}") from None
    return out


def driver_command(python: str | None = None) -> str:
    """The ``merge.gitmem.driver`` command line. git single-quotes ``%P`` itself (ll-merge.c
    ``sq_quote_buf``), so it is not quoted again; ``%O``/``%A``/``%B`` are git's temp files."""
    from gitmem.git.command import gitmem_command

    return f"{gitmem_command(python)} merge-driver %O %A %B %P"


def open_repo(repo_path: str | os.PathLike[str]) -> pygit2.Repository:
    from gitmem.git.trust import open_repository

    try:
        return open_repository(repo_path)[0]  # another user's store the user named, too
    except (pygit2.GitError, KeyError):
        raise StoreError(f"{os.fspath(repo_path)} is not a git repository") from None


# In ``<gitdir>/info/attributes``, which beats every ``.gitattributes``: a pushed one may
# name another merge driver, a filter or an encoding for the memory files, never more.
INFO_ATTRIBUTES = "*.md merge=gitmem -filter -ident -working-tree-encoding -export-subst\n"


def _info_attributes(repo: pygit2.Repository) -> Path:
    return Path(repo.path) / "info" / "attributes"


def driver_registered(repo_path: str | os.PathLike[str]) -> bool:
    """Whether git in this repository would run gitmem's merge driver for ``*.md``."""
    repo = open_repo(repo_path)
    try:
        value = str(repo.config[DRIVER_CONFIG])
        attributes = _info_attributes(repo).read_text("utf-8", "replace")
    except (KeyError, pygit2.GitError, OSError):
        return False
    return "merge-driver" in value and "gitmem" in value and INFO_ATTRIBUTES in attributes


def register_driver(repo_path: str | os.PathLike[str], python: str | None = None) -> None:
    """Register the driver in the repository's own git config: git never copies config to a
    clone, so ``gitmem init``, ``hooks install`` and ``sync`` set it."""
    repo = open_repo(repo_path)
    repo.config["merge.gitmem.name"] = "gitmem memory-aware merge"
    repo.config[DRIVER_CONFIG] = driver_command(python)
    info = _info_attributes(repo)
    try:
        kept = info.read_text("utf-8", "replace")
    except FileNotFoundError:
        kept = ""
    if INFO_ATTRIBUTES not in kept:
        info.parent.mkdir(parents=True, exist_ok=True)
        info.write_text(kept + ("\n" if kept and not kept.endswith("\n") else "") + INFO_ATTRIBUTES)
