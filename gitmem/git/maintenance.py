"""Packing with git's own policy (pygit2 writes every object loose and never packs): after a
write that git's estimate says is due, one detached ``git gc --auto`` holding
``<gitdir>/gitmem/gc.lock``; ``gitmem gc`` runs ``git gc`` under the same lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pygit2

from gitmem.base import logs, paths
from gitmem.base.errors import StoreError
from gitmem.git.command import popen_git, run_git
from gitmem.git.locks import try_flock

log = logs.get(__name__)

GC_AUTO = 512
"""``gc.auto`` of a new store, and where git's config sets none (git's 6,700 lets a young
store grow to many times its text): 5,000 creates within 4x (``python -m bench.writes``:
2.4-2.9x at 512, 4.0-5.4x at 1,024)."""
GC_AUTO_PACK_LIMIT = 20
"""``gc.autoPackLimit`` likewise (git: 50): libgit2 looks a new object up in every pack."""
SAMPLE_DIR = "17"
"""The fan-out folder git counts to estimate the loose objects (``gc.c``)."""


@dataclass(frozen=True)
class GcResult:
    path: str
    bytes_before: int
    bytes_after: int
    loose_objects_before: int
    loose_objects_after: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def configure(config: Any) -> None:
    """Write gitmem's packing thresholds into a new store's git config (a pygit2 Config)."""
    config["gc.auto"] = GC_AUTO
    config["gc.autoPackLimit"] = GC_AUTO_PACK_LIMIT


def thresholds(config: Any) -> tuple[int, int]:
    """(``gc.auto``, ``gc.autoPackLimit``) from git's config, gitmem's defaults where unset."""
    values = []
    for key, default in (("gc.auto", GC_AUTO), ("gc.autoPackLimit", GC_AUTO_PACK_LIMIT)):
        try:
            values.append(config.get_int(key))
        except (KeyError, ValueError, pygit2.GitError):
            values.append(default)
    return values[0], values[1]


def due(gitdir: Path, auto: int, pack_limit: int) -> bool:
    """Whether ``git gc --auto`` would pack, by its own estimate (``gc.c``, need_to_gc)."""
    if auto <= 0:
        return False
    objects = gitdir / "objects"
    try:
        names = os.listdir(objects / SAMPLE_DIR)  # noqa: PTH208 (names only: once a write)
        loose = sum(len(name) == 38 for name in names)
    except OSError:
        loose = 0
    if loose > -(-auto // 256):
        return True
    if pack_limit <= 0:
        return False
    try:
        packs = set(os.listdir(objects / "pack"))  # noqa: PTH208
    except OSError:
        return False
    count = sum(n.endswith(".idx") and f"{n[:-4]}.keep" not in packs for n in packs)
    return count > pack_limit


def after_write(gitdir: Path, config: Any) -> None:
    """Start packing if it is due and nobody packs. Never raises: the write has landed."""
    try:
        auto, pack_limit = thresholds(config)
        if due(gitdir, auto, pack_limit):
            start(gitdir, auto, pack_limit)
    except Exception as exc:
        log.debug("automatic packing not started: %s", exc)


def _lock_fd(gitdir: Path) -> int:
    state = paths.state_dir(gitdir)
    state.mkdir(exist_ok=True)
    return os.open(state / paths.GC_LOCK, os.O_RDWR | os.O_CREAT, 0o600)


def start(gitdir: Path, auto: int, pack_limit: int) -> subprocess.Popen[bytes] | None:
    """One detached ``git gc --auto`` holding the packing lock (an inherited ``flock``,
    released when git and its children exit); None when someone holds the lock."""
    fd = _lock_fd(gitdir)
    try:
        if not try_flock(fd):
            return None
        return popen_git(
            ["gc", "--auto", "--quiet"],
            gitdir=gitdir,
            # The thresholds gitmem decided by, whatever git's own defaults; no gc.log.
            config=[
                ("gc.auto", str(auto)),
                ("gc.autoPackLimit", str(pack_limit)),
                ("gc.autoDetach", "false"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(fd,),
            detached=True,
        )
    finally:
        os.close(fd)  # git holds its own copy; or, when none started, the lock goes


@contextlib.contextmanager
def exclusive(gitdir: Path, timeout: float = 600.0) -> Iterator[None]:
    """Hold the packing lock (``gitmem gc``, doctor's fsck): waits for packing under way,
    and none starts meanwhile. :class:`TimeoutError` if it is still held after ``timeout``."""
    try:
        fd = _lock_fd(gitdir)
    except OSError:
        yield  # a store this user cannot write: nothing of ours packs it either
        return
    try:
        deadline = time.monotonic() + timeout
        while not try_flock(fd):
            if time.monotonic() > deadline:
                raise TimeoutError(f"packing of {gitdir} still running")
            time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def repository_size(gitdir: Path) -> tuple[int, int]:
    """(bytes, loose object count) of a git directory, without gitmem's derived state."""
    total = 0
    loose = 0
    for root, dirs, files in os.walk(gitdir):
        if root == os.fspath(gitdir):  # gitmem's state, and any set aside: not git's
            dirs[:] = [d for d in dirs if d != paths.STATE_DIR and not d.startswith("gitmem.")]
        in_objects = Path(root).parent == gitdir / "objects" and len(Path(root).name) == 2
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except FileNotFoundError:
                continue
            if in_objects:
                loose += 1
    return total, loose


def gc(gitdir: Path) -> GcResult:
    """``git gc`` in the foreground under the packing lock; sizes before and after."""
    try:
        with exclusive(gitdir):
            before, loose_before = repository_size(gitdir)
            result = run_git(["gc", "--quiet"], gitdir=gitdir, check=False)
            if result.returncode != 0 and b"gc is already running" in result.stderr:
                # A detached gc whose starter died outlives our lock: wait, once, until it
                # removes its gc.pid (bounded: git judges a stale one).
                deadline = time.monotonic() + 120
                while (gitdir / "gc.pid").exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
                result = run_git(["gc", "--quiet"], gitdir=gitdir, check=False)
            if result.returncode != 0 and _clear_stale_lock(gitdir, result.stderr):
                result = run_git(["gc", "--quiet"], gitdir=gitdir, check=False)
            after, loose_after = repository_size(gitdir)
    except TimeoutError as exc:
        raise StoreError(f"git gc not run: {exc}", hint="try again in a minute") from exc
    if result.returncode != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip()
        raise StoreError(f"git gc failed: {stderr or result.returncode}")
    return GcResult(str(gitdir), before, after, loose_before, loose_after)


_LOCK_EXISTS = re.compile(rb"Unable to create '([^'\n]+\.lock)': File exists")


def _clear_stale_lock(gitdir: Path, stderr: bytes, seconds: float = 5.0) -> bool:
    """Remove a lock file a killed git left behind (``packed-refs.lock`` of a gc killed mid
    ``pack-refs`` fails every later gc): under the packing lock and with no ``gc.pid`` no gc
    runs, so one that is ``seconds`` old, or still there after as long, is stale. True when
    one was removed."""
    found = _LOCK_EXISTS.search(stderr)
    if found is None or (gitdir / "gc.pid").exists():
        return False
    lock = Path(os.fsdecode(found.group(1)))
    if not lock.resolve().is_relative_to(gitdir.resolve()):
        return False
    deadline = time.monotonic() + seconds
    with contextlib.suppress(FileNotFoundError):
        while time.time() - lock.stat().st_mtime < seconds and time.monotonic() < deadline:
            time.sleep(0.1)
        lock.unlink()
        log.warning("removed %s, left by a git process that was killed", lock)
    return True
