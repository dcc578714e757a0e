"""What gitmem keeps under ``<gitdir>/gitmem/`` (or, for a store it may not write, in the
user's own state folder): derived state only, never committed. Every module that keeps a
file there names it here; a folder that is not this git directory's own is set aside.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from pathlib import Path

from gitmem.base import logs
from gitmem.base.errors import StoreError

log = logs.get(__name__)

DEFAULT_BRANCH = "main"
"""The branch a store writes to unless told otherwise; its index is plain ``index.sqlite``."""
STATE_DIR = "gitmem"
"""``<gitdir>/gitmem/``: derived state, never committed."""

WRITE_LOCK = "write.lock"
"""``flock`` that serializes a store's writers (never stale: the kernel drops it)."""
WORKTREE_SYNCED = "worktree-synced"
"""The commit the work tree was last brought up to (a killed writer's next write heals)."""
GC_LOCK = "gc.lock"
"""``flock`` held by the ``git gc`` packing the store and by doctor's fsck: one at a time."""
PENDING_FORKS = "pending-forks"
"""Forks the git merge driver saved during a plain ``git merge``, committed once it lands."""
DETACHED_NOTED = "detached-noted"
"""The detached HEAD of a project following branches that gitmem last said writes to main."""
EDITS = "edits"
"""``gitmem edit``'s unfinished edits: ``<id>.md`` (the text) and ``<id>.base`` (its version)."""
STAMP = "stamp"
"""The folder's stamp: its git directory's device and inode, and its own (:func:`state_dir`)."""
SET_ASIDE = "gitmem.set-aside-"
"""Name prefix of a state folder set aside unread (``gitmem doctor`` names what it holds)."""
INDEX_DB = "index.sqlite"
"""The derived SQLite index of the branch ``main`` (WAL mode)."""
DERIVED_COPIES = ("index*.sqlite*", "lifecycle-named.sqlite*", "doctor-*")
"""What in the state folder copies memory text, which ``gitmem purge`` deletes."""


def state_dir(gitdir: str | os.PathLike[str]) -> Path:
    """``<gitdir>/gitmem/``, made when missing (a store this user cannot write: a folder in
    the user's own state folder). One whose stamp names another git directory or folder (a
    copy, clone or extract) is set aside unread, with a warning; StoreError when it cannot be."""
    git_dir = Path(gitdir)
    folder = git_dir / STATE_DIR
    try:
        owned = git_dir.stat().st_uid == os.geteuid()
    except OSError:
        owned = False
    for _ in range(3 if owned else 0):  # a concurrent gitmem may make the folder meanwhile
        verdict = _verdict(git_dir, folder)
        if verdict == "own" and os.access(folder, os.W_OK):
            return folder
        if verdict == "own" or not os.access(git_dir, os.W_OK):
            break
        if verdict == "foreign":
            _set_aside(git_dir, folder)
        _make(git_dir, folder)
    digest = hashlib.sha256(os.fsencode(git_dir.resolve())).hexdigest()[:32]
    mine = user_dir("state") / "stores" / digest
    with contextlib.suppress(OSError):
        mine.mkdir(parents=True, exist_ok=True, mode=0o700)
    return mine


def set_aside_folders(gitdir: str | os.PathLike[str]) -> list[Path]:
    """The state folders set aside in ``gitdir``, oldest first."""
    try:
        return sorted(p for p in Path(gitdir).iterdir() if p.name.startswith(SET_ASIDE))
    except OSError:
        return []


def held(folder: Path) -> list[str]:
    """What a set-aside state folder holds, by file name alone (nothing in it is read):
    ``"2 unfinished edits (mem_a, mem_b)"``, ``"1 pending fork"``, ``"an index"``..."""
    out: list[str] = []
    edits = sorted({n.rsplit(".", 1)[0] for n in _names(folder / EDITS) if n.endswith(".md")})
    if edits:
        out.append(f"{_count(len(edits), 'unfinished edit')} ({', '.join(edits)})")
    forks = [n for n in _names(folder / PENDING_FORKS) if n.endswith(".json")]
    if forks:
        out.append(_count(len(forks), "pending fork"))
    if any(n.startswith("index") and n.endswith(".sqlite") for n in _names(folder)):
        out.append("an index")
    return out


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _names(folder: Path) -> list[str]:
    try:
        return [p.name for p in folder.iterdir()] if stat.S_ISDIR(folder.lstat().st_mode) else []
    except OSError:
        return []


