"""``gitmem status``: which store(s) are in use and why, and the state of each (branch,
index, hooks, merge driver, waiting forks, write access, author), read without writing
anything and never failing on a damaged piece."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from gitmem.base.errors import GitmemError
from gitmem.format.model import Scope
from gitmem.store.core import Store
from gitmem.store.index_schema import connect
from gitmem.store.reads import index_writable


def index_state(store: Store, scope: Scope, tip: str | None) -> str:
    """current / behind (catches up on the next read) / not built / unreadable: never writes."""
    if not index_writable(store.db(scope)):
        return "not used: the store is read-only for you (reads scan git)"
    index = store.index(scope)
    if not index.path.exists():
        return "not built (built on the next read)"
    try:
        with contextlib.closing(connect(index.path, read_only=True, timeout=5.0)) as conn:
            indexed = dict(conn.execute("SELECT key, value FROM meta")).get("commit") or None
    except Exception as exc:  # a damaged or locked file: say so, status must not fail
        return f"unreadable ({exc}; gitmem reindex rebuilds it)"
    return "current" if indexed == tip else "behind the tip (catches up on the next read)"


def store_status(store: Store, scope: Scope, why: str) -> dict[str, Any]:
    from gitmem.entry import hooks as gh
    from gitmem.store.mergedriver import DRIVER_CONFIG, load_pending

    db = store.db(scope)
    tip = db.tip()
    repo = db.repo
    branch = None if repo.head_is_unborn and tip is None else repo.head.shorthand
    if branch is None:
        with contextlib.suppress(Exception):
            branch = str(repo.references["HEAD"].target).removeprefix("refs/heads/")
    hooks: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # a bare store's hooks dir may be absent
        hooks = {h.name: h.installed for h in gh.status(db.path).hooks}
    # pygit2's Config has no .get
    driver = str(repo.config[DRIVER_CONFIG]) if DRIVER_CONFIG in repo.config else None
    pending: list[str] = []
    with contextlib.suppress(GitmemError):  # an unreadable one: doctor says which
        pending = [p.fork.id for p in load_pending(db.gitdir)]
    tip_id = str(tip.id) if tip is not None else None
    author = db.default_author()
    return {
        "scope": str(scope),
        "path": str(db.path.absolute()),
        "gitdir": str(db.gitdir),
        "bare": db.bare,
        "why": why,
        "branch": branch,
        "tip": tip_id,
        "tip_subject": tip.message.splitlines()[0] if tip is not None and tip.message else None,
        "index": index_state(store, scope, tip_id),
        "hooks": hooks,
        "merge_driver": driver,
        "pending_forks": pending,
        "writable": os.access(db.gitdir, os.W_OK) and not db.read_only,
        "author": f"{author.name} <{author.email}>",
        "git_identity": not author.email.endswith("@gitmem.invalid"),
    }
