"""A Store's repositories and how its writes become commits: one :class:`Backend` per scope;
a write is an *action* staged in a snapshot, in a commit of its own or, inside
``with store.transaction():``, in one shared commit replayed on the newest tip if another
writer moved the branch. Every commit's text and file pass the store's secret policy here."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pygit2

from gitmem.base.clock import Clock, SystemClock
from gitmem.base.errors import ConflictError, InvalidInputError, StoreError
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
from gitmem.format import codec, memfile
from gitmem.format.config import StoreConfig
from gitmem.format.layout import CONFIG_FILE
from gitmem.format.model import Memory, Op, Scope
from gitmem.git import localconfig
from gitmem.git.db import GitDB
from gitmem.git.diff import changed_paths
from gitmem.git.objects import Snapshot
from gitmem.store import memory_versions
from gitmem.store.index import Index
from gitmem.store.inputs import author_name, check_trailer, single_line

At = str | dt.datetime | dt.date | None


@dataclass
class Effect:
    """What one action did, for the commit message and trailers."""

    op: Op
    ids: list[str]
    title: str | None = None
    supersedes: str | None = None
    agent: str | None = None
    session: str | None = None


T = TypeVar("T")
Action = Callable[[Snapshot], tuple[Effect | None, T]]
"""A write staged on a snapshot: its effect on memories (None for a file that is not a
memory, such as a folder's ``.gitkeep``) and the value the caller gets."""


class Effects:
    """What a transaction's writes did, summed up as they are staged (not kept one by
    one: a bulk import stages a million)."""

    def __init__(self, effects: Iterable[Effect] = ()) -> None:
        self.count = 0
        self.first: Effect | None = None
        # Dicts: first-seen order with O(1) membership.
        self.ops: dict[str, None] = {}
        self.ids: dict[str, None] = {}
        self.supersedes: list[str] = []
        self.agent: str | None = None
        self.session: str | None = None
        for effect in effects:
            self.add(effect)

    def add(self, effect: Effect) -> None:
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


ID_TRAILERS = 1_000
"""``Gitmem-Id`` trailers a commit lists at most; the rest are counted in one
``Gitmem-Ids-Unlisted`` (libgit2 does not cache a large commit)."""

REPLAY_LIMIT = 1_000
REPLAY_BYTES = 8 * 1024 * 1024
"""Operations (and bytes of staged files) a transaction keeps to replay on a newer tip;
past either it keeps only what it staged, not every operation's inputs (a bulk import),
and goes onto a moved tip only as staged (:meth:`Transactions._rebase_staged`)."""


class Transaction:
    """Many operations, one commit, all or nothing (:meth:`Store.transaction`): its write methods
    are the Store's, and reads through the store inside the block see what it staged."""

    def __init__(self, store: Transactions, backend: Backend) -> None:
        self.store = store
        self.backend = backend
        self.ran = 0
        self.actions: list[Action[Any]] | None = []
        """The operations to replay on a newer tip; None past :data:`REPLAY_LIMIT`."""
        self.effects = Effects()
        # Each staged file's blob is written at once and only its id kept: what the
        # transaction holds does not grow with the bytes it stages (reads get them back).
        self.snapshot = Snapshot(backend.db.repo, backend.db.resolve(None), write_blobs=True)
        self.commit: str | None = None
        self.trailers: list[tuple[str, str]] = []

    def run(self, action: Action[T]) -> T:
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
        return bool(getattr(mine, "id", None) == getattr(theirs, "id", None))

    def __getattr__(self, name: str) -> Any:
        # tx.create(...), tx.update(...), tx.read(...): the store's own methods,
        # which join this transaction because it is active on this thread.
        return getattr(self.store, name)


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


class Transactions:
    """What every Store layer shares: the repositories by scope, the transaction active
    on this thread, and the checks and encoding a commit goes through."""

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
        self._known: dict[tuple[str, str], memory_versions.Versions] = {}
        """Versions of a memory (by path) as of a commit: a fact that never changes, kept
        so that a write's second question about the commit it builds on costs nothing."""

    @contextlib.contextmanager
    def secrets_allowed(self) -> Iterator[None]:
        """Writes in this block (this thread) may store content that looks like a credential; else
        they raise :class:`gitmem.format.secrets.SecretsFoundError` naming its kind and line."""
        before = getattr(self._secrets_ok, "on", False)
        self._secrets_ok.on = True
        try:
            yield
        finally:
            self._secrets_ok.on = before

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
        """Group writes into one commit when the block ends without an exception: all or none.
        Reads in the block see them; a moved branch gets them replayed (:meth:`_rebase_staged`).
        ``op``: the commit is one operation of that name by ``by``, ``body`` its reason
        (``gitmem resolve``); ``trailers`` follow gitmem's own (``tx.trailers`` may still grow)."""
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
        tx = Transaction(self, backend)
        tx.trailers.extend(trailers)
        self._tx.active = tx
        try:
            yield tx
        finally:
            self._tx.active = None
        if not tx.ran:
            return

        def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
            effects: Effects
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
                effects = Effects(e for e in (action(snap)[0] for action in tx.actions) if e)
            for key, value in tx.trailers:
                check_trailer(key, value)
            subject = message or f"transaction: {effects.count} operations"
            spec = commit_spec(effects, subject, body, tx.trailers, op=op, by=by)
            return self._check_commit_text(backend, spec), None

        _, oid = backend.db.write(plan)
        tx.commit = str(oid) if oid is not None else None

    def _rebase_staged(self, backend: Backend, tx: Transaction, snap: Snapshot) -> None:
        """Let a transaction too large to replay commit its staged files on ``snap``, a
        newer tip, when the commits since its base changed none of those files (nor a case
        twin of one) nor the store's configuration; else ConflictError, nothing written."""
        base = tx.snapshot.commit
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

    def _active_tx(self) -> Transaction | None:
        return getattr(self._tx, "active", None)

    def _run(self, backend: Backend, action: Action[T], message: str | None) -> T:
        tx = self._active_tx()
        if tx is not None:
            if tx.backend is not backend:
                raise InvalidInputError(
                    f"this transaction writes to the {tx.backend.scope} scope, not {backend.scope}"
                )
            return tx.run(action)

        def plan(snap: Snapshot) -> tuple[CommitSpec, T]:
            self._refresh_config(backend, snap)
            effect, value = action(snap)
            # No effect: no memory changed, a folder was kept or let go (keep_folder).
            effects = Effects([effect] if effect is not None else [])
            spec = commit_spec(effects, message or "keep folder", message)
            return self._check_commit_text(backend, spec), value

        value, _ = backend.db.write(plan)
        return value

    def _snapshot(self, backend: Backend, at: At) -> Snapshot:
        tx = self._active_tx()
        if at is None and tx is not None and tx.backend is backend:
            return tx.snapshot
        return backend.db.snapshot(at)

    def _secrets_refused(self) -> bool:
        return not (self.allow_secrets or getattr(self._secrets_ok, "on", False))

    def _secret_policy(self, backend: Backend) -> Any:
        """The store's secret policy, None while secrets are allowed. Made once per config
        (compiling one is ~50 µs); a newly committed config is a new object."""
        if not self._secrets_refused():
            return None
        made = backend.secret_policy
        if made is not None and made[0] is backend.config:
            return made[1]
        # Imported here: compiling its patterns is a cost a read-only command skips.
        from gitmem.format import secrets

        config = backend.config
        policy = secrets.policy_from_config(config.raw)
        backend.secret_policy = (config, policy)
        return policy

    def _check_commit_text(self, backend: Backend, spec: CommitSpec) -> CommitSpec:
        """Refuse a commit whose message (subject, body, trailers) holds a credential: a
        message is pushed and kept in history exactly like a memory (``-m``, MCP ``reason``,
        ``message=``, a transaction's message and trailers)."""
        policy = self._secret_policy(backend)
        if policy is not None:
            from gitmem.format import secrets

            secrets.refuse_commit_message(spec.subject, spec.body, spec.trailers, policy)
        return spec

    def _encode(self, backend: Backend, memory: Memory) -> bytes:
        policy = self._secret_policy(backend)
        return memfile.encode(memory, max_body_bytes=backend.config.max_body_bytes, policy=policy)

    def check_file(self, data: bytes, *, what: str, scope: Scope | str | None = None) -> Memory:
        """The memory in a file to be stored byte for byte (an import), held to every check a write
        makes (credential policy unless allowed, path, body and front-matter bounds); raises what a
        write would. ``what`` names the file in messages."""
        backend = self._backend(scope)
        self._refresh_config(backend, backend.db.snapshot())
        policy = self._secret_policy(backend)
        return memfile.check(
            data, what=what, max_body_bytes=backend.config.max_body_bytes, policy=policy
        )

    def _decode(self, backend: Backend, data: bytes, path: str) -> Memory:
        # The scope given to the constructor: a replace() after it costs an index build 5%.
        return memfile.decode(
            data, path, what=path, require_memory_path=False, store_scope=backend.scope
        )


def commit_spec(
    summary: Effects,
    subject: str,
    body: str | None,
    extra_trailers: Sequence[tuple[str, str]] = (),
    *,
    op: str | None = None,
    by: str | None = None,
) -> CommitSpec:
    """The commit of ``summary``: one write's names it (``op: title``, ``body`` its message),
    several take ``subject``. ``op`` and ``by`` name the operation and who ran it when a
    transaction is one act of its own (``resolve``), not the sum of its writes."""
    ops = list(summary.ops)
    agent = summary.agent
    if op is not None:
        ops = [op]
        agent = by or None
    elif summary.count == 1 and summary.first is not None:
        effect = summary.first
        subject = f"{effect.op}: {effect.title or effect.ids[0]}"
    else:
        body = None
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
    return CommitSpec(subject=subject, body=body, trailers=trailers, author=author)
