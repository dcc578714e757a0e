"""The knowledge graph: the nine operations of the reference MCP knowledge-graph server
(``@modelcontextprotocol/server-memory``) over entity files ``entities/<type>/<shard>/<name>.md``
(name and type in front-matter, observations as a markdown list, relations as
``relations: [{type, to}]``; docs/integrations.md). Each changing call is one commit (or
joins :meth:`Graph.batch`); names are found through the index's rows, never file names.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gitmem.base.errors import (
    AlreadyExistsError,
    ConflictError,
    GitmemError,
    InvalidInputError,
    NotFoundError,
)
from gitmem.features.graph_rows import (
    ENTITIES_ROOT,
    MAX_NAME_SEGMENT,
    MAX_TYPE_SEGMENT,
    ORDER_KEY,
    PENDING_ID,
    EntityRow,
    GraphReader,
    _free_name,
    _title,
    entity_fields,
    format_observations,
    is_entity_path,
    memory_reader,
    open_reader,
    pending_field,
    shard_of,
)
from gitmem.format import memfile
from gitmem.format.model import Memory
from gitmem.format.schema import checker, to_json_value
from gitmem.git.objects import Snapshot
from gitmem.store.core import Store
from gitmem.store.reads import index_writable
from gitmem.store.transactions import Transaction

_T = TypeVar("_T")

_RETRIES = 30
"""How often a call is re-run when another writer changed a file it was about to write."""

_BACKOFF = 0.004
"""Seconds; the jittered pause before a re-run, growing with each attempt."""


@dataclass(frozen=True)
class Entity:
    name: str
    entity_type: str
    observations: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The reference server's JSON shape."""
        return {
            "name": self.name,
            "entityType": self.entity_type,
            "observations": list(self.observations),
        }


@dataclass(frozen=True)
class Relation:
    source: str
    target: str
    relation_type: str

    def to_dict(self) -> dict[str, Any]:
        """The reference server's JSON shape (``from``, ``to``, ``relationType``)."""
        return {"from": self.source, "to": self.target, "relationType": self.relation_type}

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.target, self.relation_type)


@dataclass
class KnowledgeGraph:
    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entities": [e.to_dict() for e in self.entities],
            "relations": [r.to_dict() for r in self.relations],
        }


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_LIST = {"type": "array"}


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


_ENTITY = _object(name=_STRING, entityType=_STRING, observations=_STRINGS)
_RELATION = _object(**{"from": _STRING, "to": _STRING, "relationType": _STRING})


def _check(value: Any, where: str, shape: dict[str, Any]) -> Any:
    """``value`` (tuples as lists) when it has the JSON-schema ``shape``; else one error
    naming where it breaks, in the schema's words."""
    value = to_json_value(value)
    problems = checker(shape)(value)
    if problems:
        first = min(problems, key=lambda p: len(p.path))
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.path)
        raise InvalidInputError(f"{where}{at}: {first.message}")
    return value


def to_entity(value: Entity | Mapping[str, Any], where: str = "entity") -> Entity:
    if isinstance(value, Entity):
        return value
    r = _check(value, where, _ENTITY)
    return Entity(r["name"], r["entityType"], tuple(r["observations"]))


def to_relation(value: Relation | Mapping[str, Any], where: str = "relation") -> Relation:
    if isinstance(value, Relation):
        return value
    r = _check(value, where, _RELATION)
    return Relation(r["from"], r["to"], r["relationType"])


def _per_entity(value: Any, where: str, key: str) -> list[tuple[str, list[str]]]:
    """``[{entityName, <key>: [str]}]`` as (name, texts) pairs."""
    items = _check(
        value, where, {"type": "array", "items": _object(entityName=_STRING, **{key: _STRINGS})}
    )
    return [(item["entityName"], item[key]) for item in items]


