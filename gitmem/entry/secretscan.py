"""``gitmem secrets``: credentials in files, in staged files, in a store, or in its history.

The scanning behind the command (the store refuses credentials on every write; this
finds what got in by other roads: hand commits, files outside the store, old history).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from gitmem.base.errors import StoreError
from gitmem.entry import hookrun
from gitmem.entry.doctor_context import Context
from gitmem.entry.doctor_memories import memory_secrets
from gitmem.format import secrets as secrets_mod
from gitmem.git.command import run_git
from gitmem.git.objects import get_commit
from gitmem.store.core import Store


@dataclass(frozen=True)
class FileFinding:
    """A credential found in a file (or a staged file, or a memory); in history, with the
    commit that introduced it and whether a branch tip still holds that file content."""

    path: str
    finding: secrets_mod.SecretFinding
    commit: str | None = None
    present: bool = True

    def to_dict(self) -> dict[str, Any]:
        found = {"path": secrets_mod.redact(self.path), **self.finding.to_dict()}
        if self.commit is None:
            return found
        return {"commit": self.commit, **found, "present": self.present}

    def line(self) -> str:
        path = secrets_mod.redact(self.path)  # a file named after a token is not printed either
        text = f"{path}:{self.finding.line}: {self.finding.kind}: {self.finding.excerpt}"
        if self.commit is None:
            return text
        return f"{self.commit[:10]} {text}" + ("" if self.present else " (history only)")


MAX_SCAN_BYTES = 16 * 1024 * 1024
"""Files larger than this are skipped by ``gitmem secrets PATH``: not memories or notes."""


def scan_paths(paths: Sequence[str | os.PathLike[str]]) -> list[FileFinding]:
    """Credentials in these files (directories: every file below, ``.git`` skipped);
    symbolic links are not followed, so a link cannot make the scan read outside."""
    out: list[FileFinding] = []
    for given in paths:
        if not os.fspath(given):
            raise StoreError("an empty PATH names no file (give . for the current folder)")
        root = Path(given)
        if not root.exists() and not root.is_symlink():
            raise StoreError(f"{root}: no such file or directory")
        for path in _files(root):
            try:
                if path.lstat().st_size > MAX_SCAN_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue  # binary
            out.extend(FileFinding(str(path), f) for f in secrets_mod.scan_bytes(data))
    return out


def _files(root: Path) -> Iterator[Path]:
    if root.is_symlink():
        return
    if root.is_file():
        yield root
        return
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            path = Path(directory) / name
            if not path.is_symlink() and path.is_file():
                yield path


def scan_staged(repo: str | os.PathLike[str] = ".") -> list[FileFinding]:
    """Credentials in the files staged in the git repository at ``repo`` (its index)."""
    cwd = Path(repo)
    names = run_git(
        ["diff", "--cached", "--name-only", "-z", "--diff-filter=ACMR"], cwd=cwd, check=False
    )
    if names.returncode != 0:
        message = names.stderr.decode("utf-8", "replace").strip().splitlines()
        raise StoreError(
            f"{cwd.resolve()} is not a git repository" + (f" ({message[-1]})" if message else ""),
        )
    policy = hookrun.staged_policy(str(cwd))
    out: list[FileFinding] = []
    for name in filter(None, names.stdout.decode("utf-8", "surrogateescape").split("\0")):
        blob = run_git(["cat-file", "blob", f":{name}"], cwd=cwd, check=False)
        if blob.returncode != 0 or b"\0" in blob.stdout[:8192]:
            continue
        out.extend(FileFinding(name, f) for f in secrets_mod.scan_bytes(blob.stdout, policy))
    return out


def scan_store(store: Store) -> list[FileFinding]:
    """Credentials in the memories of ``store`` as committed."""
    out: list[FileFinding] = []
    for each in store.scopes:
        ctx = Context(store, store.db(each), each)
        try:
            for entry, findings in memory_secrets(ctx):
                out.extend(FileFinding(entry.path or entry.id, f) for f in findings)
        finally:
            ctx.close()  # the scratch index a disagreeing one made
    return out


MESSAGE_PATH = "(commit message)"


def scan_history(store: Store) -> list[FileFinding]:
    """Credentials anywhere in the store's history (what ``gitmem purge`` must remove): every
    blob reachable from a branch, remote-tracking branch or tag, scanned once and reported
    at the commit that introduced it, and every commit message."""
    from gitmem.features.purge import new_blobs, text_blob

    out: list[FileFinding] = []
    for each in store.scopes:
        repo = store.db(each).repo
        policy = secrets_mod.policy_from_config(store.config(each).raw)
        tips: dict[pygit2.Oid, None] = {}  # every local and remote-tracking branch and tag
        for name in repo.references:
            if name.startswith(("refs/heads/", "refs/remotes/", "refs/tags/")):
                # Not a symbolic HEAD, a tag of a tree, a ref to a missing object.
                with contextlib.suppress(pygit2.GitError, KeyError, ValueError):
                    tips[repo.references[name].peel(pygit2.Commit).id] = None
        present: set[pygit2.Oid] = set()
        for tip in tips:
            for _ in new_blobs(repo, get_commit(repo, tip).tree, present):
                pass
        walker = repo.walk(None, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
        for tip in tips:
            walker.push(tip)
        seen: set[pygit2.Oid] = set()
        for commit in walker:
            hexsha = str(commit.id)
            out.extend(FileFinding(MESSAGE_PATH, f, hexsha) for f in policy.scan(commit.message))
            for oid, path in new_blobs(repo, commit.tree, seen):
                data = text_blob(repo, oid, MAX_SCAN_BYTES)
                found = secrets_mod.scan_memory_bytes(data, policy) if data is not None else []
                out.extend(FileFinding(path, f, hexsha, oid in present) for f in found)
    return out
