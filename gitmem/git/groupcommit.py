"""Group commit for bare stores: one writer moves the branch for everyone waiting.

With compare-and-swap alone, N writers racing for one branch mostly lose: each loser
has built a tree and a commit for nothing, and runs its whole plan again. Here a writer
runs its plan on the tip it read (in parallel with the others), writes its blobs, and
then either

- takes ``<gitdir>/gitmem/commit.lock`` (an ``flock``) at once and becomes the *leader*:
  it commits its own change and every request queued in ``<gitdir>/gitmem/commitq/``
  as a chain of commits (one commit and one author per write, in queue order), moving
  the branch with compare-and-swap as before once for each group of requests it took
  from the queue together and then handing each writer of the group its result (so they
  run their next plans while the leader commits the next group), then takes what was
  queued meanwhile, up to :data:`MAX_BATCH` commits; or
- queues a *request* (the tip it read, what its plan read of it, the blob ids of its
  changes, its commit message, author and time) and waits until a leader has sent its
  *result* (a line written into the waiting thread's own FIFO, kept open for all its
  writes; a ``.res`` file when the FIFO cannot take it), or the lock is free and it
  leads itself.

A queued change goes onto the chain only if every path its plan looked up (and every
case-twin question it asked) reads the same on the chain's head as on the tip the plan
ran on, so the commit is the one the plan would have made there; otherwise its result
is ``retry`` and its writer runs the plan again on the new tip, in its own process, so
its errors reach its own caller only. A write is acknowledged ("ok <commit>") only
after the branch points at a chain holding its commit.

Crash safety: a leader renames each request it takes (``.req`` to ``.claimed``) and,
before moving the branch to a commit of someone else's request, appends it to the journal
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
import re
import select
import stat
import threading
import time
import uuid
import weakref
from collections.abc import Callable
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
"""Requests one leader commits at most before it lets the lock go (the rest wait for the
next): bounds how long the leader's own caller waits."""
WAKE_CHECK = 0.05
"""Seconds between a waiting writer's looks at the lock when nobody wakes it."""
STALE_RESULT = 300.0
"""Seconds after which a result nobody collected (its writer died) is removed."""
REQUEST_ID = re.compile(r"\d{20}-\d+-[0-9a-f]{8}")
"""What :func:`new_request_id` makes; a request file's id is checked against it before it
names any file (``<id>.res``, ``<id>.claimed``)."""
COMMIT_ID = re.compile(r"[0-9a-f]{40}")
CHANNEL = re.compile(r"w-(\d+)-\d+-[0-9a-f]{8}\.fifo")
"""The name of a waiting thread's FIFO (``w-<pid>-<thread>-<random>.fifo``). A request names
its writer's FIFO; the name is checked against this before a leader opens it, since a
request file is input like any other (a name like ``../../x`` must open nothing)."""
RESULT_MAX = 1024
"""Characters of an ``error`` outcome's message sent through a FIFO: a line written at once
(below ``PIPE_BUF``) reaches the reader whole."""


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
    wake: str | None = None
    """The FIFO (a name in the queue) its writer waits on; None: a ``.res`` file only."""
    prebuilt: dict[str, tuple[str | None, str | None]] | None = None
    """Subtrees its writer built on ``base`` (:func:`gitmem.git.objects.prebuild`)."""

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
                "wake": self.wake,
                "prebuilt": self.prebuilt,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Request:
        raw: dict[str, Any] = json.loads(text)
        if not REQUEST_ID.fullmatch(str(raw["id"])):
            raise ValueError(f"not a request id: {str(raw['id'])[:60]!r}")
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
            wake=str(raw["wake"]) if raw.get("wake") is not None else None,
            prebuilt=_prebuilt(raw.get("prebuilt")),
        )


def _prebuilt(raw: Any) -> dict[str, tuple[str | None, str | None]] | None:
    """A request's prebuilt subtrees as read from its file: folder -> two tree ids (or
    None), each checked to be one; anything else is not a request gitmem wrote."""
    if raw is None:
        return None
    out: dict[str, tuple[str | None, str | None]] = {}
    for path, ids in dict(raw).items():
        old, new = (None if i is None else str(i) for i in ids)
        if any(i is not None and not COMMIT_ID.fullmatch(i) for i in (old, new)):
            raise ValueError(f"not a tree id in a prebuilt subtree of {str(path)[:60]!r}")
        out[str(path)] = (old, new)
    return out


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
    lead_cpu: float = 0.0
    """CPU seconds (this process's) spent leading: the serial part of group commit, which
    bounds what writers together can commit however many processors they have."""


