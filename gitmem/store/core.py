"""The Store: create, read, update, append, delete, restore, supersede, list, history, log.

Every write is one commit made through :class:`gitmem.git.db.GitDB`. Each
operation is an *action*: a function that reads and stages changes in a
snapshot. Outside a transaction an action gets a commit of its own; inside
``with store.transaction():`` actions share one commit, replayed on the newest
tip if another writer moved the branch in between.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import heapq
import itertools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.base import logs
from gitmem.base.clock import Clock, SystemClock
from gitmem.base.errors import (
    AlreadyExistsError,
    ConflictError,
    GitmemError,
    InvalidIdError,
    InvalidInputError,
    InvalidMemoryError,
    NotFoundError,
    StoreError,
)
from gitmem.base.trailers import (
    AGENT_TRAILER,
    ID_TRAILER,
    IDS_UNLISTED_TRAILER,
    OP_TRAILER,
    SESSION_TRAILER,
    SUPERSEDES_TRAILER,
    Author,
    CommitSpec,
    agent_author,
)
from gitmem.format import codec, memfile, schema
from gitmem.format.config import StoreConfig
from gitmem.format.layout import (
    CONFIG_FILE,
    DOCUMENT_ROOTS,
    KEEP_FILE,
    check_id,
    id_from_path,
    id_prefix,
    is_path_id,
    memory_path,
    new_id,
    one_by_prefix,
)
from gitmem.format.model import (
    DERIVED_KEYS,
    EDITABLE_FIELDS,
    Memory,
    Op,
    Scope,
    Status,
    Trigger,
    memory_from_document,
)
from gitmem.format.versions import Chain, walk_back, walk_forward
from gitmem.git import localconfig
from gitmem.git.db import GitDB
from gitmem.git.diff import blob_at, changed_paths, memory_blob
from gitmem.git.objects import Snapshot, blob_data, staged_id

# The row providers of other modules register when those modules are imported. Every
# process that opens an index opens it through a Store, so importing them here keeps
# their rows current wherever the index is caught up (a command that never recalls or
# reads the graph cannot leave them behind; a provider that missed commits is refilled
# whole): the vector rows and the knowledge graph's.
from gitmem.store import derived, graphindex, vectors  # noqa: F401  (registration)
from gitmem.store.checks import (
    RelatedInput,
    apply_fields,
    author_name,
    check_expected,
    check_trailer,
    enum_value,
    extra_fields,
    memory_fields,
    related_tuple,
    single_line,
    tag_tuple,
)
from gitmem.store.index import Index, Progress
from gitmem.store.reader import IndexReader, Reader, TreeReader
from gitmem.store.results import History, LogEntry, Problem, Version
from gitmem.store.rows import IndexStats
from gitmem.store.touches import removed_ids

if TYPE_CHECKING:
    from gitmem.git.maintenance import GcResult
    from gitmem.store.recall import RecallResults
    from gitmem.store.search import SearchResults
    from gitmem.store.sync import SyncResult

log = logs.get(__name__)

_NOT_FOUND_HINT = (
    "gitmem ls --all lists current memories; gitmem log --op delete shows deleted ones"
)

At = str | dt.datetime | dt.date | None


# -- results -------------------------------------------------------------------


# -- actions ---------------------------------------------------------------------


@dataclass
class _Effect:
    """What one action did, for the commit message and trailers."""

    op: Op
    ids: list[str]
    title: str | None = None
    supersedes: str | None = None
    agent: str | None = None
    session: str | None = None


_Action = Callable[[Snapshot], tuple[_Effect | None, Any]]
"""A write staged on a snapshot: its effect on memories (None for a file that is not a
memory, such as a folder's ``.gitkeep``) and the value the caller gets."""


class _Effects:
    """What a transaction's writes did, summed up as they are staged: its commit needs the
    distinct ops, every id once, the supersedes, the first agent and session, and the one
    effect's title when there is only one; not every effect (a bulk import stages 1M)."""

    def __init__(self, effects: Iterable[_Effect] = ()) -> None:
        self.count = 0
        self.first: _Effect | None = None
        # Dicts: first-seen order with O(1) membership (a list's ``in`` made a bulk import
        # of 100k memories spend ~55 s on the ids alone).
        self.ops: dict[str, None] = {}
        self.ids: dict[str, None] = {}
        self.supersedes: list[str] = []
        self.agent: str | None = None
        self.session: str | None = None
        for effect in effects:
            self.add(effect)

    def add(self, effect: _Effect) -> None:
        self.count += 1
        if self.first is None:
            self.first = effect
        self.ops.setdefault(str(effect.op))
        for mid in effect.ids:
            self.ids.setdefault(mid)
        if effect.supersedes:
            self.supersedes.append(effect.supersedes)
        if self.agent is None and effect.agent:
            self.agent = effect.agent
        if self.session is None and effect.session:
            self.session = effect.session


def _spec(
    effects: Iterable[_Effect] | _Effects,
    message: str | None,
    tx_message: str | None = None,
    extra_trailers: Sequence[tuple[str, str]] = (),
    *,
    op: str | None = None,
    by: str | None = None,
) -> CommitSpec:
    """The commit of ``effects``; ``op`` and ``by`` name the operation and who ran it when a
    transaction is one act of its own (``resolve``), not the sum of its writes."""
    summary = effects if isinstance(effects, _Effects) else _Effects(effects)
    ops = list(summary.ops)
    agent = summary.agent
    if op is not None:
        ops = [op]
        subject = tx_message or op
        agent = by or None
    elif summary.count == 1 and summary.first is not None:
        effect = summary.first
        what = effect.title or effect.ids[0]
        subject = f"{effect.op}: {what}"
    else:
        subject = tx_message or f"transaction: {summary.count} operations"
        message = message if tx_message is None else None
    trailers: list[tuple[str, str]] = [(OP_TRAILER, name) for name in ops]
    trailers.extend((ID_TRAILER, mid) for mid in itertools.islice(summary.ids, ID_TRAILERS))
    if len(summary.ids) > ID_TRAILERS:
        trailers.append((IDS_UNLISTED_TRAILER, str(len(summary.ids) - ID_TRAILERS)))
    trailers.extend((SUPERSEDES_TRAILER, mid) for mid in summary.supersedes)
    if agent:
        trailers.append((AGENT_TRAILER, agent))
    if summary.session:
        trailers.append((SESSION_TRAILER, summary.session))
    trailers.extend(extra_trailers)
    author: Author | None = agent_author(author_name(agent)) if agent else None
    return CommitSpec(subject=subject, body=message, trailers=trailers, author=author)


ID_TRAILERS = 1_000
"""``Gitmem-Id`` trailers a commit lists at most; the rest are counted in one
``Gitmem-Ids-Unlisted`` (libgit2 does not cache a large commit: a million ids cost every
read of the tip ~0.3 s)."""

REPLAY_LIMIT = 1_000
REPLAY_BYTES = 8 * 1024 * 1024
"""Operations (and bytes of staged files) a transaction keeps to replay on a newer tip.
Each kept operation holds its inputs (a memory's body and fields, about the size of the
file it stages), so past either bound the transaction lets them go and
holds only what it staged (paths and blob ids): a bulk import of a million memories would
otherwise keep every body until its commit. Such a transaction, if another writer moved the
branch meanwhile, goes onto the new tip as staged when that writer touched none of its
files (:meth:`Store._rebase_staged`), and fails with ConflictError otherwise."""


INDEX_STEPS = 64
"""Commits past the one the index reflects that a read or write counts versions in itself,
walking them, before it catches the index up instead: a writer that never reads walks a
few commits per write, not the whole history."""
KNOWN_VERSIONS = 4096
"""Entries of :attr:`Store._known` kept before it is emptied."""


class Transaction:
    """Many operations, one commit, all or nothing. Made by :meth:`Store.transaction`.

    Its write methods are the Store's; reads through the store inside the block
    see what the transaction staged.
    """

    def __init__(self, store: Store, backend: Backend, message: str | None) -> None:
        self.store = store
        self.backend = backend
        self.message = message
        self.ran = 0
        self.actions: list[_Action] | None = []
        """The operations to replay on a newer tip; None past :data:`REPLAY_LIMIT`."""
        self.effects = _Effects()
        # Each staged file's blob is written at once and only its id kept: what the
        # transaction holds does not grow with the bytes it stages (reads get them back).
        self.snapshot = Snapshot(backend.db.repo, backend.db.resolve(None), write_blobs=True)
        self.commit: str | None = None
        self.trailers: list[tuple[str, str]] = []
        self.op: str | None = None
        self.by: str | None = None
        self.body: str | None = None

    def run(self, action: _Action) -> Any:
        self.store._refresh_config(self.backend, self.snapshot)
        effect, value = action(self.snapshot)
        self.ran += 1
        if self.actions is not None:
            self.actions.append(action)
            if len(self.actions) > REPLAY_LIMIT or self.snapshot.written > REPLAY_BYTES:
                self.actions = None
        if effect is not None:
            self.effects.add(effect)
        return value

    def built_on(self, snap: Snapshot) -> bool:
        """Whether ``snap`` is the commit this transaction staged its changes on."""
        mine, theirs = self.snapshot.commit, snap.commit
        if mine is None or theirs is None:
            return mine is None and theirs is None
        return bool(mine.id == theirs.id)

    def __getattr__(self, name: str) -> Any:
        # tx.create(...), tx.update(...), tx.read(...): the store's own methods,
        # which join this transaction because it is active on this thread.
        return getattr(self.store, name)


# -- the store -------------------------------------------------------------------------


@dataclass
class Backend:
    scope: Scope
    db: GitDB
    config: StoreConfig
    config_blob: pygit2.Oid | None = None
    """The blob ``config`` was read from, so a newly committed policy is noticed."""
    index: Index | None = None
    """The derived SQLite index, opened on first use."""
    secret_policy: tuple[StoreConfig, Any] | None = None
    """``config`` and the secret policy made of it (:meth:`Store._secret_policy`)."""


class Store:
    """A gitmem store: one git repository, or a repo-scope and a user-scope one read together.

    Open one with :func:`gitmem.open` or :func:`gitmem.init`. Writes go to
    ``default_scope`` unless a ``scope=`` says otherwise.
    """

    def __init__(
        self,
        backends: Sequence[Backend],
        *,
        clock: Clock | None = None,
        use_index: bool = True,
    ) -> None:
        if not backends:
            raise StoreError("a Store needs at least one repository")
        self._backends: dict[Scope, Backend] = {}
        for backend in backends:
            self._backends.setdefault(backend.scope, backend)
        self.default_scope = backends[0].scope
        self.clock: Clock = clock or SystemClock()
        for backend in self._backends.values():
            backend.db.clock = self.clock
        self._tx = threading.local()
        self.use_index = use_index
        """Serve list, history, latest_version and search from the SQLite index (else scan git)."""
        self.allow_secrets = False
        """Store content that looks like a credential instead of refusing it (see
        :mod:`gitmem.format.secrets`); :meth:`secrets_allowed` allows it for one block only."""
        self._secrets_ok = threading.local()
        self._known: dict[tuple[str, str], derived.Versions] = {}
        """Versions of a memory (by path) as of a commit: a fact that never changes, kept
        so that a write's second question about the commit it builds on costs nothing."""

    @contextlib.contextmanager
    def secrets_allowed(self) -> Iterator[None]:
        """Writes in this block (in this thread) may store content that looks like a credential.

        Without it every write that would store a credential raises
        :class:`gitmem.format.secrets.SecretsFoundError` naming its kind and line.
        """
        before = getattr(self._secrets_ok, "on", False)
        self._secrets_ok.on = True
        try:
            yield
        finally:
            self._secrets_ok.on = before

    # -- opening ---------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The path of the default scope's repository (its work tree, or the bare git dir)."""
        return self._backend(None).db.path

    @property
    def scopes(self) -> list[Scope]:
        return list(self._backends)

    def db(self, scope: Scope | str | None = None) -> GitDB:
        return self._backend(scope).db

    def config(self, scope: Scope | str | None = None) -> StoreConfig:
        return self._backend(scope).config

    def _refresh_config(self, backend: Backend, snap: Snapshot) -> None:
        """Use the config committed at the tip being written to, not the one seen at open:
        a policy change (a smaller body bound) governs a long-lived store's next write."""
        blob = snap.blob_id(CONFIG_FILE)
        if blob is None or blob == backend.config_blob:
            return
        data = snap.read(CONFIG_FILE)
        if data is not None:
            config = localconfig.with_store_settings(
                StoreConfig.from_text(codec.decode(data, what=CONFIG_FILE)), backend.db.gitdir
            )
            config.check_supported(str(backend.db.path))
            backend.config = config
            backend.config_blob = blob

    def _backend(self, scope: Scope | str | None) -> Backend:
        if scope is None:
            return self._backends[self.default_scope]
        try:
            key = Scope(scope)
        except ValueError:
            raise InvalidInputError(f"scope {scope!r} is not 'repo' or 'user'") from None
        if key not in self._backends:
            raise InvalidInputError(
                f"this store has no {key} scope (it has: {', '.join(map(str, self._backends))})"
            )
        return self._backends[key]

    def _ordered(self, scope: Scope | str | None) -> list[Backend]:
        if scope is not None:
            return [self._backend(scope)]
        return list(self._backends.values())

    # -- transactions ---------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(
        self,
        message: str | None = None,
        *,
        scope: Scope | str | None = None,
        trailers: Sequence[tuple[str, str]] = (),
        op: str | None = None,
        by: str | None = None,
        body: str | None = None,
    ) -> Iterator[Transaction]:
        """Group writes into one commit: all of them land, or none does.

        ``op`` makes the commit one operation of that name (its only ``Gitmem-Op``, its
        subject ``message`` however many writes it holds, ``body`` the caller's reason),
        attributed to ``by`` (the agent or person who ran it; else the git user), not to
        the agents of the memories it rewrites: ``gitmem resolve`` is such a commit.

        ``trailers`` are added after gitmem's own (``(PRUNE_TRAILER, "...")``): a
        caller that knows *why* it writes, such as a prune run, records it in the
        commit itself. The list may still be extended inside the block
        (``tx.trailers.append(...)``), for reasons found while staging.

        Inside the block, the store's write methods stage changes; reads see them.
        The commit is made when the block ends without an exception. If another
        writer moved the branch meanwhile, the staged operations are replayed on
        the new tip (so they may see newer versions), or the commit fails with the
        error a replayed operation raised and nothing is written. A transaction past
        :data:`REPLAY_LIMIT` operations or :data:`REPLAY_BYTES` is not replayed: its
        staged files go onto the new tip when no other writer touched them, else it
        raises ConflictError (:meth:`_rebase_staged`).
        """
        if getattr(self._tx, "active", None) is not None:
            raise InvalidInputError("transactions do not nest")
        backend = self._backend(scope)
        for key, value in trailers:
            check_trailer(key, value)
        # Refused up front, not only when the commit is made: the block's writes are wasted
        # otherwise, and a one-write transaction's commit does not carry its message.
        self._check_commit_text(
            backend, CommitSpec(subject=message or "", body=body, trailers=list(trailers))
        )
        if op is not None:
            check_trailer(OP_TRAILER, op)
            by = single_line("agent", by)
        if body is not None and not isinstance(body, str):
            raise InvalidInputError(f"a commit body must be text, not {type(body).__name__}")
        tx = Transaction(self, backend, message)
        tx.trailers.extend(trailers)
        tx.op, tx.by, tx.body = op, by, body
        self._tx.active = tx
        try:
            yield tx
        finally:
            self._tx.active = None
        if not tx.ran:
            return

        def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
            effects: _Effects
            if tx.built_on(snap) or tx.actions is None:
                if not tx.built_on(snap):
                    self._rebase_staged(backend, tx, snap)
                # Nobody moved the branch (or nobody touched what was staged): what was
                # staged is what would be replayed. Shared, not copied (a million entries);
                # the write loop only reads it.
                if snap.changes:
                    snap.changes.update(tx.snapshot.changes)
                else:
                    snap.changes = tx.snapshot.changes
                effects = tx.effects
            else:
                self._refresh_config(backend, snap)
                effects = _Effects(e for e in (action(snap)[0] for action in tx.actions) if e)
            for key, value in tx.trailers:
                check_trailer(key, value)
            subject = message or f"transaction: {effects.count} operations"
            return self._check_commit_text(
                backend, _spec(effects, tx.body, subject, tx.trailers, op=tx.op, by=tx.by)
            ), None

        _, oid = backend.db.write(plan)
        tx.commit = str(oid) if oid is not None else None

    def _rebase_staged(self, backend: Backend, tx: Transaction, snap: Snapshot) -> None:
        """Let a transaction too large to replay commit its staged files on ``snap``, a
        newer tip, when the commits since the transaction's base changed none of those
        files, no file differing from one only in letter case, and not the store's
        configuration (its policy checked what was staged). Otherwise ConflictError, and
        nothing is written: the caller runs the transaction again."""
        base = tx.snapshot.base
        moved = changed_paths(base.tree if base is not None else None, snap.tree)
        staged = tx.snapshot.changes
        folds = {path.casefold() for path in moved}
        clash = CONFIG_FILE in moved or any(path in staged for path in moved)
        if not clash and folds:
            clash = any(path.casefold() in folds for path in staged)
        if clash:
            raise ConflictError(
                f"another writer changed files this transaction of {tx.ran} operations "
                "also writes (or the store's configuration) while it ran; nothing was written",
                hint="run the transaction again",
            )

    def _index(self, backend: Backend, at: At = None) -> Index | None:
        """The backend's index, or None where it cannot answer (a past ``at``, a
        transaction's staged writes, or the index switched off)."""
        if not self.use_index or at is not None:
            return None
        tx = self._active_tx()
        if tx is not None and tx.backend is backend:
            return None
        if backend.index is None and not index_writable(backend.db):
            # A read-only store (a read-only mount, another user's files): the index cannot
            # be built or caught up there, so reads scan git instead of failing.
            return None
        if backend.index is None:
            backend.index = Index(
                backend.db, lambda data, path: self._decode(backend, data, path), backend.scope
            )
        return backend.index

    def reader(self, scope: Scope | str | None = None, *, at: At = None) -> Reader:
        """The reads of one scope's repository (:class:`gitmem.store.reader.Reader`), served
        by the index where it can answer, else by git's tree at ``at``."""
        return self._reader(self._backend(scope), at)

    def _reader(self, backend: Backend, at: At = None) -> Reader:
        """How this read is served: by the index where it can answer (see :meth:`_index`),
        else by git's tree at ``at`` (inside a transaction: as staged)."""
        index = self._index(backend, at)

        def decode(data: bytes, path: str) -> Memory:
            return self._decode(backend, data, path)

        if index is not None:
            return IndexReader(index, backend.db, decode)
        snap = self._snapshot(backend, at)

        def derive(memories: builtins.list[Memory]) -> builtins.list[Memory]:
            return self._derive(backend, snap, memories)

        return TreeReader(backend.db, snap, decode, backend.scope, derive)

    def index(self, scope: Scope | str | None = None) -> Index:
        """The derived index of one scope (opened, not yet caught up)."""
        backend = self._backend(scope)
        found = self._index(backend)
        if found is None:
            if backend.index is None:
                backend.index = Index(
                    backend.db, lambda data, path: self._decode(backend, data, path), backend.scope
                )
            return backend.index
        return found

    def reindex(
        self, *, scope: Scope | str | None = None, progress: Progress | None = None
    ) -> builtins.list[IndexStats]:
        """Rebuild the index from git (``gitmem reindex``); returns what each scope holds."""
        return [self.index(b.scope).rebuild(progress) for b in self._ordered(scope)]

    def gc(
        self, *, scope: Scope | str | None = None, progress: Progress | None = None
    ) -> builtins.list[GcResult]:
        """Pack each repository with ``git gc``; sizes before and after (``gitmem gc``).

        ``progress(done, total)``: repositories packed, from ``(0, total)`` before the first
        to ``(total, total)``; each ``git gc`` is one step, however long it takes.
        """
        from gitmem.git import maintenance

        backends = self._ordered(scope)
        out: builtins.list[GcResult] = []
        if progress is not None:
            progress(0, len(backends))
        for done, backend in enumerate(backends, 1):
            out.append(maintenance.gc(backend.db.gitdir))
            if progress is not None:
                progress(done, len(backends))
        return out

    def sync(
        self,
        remote: str = "origin",
        *,
        branch: str | None = None,
        scope: Scope | str | None = None,
        max_attempts: int = 40,
        progress: Progress | None = None,
        git_progress: Callable[[str], None] | None = None,
    ) -> SyncResult:
        """Fetch ``remote``, merge its branch memory-aware, push (``gitmem sync``).

        See :func:`gitmem.store.sync.sync`: forks are reported, never conflict markers;
        a network failure leaves the store as it was. ``progress(done, total)`` follows the
        index catching up with what came in; ``git_progress`` gets git's own progress lines
        (credentials redacted).
        """
        from gitmem.store.sync import sync

        return sync(
            self,
            remote,
            branch=branch,
            scope=scope,
            max_attempts=max_attempts,
            progress=progress,
            git_progress=git_progress,
        )

    def _active_tx(self) -> Transaction | None:
        return getattr(self._tx, "active", None)

    def _run(self, backend: Backend, action: _Action, message: str | None) -> Any:
        tx = self._active_tx()
        if tx is not None:
            if tx.backend is not backend:
                raise InvalidInputError(
                    f"this transaction writes to the {tx.backend.scope} scope, not {backend.scope}"
                )
            return tx.run(action)

        def plan(snap: Snapshot) -> tuple[CommitSpec, Any]:
            self._refresh_config(backend, snap)
            effect, value = action(snap)
            if effect is None:  # no memory changed: a folder kept or let go (keep_folder)
                spec = _spec([], None, message or "keep folder")
            else:
                spec = _spec([effect], message)
            return self._check_commit_text(backend, spec), value

        value, _ = backend.db.write(plan)
        return value

    def _snapshot(self, backend: Backend, at: At) -> Snapshot:
        tx = self._active_tx()
        if at is None and tx is not None and tx.backend is backend:
            return tx.snapshot
        return backend.db.snapshot(at)

    # -- encoding ---------------------------------------------------------------------

    def _secrets_refused(self) -> bool:
        return not (self.allow_secrets or getattr(self._secrets_ok, "on", False))

    def _secret_policy(self, backend: Backend) -> Any:
        # Made once per config: a gitmem.yaml with a secrets section cost ~50 µs to compile,
        # twice a write. The config is frozen and is replaced, not changed, when a newly
        # committed gitmem.yaml is read (_refresh_config), which is what the identity tells.
        made = backend.secret_policy
        if made is not None and made[0] is backend.config:
            return made[1]
        # Imported here: compiling its patterns is a cost a read-only command skips.
        from gitmem.format import secrets

        config = backend.config
        policy = secrets.policy_from_config(config.raw)
        backend.secret_policy = (config, policy)
        return policy

    def _new_id(self, backend: Backend, given: str | None) -> str:
        """The id a write creates: ``given`` (checked) or a new one.

        A valid id is scanned with the rest of the memory (:meth:`_encode`). A refused one
        is scanned with the store's own policy before its error can echo it: the redaction
        every error gets knows only the built-in kinds, not a gitmem.yaml's ``ACME-...``."""
        if given is None:
            return new_id()
        try:
            return check_id(given)
        except InvalidIdError:
            if isinstance(given, str) and self._secrets_refused():
                from gitmem.format import secrets

                self._refresh_config(backend, backend.db.snapshot())
                secrets.refuse_memory(
                    memory_id=given, metadata={}, body="", policy=self._secret_policy(backend)
                )
            raise

    def _check_commit_text(self, backend: Backend, spec: CommitSpec) -> CommitSpec:
        """Refuse a commit whose message (subject, body, trailers) holds a credential: a
        message is pushed and kept in history exactly like a memory (``-m``, MCP ``reason``,
        ``message=``, a transaction's message and trailers)."""
        if self._secrets_refused():
            from gitmem.format import secrets

            secrets.refuse_commit_message(
                spec.subject, spec.body, spec.trailers, self._secret_policy(backend)
            )
        return spec

    def _encode(self, backend: Backend, memory: Memory) -> bytes:
        policy = self._secret_policy(backend) if self._secrets_refused() else None
        return memfile.encode(
            memory, max_body_bytes=backend.config.max_body_bytes, policy=policy
        )

    def check_file(self, data: bytes, *, what: str, scope: Scope | str | None = None) -> Memory:
        """The memory in a memory file that is to be stored byte for byte (an import), held
        to every check a write of it makes here: the store's credential policy (unless
        allowed: :attr:`allow_secrets`, :meth:`secrets_allowed`), the reader's checks at the
        path its id names, the body and front-matter bounds. Raises what a write would.
        ``what`` names the file in messages."""
        backend = self._backend(scope)
        self._refresh_config(backend, backend.db.snapshot())
        policy = self._secret_policy(backend) if self._secrets_refused() else None
        return memfile.check(
            data, what=what, max_body_bytes=backend.config.max_body_bytes, policy=policy
        )

    def _decode(self, backend: Backend, data: bytes, path: str) -> Memory:
        # The store's scope given to the constructor: a replace() after it was 5% of
        # decoding a memory, which an index build does for every file.
        return memfile.decode(
            data, path, what=path, require_memory_path=False, store_scope=backend.scope
        )

    def _load(
        self, backend: Backend, snap: Snapshot, memory_id: str, *, past: bool = False
    ) -> Memory | None:
        """The memory as ``snap`` shows it, with its derived version and updated_at.
        ``past``: ``snap`` is a commit of history, which may be from before ``gitmem
        migrate`` (Snapshot.locate)."""
        path = snap.locate(memory_id, past=past)
        data = snap.read(path) if path is not None else None
        if path is None or data is None:
            return None
        return self._derive(backend, snap, [self._decode(backend, data, path)])[0]

    # -- version and updated_at from history (gitmem.store.derived) ------------------------

    def _derive(
        self, backend: Backend, snap: Snapshot, memories: builtins.list[Memory]
    ) -> builtins.list[Memory]:
        """Memories as decoded from ``snap``'s files -> as read: version and updated_at from
        the versions in history, plus one for a change staged in ``snap`` (a plan's or a
        transaction's: one commit, one version)."""
        if not memories:
            return memories
        base = snap.base
        paths = [memory_path(m.id) for m in memories]
        found = self._versions_at(backend, base, paths)
        out: builtins.list[Memory] = []
        for memory, path in zip(memories, paths, strict=True):
            versions = found[path]
            staged = snap.changes.get(path)
            if staged is not None:
                committed = blob_at(base.tree, path) if base is not None else None
                if staged_id(staged) != committed:
                    versions = versions.plus(int(self.clock.now().timestamp()))
            out.append(versions.apply(memory))
        return out

    def _versions_at(
        self, backend: Backend, commit: pygit2.Commit | None, paths: Sequence[str]
    ) -> dict[str, derived.Versions]:
        """The versions of the memories at ``paths`` as of ``commit``: from the index when it
        reflects that commit or one a few commits before it (counting those few), else
        from one walk of the history."""
        if commit is None:
            return {path: derived.Versions() for path in paths}
        key = str(commit.id)
        known = {p: self._known[(key, p)] for p in paths if (key, p) in self._known}
        wanted = [p for p in dict.fromkeys(paths) if p not in known]
        if wanted:
            found = self._indexed_versions(backend, commit, wanted)
            if found is None:
                found = derived.walk(backend.db.repo, commit, wanted)
                assert found is not None  # no limit
            if len(self._known) + len(found) > KNOWN_VERSIONS:
                self._known.clear()
            for path, versions in found.items():
                self._known[(key, path)] = versions
            known.update(found)
        return known

    def _indexed_versions(
        self, backend: Backend, commit: pygit2.Commit, paths: Sequence[str]
    ) -> dict[str, derived.Versions] | None:
        """:meth:`_versions_at` from the index, None where it cannot say: no index, or one
        that reflects neither ``commit`` nor an ancestor at most :data:`INDEX_STEPS`
        commits before it (then, outside a transaction, the index is caught up first)."""
        if not self.use_index:
            return None
        tx = self._active_tx()
        in_tx = tx is not None and tx.backend is backend
        index = backend.index if in_tx else self._index(backend)
        if index is None:
            return None
        repo = backend.db.repo
        for attempt in (1, 2):
            try:
                indexed, counts = index.version_counts([id_from_path(p) or p for p in paths])
            except (sqlite3.Error, GitmemError):
                return None  # the index cannot say; history can
            since: dict[str, derived.Versions] | None = {}
            if indexed is None:
                since = None
            elif indexed != str(commit.id):
                start = pygit2.Oid(hex=indexed)
                since = None
                if _first_parents_reach(commit, start, INDEX_STEPS):
                    since = derived.walk(repo, commit, paths, hide=start, limit=INDEX_STEPS)
            if since is not None:
                out: dict[str, derived.Versions] = {}
                for path in paths:
                    count, newest = counts.get(id_from_path(path) or path, (0, 0))
                    base = derived.Versions(count, newest // 1_000_000 if count else None)
                    out[path] = base + since[path] if path in since else base
                return out
            if attempt == 2 or in_tx:
                return None
            try:
                index.catch_up()
            except (sqlite3.Error, GitmemError):
                return None
        return None

    def _put_new(
        self, backend: Backend, snap: Snapshot, path: str, memory: Memory, *, given: bool
    ) -> Memory:
        """Stage a new memory: version 1, unless a memory of this id (``given`` by the
        caller; a new uuid never is) had versions before, deleted since."""
        if given:
            return self._put(backend, snap, path, memory)
        snap.put(path, self._encode(backend, memory))
        return derived.Versions().plus(int(self.clock.now().timestamp())).apply(memory)

    def _put(self, backend: Backend, snap: Snapshot, path: str, memory: Memory) -> Memory:
        """Stage ``memory`` over the file at ``path``; returns it as a read of ``snap`` now
        gives it (derived: a second write in one transaction, one commit, stays one
        version)."""
        snap.put(path, self._encode(backend, memory))
        return self._derive(backend, snap, [memory])[0]

    def _require(self, backend: Backend, snap: Snapshot, memory_id: str) -> Memory:
        memory = self._load(backend, snap, memory_id)
        if memory is None:
            raise NotFoundError(f"no memory {memory_id} in the {backend.scope} store")
        return memory

    def _locate(self, memory_id: str, scope: Scope | str | None = None) -> Backend:
        """The backend that holds ``memory_id`` now (inside a transaction: as staged)."""
        check_id(memory_id)
        for backend in self._ordered(scope):
            if self._snapshot(backend, None).locate(memory_id) is not None:
                return backend
        raise NotFoundError(f"no memory {memory_id}", hint=_NOT_FOUND_HINT)

    # -- input checks -------------------------------------------------------------------

    @staticmethod
    def _body(body: str | bytes) -> str:
        if isinstance(body, bytes):
            body = codec.decode(body, what="body")
        if not isinstance(body, str):
            raise InvalidInputError(f"body must be text, not {type(body).__name__}")
        if "\x00" in body:
            raise InvalidInputError("body contains a NUL byte; memories are text")
        return body

    def _fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Check and normalise caller-settable fields; raises naming the bad one."""
        unknown = set(fields) - EDITABLE_FIELDS - {"extra"}
        if unknown:
            raise InvalidInputError(
                f"cannot set {', '.join(sorted(unknown))}: settable fields are "
                f"{', '.join(sorted(EDITABLE_FIELDS))} and extra"
            )
        out: dict[str, Any] = {}
        for key, value in fields.items():
            if key in {"title", "category", "agent", "session_id"}:
                out[key] = single_line(key, value)
            elif key == "tags":
                out[key] = tag_tuple(value)
            elif key == "related":
                out[key] = related_tuple(value)
            elif key == "trigger":
                out[key] = enum_value(Trigger, key, value)
            elif key == "status":
                out[key] = enum_value(Status, key, value) or Status.ACTIVE
            elif key == "extra":
                out[key] = extra_fields(value)
        return out

    # -- create / read ----------------------------------------------------------------------

    def create(
        self,
        body: str | bytes,
        *,
        title: str | None = None,
        category: str | None = None,
        scope: Scope | str | None = None,
        tags: Iterable[str] = (),
        related: Iterable[RelatedInput] = (),
        agent: str | None = None,
        session_id: str | None = None,
        trigger: Trigger | str | None = None,
        status: Status | str | None = None,
        id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        message: str | None = None,
    ) -> Memory:
        """Store a new memory in one commit and return it (with its new ``mem_<uuid>`` id).

        Raises AlreadyExistsError if ``id`` is given and taken, InvalidInputError
        for bad fields, TooLargeError over the body bound.
        """
        backend = self._backend(scope)
        memory_id = self._new_id(backend, id)
        body = self._body(body)
        fields = self._fields(
            {
                "title": title,
                "category": category,
                "tags": tags,
                "related": related,
                "agent": agent,
                "session_id": session_id,
                "trigger": trigger,
                "status": status,
                "extra": extra,
            }
        )

        def action(snap: Snapshot) -> tuple[_Effect, Memory]:
            if snap.locate(memory_id) is not None:
                raise AlreadyExistsError(f"a memory with id {memory_id} already exists")
            path = memory_path(memory_id)
            twin = _case_twin(snap, path) if id is not None else None  # new ids are lowercase
            if twin is not None:
                raise AlreadyExistsError(
                    f"{path} differs only in case from {twin}, which exists: on a "
                    "case-insensitive file system (macOS, Windows) the two are one file",
                    hint="use the existing name, or one that differs in more than case",
                )
            now = self.clock.now()
            memory = Memory(
                id=memory_id,
                body=body,
                created_at=now,
                updated_at=now,
                version=1,
                scope=backend.scope,
                path=path,
                store_scope=backend.scope,
                **memory_fields(fields),
            )
            memory = self._put_new(backend, snap, path, memory, given=id is not None)
            return _Effect(
                Op.CREATE, [memory_id], memory.title, None, memory.agent, memory.session_id
            ), memory

        result: Memory = self._run(backend, action, message)
        return result

    def read(self, id: str, *, at: At = None, scope: Scope | str | None = None) -> Memory:
        """The memory with this id (or a unique prefix of it, as :meth:`resolve_id` finds),
        now or ``at`` a revision or time. Raises NotFoundError or AmbiguousIdError."""
        id = id_prefix(id)
        memory = self.get(id, at=at, scope=scope)
        if memory is None and (full := self.resolve_id(id, scope=scope)) != id:
            memory = self.get(full, at=at, scope=scope)
        if memory is None:
            when = f" at {at}" if at is not None else ""
            raise NotFoundError(f"no memory {id}{when}", hint=_NOT_FOUND_HINT)
        return memory

    def get(self, id: str, *, at: At = None, scope: Scope | str | None = None) -> Memory | None:
        """Like :meth:`read`, but None when there is no such memory."""
        check_id(id)
        for backend in self._ordered(scope):
            memory = self._load(backend, self._snapshot(backend, at), id, past=at is not None)
            if memory is not None:
                return memory
        return None

    def exists(self, id: str, *, at: At = None) -> bool:
        return self.get(id, at=at) is not None

    def resolve_id(self, prefix: str, *, scope: Scope | str | None = None) -> str:
        """The full id of the one memory whose id starts with ``prefix``, in every scope.

        For people typing ids: ``mem_5f0c`` (or ``mem_5f0c...`` as help texts write it)
        names ``mem_5f0c2c1e-...`` when no other id starts that way. An id that exists is
        returned as it is; otherwise current memories are searched first, then ids that
        delete commits removed (so ``restore`` takes a prefix too). Raises
        :class:`AmbiguousIdError` listing the candidates when several match, and
        NotFoundError when none does. Path ids (``projects/x/y``) are never abbreviated.
        """
        wanted = id_prefix(prefix)
        if is_path_id(wanted) or any(
            # whether the file is there, without decoding it (the caller reads it next)
            self._snapshot(b, None).locate(wanted) is not None
            for b in self._ordered(scope)
        ):
            return wanted
        current: set[str] = set()
        for backend in self._ordered(scope):
            current.update(self._reader(backend).ids())
        found = [i for i in current if i.startswith(wanted)]
        if not found:
            deleted: set[str] = set()
            for entry in self.log(op=Op.DELETE, scope=scope):
                deleted.update(entry.ids)
                if entry.unlisted:  # a bulk delete names its first ids only: ask its files
                    deleted.update(removed_ids(self.db(entry.scope).repo, entry.commit))
            found = [i for i in deleted if i.startswith(wanted)]
        chosen = one_by_prefix(wanted, found)
        if chosen is None:
            raise NotFoundError(f"no memory {wanted}", hint=_NOT_FOUND_HINT)
        return chosen

    # -- update / append / delete / restore ----------------------------------------------------

    def update(
        self,
        id: str,
        body: str | bytes | None = None,
        *,
        expected_version: int | None = None,
        message: str | None = None,
        **fields: Any,
    ) -> Memory:
        """Change a memory in place: same id and path, ``version`` + 1, ``updated_at`` now.

        ``fields`` are any of title, category, tags, related, agent, session_id,
        trigger, status, and ``extra`` (a mapping merged into unknown keys; a None
        value removes that key). With ``expected_version`` the update fails with
        ConflictError when the stored version differs (someone else changed it).
        An update that changes nothing makes no commit.
        """
        backend = self._locate(id)
        new_body = self._body(body) if body is not None else None
        changes = self._fields(fields)

        def action(snap: Snapshot) -> tuple[_Effect, Memory]:
            current = self._require(backend, snap, id)
            check_expected(current, expected_version)
            updated = apply_fields(current, changes, new_body)
            if updated == current:
                return _Effect(Op.UPDATE, [id], current.title), current
            updated = self._put(backend, snap, memory_path(id), updated)
            return _Effect(
                Op.UPDATE,
                [id],
                updated.title,
                None,
                changes.get("agent"),
                changes.get("session_id"),
            ), updated

        result: Memory = self._run(backend, action, message)
        return result

    def append(
        self,
        id: str,
        text: str | bytes,
        *,
        expected_version: int | None = None,
        agent: str | None = None,
        session_id: str | None = None,
        message: str | None = None,
    ) -> Memory:
        """Add ``text`` at the end of the body (on a new line), as an update.

        ``agent`` and ``session_id`` go into the commit's trailers (so ``gitmem undo
        --session`` finds the write); the memory's own fields are left as they are.
        """
        backend = self._locate(id)
        addition = self._body(text)
        agent = single_line("agent", agent)
        session = single_line("session_id", session_id)

        def action(snap: Snapshot) -> tuple[_Effect, Memory]:
            current = self._require(backend, snap, id)
            check_expected(current, expected_version)
            body = current.body
            separator = "" if not body or body.endswith("\n") else "\n"
            updated = replace(current, body=body + separator + addition)
            updated = self._put(backend, snap, memory_path(id), updated)
            return _Effect(Op.APPEND, [id], updated.title, None, agent, session), updated

        result: Memory = self._run(backend, action, message)
        return result

    def update_from_text(
        self,
        id: str,
        text: str | bytes,
        *,
        expected_version: int | None = None,
        message: str | None = None,
    ) -> Memory:
        """Replace a memory with the whole file text a person edited (``gitmem edit``).

        The text is parsed and schema-validated like a stored file; every key in
        it, known or unknown, keeps the order and spelling the person wrote. The
        id must not change (:meth:`supersede` writes under a new id).
        ``version``, ``created_at`` and ``updated_at`` belong to the store:
        whatever the text says, the result keeps the stored ``created_at``, and
        the other two are derived (the file does not carry them). Text that
        differs from the stored file only in those fields makes no commit and
        returns the memory as it is. When anything is wrong nothing is written.
        """
        backend = self._locate(id)
        if isinstance(text, bytes):
            text = codec.decode(text, what="edited text")
        doc = codec.parse(self._body(text))
        if not doc.has_front_matter:
            raise InvalidMemoryError(
                "the edited text has no front-matter (it must start with a '---' line)"
            )
        given_id = doc.metadata.get("id")
        if given_id != id:
            raise InvalidMemoryError(
                f"the id cannot change: it is {id}, the edited text says {given_id!r}",
                hint="put the id back; gitmem supersede writes a memory under a new id",
            )

        def action(snap: Snapshot) -> tuple[_Effect, Memory]:
            current = self._require(backend, snap, id)
            check_expected(current, expected_version)
            path = memory_path(id)
            metadata = {k: v for k, v in doc.metadata.items() if k not in DERIVED_KEYS}
            metadata["created_at"] = current.to_metadata()["created_at"]
            schema.validate(metadata, what="edited text")
            updated = memory_from_document(doc.with_changes(metadata, doc.body), path=path)
            updated = replace(updated, store_scope=backend.scope)
            if self._encode(backend, updated) == snap.read(path):
                return _Effect(Op.UPDATE, [id], current.title), current
            target = updated.supersedes
            if target is not None and target != current.supersedes:
                if target == id:
                    raise InvalidIdError("a memory cannot supersede itself")
                if snap.locate(target) is None:
                    raise InvalidInputError(
                        f"supersedes names {target}, which is not in the {backend.scope} store"
                    )
            updated = self._put(backend, snap, path, updated)
            return _Effect(Op.UPDATE, [id], updated.title), updated

        result: Memory = self._run(backend, action, message)
        return result

    def delete(
        self,
        id: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        message: str | None = None,
        missing_ok: bool = True,
    ) -> bool:
        """Remove a memory from the current tree (history keeps it; :meth:`restore` brings it back).

        Returns False when there was nothing to delete, or with ``missing_ok=False``
        raises :class:`NotFoundError` saying where deleted memories are found. ``agent``
        and ``session_id`` go into the commit's trailers.
        """
        check_id(id)
        try:
            backend = self._locate(id)
        except NotFoundError:
            if missing_ok:
                return False
            raise NotFoundError(
                f"no memory {id}",
                hint="gitmem ls --all lists current memories; "
                "gitmem log --op delete shows deleted ones",
            ) from None
        agent = single_line("agent", agent)
        session = single_line("session_id", session_id)

        def action(snap: Snapshot) -> tuple[_Effect, bool]:
            path = snap.locate(id)
            data = snap.read(path) if path is not None else None
            if path is None or data is None:
                return _Effect(Op.DELETE, [id]), False
            title = None
            with contextlib.suppress(GitmemError):
                title = self._decode(backend, data, path).title
            snap.remove(path)
            return _Effect(Op.DELETE, [id], title, None, agent, session), True

        result: bool = self._run(backend, action, message)
        if not result and not missing_ok:
            raise NotFoundError(f"no memory {id}", hint="someone deleted it meanwhile")
        return result

    def keep_folder(
        self,
        folder: str,
        keep: bool = True,
        *,
        scope: Scope | str | None = None,
        message: str | None = None,
    ) -> bool:
        """Keep a folder below a document root in the tree though it holds no memory (an
        empty ``.gitkeep`` file in it, which is not a memory and which every reader skips),
        or with ``keep=False`` remove that file. Returns whether anything changed.

        Claude's memory tool uses it for the empty directories a file system keeps after
        a delete or a rename. In a transaction it joins the transaction's commit.
        """
        check_id(folder, what="folder")
        if not is_path_id(folder):
            raise InvalidInputError(f"folder {folder!r} is not below a document root")
        backend = self._backend(scope)
        path = f"{folder}/{KEEP_FILE}"

        def action(snap: Snapshot) -> tuple[_Effect | None, bool]:
            if snap.exists(path) == keep:
                return None, False
            if keep:
                snap.put(path, b"")
            else:
                snap.remove(path)
            return None, True

        result: bool = self._run(backend, action, message)
        return result

    def restore(
        self,
        id: str,
        *,
        at: At = None,
        scope: Scope | str | None = None,
        agent: str | None = None,
        message: str | None = None,
    ) -> Memory:
        """Bring back a deleted memory as it last was, or roll one back to its content ``at``.

        The restore is a new version of the memory (docs/format.md), so it is a visible
        step of its history.
        """
        check_id(id)
        agent = single_line("agent", agent)
        backend = self._backend(scope)
        if scope is None:
            for candidate in self._ordered(None):
                if self._find_past(candidate, id, at) is not None:
                    backend = candidate
                    break
        data = self._find_past(backend, id, at)
        if data is None:
            raise NotFoundError(f"memory {id} is not in this store's history")
        path = memory_path(id)
        past = self._decode(backend, data, path)

        def action(snap: Snapshot) -> tuple[_Effect, Memory]:
            current = self._load(backend, snap, id)
            if current is not None and at is None:
                raise AlreadyExistsError(
                    f"memory {id} exists; pass at=REVISION|DATE to roll it back"
                )
            restored = past
            if current is not None:
                restored = replace(restored, document=current.document)
            restored = self._put(backend, snap, path, replace(restored, path=path))
            return _Effect(Op.RESTORE, [id], restored.title, None, agent), restored

        result: Memory = self._run(backend, action, message)
        return result

    def _find_past(self, backend: Backend, memory_id: str, at: At) -> bytes | None:
        """The memory's content at ``at``, or (at=None) its last content before it was
        deleted (in history from before ``gitmem migrate`` too)."""
        if at is not None:
            snap = backend.db.snapshot(at)
            found = snap.locate(memory_id, past=True)
            return snap.read(found) if found is not None else None
        repo = backend.db.repo
        path = memory_path(memory_id)
        for commit in backend.db.walk():
            blob = memory_blob(commit.tree, path)
            if blob is not None:
                return blob_data(repo, blob)
        return None

    # -- versions ---------------------------------------------------------------------

    def supersede(
        self,
        old_id: str,
        body: str | bytes,
        *,
        id: str | None = None,
        message: str | None = None,
        **fields: Any,
    ) -> Memory:
        """Write a new memory that replaces ``old_id``; the old file is not touched.

        The new memory's ``supersedes`` names the old one; it is a new memory (version
        1). Title, category, tags and related are carried forward unless given; scope
        is the old memory's store.
        """
        backend = self._locate(old_id)
        new_memory_id = self._new_id(backend, id)
        if new_memory_id == old_id:
            raise InvalidIdError("a memory cannot supersede itself")
        new_body = self._body(body)
        given = self._fields(fields)

        def action(snap: Snapshot) -> tuple[_Effect, Memory]:
            old = self._require(backend, snap, old_id)
            path = memory_path(new_memory_id)
            if snap.locate(new_memory_id) is not None:
                raise AlreadyExistsError(f"a memory with id {new_memory_id} already exists")
            now = self.clock.now()
            carried: dict[str, Any] = {
                "title": old.title,
                "category": old.category,
                "tags": old.tags,
                "related": old.related,
            }
            carried.update(given)
            memory = Memory(
                id=new_memory_id,
                body=new_body,
                created_at=now,
                updated_at=now,
                version=1,
                supersedes=old_id,
                scope=backend.scope,
                path=path,
                store_scope=backend.scope,
                **memory_fields(carried),
            )
            memory = self._put_new(backend, snap, path, memory, given=id is not None)
            effect = _Effect(
                Op.SUPERSEDE, [new_memory_id], memory.title, old_id, memory.agent, memory.session_id
            )
            return effect, memory

        result: Memory = self._run(backend, action, message)
        return result

    def list(
        self,
        *,
        scope: Scope | str | None = None,
        category: str | None = None,
        tags: Iterable[str] | None = None,
        include_superseded: bool = False,
        include_archived: bool = False,
        at: At = None,
    ) -> builtins.list[Memory]:
        """Memories, oldest first; superseded and archived ones only when asked for.

        Files that cannot be read as memories are skipped and logged; see
        :meth:`problems` for the full list.
        """
        wanted_tags = set(tag_tuple(tags)) if tags else set()
        out: builtins.list[Memory] = []
        for backend in self._ordered(scope):
            out.extend(
                self._reader(backend, at).memories(
                    category=category,
                    tags=sorted(wanted_tags),
                    include_superseded=include_superseded,
                    include_archived=include_archived,
                )
            )
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def documents(
        self, folder: str, *, recursive: bool = False, scope: Scope | str | None = None
    ) -> builtins.list[str]:
        """Path ids of the documents in ``folder`` (``projects/acme``), sorted; [] if none.

        Read from the tip's tree (inside a transaction: as staged), so it costs the
        folder's size, not the store's. ``recursive`` includes sub-folders.
        """
        folder = folder.strip("/")
        if folder not in DOCUMENT_ROOTS:
            check_id(folder, what="folder")
            if not is_path_id(folder):
                raise InvalidIdError(
                    f"folder {folder!r} is not under one of the document roots "
                    + ", ".join(DOCUMENT_ROOTS)
                )
        found: set[str] = set()
        for backend in self._ordered(scope):
            for path in self._snapshot(backend, None).iter_files(folder):
                if not recursive and "/" in path[len(folder) + 1 :]:
                    continue
                memory_id = id_from_path(path)
                if memory_id is not None:
                    found.add(memory_id)
        return sorted(found)

    def problems(self, *, scope: Scope | str | None = None) -> builtins.list[Problem]:
        """Files under the memory folders that are not valid memories, with the reason."""
        found: builtins.list[Problem] = []
        for backend in self._ordered(scope):
            found.extend(self._reader(backend).problems())
        return found

    def version_chain(self, id: str, max_depth: int = 1000, *, at: At = None) -> Chain:
        """The chain of memories ``id`` replaces, root first, ending at ``id``."""
        start = self.read(id, at=at)
        found: builtins.list[str] = []
        chain = walk_back(start, lambda other: self._predecessor(other, at, found), max_depth)
        chain = replace(chain, warnings=found + chain.warnings)
        for warning in chain.warnings:
            log.warning("%s", warning)
        return chain

    def _predecessor(self, other: str, at: At, warnings: builtins.list[str]) -> Memory | None:
        """A memory named in ``supersedes``, now or as it last was before a delete.

        None when there is none or it cannot be read: links are written by hand too,
        so a broken one is reported (in ``warnings``), never fatal.
        """
        try:
            found = self.get(other, at=at)
        except InvalidIdError:
            warnings.append(f"supersedes names {other!r}, which is not a valid id")
            return None
        except GitmemError as exc:
            warnings.append(f"{other} cannot be read: {exc}")
            return None
        return found if found is not None else self._last_known(other)

    def _last_known(self, id: str) -> Memory | None:
        """A deleted memory as it last was, from history (chains may run through deleted ones)."""
        for backend in self._ordered(None):
            data = self._reader(backend).last_data(id)
            if data is not None:
                with contextlib.suppress(GitmemError):
                    return self._decode(backend, data, memory_path(id))
        return None

    def latest_version(self, id: str) -> Memory:
        """The newest memory that (transitively) supersedes ``id``, or ``id`` itself.

        When two memories supersede the same one (a fork), the higher version wins,
        then the later ``updated_at``, then the id; a warning is logged.
        """
        check_id(id)
        latest_id, _, warnings = walk_forward(id, self._successors_of)
        for warning in warnings:
            log.warning("%s", warning)
        return self.read(latest_id)

    def successors(self, id: str) -> builtins.list[Memory]:
        """Memories that name ``id`` in ``supersedes`` (more than one is a fork)."""
        check_id(id)
        return self._successors_of(id)

    def _successors_of(self, id: str) -> builtins.list[Memory]:
        found: builtins.list[Memory] = []
        for backend in self._ordered(None):
            found.extend(self._reader(backend).successors(id))
        return found

    def history(self, id: str, *, max_depth: int = 1000) -> History:
        """Every version along the chain ending at ``id``, oldest first.

        Follows ``supersedes`` back to the root and expands each memory's file into
        the commits that changed it: version, commit, time, author, agent,
        operation, and the content at that point.
        """
        check_id(id)
        warnings: builtins.list[str] = []
        try:
            current = self.get(id) or self._last_known(id)
        except GitmemError as exc:
            # A file broken now still has a history worth seeing (to restore from).
            warnings.append(f"{id} cannot be read now, so its supersedes link is unknown: {exc}")
            ids = [id]
        else:
            if current is None:
                raise NotFoundError(f"no memory {id} in this store or its history")
            chain = walk_back(
                current, lambda other: self._predecessor(other, None, warnings), max_depth
            )
            warnings.extend(chain.warnings)
            ids = chain.ids
        # Steps follow the commits (many land within one second, and a hand commit's
        # clock may disagree with gitmem's); only separate scopes are merged by time.
        versions = builtins.list(
            heapq.merge(
                *(self._versions_of(b, ids, warnings) for b in self._ordered(None)),
                key=lambda v: v.time,
            )
        )
        if not versions:
            raise NotFoundError(f"no memory {id} in this store or its history")
        for warning in warnings:
            log.warning("%s", warning)
        return History(versions, warnings)

    def _versions_of(
        self, backend: Backend, ids: Sequence[str], warnings: builtins.list[str]
    ) -> builtins.list[Version]:
        """The steps of ``ids``' files in one scope, each memory's numbered by its own
        versions so far (gitmem.store.derived): exact along one line of history; where
        branches ran side by side, a step counts what came before it in this order."""
        counted: dict[str, derived.Versions] = {}
        out: builtins.list[Version] = []
        for step in self._reader(backend).versions(ids, warnings):
            versions = counted.get(step.memory_id, derived.Versions())
            if step.counted:
                versions = counted[step.memory_id] = versions.plus(int(step.time.timestamp()))
            if step.memory is None:  # a deletion: no version of its own
                out.append(replace(step, version=None))
                continue
            memory = versions.apply(step.memory)
            out.append(replace(step, version=memory.version, memory=memory))
        return out

    # -- search --------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        mode: str = "fts",
        scope: Scope | str | None = None,
        layer: str | None = None,
        project: str | None = None,
        category: str | None = None,
        tags: Iterable[str] | None = None,
        include_superseded: bool = False,
        include_archived: bool = False,
        limit: int = 20,
    ) -> SearchResults:
        """Search the current memories; best matches first.

        ``mode="fts"`` takes FTS5 syntax (``AND``, ``OR``, ``NOT``, ``"phrases"``,
        ``prefix*``) and ranks title matches first, then by bm25. A query that is not
        FTS5 syntax (FTS5 cannot parse it, or it has no operator and no memory holds all
        its words) is answered by :meth:`recall` instead, and ``notice`` says so.
        ``"regex"`` is a grep over the bodies (Python regex syntax), one match per
        line (a title-only match has no line number); ``"substring"`` is the same
        for a case-insensitive literal.
        """
        from gitmem.store import search as search_mod
        from gitmem.store.search import SearchResults

        checked_mode = search_mod.check_mode(mode)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("the search query is empty")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidInputError(f"limit must be a positive integer, not {limit!r}")
        filters: dict[str, Any] = {
            "category": category,
            "tags": sorted(set(tag_tuple(tags))) if tags else [],
            "include_superseded": include_superseded,
            "include_archived": include_archived,
            "layer": layer,
            "project": project,
        }
        results = SearchResults(query=query, mode=checked_mode)
        if checked_mode != "fts":
            pattern = search_mod.compile_line_pattern(query, checked_mode)
            memories = itertools.chain.from_iterable(
                self._search_candidates(b, filters) for b in self._ordered(scope)
            )
            results.matches = search_mod.grep(memories, pattern, limit)
            return results
        found = search_mod.full_text_matches(
            query, (self._reader(b) for b in self._ordered(scope)), limit, filters
        )
        if isinstance(found, str):
            # Not FTS5 syntax: a question, punctuation, words no memory holds all of.
            why = found
            recalled = self.recall(
                query,
                limit=limit,
                scope=scope,
                category=category,
                tags=tags,
                include_superseded=include_superseded,
                include_archived=include_archived,
                layer=layer,
                project=project,
            )
            results.notice = f"searched {query!r} as natural language ({why})"
            results.mode = "natural"  # scores are recall's, not FTS5 tiers and bm25
            results.matches = [search_mod.from_recall(h) for h in recalled]
            return results
        results.matches = found
        return results

    def recall(
        self,
        query: str,
        *,
        limit: int = 10,
        scope: Scope | str | None = None,
        category: str | None = None,
        tags: Iterable[str] | None = None,
        include_superseded: bool = False,
        include_archived: bool = False,
        at: At = None,
        budget: int | None = None,
        layer: str | None = None,
        project: str | None = None,
    ) -> RecallResults:
        """The memories that answer ``query`` (a question, keywords, an identifier, a path),
        best first, each with its best-matching lines and why it ranked.

        No query raises: one with no words finds nothing, with a notice. Superseded
        memories count for the newest version of their chain; archived ones are left out.
        ``budget`` (tokens) also packs the best whole memories into ``results.packed``.
        ``layer`` / ``project`` keep layered documents of that layer / project.
        See :mod:`gitmem.store.recall` and docs/recall.md. Raises InvalidInputError for a bad
        ``limit`` or ``budget``.
        """
        from gitmem.store.recall import recall

        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidInputError(f"limit must be a positive integer, not {limit!r}")
        if budget is not None and (
            not isinstance(budget, int) or isinstance(budget, bool) or budget < 0
        ):
            raise InvalidInputError(f"budget must be a number of tokens >= 0, not {budget!r}")
        return recall(
            self,
            query,
            limit=limit,
            scope=scope,
            category=category,
            tags=sorted(set(tag_tuple(tags))) if tags else (),
            include_superseded=include_superseded,
            include_archived=include_archived,
            at=at,
            budget=budget,
            layer=layer,
            project=project,
        )

    def near_duplicates(
        self, memory: Memory, *, limit: int = 3
    ) -> builtins.list[tuple[Memory, float]]:
        """Current memories that say much the same as ``memory`` (one already stored, say
        what :meth:`create` returned), with their similarity (0..1), most similar first:
        candidates to update instead of keeping both.
        See :func:`gitmem.store.recall.near_duplicates`.
        """
        from gitmem.store.recall import near_duplicates

        return [(hit.memory, sim) for hit, sim in near_duplicates(self, memory, limit=limit)]

    def _search_candidates(self, backend: Backend, filters: Mapping[str, Any]) -> Iterator[Memory]:
        return self._reader(backend).candidates(filters)

    # -- the audit log --------------------------------------------------------------------

    def log(
        self,
        *,
        agent: str | None = None,
        op: str | Op | None = None,
        id: str | None = None,
        since: str | dt.datetime | dt.date | None = None,
        until: str | dt.datetime | dt.date | None = None,
        limit: int | None = None,
        scope: Scope | str | None = None,
        path: str | None = None,
        category: str | None = None,
    ) -> builtins.list[LogEntry]:
        """Commits, newest first, filtered by the facts in their trailers.

        ``path`` keeps commits that changed a file under it (a file, a directory or
        a glob); ``category`` those that changed a memory of that category (see
        :func:`gitmem.store.touches.touches`).
        """
        from gitmem.store.touches import read_log

        return read_log(
            [(b.db, b.scope) for b in self._ordered(scope)],
            agent=agent,
            op=op,
            id=id,
            since=since,
            until=until,
            limit=limit,
            path=path,
            category=category,
        )


# -- helpers ---------------------------------------------------------------------------


def index_writable(db: GitDB) -> bool:
    """Whether this process may create or update the store's index file."""
    from gitmem.store.index import DB_NAME

    state = db.state_dir
    index_file = state / DB_NAME
    if index_file.exists():
        return os.access(index_file, os.W_OK) and os.access(state, os.W_OK)
    return os.access(state if state.exists() else db.gitdir, os.W_OK)


