"""A Store's writes (create, update, append, edit, delete, restore, supersede, keep a folder),
each an action staged in a snapshot (:mod:`gitmem.store.transactions`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import (
    AlreadyExistsError,
    GitmemError,
    InvalidIdError,
    InvalidInputError,
    InvalidMemoryError,
    NotFoundError,
)
from gitmem.base.trailers import REASON_TRAILER, VALID_UNTIL_TRAILER
from gitmem.format import codec, schema
from gitmem.format.layout import KEEP_FILE, check_id, is_path_id, memory_path, new_id
from gitmem.format.model import (
    DERIVED_KEYS,
    Memory,
    Op,
    Scope,
    Status,
    Trigger,
    memory_from_document,
)
from gitmem.git.objects import Snapshot
from gitmem.store import memory_versions
from gitmem.store.history import VersionHistory
from gitmem.store.inputs import (
    RelatedInput,
    apply_fields,
    body_text,
    check_expected,
    memory_fields,
    settable_fields,
    single_line,
    valid_time,
)
from gitmem.store.reads import NOT_FOUND_HINT
from gitmem.store.transactions import At, Backend, Effect


class Writes(VersionHistory):
    """The writes of a Store: each an action, in a commit of its own or a transaction's."""

    def _new_id(self, backend: Backend, given: str | None) -> str:
        """The id a write creates: ``given`` (checked) or a new one. A refused id is scanned
        with the store's own secret policy before its error echoes it (the redaction every
        error gets knows only the built-in kinds)."""
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

    def _add_new(
        self,
        backend: Backend,
        snap: Snapshot,
        memory_id: str,
        body: str,
        fields: Mapping[str, Any],
        *,
        given: bool,
        supersedes: str | None = None,
    ) -> Memory:
        """Stage a new memory: version 1, unless a memory of this id (``given`` by the
        caller; a new uuid never is) had versions before, deleted since."""
        if snap.locate(memory_id) is not None:
            raise AlreadyExistsError(f"a memory with id {memory_id} already exists")
        path = memory_path(memory_id)
        twin = _case_twin(snap, path) if given else None  # new ids are lowercase
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
            supersedes=supersedes,
            scope=backend.scope,
            path=path,
            store_scope=backend.scope,
            **memory_fields(fields),
        )
        if given:
            return self._put(backend, snap, path, memory)
        snap.put(path, self._encode(backend, memory))
        return memory_versions.Versions().plus(int(now.timestamp())).apply(memory)

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
        raise NotFoundError(f"no memory {memory_id}", hint=NOT_FOUND_HINT)

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
        allow_empty: bool = False,
        valid_from: At = None,
        valid_until: At = None,
    ) -> Memory:
        """Store a new memory in one commit and return it (id ``mem_<uuid>`` unless ``id``).
        ``valid_from``/``valid_until``: when the fact held in the world. Raises AlreadyExistsError
        for a taken ``id``, InvalidInputError for bad fields or an empty body (unless
        ``allow_empty``), TooLargeError over the body bound."""
        backend = self._backend(scope)
        memory_id = self._new_id(backend, id)
        body = body_text(body, allow_empty=allow_empty)
        fields = settable_fields(
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
                "valid_from": valid_from,
                "valid_until": valid_until,
            }
        )

        def action(snap: Snapshot) -> tuple[Effect, Memory]:
            memory = self._add_new(backend, snap, memory_id, body, fields, given=id is not None)
            return Effect(
                Op.CREATE, [memory_id], memory.title, None, memory.agent, memory.session_id
            ), memory

        return self._run(backend, action, message)

    def update(
        self,
        id: str,
        body: str | bytes | None = None,
        *,
        expected_version: int | None = None,
        message: str | None = None,
        allow_empty: bool = False,
        **fields: Any,
    ) -> Memory:
        """Change a memory in place: same id, ``version`` + 1. ``fields``: ``model.EDITABLE_FIELDS``
        and ``extra`` (merged; a None value removes a key). ``expected_version``: ConflictError
        when the stored one differs. An update that changes nothing makes no commit."""
        backend = self._locate(id)
        new_body = body_text(body, allow_empty=allow_empty) if body is not None else None
        changes = settable_fields(fields)

        def action(snap: Snapshot) -> tuple[Effect, Memory]:
            current = self._require(backend, snap, id)
            check_expected(current, expected_version)
            updated = apply_fields(current, changes, new_body)
            if updated == current:
                return Effect(Op.UPDATE, [id], current.title), current
            updated = self._put(backend, snap, memory_path(id), updated)
            agent, session = changes.get("agent"), changes.get("session_id")
            return Effect(Op.UPDATE, [id], updated.title, None, agent, session), updated

        return self._run(backend, action, message)

    def append(
        self,
        id: str,
        text: str | bytes,
        *,
        expected_version: int | None = None,
        agent: str | None = None,
        session_id: str | None = None,
        message: str | None = None,
        allow_empty: bool = False,
    ) -> Memory:
        """Add ``text`` at the end of the body (on a new line), as an update; ``agent`` and
        ``session_id`` go into the commit's trailers only (``gitmem undo --session`` finds it)."""
        backend = self._locate(id)
        addition = body_text(text, what="text", allow_empty=allow_empty)
        agent = single_line("agent", agent)
        session = single_line("session_id", session_id)

        def action(snap: Snapshot) -> tuple[Effect, Memory]:
            current = self._require(backend, snap, id)
            check_expected(current, expected_version)
            body = current.body
            separator = "" if not body or body.endswith("\n") else "\n"
            updated = replace(current, body=body + separator + addition)
            updated = self._put(backend, snap, memory_path(id), updated)
            return Effect(Op.APPEND, [id], updated.title, None, agent, session), updated

        return self._run(backend, action, message)

    def update_from_text(
        self,
        id: str,
        text: str | bytes,
        *,
        expected_version: int | None = None,
        message: str | None = None,
    ) -> Memory:
        """Replace a memory with the whole file text a person edited (``gitmem edit``), validated
        like a stored file, keys kept as written; the id must not change and ``created_at`` stays
        the stored one. Text that differs only in derived fields makes no commit."""
        backend = self._locate(id)
        doc = codec.parse(body_text(text, what="edited text", allow_empty=True))
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

        def action(snap: Snapshot) -> tuple[Effect, Memory]:
            current = self._require(backend, snap, id)
            check_expected(current, expected_version)
            path = memory_path(id)
            metadata = {k: v for k, v in doc.metadata.items() if k not in DERIVED_KEYS}
            metadata["created_at"] = current.to_metadata()["created_at"]
            schema.validate(metadata, what="edited text")
            updated = memory_from_document(doc.with_changes(metadata, doc.body), path=path)
            updated = replace(updated, store_scope=backend.scope)
            if self._encode(backend, updated) == snap.read(path):
                return Effect(Op.UPDATE, [id], current.title), current
            target = updated.supersedes
            if target is not None and target != current.supersedes:
                if target == id:
                    raise InvalidIdError("a memory cannot supersede itself")
                if snap.locate(target) is None:
                    raise InvalidInputError(
                        f"supersedes names {target}, which is not in the {backend.scope} store"
                    )
            updated = self._put(backend, snap, path, updated)
            return Effect(Op.UPDATE, [id], updated.title), updated

        return self._run(backend, action, message)

    def delete(
        self,
        id: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        message: str | None = None,
        missing_ok: bool = True,
    ) -> bool:
        """Remove a memory from the tree (history keeps it; :meth:`restore` brings it back). False
        when there was nothing to delete, or NotFoundError with ``missing_ok=False``."""
        try:
            backend = self._locate(id)
        except NotFoundError:
            if missing_ok:
                return False
            raise
        agent = single_line("agent", agent)
        session = single_line("session_id", session_id)

        def action(snap: Snapshot) -> tuple[Effect, bool]:
            path = snap.locate(id)
            data = snap.read(path) if path is not None else None
            if path is None or data is None:
                return Effect(Op.DELETE, [id]), False
            title = None
            with contextlib.suppress(GitmemError):
                title = self._decode(backend, data, path).title
            snap.remove(path)
            return Effect(Op.DELETE, [id], title, None, agent, session), True

        result = self._run(backend, action, message)
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
        """Keep a folder below a document root in the tree though it holds no memory (an empty
        ``.gitkeep``), or with ``keep=False`` remove that file; whether anything changed."""
        check_id(folder, what="folder")
        if not is_path_id(folder):
            raise InvalidInputError(f"folder {folder!r} is not below a document root")
        backend = self._backend(scope)
        path = f"{folder}/{KEEP_FILE}"

        def action(snap: Snapshot) -> tuple[Effect | None, bool]:
            if snap.exists(path) == keep:
                return None, False
            if keep:
                snap.put(path, b"")
            else:
                snap.remove(path)
            return None, True

        return self._run(backend, action, message)

    def restore(
        self,
        id: str,
        *,
        at: At = None,
        scope: Scope | str | None = None,
        agent: str | None = None,
        message: str | None = None,
    ) -> Memory:
        """Bring back a deleted memory as it last was, or roll one back to its content ``at``: a new
        version of it, a visible step of its history."""
        check_id(id)
        agent = single_line("agent", agent)
        for backend in self._ordered(scope):
            # Its content at ``at``, or its last before it was deleted (from before migrate too).
            if at is None:
                data = self._last_data(backend, id)
            else:
                snap = backend.db.snapshot(at)
                found = snap.locate(id, past=True)
                data = snap.read(found) if found is not None else None
            if data is not None:
                break
        if data is None:
            raise NotFoundError(f"memory {id} is not in this store's history")
        path = memory_path(id)
        past = self._decode(backend, data, path)

        def action(snap: Snapshot) -> tuple[Effect, Memory]:
            current = self._load(backend, snap, id)
            if current is not None and at is None:
                raise AlreadyExistsError(
                    f"memory {id} exists; pass at=REVISION|DATE to roll it back"
                )
            restored = past
            if current is not None:
                restored = replace(restored, document=current.document)
            restored = self._put(backend, snap, path, replace(restored, path=path))
            return Effect(Op.RESTORE, [id], restored.title, None, agent), restored

        return self._run(backend, action, message)

    def invalidate(
        self,
        id: str,
        *,
        reason: str,
        valid_until: At = None,
        agent: str | None = None,
    ) -> Memory:
        """End a memory's validity at ``valid_until`` (default: now) in one commit,
        ``Gitmem-Op: invalidate``, whose trailers carry ``reason`` and the date: the fact
        stops being current, stays readable at an earlier ``valid_at``, and why it was
        retired is in history. ``agent`` is who retired it (the commit's author)."""
        why = single_line("reason", reason)
        if not why:
            raise InvalidInputError("invalidate needs a reason (one line)")
        until = valid_time(valid_until, "valid_until") or self.clock.now()
        trailers = [(REASON_TRAILER, why), (VALID_UNTIL_TRAILER, format_timestamp(until))]
        backend = self._locate(id)
        subject = f"invalidate: {id}"
        with self.transaction(
            subject, scope=backend.scope, trailers=trailers, op=Op.INVALIDATE, by=agent
        ):
            return self.update(id, valid_until=until)

    def supersede(
        self,
        old_id: str,
        body: str | bytes,
        *,
        id: str | None = None,
        message: str | None = None,
        allow_empty: bool = False,
        **fields: Any,
    ) -> Memory:
        """Write a new memory (version 1) replacing ``old_id``, whose file is not touched. Title,
        category, tags and related carry forward unless given; ``valid_from`` also ends the old
        memory's validity then, in the same commit (unless it ended earlier)."""
        backend = self._locate(old_id)
        new_memory_id = self._new_id(backend, id)
        if new_memory_id == old_id:
            raise InvalidIdError("a memory cannot supersede itself")
        new_body = body_text(body, allow_empty=allow_empty)
        given = settable_fields(fields)

        def action(snap: Snapshot) -> tuple[Effect, Memory]:
            old = self._require(backend, snap, old_id)
            carried: dict[str, Any] = {
                "title": old.title,
                "category": old.category,
                "tags": old.tags,
                "related": old.related,
            }
            carried.update(given)
            memory = self._add_new(
                backend,
                snap,
                new_memory_id,
                new_body,
                carried,
                given=id is not None,
                supersedes=old_id,
            )
            since = given.get("valid_from")
            if since is not None and (old.valid_until is None or since < old.valid_until):
                self._put(backend, snap, memory_path(old_id), replace(old, valid_until=since))
            effect = Effect(
                Op.SUPERSEDE, [new_memory_id], memory.title, old_id, memory.agent, memory.session_id
            )
            return effect, memory

        return self._run(backend, action, message)


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
