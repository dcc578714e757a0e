"""Finding and making stores (``gitmem.open()``, ``gitmem.init()``): ``$GITMEM_DIR``, the
project's ``.gitmem/`` found walking up, the user store; a new one gets its merge driver and
trust record."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from pathlib import Path

import pygit2

from gitmem.base import logs
from gitmem.base.clock import Clock
from gitmem.base.errors import GitmemError, StoreError
from gitmem.base.trailers import OP_TRAILER, CommitSpec
from gitmem.format import codec
from gitmem.format.config import ATTRIBUTES_TEXT, FORMAT, StoreConfig, initial_text
from gitmem.format.layout import ATTRIBUTES_FILE, CONFIG_FILE
from gitmem.format.model import Op, Scope
from gitmem.git import localconfig, maintenance, trust
from gitmem.git.db import GitDB
from gitmem.git.objects import Snapshot
from gitmem.store import follow
from gitmem.store.core import Store
from gitmem.store.locations import find_project_store, is_store, user_store_path
from gitmem.store.transactions import Backend

log = logs.get(__name__)


def _open_backend(
    path: Path,
    *,
    clock: Clock | None,
    durable: bool,
    branch: str | None = None,
    any_format: bool = False,
    lazy: bool = False,
) -> Backend:
    db = GitDB(path, clock=clock, durable=durable, branch=branch, lazy=lazy)
    _refuse_foreign_worktree(path, db)
    _refuse_foreign_alternates(path, db)
    snap = db.snapshot()
    data = snap.read(CONFIG_FILE)
    if data is None:
        if snap.commit is None:
            raise StoreError(
                f"{path} is an empty git repository, not a gitmem store", hint="run gitmem init"
            )
        raise StoreError(
            f"{path} is a git repository but not a gitmem store (no {CONFIG_FILE})",
            hint="run gitmem init in an empty directory",
        )
    config = localconfig.with_store_settings(
        StoreConfig.from_text(codec.decode(data, what=CONFIG_FILE)), db.gitdir
    )
    if not (any_format and config.format < FORMAT):
        config.check_supported(str(path))
    return Backend(config.scope, db, config)


def _refuse_foreign_worktree(path: Path, db: GitDB) -> None:
    """A store's work tree is its own directory (or none). ``core.worktree`` in a store's
    git config can point anywhere, and gitmem writes memory files into the work tree: in a
    store the user does not trust, that setting came from someone else."""
    target = path.expanduser().resolve()
    if target.name == ".git":
        expected: Path | None = target.parent
    else:
        expected = target if (target / ".git").exists() else None
    actual = db.workdir.resolve() if db.workdir is not None else None
    if actual == expected or trust.is_trusted(path):
        return
    raise StoreError(
        f"{path}'s git config puts its work tree at {actual or 'none'} (core.worktree); "
        "gitmem writes memory files there, so it does not follow that for a store you have "
        "not trusted",
        hint=f"if the setting is yours: gitmem trust {path}",
    )


def _refuse_foreign_alternates(path: Path, db: GitDB) -> None:
    """Refuse (unless trusted) a store whose ``objects/info/alternates`` names another repository:
    a ref could name a commit only that repository holds, and sync would push it. Checked
    before any object is read (libgit2 loads the file on the first read)."""
    alternates = db.gitdir / "objects" / "info" / "alternates"
    try:
        if stat.S_ISREG(alternates.stat().st_mode):
            # Bounded: the file is the store's, and only whether it names anything matters.
            with alternates.open("rb") as fh:
                lines = fh.read(65536).decode("utf-8", "replace").splitlines()
            if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
                return
        # Anything else there (a FIFO would block the read) is refused unread.
    except OSError:
        return  # none (or unreadable, and then git cannot use it either)
    if trust.is_trusted(path):
        return
    raise StoreError(
        f"{path} reads objects from another repository ({alternates}); gitmem does not "
        "use that for a store you have not trusted",
        hint=f"if the setting is yours: gitmem trust {path}; or make the store "
        "self-contained: git repack -a -d, then remove that file",
    )


def git_top(start: Path) -> Path | None:
    """The work tree of the git repository around ``start``, if any (``init --project``)."""
    found = pygit2.discover_repository(str(start))
    if found is None:
        return None
    workdir = pygit2.Repository(found).workdir
    return Path(workdir) if workdir else None


def _record_trust(target: Path) -> None:
    """The user made this store: its git configuration is theirs (see gitmem.git.trust)."""
    try:
        trust.trust(target)
    except (OSError, GitmemError) as exc:
        log.warning(
            "could not record %s as trusted (%s); gitmem treats it as untrusted "
            "until 'gitmem trust %s' succeeds",
            target,
            exc,
            target,
        )


def init_store(
    path: str | os.PathLike[str],
    *,
    bare: bool = False,
    scope: Scope | str = Scope.REPO,
    clock: Clock | None = None,
    durable: bool = False,
) -> Store:
    """Create a store at ``path`` (a new or empty directory) and return it opened.

    Initialising an existing gitmem store is harmless: it is opened as it is.
    """
    target = Path(path).expanduser()
    scope = Scope(scope)
    if is_store(target):
        with contextlib.suppress(StoreError):
            store = Store([_open_backend(target, clock=clock, durable=durable)], clock=clock)
            # A clone made with plain git has no merge.gitmem.driver (git never copies
            # config): `gitmem init` in it registers the driver, and changes nothing else.
            from gitmem.store.mergedriver import driver_registered, register_driver

            if not driver_registered(target):
                register_driver(target)
            return store
    if target.exists() and any(target.iterdir()) and not is_store(target):
        raise StoreError(
            f"{target} exists and is not empty; gitmem init wants a new or empty directory"
        )
    target.mkdir(parents=True, exist_ok=True, mode=0o700 if scope is Scope.USER else 0o777)
    if scope is Scope.USER:
        # A user store holds one person's memories: owner only, also when the (empty)
        # directory was there before and mkdir's mode did not apply.
        target.chmod(0o700)
    repo = pygit2.init_repository(str(target), bare=bare, initial_head="main")
    repo.config["gitmem.format"] = "1"
    maintenance.configure(repo.config)
    _record_trust(target)
    # .gitattributes says *.md merge=gitmem; git only runs the driver once this names it.
    from gitmem.store.mergedriver import register_driver

    register_driver(target)
    db = GitDB(target, clock=clock, durable=durable)

    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        snap.put(CONFIG_FILE, initial_text(scope).encode())
        snap.put(ATTRIBUTES_FILE, ATTRIBUTES_TEXT.encode())
        return CommitSpec(subject="init: gitmem store", trailers=[(OP_TRAILER, str(Op.INIT))]), None

    if db.tip() is None:
        db.write(plan)
    return Store([_open_backend(target, clock=clock, durable=durable)], clock=clock)


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    clock: Clock | None = None,
    durable: bool = False,
    cwd: str | os.PathLike[str] | None = None,
    branch: str | None = None,
    use_index: bool = True,
    any_format: bool = False,
) -> Store:
    """Open a store: ``path``, else ``$GITMEM_DIR``, else the project's ``.gitmem/`` found walking
    up from ``cwd`` (with the user store beside it), else the user store (made on first use).
    ``branch``: that branch instead (made from main; a proposal to review); a project store
    following its code's branches opens the checkout's memory branch (:mod:`.follow`).
    ``use_index=False``: every read from git (doctor); ``any_format``: an older format too."""
    path = path if path is not None else os.environ.get("GITMEM_DIR") or None
    opened = functools.partial(_open_backend, clock=clock, durable=durable, any_format=any_format)
    if path is not None:
        target = Path(path).expanduser()
        if not target.exists():
            raise StoreError(f"no store at {target}", hint=f"create it with: gitmem init {target}")
        trust.name(target)  # another user's store, named: read (gitmem.git.trust)
        return Store([opened(target, branch=branch)], clock=clock, use_index=use_index)
    user_path = user_store_path()
    here = Path(cwd) if cwd is not None else Path.cwd()
    project = find_project_store(here)
    if project is not None:
        _refuse_committed_store(project)
        backends = [opened(project, branch=branch)]
        followed = follow.memory_branch(backends[0].db, here) if branch is None else None
        if followed is not None:  # the project's code branch: see gitmem.store.follow
            backends[0] = opened(project, branch=followed, lazy=True)
            follow.catch_up(backends[0].db)
        if is_store(user_path) and user_path.resolve() != project.resolve():
            with contextlib.suppress(StoreError):
                backends.append(opened(user_path))
        return Store(backends, clock=clock, use_index=use_index)
    if not is_store(user_path):
        init_store(user_path, scope=Scope.USER, clock=clock, durable=durable)
    return Store([opened(user_path, branch=branch)], clock=clock, use_index=use_index)


def committed_in_project(store_dir: Path) -> Path | None:
    """The top of the enclosing project when it tracks ``store_dir`` (committed or staged):
    the store's git configuration and hooks then came from the project's author."""
    try:
        found = pygit2.discover_repository(str(store_dir.parent))
        if found is None:
            return None
        project = pygit2.Repository(found)
    except (pygit2.GitError, KeyError, OSError):
        return None
    if project.is_bare:
        return None
    top = Path(project.workdir).resolve()
    try:
        rel = store_dir.resolve().relative_to(top).as_posix()
    except ValueError:
        return None
    with contextlib.suppress(pygit2.GitError, KeyError, ValueError, AttributeError):
        tree = project.head.peel(pygit2.Tree)
        tree[rel]  # a KeyError when the project does not track it
        return top
    with contextlib.suppress(pygit2.GitError, KeyError, ValueError, OSError):
        index = project.index
        if any(f"{rel}/{name}" in index for name in ("HEAD", "config")) or rel in index:
            return top
    return None


def _refuse_committed_store(store_dir: Path) -> None:
    top = committed_in_project(store_dir)
    if top is None or trust.is_trusted(store_dir):
        return
    raise StoreError(
        f"{store_dir} is committed in the project at {top}, so its git settings and hooks "
        "come from the project's author; gitmem does not use it unasked",
        hint=(
            f"name it with --store {store_dir} (git then runs without its settings), "
            f"or trust its author: gitmem trust {store_dir}"
        ),
    )


def init_project_store(project: str | os.PathLike[str], *, clock: Clock | None = None) -> Store:
    """Create ``<project>/.gitmem/`` and exclude it in the project's ``.git/info/exclude``."""
    root = Path(project).resolve()
    try:
        project_repo = pygit2.Repository(str(root), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    except (pygit2.GitError, KeyError):
        raise StoreError(
            f"{root} is not the top of a git repository",
            hint="run gitmem init --project at the root of a project repository",
        ) from None
    store = init_store(root / ".gitmem", scope=Scope.REPO, clock=clock)
    exclude = Path(project_repo.path) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude.read_text() if exclude.exists() else ""
    if not any(
        line.strip() in {".gitmem", ".gitmem/", "/.gitmem", "/.gitmem/"}
        for line in existing.splitlines()
    ):
        with open(exclude, "a") as fh:
            if existing and not existing.endswith("\n"):
                fh.write("\n")
            fh.write("# gitmem: the project's memory store is a repository of its own\n/.gitmem/\n")
    return store