def _first_parents_reach(commit: pygit2.Commit, target: pygit2.Oid, steps: int) -> bool:
    """Whether ``target`` is ``commit`` or one of its first ``steps`` first-parent ancestors."""
    each = commit
    for _ in range(steps + 1):
        if each.id == target:
            return True
        parents = each.parent_ids
        if not parents:
            return False
        if target in parents:
            return True
        each = each.parents[0]
    return False


def _case_twin(snap: Snapshot, path: str) -> str | None:
    """A path in ``snap`` equal to ``path`` but for letter case, at the file or any folder on
    the way; None if there is none. Git keeps such twins apart; a checkout on a
    case-insensitive file system would write one over the other."""
    parts = path.split("/")
    for depth, name in enumerate(parts):
        parent = "/".join(parts[:depth])
        for other in snap.committed_spellings(parent, name):
            if other != name:
                return "/".join([*parts[:depth], other])
        here = "/".join(parts[: depth + 1])
        for staged in snap.staged_spellings(here):
            if staged != here and _staged_live(snap, staged):
                return staged
    return None


def _staged_live(snap: Snapshot, path: str) -> bool:
    """Whether a staged file is at ``path`` or under it (a staged removal is not one).
    Only asked when a case twin was staged, so the scan is rare."""
    inside = f"{path}/"
    return any(
        data is not None and (p == path or p.startswith(inside)) for p, data in snap.changes.items()
    )


# -- opening stores ------------------------------------------------------------------------


