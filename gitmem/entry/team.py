"""Joining a team's store: ``gitmem clone`` (a hub's store checked out, merge driver and
hooks installed, index built, recorded as trusted) and ``gitmem join`` (a store the user
has merged into the team's, both histories kept, the team's configuration winning)."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.base.errors import InvalidInputError, OldFormatError, StoreError
from gitmem.format import codec
from gitmem.format.config import FORMAT, StoreConfig
from gitmem.format.layout import CONFIG_FILE
from gitmem.git.command import run_git
from gitmem.git.objects import blob_data
from gitmem.store.index_catchup import Progress

if TYPE_CHECKING:
    from gitmem.store.core import Store
    from gitmem.store.sync import SyncResult

BRANCH = "main"
"""The branch a gitmem store keeps its memories on."""


@dataclass
class CloneResult:
    path: Path
    branch: str
    memories: int = 0
    hooks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def _default_dest(url: str) -> Path:
    name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
    if not name or name in {".", ".."}:
        raise InvalidInputError(f"cannot name a folder after {url!r}; give DIR")
    return Path(name)


def _store_branch(repo: pygit2.Repository, prefix: str, wanted: str | None) -> str:
    """The hub's branch that holds the store (under ``prefix``): ``wanted``, else main,
    else its only branch."""
    branches = sorted(
        name[len(prefix) :]
        for name in repo.references
        if name.startswith(prefix) and not name.endswith("/HEAD")
    )
    if wanted is not None:
        if wanted not in branches:
            raise StoreError(
                f"the hub has no branch {wanted!r} (it has: {', '.join(branches) or 'none'})"
            )
        return wanted
    if BRANCH in branches:
        return BRANCH
    if len(branches) == 1:
        return branches[0]
    if not branches:
        raise StoreError(
            "the hub is empty: there is no store to clone yet",
            hint="push one first: gitmem remote add origin URL && gitmem sync",
        )
    raise StoreError(
        f"the hub has no {BRANCH!r} branch and several others ({', '.join(branches)})",
        hint="name the store's branch with --branch",
    )


def clone(
    url: str,
    dest: str | os.PathLike[str] | None = None,
    *,
    bare: bool = False,
    branch: str | None = None,
    hooks: bool = True,
    progress: Progress | None = None,
) -> CloneResult:
    """Clone the store at ``url`` into ``dest`` (branch ``main``, tracking the hub's) and make
    it ready to use; refused, leaving nothing, when ``dest`` is not empty or the hub holds
    no gitmem store."""
    from gitmem.git import trust
    from gitmem.store.discovery import open_store
    from gitmem.store.mergedriver import register_driver

    target = Path(dest).expanduser() if dest is not None else _default_dest(url)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise StoreError(f"{target} exists and is not empty; gitmem clone wants a new folder")
    made = not target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        args = ["clone", "--quiet", "--no-checkout", *(["--bare"] if bare else [])]
        run_git([*args, "--", url, str(target)], cwd=target.parent, trusted=False)
        # Git wrote this repository's configuration just now, for this user.
        trust.trust(target)
        gitdir = trust.git_dir_of(target)
        repo = pygit2.Repository(str(gitdir))
        prefix = "refs/heads/" if bare else "refs/remotes/origin/"
        source = _store_branch(repo, prefix, branch)
        tip = repo.references[f"{prefix}{source}"].peel(pygit2.Commit)
        try:
            data = blob_data(repo, tip.tree[CONFIG_FILE].id)
        except KeyError:
            raise StoreError(
                f"{url} holds a git repository but not a gitmem store (no gitmem.yaml on "
                f"its branch {source})"
            ) from None
        config = StoreConfig.from_text(codec.decode(data, what=CONFIG_FILE))
        if bare:  # main at the store's tip, HEAD on it
            repo.references.create(f"refs/heads/{BRANCH}", tip.id, force=True)
            repo.set_head(f"refs/heads/{BRANCH}")
        else:
            checkout = ["checkout", "--quiet", "-B", BRANCH, "--track", f"origin/{source}"]
            run_git(checkout, cwd=target, trusted=True)
        if config.format < FORMAT:
            # Kept, checked out by git alone: the clone in which to convert the hub.
            register_driver(target)
            made = False
            raise OldFormatError(
                f"{url} is a format {config.format} store (cloned to {target} by git only); "
                f"this gitmem reads format {FORMAT}",
                hint=f"convert the hub once, for everyone: gitmem --store {target} migrate, "
                f"then git -C {target} push (docs/format.md)",
            )
        result = CloneResult(target, BRANCH)
        store = open_store(target)
        store.reindex(progress=progress)
        # After the checkout: git runs a post-checkout hook that is there when it ends, and
        # writes the branch's upstream into the config the driver's registration writes.
        if hooks and not bare:
            from gitmem.entry.hooks import install

            result.hooks = install(target, "memory").changed
        else:
            register_driver(target)
        # What `gitmem ls` would list, counted by the index without loading every memory.
        result.memories = store.index().count(include_superseded=False, include_archived=False)
        return result
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                shutil.rmtree(target)
        raise


def join(store: Store, url: str, *, remote: str = "origin") -> SyncResult:
    """Bring ``store`` into the team store at ``url`` without losing either history: merge
    the unrelated histories (the team's ``gitmem.yaml`` and ``.gitattributes`` win, every
    memory is kept) and push; ``remote`` is added when missing."""
    from gitmem.store import sync

    db = store.db()
    if remote in sync.remote_names(db):
        configured = db.repo.remotes[remote].url
        if configured != url:
            raise InvalidInputError(
                f"the store's remote {remote!r} is {configured}, not {url}",
                hint="name another remote with --remote",
            )
    else:
        sync.add_remote(db, remote, url)
    return store.sync(remote, join=True)