class _Channel:
    """A waiting thread's FIFO, made the first time the thread has to wait and kept open
    for its later writes: a leader wakes it with one byte and sends it its results as
    lines (``<request id> <outcome>``). One per thread, since each thread waits for its
    own requests only; closed and removed when the thread's locals go, or at exit."""

    def __init__(self, queue: Path) -> None:
        self.pid = os.getpid()
        self.name = f"w-{self.pid}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.fifo"
        path = queue / self.name
        os.mkfifo(path, 0o600)
        # Read-write: with no writer left, a read-only FIFO reads as end-of-file, and
        # select would return at once forever after the first wake-up (Linux, macOS).
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self.pending = b""
        weakref.finalize(self, _close_channel, self.pid, self.fd, str(path))

    def results(self) -> dict[str, Outcome]:
        """The results sent since the last look (wake-up bytes are dropped)."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        out: dict[str, Outcome] = {}
        for raw in lines:
            line = raw.lstrip(b"!").decode("utf-8", "replace")
            request_id, _, rest = line.partition(" ")
            if rest:
                out[request_id] = Outcome.decode(rest)
        self.pending = self.pending.lstrip(b"!")
        return out


def _close_channel(pid: int, fd: int, path: str) -> None:
    if os.getpid() != pid:
        return  # a forked child: the FIFO is its parent's
    with contextlib.suppress(OSError):
        os.close(fd)
    with contextlib.suppress(OSError):
        Path(path).unlink()


class CommitQueue:
    """The group-commit protocol of one GitDB (one per GitDB; threads open their own fds)."""

    def __init__(self, db: GitDB) -> None:
        self.db = db
        self.state = db.state_dir
        self.queue = db.state_dir / QUEUE_DIR
        self.stats = Stats()
        self._local = threading.local()

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
            # A FIFO the leader writes our result to, and one byte to every waiter when it
            # lets the lock go: every waiter wakes at once, in the kernel. (Waiters polling
            # every few milliseconds took the CPU from the leader they waited for; waiters
            # blocked on the lock woke one after another, each after its own wait for a
            # CPU.) Kept for the thread's next writes: a FIFO made and removed per write,
            # and a result file written, renamed, read and removed, were four file system
            # changes per queued write on top of the request's own.
            channel = self._channel()
            request.wake = channel.name
            return self._wait(request, fd, channel, deadline)
        finally:
            os.close(fd)

    def _channel(self) -> _Channel:
        channel: _Channel | None = getattr(self._local, "channel", None)
        if (
            channel is None
            or channel.pid != os.getpid()
            or not (self.queue / channel.name).exists()  # removed by someone: a new one
        ):
            channel = _Channel(self.queue)
            self._local.channel = channel
        return channel

    def _wait(self, request: Request, fd: int, channel: _Channel, deadline: float) -> Outcome:
        """Queue ``request`` and wait for its outcome, or for the lock (then lead)."""
        req_path = self.queue / f"{request.id}.req"
        channel.results()  # what came for earlier requests of this thread is stale
        _write_atomic(req_path, request.to_json())
        given_up = False
        while True:
            outcome = self._collect(request.id, channel)
            if outcome is not None:
                if outcome.kind == "ok":
                    self.stats.queued += 1
                return outcome
            if try_flock(fd):
                try:
                    outcome = self._collect(request.id, channel)
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
            select.select([channel.fd], [], [], WAKE_CHECK)

    def _wake_waiters(self) -> None:
        """After the lock is released: wake every waiting writer, so one whose request
        came too late for this chain takes the lock now rather than at its next check."""
        try:
            names = os.listdir(self.queue)  # noqa: PTH208 (names only)
        except FileNotFoundError:
            return
        for name in names:
            if name.endswith(".fifo"):
                self._send(name, b"!")

    def _notify(self, request_id: str) -> None:
        """Wake the writer waiting for ``request_id`` on a FIFO of its own (a writer of an
        earlier gitmem, which made one per request), if it still waits."""
        self._send(f"{request_id}.fifo", b"!")

    def _send(self, name: str, data: bytes) -> bool:
        """Write ``data`` (one line at most, written at once) into the FIFO ``name`` of the
        queue; False when nobody reads it, it is not a FIFO, or it is full."""
        try:
            fd = os.open(
                self.queue / name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except OSError:
            return False
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                return False
            return os.write(fd, data) == len(data)
        except OSError:
            return False
        finally:
            os.close(fd)

    def _deliver(self, request: Request, outcome: Outcome) -> None:
        """Hand ``outcome`` to the writer of ``request``: through its FIFO, else (an earlier
        gitmem's writer, a full or vanished FIFO) as a ``.res`` file it looks for too."""
        if request.wake is not None and CHANNEL.fullmatch(request.wake):
            text = Outcome(outcome.kind, outcome.commit, outcome.message[:RESULT_MAX]).encode()
            if self._send(request.wake, f"{request.id} {text}".encode()):
                return
        _write_atomic(self.queue / f"{request.id}.res", outcome.encode())

    def _collect(self, request_id: str, channel: _Channel | None = None) -> Outcome | None:
        if channel is not None:
            found = channel.results().get(request_id)
            if found is not None:
                return found
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
        """Under the lock: commit ``own`` and the queued requests, one commit each on the
        tip, moving the branch once for what was taken from the queue together and handing
        those writers their results; then the requests queued meanwhile, up to
        :data:`MAX_BATCH` commits in all.

        Moving the branch per group taken (not once per chain of up to 64) is what lets
        writers overlap: a writer whose commit landed runs its next plan on the other
        processor while the leader commits the next group, instead of every writer waiting
        for the whole chain (see :meth:`_commit_chain` for why not per commit).
        """
        started = time.process_time()
        repo = self.db.repo
        self._recover(repo)
        mine = own.id if own is not None else mine
        outcomes: dict[str, Outcome] = {}
        journal = _Journal(self.queue / BATCH_NAME)
        pending = [own] if own is not None else []
        stopped = False
        while len(outcomes) < MAX_BATCH:
            taken = self._claim(MAX_BATCH - len(outcomes) - len(pending), sweep=not outcomes)
            # (A request settled by this leader has had its file removed: never twice.)
            claimed = [r for r in taken if r.id not in outcomes]
            if not claimed and not pending:
                break
            queued = {r.id for r in claimed}

            def settle(request: Request, outcome: Outcome, queued: set[str] = queued) -> None:
                outcomes[request.id] = outcome
                if request.id != mine:  # our own (queued, then led) is returned below
                    self._deliver(request, outcome)
                if request.id in queued:
                    with contextlib.suppress(FileNotFoundError):
                        (self.queue / f"{request.id}.claimed").unlink()

            try:
                self._commit_chain(repo, pending + claimed, queued, journal, settle)
            except Exception:
                landed = outcomes.get(mine) if mine is not None else None
                if landed is None or landed.kind != "ok":
                    journal.close()
                    raise
                # Our own write is on the branch: failing now would report a write failed
                # that landed. Stop leading; the journal and the claimed requests stay for
                # the next leader to settle, as after a leader that died.
                log.warning("group commit: stopped committing for others", exc_info=True)
                stopped = True
                break
            pending = []
        if stopped:
            journal.close()
        else:
            journal.remove()
        self.stats.lead_cpu += time.process_time() - started
        if outcomes:
            self.stats.led += 1
            ours = 1 if own is not None else 0
            self.stats.carried += sum(o.kind == "ok" for o in outcomes.values()) - ours
            self.stats.longest = max(self.stats.longest, len(outcomes))
        if mine is None or mine not in outcomes:
            # Our request was taken by a leader before us, which then died after moving the
            # branch: _recover wrote our result.
            found = self._collect(mine) if mine is not None else None
            return found or Outcome("retry")
        return outcomes[mine]

    def _claim(self, limit: int = MAX_BATCH, *, sweep: bool = True) -> list[Request]:
        """Take up to ``limit`` queued requests (and those a dead leader had taken), in queue
        order. ``sweep``: also remove what dead writers left (once per leadership is enough:
        a leader that goes on taking requests lists the queue once per commit or so)."""
        try:
            names = sorted(os.listdir(self.queue))  # noqa: PTH208 (names, in queue order)
        except FileNotFoundError:
            return []
        now = time.time()
        out: list[Request] = []
        for name in names:
            if not sweep and not name.endswith((".req", ".claimed")):
                continue
            path = self.queue / name
            waiter = CHANNEL.fullmatch(name)
            if waiter is not None:
                # A waiting thread's FIFO, kept between its writes: gone with its process.
                if not pid_alive(int(waiter.group(1))):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                continue
            if name.endswith((".res", ".fifo")):
                # A result (or wake-up FIFO) whose writer never came for it: it died waiting.
                with contextlib.suppress(FileNotFoundError):
                    if now - path.stat().st_mtime > STALE_RESULT:
                        path.unlink()
                continue
            if len(out) >= limit:
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
        """A leader died between journalling a commit and reporting it: settle its requests."""
        journal = self.queue / BATCH_NAME
        try:
            entries = _Journal.read(journal)
        except FileNotFoundError:
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
        self,
        repo: pygit2.Repository,
        requests: list[Request],
        queued: set[str],
        journal: _Journal,
        settle: Callable[[Request, Outcome], None],
    ) -> None:
        """Commit each request that still applies on the tip, in order, one commit each on
        the one before, move the branch once to the last with compare-and-swap, then call
        ``settle`` with every outcome, in request order. ``queued``: the requests that came
        through queue files, each journalled (request id -> commit) before the branch moves,
        so a successor can tell their writers what landed if this leader dies.

        One move for the requests claimed together, not one per commit: with eight writers
        a leader is committing nearly all the time (the serial part every writer waits on),
        and moving the branch (a lock file written and renamed) was a fifth of its work per
        commit. A writer's result waits for the rest of its group, which is at most the
        writers that queued while the previous group was committed.
        """
        from gitmem.base.trailers import Author
        from gitmem.git.objects import build_tree, get_commit, get_tree, reads_hold

        deadline = time.monotonic() + self.db.lock_timeout
        attempt = 0
        todo = list(requests)
        committer = self.db.committer()  # read once: git's config for every commit of it
        while todo:
            attempt += 1
            try:
                ref: pygit2.Reference | None = repo.lookup_reference(self.db.ref_name)
            except KeyError:
                ref = None
            tip = get_commit(repo, ref.target) if ref is not None else None
            head_id = tip.id if tip is not None else None
            head_tree = tip.tree if tip is not None else None
            results: list[tuple[Request, Outcome]] = []
            for request in todo:
                same_base = request.base == (str(head_id) if head_id is not None else None)
                if not same_base and (
                    request.opaque
                    or not reads_hold(repo, head_tree, request.entries, request.spellings)
                ):
                    results.append((request, Outcome("retry")))
                    continue
                try:
                    changes = {
                        path: pygit2.Oid(hex=blob) if blob is not None else None
                        for path, blob in request.changes.items()
                    }
                    tree_id = build_tree(repo, head_tree, changes, prebuilt=request.prebuilt)
                    parents = [head_id] if head_id is not None else []
                    # Committed (and signed, where git is set to sign) as the user the
                    # leading writer runs as: writers sharing a queue share the store.
                    commit_id = self.db.make_commit(
                        Author(*request.author),
                        request.when,
                        request.message,
                        tree_id,
                        parents,
                        committer=committer,
                    )
                except Exception as exc:
                    results.append((request, Outcome("error", None, str(exc).replace("\n", " "))))
                    continue
                if request.id in queued:
                    journal.add(request.id, str(commit_id))
                head_id = commit_id
                head_tree = get_tree(repo, tree_id)
                results.append((request, Outcome("ok", str(commit_id))))
            landed = tip is None or head_id != tip.id
            if landed and head_id is not None:
                try:
                    if ref is None:
                        ref = repo.references.create(self.db.ref_name, head_id)
                    else:
                        ref.set_target(head_id, "gitmem: group commit")
                except (pygit2.GitError, pygit2.AlreadyExistsError, OSError) as exc:
                    # Someone outside the queue (a sync, an older gitmem) moved the branch:
                    # the whole group goes again on the new tip. (Its journal entries name
                    # commits that never land, so a successor ignores them.)
                    self.db.back_off(exc, attempt, deadline)
                    continue
            # Every writer of the group is told even if telling one fails (its result file
            # cannot be written, say): the leader's own write may come after it in the
            # group, and it landed. The first failure goes up once all were told.
            failed: Exception | None = None
            for request, outcome in results:
                try:
                    settle(request, outcome)
                except Exception as exc:
                    failed = failed or exc
            if failed is not None:
                raise failed
            todo = []


