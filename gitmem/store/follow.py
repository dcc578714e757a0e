"""Project memory that follows the code's branches (``gitmem config branches.follow true``):
on code branch B the project store writes to memory branch B, kept merged up to date with
main, and B lands in main when its code does (post-merge hook). The switch is this clone's
own git config (``gitmem.followBranches``), never committed."""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.base import logs, paths
from gitmem.base.errors import GitmemError, InvalidInputError, NotFoundError
from gitmem.format.layout import id_from_path
from gitmem.git.command import run_git
from gitmem.git.db import DEFAULT_BRANCH, GitDB, check_branch_name
from gitmem.git.diff import changed_paths
from gitmem.git.objects import get_commit

if TYPE_CHECKING:  # merging and syncing are loaded only when a branch merges or syncs
    from gitmem.store.branchmerge import TreeMerge
    from gitmem.store.sync import SyncResult

log = logs.get(__name__)

FOLLOW_KEY = "gitmem.followBranches"
MAIN = f"refs/heads/{DEFAULT_BRANCH}"


def follows(repo: pygit2.Repository) -> bool:
    """Whether the store of ``repo`` follows its project's branches."""
    try:
        return bool(repo.config.get_bool(FOLLOW_KEY))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def set_follow(repo: pygit2.Repository, on: bool) -> None:
    repo.config[FOLLOW_KEY] = "true" if on else "false"


def code_repository(store_dir: Path, cwd: Path) -> pygit2.Repository | None:
    """The project checkout at ``cwd`` (a linked work tree has its own HEAD), else the one
    the store sits in."""
    for start in (cwd, store_dir.parent):
        found = pygit2.discover_repository(str(start))
        if found is not None and not Path(found).resolve().is_relative_to(store_dir.resolve()):
            with contextlib.suppress(pygit2.GitError, KeyError):
                return pygit2.Repository(found)
    return None


def default_branch(code: pygit2.Repository) -> str:
    """The project's default branch: what ``origin/HEAD`` names, else main or master."""
    head = code.references.get("refs/remotes/origin/HEAD")
    if head is not None and isinstance(head.target, str):
        return head.target.removeprefix("refs/remotes/origin/")
    return next((b for b in ("main", "master") if f"refs/heads/{b}" in code.references), "main")


def memory_branch(db: GitDB, cwd: Path) -> str | None:
    """The memory branch the project's checkout at ``cwd`` writes to; None: the store's own
    (it does not follow, or the code is on its default branch, detached, or on a branch whose
    name holds a credential, said once)."""
    if not follows(db.repo):
        return None
    code = code_repository(db.path, cwd)
    if code is None:
        return None
    head = code.references.get("HEAD")
    target = head.target if head is not None else None
    if not isinstance(target, str):
        note = paths.state_dir(db.gitdir) / paths.DETACHED_NOTED
        with contextlib.suppress(OSError):
            said = note.read_text() if note.exists() else ""
            if said != f"{code.path} {target}":
                log.warning("the project's HEAD is detached: its memories go to main")
                note.write_text(f"{code.path} {target}")
        return None
    name = target.removeprefix("refs/heads/")
    if name == default_branch(code):
        return None
    try:
        return check_branch_name(name)
    except InvalidInputError:
        log.warning("the project's branch name looks like a credential: not followed, "
                    "its memories go to main")
        return None


def catch_up(db: GitDB) -> None:
    """Bring memory branch ``db`` up to date with main by gitmem's merge (when it exists)."""
    repo = db.repo
    tip, main = _tip(repo, db.ref_name), _tip(repo, MAIN)
    if tip is None or main is None or _contains(repo, tip, main):
        return
    from gitmem.store.branchmerge import integrate

    try:
        integrate(db, get_commit(repo, main), f"{DEFAULT_BRANCH} into {db.branch}")
    except (GitmemError, pygit2.GitError, OSError) as exc:  # a read goes on with it as it is
        log.warning("could not bring %s up to date with %s: %s", db.branch, DEFAULT_BRANCH, exc)


def _tip(repo: pygit2.Repository, name: str) -> pygit2.Oid | None:
    ref = repo.references.get(name)
    return ref.peel(pygit2.Commit).id if ref is not None else None


def _contains(repo: pygit2.Repository, tip: pygit2.Oid, other: pygit2.Oid) -> bool:
    return tip == other or repo.descendant_of(tip, other)


def _names(repo: pygit2.Repository) -> list[str]:
    return sorted(b for b in repo.branches.local if b != DEFAULT_BRANCH)


def land(path: Path, name: str) -> tuple[str, TreeMerge]:
    """Merge memory branch ``name`` into main with gitmem's merge, then delete it: (kind,
    merge), kind none (nothing of its own), fast-forward or merge."""
    from gitmem.store.branchmerge import integrate

    db = GitDB(path, branch=DEFAULT_BRANCH)
    tip = _tip(db.repo, f"refs/heads/{name}")
    if name == DEFAULT_BRANCH or tip is None:
        raise NotFoundError(f"there is no memory branch {name!r}", hint="gitmem branches")
    kind, tm, _, _ = integrate(db, get_commit(db.repo, tip), f"memory branch {name}")
    _delete(db, name, tip)
    return kind, tm