class _State:
    """What one call (or batch) reads and changes, from the snapshot it writes on: entity
    files loaded, created and deleted, and the pending relations."""

    def __init__(self, graph: Graph, snap: Snapshot) -> None:
        self.graph = graph
        self.snap = snap
        self.source: GraphReader
        self.loaded: dict[str, EntityRow] = {}
        self.by_name: dict[str, list[EntityRow]] = {}
        """Loaded and created files by name (a batch creates thousands: no scans per call)."""
        self.planned: set[str] = set()
        """Casefolded ids and folders of files created here and not staged yet."""
        self.gone: set[str] = set()
        self.deleted: list[EntityRow] = []
        self._pending: list[Relation] | None = None
        self.pending_version: int | None = None
        self.pending_dirty = False

    def _load(self, doc: str) -> EntityRow | None:
        if doc not in self.loaded and doc not in self.gone:
            memory = self.graph._memory(self.snap, f"{doc}.md")
            if memory is not None:
                self._keep(entity_fields(memory))
        return None if doc in self.gone else self.loaded.get(doc)

    def _keep(self, f: EntityRow) -> None:
        self.loaded[f.doc] = f
        self.by_name.setdefault(f.name, []).append(f)

    def _live(self) -> Iterator[EntityRow]:
        return (f for f in self.loaded.values() if f.doc not in self.gone)

    def named(self, names: Collection[str]) -> list[EntityRow]:
        """Every live entity file with one of these names, oldest first."""
        docs = [row.doc for row in self.source.named(names)]
        found = {f.doc: f for d in docs if (f := self._load(d)) is not None}
        for name in names:
            found.update((f.doc, f) for f in self.by_name.get(name, ()) if f.doc not in self.gone)
        return sorted((f for f in found.values() if f.name in names), key=lambda f: f.order)

    def lookup(self, name: str) -> EntityRow | None:
        """The entity called ``name`` (the oldest file, if a hand edit made two)."""
        files = self.named((name,))
        return files[0] if files else None

    def relating_to(self, names: Collection[str]) -> list[EntityRow]:
        found = {
            f.doc: f
            for d in self.source.docs_relating_to(names)
            if (f := self._load(d)) is not None
        }
        found.update((f.doc, f) for f in self._live() if f.doc not in found)
        return [f for f in found.values() if any(t in names for _, t in f.relations)]

    def delete(self, f: EntityRow) -> None:
        self.gone.add(f.doc)
        if f.version is not None:
            self.deleted.append(f)

    @property
    def pending(self) -> list[Relation]:
        if self._pending is None:
            memory = self.graph._memory(self.snap, f"{PENDING_ID}.md")
            found = pending_field(memory.extra.get("relations")) if memory is not None else []
            self._pending = [Relation(s, t, k) for s, k, t in found]
            self.pending_version = memory.version if memory is not None else None
        return self._pending

    @pending.setter
    def pending(self, value: list[Relation]) -> None:
        if value != self._pending:
            self._pending, self.pending_dirty = value, True

    def new_file(self, entity: Entity) -> EntityRow:
        """A file for a new entity: in the folder of its type (a new folder for a new type),
        under a name no file of the folder has, ignoring case."""
        kind, planned = entity.entity_type, self.planned
        mine = [*self.loaded.values(), *self.deleted]
        folders = {
            *self.source.docs_of_type(kind),
            *(f.folder for f in mine if f.entity_type == kind),
        }
        if folders:
            directory = min(folders)
        else:
            directory = _free_name(
                self.snap, ENTITIES_ROOT, kind, MAX_TYPE_SEGMENT, "untyped", planned
            )
        folder = f"{ENTITIES_ROOT}/{directory}/{shard_of(entity.name)}"
        segment = _free_name(self.snap, folder, entity.name, MAX_NAME_SEGMENT, "unnamed", planned)
        f = EntityRow(
            created_ns=self.graph._next_ns(),
            doc=f"{folder}/{segment}",
            version=None,
            name=entity.name,
            entity_type=entity.entity_type,
            observations=list(entity.observations),
            relations=[],
            dirty=True,
        )
        self._keep(f)
        planned.update((f"{ENTITIES_ROOT}/{directory}".casefold(), f.doc.casefold()))
        return f