class _Journal:
    """``batch``: one line ``<request id> <commit>`` per queued write, added before the branch
    moves to its commit (appended, so a torn last line is one whose move never happened)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def add(self, request_id: str, commit: str) -> None:
        if self.fd is None:
            self.fd = os.open(
                self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
            )
        os.write(self.fd, f"{request_id} {commit}\n".encode())

    def close(self) -> None:
        """Stop adding to it, and leave it for the next leader."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def remove(self) -> None:
        """Every write in it was reported: it is no longer needed."""
        if self.fd is None:
            return
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    @staticmethod
    def read(path: Path) -> list[tuple[str, str]]:
        """The entries of a journal a leader left (also an earlier gitmem's JSON list);
        anything that is not a request id and a commit id is ignored (a torn line, or
        input that would name a file outside the queue)."""
        text = path.read_text(errors="replace")
        try:
            raw: Any = json.loads(text)
            pairs = [tuple(entry) for entry in raw] if isinstance(raw, list) else []
        except (ValueError, TypeError):
            pairs = [tuple(line.split(" ")) for line in text.splitlines()]
        return [
            (str(pair[0]), str(pair[1]))
            for pair in pairs
            if len(pair) == 2
            and REQUEST_ID.fullmatch(str(pair[0]))
            and COMMIT_ID.fullmatch(str(pair[1]))
        ]


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