def _delete(db: GitDB, name: str, expected: pygit2.Oid) -> None:
    ref = db.repo.references.get(f"refs/heads/{name}")
    if ref is not None and ref.target == expected:  # not a write that came meanwhile
        ref.delete()
        for stale in paths.state_dir(db.gitdir).glob(paths.index_name(name) + "*"):
            stale.unlink(missing_ok=True)


def _code_tip(code: pygit2.Repository, name: str) -> pygit2.Oid | None:
    """The code branch ``name``'s commit: the local branch, else a remote's."""
    remote = (r for r in code.references
              if r.startswith("refs/remotes/") and r.split("/", 3)[-1] == name)
    found = f"refs/heads/{name}" if f"refs/heads/{name}" in code.references else next(remote, "")
    return _tip(code, found) if found else None


def land_merged(db: GitDB, cwd: Path, before: str | None) -> list[str]:
    """After a merge or pull on the default branch (the post-merge hook): land each memory
    branch whose code branch the merge brought in (in HEAD now, not in ``before``)."""
    code = code_repository(db.path, cwd)
    if before is None or code is None or not follows(db.repo) or code.head_is_detached:
        return []
    if code.head.shorthand != default_branch(code):
        return []
    new, old = code.head.peel(pygit2.Commit).id, pygit2.Oid(hex=before)
    landed = []
    for name in _names(db.repo):
        tip = _code_tip(code, name)
        if tip is not None and _contains(code, new, tip) and not _contains(code, old, tip):
            land(db.path, name)
            landed.append(name)
    return landed


@dataclass
class MemoryBranch:
    """A memory branch and its code branch's state: open, merged (into the default
    branch) or gone (no branch of that name, local or remote)."""

    name: str
    state: str
    memories: int
    """Memories written on it since it left main."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def branches(db: GitDB, cwd: Path) -> list[MemoryBranch]:
    repo, code = db.repo, code_repository(db.path, cwd)
    main = _tip(repo, MAIN)
    out = []
    for name in _names(repo):
        tip = get_commit(repo, repo.references[f"refs/heads/{name}"].peel(pygit2.Commit).id)
        base_id = repo.merge_base(tip.id, main) if main is not None else None
        base = get_commit(repo, base_id).tree if base_id is not None else None
        ids = {id_from_path(p) for p in changed_paths(base, tip.tree)} - {None}
        out.append(MemoryBranch(name, _state(code, name), len(ids)))
    return out


def _state(code: pygit2.Repository | None, name: str) -> str:
    tip = _code_tip(code, name) if code is not None else None
    if code is None or tip is None:
        return "gone"
    default = _code_tip(code, default_branch(code))
    return "merged" if default is not None and _contains(code, default, tip) else "open"


def prune(db: GitDB, cwd: Path, *, apply: bool = False) -> list[MemoryBranch]:
    """The memory branches whose code branch is gone; deleted with ``apply``."""
    gone = [b for b in branches(db, cwd) if b.state == "gone"]
    for branch in gone if apply else ():
        tip = _tip(db.repo, f"refs/heads/{branch.name}")
        if tip is not None:
            _delete(db, branch.name, tip)
    return gone


def sync_all(db: GitDB, remote: str, **options: Any) -> SyncResult:
    """``gitmem sync`` of a store that follows branches: main, then every memory branch
    here and every one on ``remote`` whose code branch is open here and that main does not
    hold yet (a landed branch stays on the hub: sync deletes nothing there)."""
    from gitmem.store.sync import sync

    result = sync(GitDB(db.path, branch=DEFAULT_BRANCH), remote, **options)
    words = run_git(["ls-remote", "--heads", remote], gitdir=db.gitdir, check=False,
                    timeout=600).stdout.decode("utf-8", "replace").split()
    pairs = zip(words[::2], words[1::2], strict=False)
    theirs = {ref.removeprefix("refs/heads/"): oid for oid, ref in pairs}
    code, ours = code_repository(db.path, db.path.parent), _names(db.repo)
    main = _tip(db.repo, MAIN)
    for name in sorted(set(ours) | set(theirs) - {DEFAULT_BRANCH}):
        landed = name in theirs and _holds(db.repo, main, theirs[name])
        if name in ours or (_state(code, name) == "open" and not landed):
            result.others.append(sync(GitDB(db.path, branch=name), remote, **options))
    return result


def _holds(repo: pygit2.Repository, main: pygit2.Oid | None, oid: str) -> bool:
    with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
        return main is not None and _contains(repo, main, pygit2.Oid(hex=oid))
    return False