def _stamp_text(gitdir: os.stat_result, folder: os.stat_result) -> bytes:
    return f"gitmem state {gitdir.st_dev} {gitdir.st_ino} {folder.st_ino}\n".encode()


def _verdict(gitdir: Path, folder: Path) -> str:
    """"own", "missing" or "foreign"."""
    try:
        found = os.lstat(folder)
    except FileNotFoundError:
        return "missing"
    if not stat.S_ISDIR(found.st_mode):
        return "foreign"  # a link (to anywhere) or a file where the folder should be
    try:
        fd = os.open(f"{folder}/{STAMP}", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "foreign"
    try:
        text = os.read(fd, 200) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    finally:
        os.close(fd)
    return "own" if text == _stamp_text(gitdir.stat(), found) else "foreign"


def _make(gitdir: Path, folder: Path) -> None:
    """Make ``folder`` stamped, under another name first so no gitmem sees it unstamped."""
    tmp = gitdir / f"{STATE_DIR}.new-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        tmp.mkdir()
    except OSError:
        return  # the caller finds it still missing, and uses the user's own folder
    (tmp / STAMP).write_bytes(_stamp_text(gitdir.stat(), tmp.lstat()))
    try:
        tmp.rename(folder)
    except OSError:  # another gitmem made it first: keep theirs
        (tmp / STAMP).unlink()
        tmp.rmdir()


def _set_aside(gitdir: Path, folder: Path) -> None:
    moment = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = gitdir / f"{SET_ASIDE}{moment}-{os.urandom(3).hex()}"
    try:
        folder.rename(target)
    except FileNotFoundError:
        return  # another gitmem set it aside first
    except OSError as exc:
        raise StoreError(
            f"{folder} was not made for this git directory, so gitmem does not read it, "
            f"and it cannot be set aside ({exc.strerror})",
            hint=f"move it out of the way: mv {folder} {target}",
        ) from None
    if _verdict(gitdir, target) == "own":
        # Made by a concurrent gitmem after this one looked: it is this store's after all.
        with contextlib.suppress(OSError):
            target.rename(folder)
        return
    what = held(target)
    log.warning(
        "%s was not made for this git directory (it came with a copy, clone or extract, "
        "or predates gitmem's stamps); set aside unread as %s%s, and the index is rebuilt "
        "from git (gitmem doctor names it)",
        folder,
        target.name,
        f", holding {'; '.join(what)}" if what else "",
    )


def user_dir(kind: str) -> Path:
    """The user's own ``"cache"`` or ``"state"`` folder, outside every store
    (``$XDG_<KIND>_HOME/gitmem``, else ``~/.cache/gitmem`` or ``~/.local/state/gitmem``)."""
    xdg = os.environ.get(f"XDG_{kind.upper()}_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "gitmem"
    return Path.home() / (".cache" if kind == "cache" else ".local/state") / "gitmem"


def index_name(branch: str) -> str:
    """The index file's name for ``branch`` (``index@<branch>.sqlite``; main's ``index.sqlite``)."""
    return INDEX_DB if branch == DEFAULT_BRANCH else f"index@{branch.replace('/', '%2F')}.sqlite"


def edit_files(gitdir: str | os.PathLike[str], memory_id: str) -> tuple[Path, Path]:
    """Where ``gitmem edit`` keeps an unfinished edit of ``memory_id``: (text, base version)."""
    edits = state_dir(gitdir) / EDITS
    return edits / f"{memory_id}.md", edits / f"{memory_id}.base"
