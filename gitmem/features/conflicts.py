"""Forks a merge kept both sides of: list them and settle one (``gitmem conflicts``,
``gitmem resolve``), through the Store's public writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitmem.base.errors import InvalidInputError, NotFoundError
from gitmem.format import codec
from gitmem.format.model import Memory
from gitmem.format.versions import newest
from gitmem.store import merge as merging
from gitmem.store.core import Store
from gitmem.store.sync import commit_pending_forks


@dataclass(frozen=True)
class Conflict:
    """Something a merge kept both sides of: ``fork`` lost the path of ``of`` (``kept`` is
    at the path now, None if deleted since), or (``supersede``) two clones each superseded
    ``of`` and ``kept`` is the successor readers follow."""

    fork: Memory
    of: str
    kept: Memory | None
    kind: str = "fork"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "fork": self.fork.id,
            "of": self.of,
            "title": self.fork.title,
            "fork_version": self.fork.version,
            "kept_version": self.kept.version if self.kept else None,
            "fork_body": self.fork.body,
            "kept_body": self.kept.body if self.kept else None,
        }


RESOLUTIONS = ("ours", "theirs", "both", "edit")


def conflicts(store: Store, *, scope: str | None = None) -> list[Conflict]:
    """Unresolved forks, oldest first (forks a plain git merge left waiting are committed first)."""
    for backend_scope in [scope] if scope else store.scopes:
        commit_pending_forks(store.db(backend_scope))
    out: list[Conflict] = []
    successors: dict[str, list[Memory]] = {}
    for memory in store.list(scope=scope, include_superseded=True, include_archived=True):
        of = memory.extra.get(merging.FORK_KEY)
        if isinstance(memory.extra.get(merging.DECIDED_KEY), dict):
            out.append(Conflict(memory, memory.id, memory, "decided"))
        if isinstance(of, str) and of:
            out.append(Conflict(memory, of, store.get(of)))
        elif memory.supersedes:
            # A fork keeps its memory's `supersedes`: it is listed above, not here.
            successors.setdefault(memory.supersedes, []).append(memory)
    for of, found in sorted(successors.items()):
        if len(found) > 1:
            kept = newest(found)
            out += [Conflict(m, of, kept, "supersede") for m in found if m.id != kept.id]
    return out


def find_conflict(store: Store, memory_id: str) -> Conflict:
    """The one unresolved fork of ``memory_id``: the fork's id, or its memory's (a unique
    prefix of either will do)."""
    memory_id = store.resolve_id(memory_id)
    found = conflicts(store)
    mine = [c for c in found if c.fork.id == memory_id]
    if not mine:
        mine = [c for c in found if c.of == memory_id]
    if not mine:
        mine = [c for c in found if c.kind == "supersede" and c.kept and c.kept.id == memory_id]
    if not mine:
        raise NotFoundError(
            f"{memory_id} has no unresolved fork", hint="gitmem conflicts lists the forks"
        )
    if len(mine) > 1:
        raise InvalidInputError(
            f"{memory_id} has {len(mine)} forks ({', '.join(c.fork.id for c in mine)}); "
            "resolve them one by one by fork id"
        )
    return mine[0]


def resolve(
    store: Store,
    memory_id: str,
    keep: str,
    *,
    text: str | bytes | None = None,
    agent: str | None = None,
    message: str | None = None,
) -> Conflict:
    """Settle one fork (``memory_id``: the fork's or the forked memory's) in one commit:
    ``keep`` ours, theirs (the fork's content at the path), both (the fork loses its marker)
    or edit (``text``, a whole memory file, at the path); docs/collaboration.md. Of two
    successors, ``both`` chains them (the one readers follow supersedes the other); of fields
    a merge decided by time, theirs puts the losing values back."""
    if keep not in RESOLUTIONS:
        raise InvalidInputError(f"keep {keep!r} is not one of {', '.join(RESOLUTIONS)}")
    if (keep == "edit") != (text is not None):
        raise InvalidInputError("the edited text goes with keep='edit', and only with it")
    conflict = find_conflict(store, memory_id)
    fork, of = conflict.fork, conflict.of
    if conflict.kind == "decided" and keep == "both":
        raise InvalidInputError(
            "a field holds one value: keep ours (the merge's) or theirs (the other side's)"
        )
    if conflict.kept is None and keep != "both":
        raise NotFoundError(
            f"{of} was deleted since the fork; keep both (the fork stays as its own memory)"
        )
    subject = f"resolve: {of} keep {keep}"
    if conflict.kind == "supersede":
        subject = f"resolve: {of} superseded twice, keep {keep}"
    elif conflict.kind == "decided":
        names = ", ".join(map(str, fork.extra.get(merging.DECIDED_KEY) or {}))
        subject = f"resolve: {fork.id} fields {names} keep {keep}"
    # One act of its own: `Gitmem-Op: resolve`, the reason (-m) in the body, and the commit
    # attributed to who resolved (``agent``, else the git user), not to the memory's agent.
    with store.transaction(message=subject, op="resolve", by=agent, body=message):
        if conflict.kind == "decided":
            _settle_decided(store, fork.id, keep, text)
        elif conflict.kind == "supersede":
            _settle_successors(store, conflict, keep, text, agent)
        else:
            _settle_fork(store, conflict, keep, text, agent)
    return conflict


def _settle_fork(
    store: Store, conflict: Conflict, keep: str, text: str | bytes | None, agent: str | None
) -> None:
    fork, of = conflict.fork, conflict.of
    if keep == "both":
        who: dict[str, Any] = {"agent": agent} if agent else {}
        store.update(fork.id, extra={merging.FORK_KEY: None}, **who)
        return
    if keep == "theirs":
        assert conflict.kept is not None
        extra: dict[str, Any] = {k: None for k in conflict.kept.extra if k not in fork.extra}
        extra.update({k: v for k, v in fork.extra.items() if k != merging.FORK_KEY})
        fields: dict[str, Any] = {
            "title": fork.title,
            "category": fork.category,
            "tags": list(fork.tags),
            "related": list(fork.related),
            "trigger": fork.trigger,
            "status": fork.status,
            "extra": extra,
        }
        if agent or fork.agent:
            fields["agent"] = agent or fork.agent
        store.update(of, fork.body, allow_empty=True, **fields)
    elif keep == "edit":
        assert text is not None
        store.update_from_text(of, text)
    store.delete(fork.id, agent=agent)


def _settle_successors(
    store: Store, conflict: Conflict, keep: str, text: str | bytes | None, agent: str | None
) -> None:
    assert conflict.kept is not None
    kept, other = conflict.kept, conflict.fork
    if keep == "theirs":
        kept, other = other, kept
    if keep == "both":
        doc = _document(store, kept.id)
        meta = {**doc.metadata, "supersedes": other.id}
        store.update_from_text(kept.id, codec.serialize(doc.with_changes(meta, doc.body)))
        return
    if keep == "edit":
        assert text is not None
        store.update_from_text(kept.id, text)
    store.delete(other.id, agent=agent)


def _settle_decided(store: Store, memory_id: str, keep: str, text: str | bytes | None) -> None:
    if text is not None:
        doc = codec.parse(text.decode("utf-8") if isinstance(text, bytes) else text)
    else:
        doc = _document(store, memory_id)
    meta = dict(doc.metadata)
    lost = meta.pop(merging.DECIDED_KEY, None)
    if keep == "theirs" and isinstance(lost, dict):
        meta.update(lost)
    store.update_from_text(memory_id, codec.serialize(doc.with_changes(meta, doc.body)))


def _document(store: Store, memory_id: str) -> codec.Document:
    """The memory's file as parsed (conflicts are listed from the index, without file text)."""
    doc = store.read(memory_id).document
    if doc is None:
        raise InvalidInputError(f"{memory_id} cannot be rewritten (its file did not parse)")
    return doc
