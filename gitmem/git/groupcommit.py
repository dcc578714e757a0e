"""Group commit for bare stores: one writer moves the branch for everyone waiting.

With compare-and-swap alone, N writers racing for one branch mostly lose: each loser
has built a tree and a commit for nothing, and runs its whole plan again. Here a writer
runs its plan on the tip it read (in parallel with the others), writes its blobs, and
then either

- takes ``<gitdir>/gitmem/commit.lock`` (an ``flock``) at once and becomes the *leader*:
  it commits its own change and every request queued in ``<gitdir>/gitmem/commitq/``
  as a chain of commits (one commit and one author per write, in queue order) and moves
  the branch once, with compare-and-swap as before; or
- queues a *request* (the tip it read, what its plan read of it, the blob ids of its
  changes, its commit message, author and time) and waits until a leader has written
  its *result*, or the lock is free and it leads itself.

A queued change goes onto the chain only if every path its plan looked up (and every
case-twin question it asked) reads the same on the chain's head as on the tip the plan
ran on, so the commit is the one the plan would have made there; otherwise its result
is ``retry`` and its writer runs the plan again on the new tip, in its own process, so
its errors reach its own caller only. A write is acknowledged ("ok <commit>") only
after the branch points at a chain holding its commit.

Crash safety: a leader renames each request it takes (``.req`` to ``.claimed``) and,
before moving the branch for a chain that holds others' requests, journals the chain
(``batch``: request id -> commit). The lock dies with its holder; the next leader reads
the journal, acknowledges what reached the branch, and processes every other claimed
request again. A writer that gives up waiting removes its ``.req`` file only if no
leader has claimed it, so a write is never both reported failed and committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.base import logs, paths
from gitmem.base.errors import ConflictError
from gitmem.git.locks import pid_alive, temp_path, try_flock

if TYPE_CHECKING:
    from gitmem.git.db import GitDB

log = logs.get(__name__)

QUEUE_DIR = paths.COMMIT_QUEUE
LOCK_NAME = paths.COMMIT_LOCK
BATCH_NAME = "batch"
MAX_BATCH = 64
"""Requests one leader commits in one chain at most (the rest wait for the next)."""
WAKE_CHECK = 0.05
"""Seconds between a waiting writer's looks at the lock when nobody wakes it."""
STALE_RESULT = 300.0
"""Seconds after which a result nobody collected (its writer died) is removed."""


@dataclass
class Request:
    """One write, ready to commit: what its plan read, and what it changes."""

    id: str
    base: str | None
    """The commit the plan ran on (None: the branch did not exist)."""
    opaque: bool
    entries: dict[str, tuple[str, int] | None]
    spellings: dict[tuple[str, str], list[str]]
    changes: dict[str, str | None]
    """Path -> blob id (hex), None to remove."""
    message: str
    author: tuple[str, str]
    when: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "base": self.base,
                "opaque": self.opaque,
                "entries": self.entries,
                "spellings": [[f, n, v] for (f, n), v in self.spellings.items()],
                "changes": self.changes,
                "message": self.message,
                "author": list(self.author),
                "when": self.when,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Request:
        raw: dict[str, Any] = json.loads(text)
        return cls(
            id=str(raw["id"]),
            base=raw["base"],
            opaque=bool(raw["opaque"]),
            entries={
                str(k): (str(v[0]), int(v[1])) if v is not None else None
                for k, v in raw["entries"].items()
            },
            spellings={(str(f), str(n)): [str(x) for x in v] for f, n, v in raw["spellings"]},
            changes={
                str(k): (str(v) if v is not None else None) for k, v in raw["changes"].items()
            },
            message=str(raw["message"]),
            author=(str(raw["author"][0]), str(raw["author"][1])),
            when=int(raw["when"]),
        )


@dataclass
class Outcome:
    kind: str
    """``ok`` (on the branch), ``retry`` (run the plan again on the new tip) or ``error``
    (committing it failed: the writer commits it alone, where the error is its own)."""
    commit: str | None = None
    message: str = ""

    def encode(self) -> str:
        return f"{self.kind} {self.commit or ''} {self.message}".rstrip() + "\n"

    @classmethod
    def decode(cls, text: str) -> Outcome:
        kind, _, rest = text.strip().partition(" ")
        if kind == "ok":
            return cls("ok", rest.split(" ", 1)[0])
        if kind == "error":
            return cls("error", None, rest.strip())
        return cls("retry")


def new_request_id() -> str:
    # Time first: a leader takes requests in the order they were queued.
    return f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass
class Stats:
    led: int = 0
    """Chains this writer committed as leader."""
    carried: int = 0
    """Others' writes this writer committed as leader."""
    queued: int = 0
    """Own writes committed by another writer."""
    retried: int = 0
    longest: int = 0
    """The longest chain this writer committed."""