class Graph:
    """The knowledge graph of a store's default scope; ``agent`` authors the commits. The
    index's graph rows serve reads; inside a batch, or where the index cannot answer, every
    entity file is read instead, with the same result."""

    def __init__(self, store: Store, *, agent: str | None = None) -> None:
        self.store = store
        self.agent = agent
        self._batch: Transaction | None = None
        self._batch_state: _State | None = None
        self._last_ns = 0

    def _next_ns(self) -> int:
        """A creation time in nanoseconds, later than every one this graph gave before."""
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return self._last_ns

    @contextlib.contextmanager
    def _reader(self, snap: Snapshot | None = None) -> Iterator[GraphReader]:
        """The graph rows at ``snap``'s commit (default: the branch tip): the index's when
        they reflect it, else rows built from every entity file of ``snap`` (the index
        off, or reads inside a batch, which see its staged files)."""
        store = self.store
        if (snap is not None or self._batch is None) and (
            store.use_index and index_writable(store.db())
        ):
            base = str(snap.commit.id) if snap is not None and snap.commit is not None else None
            with open_reader(store.index()) as reader:
                if reader is not None and (snap is None or reader.commit == base):
                    yield reader
                    return
        if snap is None:
            snap = self._batch.snapshot if self._batch is not None else store.db().snapshot()
        paths = [p for p in snap.iter_files(ENTITIES_ROOT) if is_entity_path(p)]
        memories = [self._memory(snap, p) for p in [*paths, f"{PENDING_ID}.md"]]
        commit = str(snap.commit.id) if snap.commit is not None else None
        walked = memory_reader([m for m in memories if m is not None], commit)
        try:
            yield walked
        finally:
            walked.conn.close()

    def _memory(self, snap: Snapshot, path: str) -> Memory | None:
        data = snap.read(path)
        if data is not None:
            with contextlib.suppress(GitmemError):
                return memfile.decode(data, path, what=path, require_memory_path=False)
        return None

    def read_graph(self) -> KnowledgeGraph:
        """Every entity (oldest first) and every relation."""
        data = self.read_graph_dict()
        return KnowledgeGraph(
            [to_entity(e) for e in data["entities"]], [to_relation(r) for r in data["relations"]]
        )

    def read_graph_dict(self) -> dict[str, Any]:
        """:meth:`read_graph` in the reference server's JSON shape (``to_dict``), made from
        the rows directly."""
        with self._reader() as reader:
            return reader.graph_dict()

    def search_nodes(self, query: str) -> KnowledgeGraph:
        """Entities whose name, type or an observation contains ``query`` (ignoring case),
        and every relation with at least one end among them."""
        needle = _check(query, "query", _STRING).lower()
        with self._reader() as reader:
            return _served(reader, reader.search(needle))

    def open_nodes(self, names: Iterable[str]) -> KnowledgeGraph:
        """The named entities and every relation with at least one end among them."""
        wanted = set(_check(names, "names", _STRINGS))
        with self._reader() as reader:
            return _served(reader, reader.named(wanted))

    def entity_id(self, name: str) -> str | None:
        """The document id of the entity called ``name`` (for ``gitmem history``)."""
        with self._reader() as reader:
            rows = reader.named((name,))
        return rows[0].doc if rows else None

    @contextlib.contextmanager
    def batch(self, message: str | None = None) -> Iterator[Graph]:
        """Many graph calls, one commit (imports use it); all or nothing."""
        if self._batch is not None:
            raise InvalidInputError("graph batches do not nest")
        with self.store.transaction(message=message) as tx:
            self._batch = tx
            self._batch_state = _State(self, tx.snapshot)
            try:
                yield self
            finally:
                self._batch = None
                self._batch_state = None

    def _change(self, state: _State, change: Callable[[_State], _T]) -> _T:
        """``change(state)`` with the graph rows at the state's commit, then its files staged."""
        with self._reader(state.snap) as reader:
            state.source = reader
            result = change(state)
            self._flush(state)
        return result

    def _write(self, message: str, change: Callable[[_State], _T]) -> _T:
        """Run ``change(state)`` and write the files it marked, as one commit; outside a
        batch, one that lost a race with another writer is run again on the new tip."""
        if self._batch is not None:
            assert self._batch_state is not None
            return self._change(self._batch_state, change)
        for attempt in range(_RETRIES):
            committing = False
            try:
                with self.store.transaction(message=message) as tx:
                    result = self._change(_State(self, tx.snapshot), change)
                    committing = True
                return result
            except (ConflictError, AlreadyExistsError) as exc:
                # Only the commit's replay on a moved tip is a lost race; the same error
                # from the call itself (a dirty work tree, a locked store) is final.
                lost_race = committing and type(exc) in {ConflictError, AlreadyExistsError}
                if not lost_race or attempt == _RETRIES - 1:
                    raise
                time.sleep(random.uniform(0, _BACKOFF * min(attempt + 1, 10)))
        raise AssertionError("unreachable")  # pragma: no cover

    def _flush(self, state: _State) -> None:
        """Stage what ``state`` changed; afterwards it describes the staged files (a batch
        goes on from there)."""
        store, agent = self.store, self.agent
        for f in state.deleted:
            store.delete(f.doc, agent=agent)
            state.loaded.pop(f.doc, None)
        state.deleted.clear()
        for f in state._live():
            if not f.dirty:
                continue
            relations = [{"type": kind, "to": target} for kind, target in f.relations]
            body = format_observations(f.observations)
            if f.version is None:
                extra: dict[str, Any] = {
                    "name": f.name,
                    "entity_type": f.entity_type,
                    ORDER_KEY: f.created_ns,
                }
                if relations:
                    extra["relations"] = relations
                memory = store.create(
                    body,
                    id=f.doc,
                    title=_title(f.name),
                    agent=agent,
                    extra=extra,
                    allow_empty=True,
                )
            else:
                memory = store.update(
                    f.doc,
                    body,
                    expected_version=self._expected(f.doc, f.version),
                    agent=agent,
                    allow_empty=True,
                    extra={"relations": relations or None},
                )
            f.version, f.dirty = memory.version, False
        if state.pending_dirty:
            state.pending_version = self._write_pending(state.pending, state.pending_version)
            state.pending_dirty = False

    def _expected(self, doc_id: str, version: int) -> int:
        """The version an update checks against, derived from history as a read of the
        transaction's snapshot gives it (a replay on a moved tip checks it again)."""
        current = self.store.get(doc_id)
        return current.version if current is not None else version

    def _write_pending(self, pending: list[Relation], version: int | None) -> int | None:
        rows = [{"from": r.source, "type": r.relation_type, "to": r.target} for r in pending]
        if version is None:
            if not rows:
                return None
            return self.store.create(
                "Relations whose source entity does not exist yet; each moves into its\n"
                "entity's file when that entity is created.\n",
                id=PENDING_ID,
                title="Pending relations",
                agent=self.agent,
                extra={"relations": rows},
            ).version
        if rows:
            return self.store.update(
                PENDING_ID,
                expected_version=self._expected(PENDING_ID, version),
                agent=self.agent,
                extra={"relations": rows},
            ).version
        self.store.delete(PENDING_ID, agent=self.agent)
        return None

    def create_entities(self, entities: Iterable[Entity | Mapping[str, Any]]) -> list[Entity]:
        """Create the entities whose names are new; return those (existing names are skipped,
        and a name repeated in one call is created once)."""
        wanted = [
            to_entity(e, f"entities[{i}]")
            for i, e in enumerate(_check(entities, "entities", _LIST))
        ]

        def change(state: _State) -> list[Entity]:
            created: list[Entity] = []
            for entity in wanted:
                if state.lookup(entity.name) is not None:
                    continue
                f = state.new_file(entity)
                created.append(entity)
                moved = [r for r in state.pending if r.source == entity.name]
                f.relations.extend((r.relation_type, r.target) for r in moved)
                state.pending = [r for r in state.pending if r.source != entity.name]
            return created

        names = ", ".join(e.name for e in wanted[:3]) + (" ..." if len(wanted) > 3 else "")
        return self._write(f"graph: create entities {names}", change)

    def create_relations(self, relations: Iterable[Relation | Mapping[str, Any]]) -> list[Relation]:
        """Create the relations not already there; return those. Endpoints need not exist."""
        wanted = [
            to_relation(r, f"relations[{i}]")
            for i, r in enumerate(_check(relations, "relations", _LIST))
        ]

        def change(state: _State) -> list[Relation]:
            created: list[Relation] = []
            sources = state.named({r.source for r in wanted})
            existing = {(f.name, t, k) for f in sources for k, t in f.relations}
            existing.update(r.key for r in state.pending)
            for rel in wanted:
                if rel.key in existing:
                    continue
                existing.add(rel.key)
                source = next((f for f in sources if f.name == rel.source), None)
                if source is not None:
                    source.relations.append((rel.relation_type, rel.target))
                    source.dirty = True
                else:
                    state.pending = [*state.pending, rel]
                created.append(rel)
            return created

        return self._write(
            f"graph: create {len(wanted)} relation{'s' if len(wanted) != 1 else ''}", change
        )

    def add_observations(self, observations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Add observations to existing entities: ``[{entityName, addedObservations}]``;
        an unknown entity is an error and nothing is written."""
        wanted = _per_entity(observations, "observations", "contents")

        def change(state: _State) -> list[dict[str, Any]]:
            results: list[dict[str, Any]] = []
            for name, contents in wanted:
                f = state.lookup(name)
                if f is None:
                    raise NotFoundError(f"Entity with name {name} not found")
                added: list[str] = []
                for content in contents:
                    if content not in f.observations:
                        f.observations.append(content)
                        added.append(content)
                f.dirty = f.dirty or bool(added)
                results.append({"entityName": name, "addedObservations": added})
            return results

        names = ", ".join(dict.fromkeys(name for name, _ in wanted))
        return self._write(f"graph: observe {names}", change)

    def delete_entities(self, names: Iterable[str]) -> None:
        """Delete the named entities and every relation touching those names."""
        doomed = set(_check(names, "entityNames", _STRINGS))

        def change(state: _State) -> None:
            for f in state.named(doomed):
                state.delete(f)
            for f in state.relating_to(doomed):
                kept = [(k, t) for k, t in f.relations if t not in doomed]
                if len(kept) != len(f.relations):
                    f.relations, f.dirty = kept, True
            state.pending = [
                r for r in state.pending if r.source not in doomed and r.target not in doomed
            ]

        self._write(f"graph: delete entities {', '.join(sorted(doomed))[:200]}", change)

    def delete_observations(self, deletions: Iterable[Mapping[str, Any]]) -> None:
        """Remove the given observations; unknown entities and texts are ignored."""
        wanted = _per_entity(deletions, "deletions", "observations")

        def change(state: _State) -> None:
            for name, texts in wanted:
                f = state.lookup(name)
                if f is None:
                    continue
                kept = [o for o in f.observations if o not in texts]
                if len(kept) != len(f.observations):
                    f.observations, f.dirty = kept, True

        self._write("graph: delete observations", change)

    def delete_relations(self, relations: Iterable[Relation | Mapping[str, Any]]) -> None:
        """Delete exactly these (from, to, relationType) triples; others are ignored."""
        doomed = {
            to_relation(r, f"relations[{i}]").key
            for i, r in enumerate(_check(relations, "relations", _LIST))
        }

        def change(state: _State) -> None:
            for f in state.named({source for source, _, _ in doomed}):
                kept = [(k, t) for k, t in f.relations if (f.name, t, k) not in doomed]
                if len(kept) != len(f.relations):
                    f.relations, f.dirty = kept, True
            state.pending = [r for r in state.pending if r.key not in doomed]

        self._write("graph: delete relations", change)


def _served(reader: GraphReader, rows: list[EntityRow]) -> KnowledgeGraph:
    """The entities of ``rows`` and every relation with at least one end among them."""
    entities = [Entity(r.name, r.entity_type, tuple(r.observations)) for r in rows]
    touching = reader.touching({e.name for e in entities})
    return KnowledgeGraph(entities, [Relation(s, t, k) for s, t, k in touching])