class CommitQueue:
    """The group-commit protocol of one GitDB (one per GitDB; threads open their own fds)."""

    def __init__(self, db: GitDB) -> None:
        self.db = db
        self.state = db.state_dir
        self.queue = db.state_dir / QUEUE_DIR
        self.stats = Stats()

    # -- the writer's side ---------------------------------------------------------------

    def submit(self, request: Request, deadline: float) -> Outcome:
        """Commit ``request`` (as leader, or through one); its outcome."""
        self.queue.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.state / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if try_flock(fd):
                try:
                    return self._lead(request)  # nobody is committing: no queue file
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    self._wake_waiters()
            # A FIFO the leader writes one byte to once our result is there: every waiter
            # wakes at once, in the kernel. (Waiters polling every few milliseconds took the
            # CPU from the leader they waited for; waiters blocked on the lock woke one
            # after another, each after its own wait for a CPU.)
            fifo = self.queue / f"{request.id}.fifo"
            os.mkfifo(fifo, 0o600)
            # Read-write: with no writer left, a read-only FIFO reads as end-of-file, and
            # select would return at once forever after the first wake-up (Linux, macOS).
            wake = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            try:
                return self._wait(request, fd, wake, deadline)
            finally:
                os.close(wake)
                with contextlib.suppress(FileNotFoundError):
                    fifo.unlink()
        finally:
            os.close(fd)

    def _wait(self, request: Request, fd: int, wake: int, deadline: float) -> Outcome:
        """Queue ``request`` and wait for its outcome, or for the lock (then lead)."""
        req_path = self.queue / f"{request.id}.req"
        _write_atomic(req_path, request.to_json())
        given_up = False
        while True:
            outcome = self._collect(request.id)
            if outcome is not None:
                if outcome.kind == "ok":
                    self.stats.queued += 1
                return outcome
            if try_flock(fd):
                try:
                    outcome = self._collect(request.id)
                    if outcome is None:
                        outcome = self._lead(None, mine=request.id)
                    elif outcome.kind == "ok":
                        self.stats.queued += 1
                    return outcome
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    self._wake_waiters()
            if time.monotonic() > deadline:
                try:
                    req_path.unlink()
                except FileNotFoundError:
                    # A leader has claimed it: its outcome is coming (or the leader died,
                    # and the next one will settle it). Wait once more as long.
                    if given_up:
                        raise ConflictError(
                            "a writer committing for this one did not finish in time; "
                            "the write may still land",
                            hint="check with gitmem log before writing it again",
                        ) from None
                    given_up = True
                    deadline = time.monotonic() + self.db.lock_timeout
                    continue
                raise ConflictError(
                    "could not commit: other writers kept the store busy",
                    hint="another writer kept the branch busy; try again",
                )
            # Woken by the leader, or every WAKE_CHECK seconds to see whether the lock
            # came free without a result (its holder died).
            select.select([wake], [], [], WAKE_CHECK)
            with contextlib.suppress(BlockingIOError):
                os.read(wake, 64)

    def _wake_waiters(self) -> None:
        """After the lock is released: wake every waiting writer, so one whose request
        came too late for this chain takes the lock now rather than at its next check."""
        try:
            names = os.listdir(self.queue)  # noqa: PTH208 (names only)
        except FileNotFoundError:
            return
        for name in names:
            if name.endswith(".fifo"):
                self._notify(name[: -len(".fifo")])

    def _notify(self, request_id: str) -> None:
        """Wake the writer waiting for ``request_id`` (if it still waits)."""
        with contextlib.suppress(OSError):
            fd = os.open(self.queue / f"{request_id}.fifo", os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"!")
            finally:
                os.close(fd)

    def _collect(self, request_id: str) -> Outcome | None:
        path = self.queue / f"{request_id}.res"
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return Outcome.decode(text)

    # -- the leader's side ---------------------------------------------------------------

    def _lead(self, own: Request | None, *, mine: str | None = None) -> Outcome:
        """Under the lock: commit ``own`` and the queued requests as one chain."""
        repo = self.db.repo
        self._recover(repo)
        claimed = self._claim()
        requests = ([own] if own is not None else []) + claimed
        mine = own.id if own is not None else mine
        outcomes = self._commit_chain(repo, requests, {r.id for r in claimed})
        for request in claimed:
            _write_atomic(self.queue / f"{request.id}.res", outcomes[request.id].encode())
            with contextlib.suppress(FileNotFoundError):
                (self.queue / f"{request.id}.claimed").unlink()

        with contextlib.suppress(FileNotFoundError):
            (self.queue / BATCH_NAME).unlink()
        if mine is None or mine not in outcomes:
            # Our request was taken by a leader before us, which then died after moving the
            # branch: _recover wrote our result.
            found = self._collect(mine) if mine is not None else None
            return found or Outcome("retry")
        if own is None:
            # Our own request went through the queue file: its result is ours to take.
            with contextlib.suppress(FileNotFoundError):
                (self.queue / f"{mine}.res").unlink()
        return outcomes[mine]

    def _claim(self) -> list[Request]:
        try:
            names = sorted(os.listdir(self.queue))  # noqa: PTH208 (names, in queue order)
        except FileNotFoundError:
            return []
        now = time.time()
        out: list[Request] = []
        for name in names:
            path = self.queue / name
            if name.endswith((".res", ".fifo")):
                # A result (or wake-up FIFO) whose writer never came for it: it died waiting.
                with contextlib.suppress(FileNotFoundError):
                    if now - path.stat().st_mtime > STALE_RESULT:
                        path.unlink()
                continue
            if len(out) >= MAX_BATCH:
                continue
            if name.endswith(".req"):
                claimed = path.with_suffix(".claimed")
                try:
                    os.replace(path, claimed)  # the writer can no longer withdraw it
                except FileNotFoundError:
                    continue  # withdrawn by its writer a moment ago
                path = claimed
            elif not name.endswith(".claimed"):
                if name.startswith(".") and name.endswith(".tmp"):
                    _remove_if_dead(path)  # a temporary file a killed writer left
                continue
            try:
                out.append(Request.from_json(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
                log.warning("dropping an unreadable group-commit request %s: %s", name, exc)
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        return out

    def _recover(self, repo: pygit2.Repository) -> None:
        """A leader died between journalling a chain and reporting it: settle its requests."""
        journal = self.queue / BATCH_NAME
        try:
            entries = json.loads(journal.read_text())
        except FileNotFoundError:
            return
        except ValueError:
            journal.unlink()
            return
        tip = self.db.tip()
        for request_id, commit in entries:
            landed = tip is not None and (
                str(tip.id) == commit or repo.descendant_of(tip.id, pygit2.Oid(hex=commit))
            )
            if landed:
                _write_atomic(self.queue / f"{request_id}.res", Outcome("ok", commit).encode())
                for suffix in (".claimed", ".req"):
                    with contextlib.suppress(FileNotFoundError):
                        (self.queue / f"{request_id}{suffix}").unlink()
                self._notify(request_id)
        journal.unlink()

    def _commit_chain(
        self, repo: pygit2.Repository, requests: list[Request], queued: set[str]
    ) -> dict[str, Outcome]:
        """Commit what still applies as one chain on the tip and move the branch to it.
        ``queued``: the requests that came through queue files (journalled before the move,
        so a successor can tell their writers what landed)."""
        from gitmem.base.trailers import Author
        from gitmem.git.objects import build_tree, get_commit, get_tree, reads_hold

        deadline = time.monotonic() + self.db.lock_timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                ref: pygit2.Reference | None = repo.lookup_reference(self.db.ref_name)
            except KeyError:
                ref = None
            tip = get_commit(repo, ref.target) if ref is not None else None
            head_id = tip.id if tip is not None else None
            head_tree = tip.tree if tip is not None else None
            outcomes: dict[str, Outcome] = {}
            chain: list[tuple[str, str]] = []
            for request in requests:
                same_base = request.base == (str(head_id) if head_id is not None else None)
                if not same_base and (
                    request.opaque
                    or not reads_hold(repo, head_tree, request.entries, request.spellings)
                ):
                    outcomes[request.id] = Outcome("retry")
                    continue
                try:
                    changes = {
                        path: pygit2.Oid(hex=blob) if blob is not None else None
                        for path, blob in request.changes.items()
                    }
                    tree_id = build_tree(repo, head_tree, changes)
                    parents = [head_id] if head_id is not None else []
                    # Committed (and signed, where git is set to sign) as the user the
                    # leading writer runs as: writers sharing a queue share the store.
                    commit_id = self.db.make_commit(
                        Author(*request.author), request.when, request.message, tree_id, parents
                    )
                except Exception as exc:
                    outcomes[request.id] = Outcome("error", None, str(exc).replace("\n", " "))
                    continue
                head_id = commit_id
                head_tree = get_tree(repo, tree_id)
                chain.append((request.id, str(commit_id)))
                outcomes[request.id] = Outcome("ok", str(commit_id))
            if not chain:
                return outcomes
            if any(request_id in queued for request_id, _ in chain):
                _write_atomic(self.queue / BATCH_NAME, json.dumps(chain))
            try:
                assert head_id is not None
                if ref is None:
                    repo.references.create(self.db.ref_name, head_id)
                else:
                    ref.set_target(head_id, f"gitmem: {len(chain)} write(s)")
            except (pygit2.GitError, pygit2.AlreadyExistsError, OSError) as exc:
                # Someone outside the queue (a sync, an older gitmem) moved the branch:
                # build the chain again on the new tip.
                with contextlib.suppress(FileNotFoundError):
                    (self.queue / BATCH_NAME).unlink()
                self.db.back_off(exc, attempt, deadline)
                continue
            self.stats.led += 1
            self.stats.carried += len(chain) - 1
            self.stats.longest = max(self.stats.longest, len(chain))
            return outcomes


def _remove_if_dead(tmp: Path) -> None:
    """Remove ``.<name>.<pid>.tmp`` once the process that was writing it is gone."""

    pid = tmp.name[: -len(".tmp")].rsplit(".", 1)[-1]
    if pid.isdigit() and not pid_alive(int(pid)):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _write_atomic(path: Path, text: str) -> None:
    tmp = temp_path(path)
    tmp.write_text(text)
    os.replace(tmp, path)
