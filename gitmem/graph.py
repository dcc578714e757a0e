"""The knowledge graph: entities, observations and relations, kept as memory files.

The nine operations of the reference MCP knowledge-graph server
(``@modelcontextprotocol/server-memory``) with its semantics, over a gitmem
store instead of one JSONL file:

- an entity is the document ``entities/<type>/<name>`` (file
  ``entities/<type>/<name>.md``): the exact name and type are in the
  front-matter (``name``, ``entity_type``), the observations are a markdown
  list in the body, and the relations that start at the entity are in its
  front-matter (``relations: [{type, to}]``), so a person can read and edit it;
- a relation whose source entity does not exist (yet) is kept in
  ``entities/pending-relations.md`` and moves into the entity's file when the
  entity is created, because the reference lets clients relate names before
  creating them;
- every call that changes something is one commit (or joins the batch opened
  with :meth:`Graph.batch`); a call that changes nothing makes no commit.

Names and types are matched exactly, as in the reference; file names are only
where things live (see :func:`sanitise`), never how they are found: every
call reads the entity files, so a hand-edited ``name:`` is honoured.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import re
import time
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import codec
from .errors import (
    AlreadyExistsError,
    ConflictError,
    GitmemError,
    InvalidInputError,
    NotFoundError,
)
from .gitdb import Snapshot
from .store import Store, Transaction

__all__ = [
    "ENTITIES_ROOT",
    "PENDING_ID",
    "Entity",
    "Graph",
    "KnowledgeGraph",
    "Relation",
    "format_observations",
    "parse_observations",
    "sanitise",
]

ENTITIES_ROOT = "entities"
PENDING_ID = f"{ENTITIES_ROOT}/pending-relations"
"""Relations whose source entity does not exist yet."""

MAX_NAME_SEGMENT = 100
MAX_TYPE_SEGMENT = 80
"""``entities/`` + type + ``/`` + name stays within the 200-character id bound."""

_HASH_LENGTHS = (8, 12, 16, 40)
_WINDOWS_RESERVED = {
    "CON", "PRN", "AUX", "NUL",
    *(f"COM{i}" for i in range(1, 10)),
    *(f"LPT{i}" for i in range(1, 10)),
}  # fmt: skip
_RETRIES = 30
"""How often a call is re-run when another writer changed a file it was about to write."""
_BACKOFF = 0.004
"""Seconds; the jittered pause before a re-run grows with each attempt, so two writers in a
tight loop on one entity do not keep beating each other to the branch."""


# -- values ------------------------------------------------------------------------------


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


# -- input checks: the reference's zod schemas, as one-line errors -----------------------


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{where} must be a string, not {_kind(value)}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list | tuple):
        raise InvalidInputError(f"{where} must be a list of strings, not {_kind(value)}")
    return [_string(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", bool: "a boolean", int: "a number",
            float: "a number", str: "a string"}.get(type(value), type(value).__name__)  # fmt: skip


def _record(value: Any, where: str, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} must be an object, not {_kind(value)}")
    for key in keys:
        if key not in value:
            raise InvalidInputError(f"{where} has no {key!r}")
    return value


def _items(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise InvalidInputError(f"{where} must be a list, not {_kind(value)}")
    return list(value)


def to_entity(value: Entity | Mapping[str, Any], where: str = "entity") -> Entity:
    if isinstance(value, Entity):
        return value
    record = _record(value, where, ("name", "entityType", "observations"))
    return Entity(
        _string(record["name"], f"{where}.name"),
        _string(record["entityType"], f"{where}.entityType"),
        tuple(_strings(record["observations"], f"{where}.observations")),
    )


def to_relation(value: Relation | Mapping[str, Any], where: str = "relation") -> Relation:
    if isinstance(value, Relation):
        return value
    record = _record(value, where, ("from", "to", "relationType"))
    return Relation(
        _string(record["from"], f"{where}.from"),
        _string(record["to"], f"{where}.to"),
        _string(record["relationType"], f"{where}.relationType"),
    )


# -- file names ----------------------------------------------------------------------------


def sanitise(text: str, *, max_length: int = MAX_NAME_SEGMENT, fallback: str = "unnamed") -> str:
    """A path segment for ``text``: letters, digits, '.', '_' and '-' only.

    Accents are dropped (``Zürich`` → ``Zurich``), every other character and
    whitespace becomes ``-``, runs of dashes and dots collapse, the ends are
    trimmed of punctuation, at most ``max_length`` characters are kept; a name
    with nothing left becomes ``fallback``. Several names can give one segment;
    :func:`_free_segment` adds a stable suffix then.
    """
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    out = re.sub(r"[^A-Za-z0-9._-]+", "-", folded)
    out = re.sub(r"-{2,}", "-", out)
    out = re.sub(r"\.{2,}", ".", out)
    out = out.strip("-._")[:max_length].rstrip("-._")
    if out.lower().endswith(".md"):
        out = out[:-3] + "-md"
    if out.upper().split(".")[0] in _WINDOWS_RESERVED:
        out = f"{out}-"
    return out or fallback


def _suffixed(base: str, text: str, max_length: int) -> Iterator[str]:
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    for length in _HASH_LENGTHS:
        yield f"{base[: max_length - length - 1].rstrip('-._')}-{digest[:length]}"
    for n in range(2, 10_000):
        yield f"{base[: max_length - 46].rstrip('-._')}-{digest}-{n}"


def _free_segment(text: str, taken: set[str], max_length: int, fallback: str) -> str:
    """The segment for ``text`` that no other entry of its directory has, compared
    case-insensitively so checkouts on macOS and Windows do not collide."""
    base = sanitise(text, max_length=max_length, fallback=fallback)
    if base.casefold() not in taken:
        return base
    for candidate in _suffixed(base, text, max_length):
        if candidate.casefold() not in taken:
            return candidate
    raise GitmemError(f"no free file name for {text!r}")  # pragma: no cover


# -- observations in the body --------------------------------------------------------------


def _plain(observation: str) -> bool:
    """Whether an observation survives the plain list form (and a person's editor) intact."""
    if not observation or observation.startswith('"'):
        return False
    for line in observation.split("\n"):
        if not line or line != line.strip():
            return False
        if any(unicodedata.category(c) == "Cc" for c in line):
            return False
    return True


def format_observations(observations: Iterable[str]) -> str:
    """The body of an entity file: one list item per observation.

    A multi-line observation continues on lines indented by two spaces. One that
    the plain form would not keep exactly (empty, leading or trailing blanks,
    control characters, an empty line, a leading double quote) is written as a
    JSON string, which :func:`parse_observations` decodes.
    """
    lines: list[str] = []
    for observation in observations:
        if _plain(observation):
            first, *rest = observation.split("\n")
            lines.append(f"- {first}")
            lines.extend(f"  {line}" for line in rest)
        else:
            lines.append("- " + json.dumps(observation, ensure_ascii=False))
    return "".join(f"{line}\n" for line in lines)


def parse_observations(body: str) -> list[str]:
    """Observations from an entity file's body, written by gitmem or by hand.

    ``- `` or ``* `` starts an item, lines indented by two spaces continue it,
    blank lines are skipped, and any other line is an observation of its own
    (a sentence someone typed without the dash).
    """
    items: list[list[str]] = []
    current: list[str] | None = None
    for raw in body.split("\n"):
        line = raw[:-1] if raw.endswith("\r") else raw
        if line.startswith(("- ", "* ")) or line in {"-", "*"}:
            current = [line[2:]]
            items.append(current)
        elif not line.strip():
            continue
        elif line.startswith("  ") and current is not None:
            current.append(line[2:])
        else:
            current = None
            items.append([line.strip()])
    out: list[str] = []
    for item in items:
        text = "\n".join(item)
        if text.startswith('"'):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            if isinstance(decoded, str):
                text = decoded
        out.append(text)
    return out


# -- entity files ----------------------------------------------------------------------------


@dataclass
class _File:
    """One entity file as read (or as it will be written)."""

    id: str
    version: int | None
    """None for a file this call creates."""
    name: str
    entity_type: str
    observations: list[str]
    relations: list[tuple[str, str]]
    """(relationType, to) of relations starting here, in file order."""
    created: str = ""
    dirty: bool = False

    @property
    def directory(self) -> str:
        return self.id.split("/")[1]


def _path(doc_id: str) -> str:
    return f"{doc_id}.md"


def _relations_field(value: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping):
                kind, target = item.get("type"), item.get("to")
                if isinstance(kind, str) and isinstance(target, str):
                    out.append((kind, target))
    return out


def _parse_file(doc_id: str, data: bytes) -> _File | None:
    try:
        doc = codec.parse(codec.decode(data))
    except GitmemError:
        return None
    meta = doc.metadata
    segments = doc_id.split("/")
    name = meta.get("name")
    kind = meta.get("entity_type")
    version = meta.get("version")
    created = meta.get("created_at")
    return _File(
        id=doc_id,
        version=version if isinstance(version, int) else None,
        name=name if isinstance(name, str) else segments[-1],
        entity_type=kind if isinstance(kind, str) else segments[1],
        observations=parse_observations(doc.body),
        relations=_relations_field(meta.get("relations")),
        created=str(created) if created is not None else "",
    )


def _pending_field(value: Any) -> list[Relation]:
    out: list[Relation] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping):
                source, kind, target = item.get("from"), item.get("type"), item.get("to")
                if isinstance(source, str) and isinstance(kind, str) and isinstance(target, str):
                    out.append(Relation(source, target, kind))
    return out


def _title(name: str) -> str:
    """A one-line title for ``gitmem ls`` (titles may not hold control characters)."""
    flat = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in name).strip()
    return " ".join(flat.split())[:200] or "(unnamed)"


@dataclass
class _State:
    """Every entity file of one snapshot, plus the pending relations."""

    files: list[_File]
    pending: list[Relation]
    pending_version: int | None
    by_name: dict[str, _File] = field(default_factory=dict)
    pending_dirty: bool = False
    deleted: list[_File] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    """Every file under entities/, readable or not: a new entity must not land on any."""

    _directories: tuple[dict[str, set[str]], dict[str, set[str]]] | None = None

    def __post_init__(self) -> None:
        for f in self.files:
            self.by_name.setdefault(f.name, f)

    def directories(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """Type folder -> entity types in it, and type folder -> file names taken in it
        (casefolded; deleted files count, since their place is still in this commit).
        Built once per call and kept up to date as files are added."""
        if self._directories is None:
            kinds: dict[str, set[str]] = {}
            taken: dict[str, set[str]] = {}
            for f in [*self.files, *self.deleted]:
                kinds.setdefault(f.directory, set()).add(f.entity_type)
            for path in self.paths:
                parts = path.split("/")
                if len(parts) == 3:
                    taken.setdefault(parts[1], set()).add(parts[2].removesuffix(".md").casefold())
                if len(parts) >= 2:
                    kinds.setdefault(parts[1].removesuffix(".md"), set())
            self._directories = (kinds, taken)
        return self._directories

    def relations(self) -> list[Relation]:
        out = [Relation(f.name, target, kind) for f in self.files for kind, target in f.relations]
        return out + list(self.pending)

    def graph(self) -> KnowledgeGraph:
        entities = [Entity(f.name, f.entity_type, tuple(f.observations)) for f in self.files]
        return KnowledgeGraph(entities, self.relations())


# -- the graph ---------------------------------------------------------------------------------


class Graph:
    """The knowledge graph of a store (its default scope).

    Mutations take and return the reference server's shapes (mappings with
    ``name``/``entityType``/``observations`` and ``from``/``to``/``relationType``,
    or :class:`Entity`/:class:`Relation`). ``agent`` becomes the commits' author.
    """

    def __init__(self, store: Store, *, agent: str | None = None) -> None:
        self.store = store
        self.agent = agent
        self._batch: Transaction | None = None
        self._cache: dict[str, _File | None] = {}
        """Parsed entity files by blob id: a long-lived server re-reads only what changed."""

    # -- reading -------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        if self._batch is not None:
            return self._batch.snapshot
        return self.store.db().snapshot()

    def _read(self, snap: Snapshot, path: str) -> _File | None:
        doc_id = path[: -len(".md")]
        blob = snap.blob_id(path) if path not in snap.changes else None
        key = str(blob) if blob is not None else None
        if key is not None and key in self._cache:
            cached = self._cache[key]
            return None if cached is None else _copy_file(cached, doc_id)
        data = snap.read(path)
        parsed = _parse_file(doc_id, data) if data is not None else None
        if key is not None:
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[key] = parsed
            return None if parsed is None else _copy_file(parsed, doc_id)
        return parsed

    def _state(self, snap: Snapshot) -> _State:
        files: list[_File] = []
        pending: list[Relation] = []
        pending_version: int | None = None
        paths = list(snap.iter_files(ENTITIES_ROOT))
        for path in paths:
            if not path.endswith(".md"):
                continue
            parts = path.split("/")
            if path == _path(PENDING_ID):
                data = snap.read(path)
                if data is not None:
                    try:
                        meta = codec.parse(codec.decode(data)).metadata
                    except GitmemError:
                        meta = {}
                    pending = _pending_field(meta.get("relations"))
                    version = meta.get("version")
                    pending_version = version if isinstance(version, int) else None
                continue
            if len(parts) != 3:
                continue
            parsed = self._read(snap, path)
            if parsed is not None:
                files.append(parsed)
        files.sort(key=lambda f: (f.created, f.id))
        return _State(files, pending, pending_version, paths=paths)

    def read_graph(self) -> KnowledgeGraph:
        """Every entity (oldest first) and every relation."""
        return self._state(self._snapshot()).graph()

    def search_nodes(self, query: str) -> KnowledgeGraph:
        """Entities whose name, type or an observation contains ``query`` (ignoring case),
        and every relation with at least one end among them."""
        query = _string(query, "query").lower()
        graph = self.read_graph()
        entities = [
            e
            for e in graph.entities
            if query in e.name.lower()
            or query in e.entity_type.lower()
            or any(query in o.lower() for o in e.observations)
        ]
        return _with_touching(entities, graph.relations)

    def open_nodes(self, names: Iterable[str]) -> KnowledgeGraph:
        """The named entities and every relation with at least one end among them."""
        wanted = set(_strings(names, "names"))
        graph = self.read_graph()
        return _with_touching([e for e in graph.entities if e.name in wanted], graph.relations)

    def entity(self, name: str) -> Entity | None:
        f = self._state(self._snapshot()).by_name.get(name)
        return None if f is None else Entity(f.name, f.entity_type, tuple(f.observations))

    def entity_id(self, name: str) -> str | None:
        """The document id of the entity called ``name`` (for ``gitmem history``)."""
        f = self._state(self._snapshot()).by_name.get(name)
        return None if f is None else f.id

    # -- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self, message: str | None = None) -> Iterator[Graph]:
        """Many graph calls, one commit (imports use it); all or nothing."""
        if self._batch is not None:
            raise InvalidInputError("graph batches do not nest")
        with self.store.transaction(message=message) as tx:
            self._batch = tx
            try:
                yield self
            finally:
                self._batch = None

    def _write(self, message: str, change: Any) -> Any:
        """Run ``change(state)`` and write the files it marked, as one commit.

        Outside a batch, a change that lost a race with another writer (a file
        it updates changed, or a name it creates was taken) is run again on the
        new tip, so two agents adding observations at once both keep theirs.
        """
        if self._batch is not None:
            state = self._state(self._batch.snapshot)
            result = change(state)
            self._flush(state)
            return result
        for attempt in range(_RETRIES):
            committing = False
            try:
                with self.store.transaction(message=message) as tx:
                    state = self._state(tx.snapshot)
                    result = change(state)
                    self._flush(state)
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
        store, agent = self.store, self.agent
        for f in state.deleted:
            store.delete(f.id, agent=agent)
        for f in state.files:
            if not f.dirty:
                continue
            relations = [{"type": kind, "to": target} for kind, target in f.relations]
            body = format_observations(f.observations)
            if f.version is None:
                extra: dict[str, Any] = {"name": f.name, "entity_type": f.entity_type}
                if relations:
                    extra["relations"] = relations
                store.create(body, id=f.id, title=_title(f.name), agent=agent, extra=extra)
            else:
                store.update(
                    f.id,
                    body,
                    expected_version=f.version,
                    agent=agent,
                    extra={"relations": relations or None},
                )
        if state.pending_dirty:
            self._write_pending(state)

    def _write_pending(self, state: _State) -> None:
        rows = [{"from": r.source, "type": r.relation_type, "to": r.target} for r in state.pending]
        if state.pending_version is None:
            if rows:
                self.store.create(
                    "Relations whose source entity does not exist yet; each moves into its\n"
                    "entity's file when that entity is created.\n",
                    id=PENDING_ID,
                    title="Pending relations",
                    agent=self.agent,
                    extra={"relations": rows},
                )
        elif rows:
            self.store.update(
                PENDING_ID,
                expected_version=state.pending_version,
                agent=self.agent,
                extra={"relations": rows},
            )
        else:
            self.store.delete(PENDING_ID, agent=self.agent)

    def create_entities(self, entities: Iterable[Entity | Mapping[str, Any]]) -> list[Entity]:
        """Create the entities whose names are new; return those (existing names are skipped,
        and a name repeated in one call is created once)."""
        wanted = [
            to_entity(e, f"entities[{i}]") for i, e in enumerate(_items(entities, "entities"))
        ]

        def change(state: _State) -> list[Entity]:
            created: list[Entity] = []
            for entity in wanted:
                if entity.name in state.by_name:
                    continue
                f = self._new_file(state, entity)
                state.files.append(f)
                state.by_name[entity.name] = f
                created.append(entity)
                moved = [r for r in state.pending if r.source == entity.name]
                if moved:
                    f.relations.extend((r.relation_type, r.target) for r in moved)
                    state.pending = [r for r in state.pending if r.source != entity.name]
                    state.pending_dirty = True
            return created

        names = ", ".join(e.name for e in wanted[:3]) + (" ..." if len(wanted) > 3 else "")
        result: list[Entity] = self._write(f"graph: create entities {names}", change)
        return result

    def _new_file(self, state: _State, entity: Entity) -> _File:
        kinds, taken = state.directories()
        directory = next(
            (d for d, seen in sorted(kinds.items()) if entity.entity_type in seen), None
        )
        if directory is None:
            directory = _free_segment(
                entity.entity_type, {d.casefold() for d in kinds}, MAX_TYPE_SEGMENT, "untyped"
            )
        segment = _free_segment(
            entity.name, taken.setdefault(directory, set()), MAX_NAME_SEGMENT, "unnamed"
        )
        kinds.setdefault(directory, set()).add(entity.entity_type)
        taken[directory].add(segment.casefold())
        return _File(
            id=f"{ENTITIES_ROOT}/{directory}/{segment}",
            version=None,
            name=entity.name,
            entity_type=entity.entity_type,
            observations=list(entity.observations),
            relations=[],
            dirty=True,
        )

    def create_relations(self, relations: Iterable[Relation | Mapping[str, Any]]) -> list[Relation]:
        """Create the relations not already there; return those. Endpoints need not exist."""
        wanted = [
            to_relation(r, f"relations[{i}]") for i, r in enumerate(_items(relations, "relations"))
        ]

        def change(state: _State) -> list[Relation]:
            created: list[Relation] = []
            existing = {r.key for r in state.relations()}
            for rel in wanted:
                if rel.key in existing:
                    continue
                existing.add(rel.key)
                source = state.by_name.get(rel.source)
                if source is not None:
                    source.relations.append((rel.relation_type, rel.target))
                    source.dirty = True
                else:
                    state.pending.append(rel)
                    state.pending_dirty = True
                created.append(rel)
            return created

        result: list[Relation] = self._write(
            f"graph: create {len(wanted)} relation{'s' if len(wanted) != 1 else ''}", change
        )
        return result

    def add_observations(self, observations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Add observations to existing entities: ``[{entityName, addedObservations}]``.

        An unknown entity is an error naming it, and nothing is written.
        """
        wanted: list[tuple[str, list[str]]] = []
        for i, item in enumerate(_items(observations, "observations")):
            record = _record(item, f"observations[{i}]", ("entityName", "contents"))
            wanted.append(
                (
                    _string(record["entityName"], f"observations[{i}].entityName"),
                    _strings(record["contents"], f"observations[{i}].contents"),
                )
            )

        def change(state: _State) -> list[dict[str, Any]]:
            results: list[dict[str, Any]] = []
            for name, contents in wanted:
                f = state.by_name.get(name)
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
        result: list[dict[str, Any]] = self._write(f"graph: observe {names}", change)
        return result

    def delete_entities(self, names: Iterable[str]) -> None:
        """Delete the named entities and every relation touching those names."""
        doomed = set(_strings(_items(names, "entityNames"), "entityNames"))

        def change(state: _State) -> None:
            keep: list[_File] = []
            for f in state.files:
                if f.name in doomed:
                    if f.version is not None:
                        state.deleted.append(f)
                    continue
                kept = [(k, t) for k, t in f.relations if t not in doomed]
                if len(kept) != len(f.relations):
                    f.relations, f.dirty = kept, True
                keep.append(f)
            state.files = keep
            pending = [
                r for r in state.pending if r.source not in doomed and r.target not in doomed
            ]
            if len(pending) != len(state.pending):
                state.pending, state.pending_dirty = pending, True

        self._write(f"graph: delete entities {', '.join(sorted(doomed))[:200]}", change)

    def delete_observations(self, deletions: Iterable[Mapping[str, Any]]) -> None:
        """Remove the given observations; unknown entities and texts are ignored."""
        wanted: list[tuple[str, list[str]]] = []
        for i, item in enumerate(_items(deletions, "deletions")):
            record = _record(item, f"deletions[{i}]", ("entityName", "observations"))
            wanted.append(
                (
                    _string(record["entityName"], f"deletions[{i}].entityName"),
                    _strings(record["observations"], f"deletions[{i}].observations"),
                )
            )

        def change(state: _State) -> None:
            for name, texts in wanted:
                f = state.by_name.get(name)
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
            for i, r in enumerate(_items(relations, "relations"))
        }

        def change(state: _State) -> None:
            for f in state.files:
                kept = [(k, t) for k, t in f.relations if (f.name, t, k) not in doomed]
                if len(kept) != len(f.relations):
                    f.relations, f.dirty = kept, True
            pending = [r for r in state.pending if r.key not in doomed]
            if len(pending) != len(state.pending):
                state.pending, state.pending_dirty = pending, True

        self._write("graph: delete relations", change)


def _copy_file(f: _File, doc_id: str) -> _File:
    return _File(
        id=doc_id,
        version=f.version,
        name=f.name,
        entity_type=f.entity_type,
        observations=list(f.observations),
        relations=list(f.relations),
        created=f.created,
    )


def _with_touching(entities: list[Entity], relations: list[Relation]) -> KnowledgeGraph:
    names = {e.name for e in entities}
    return KnowledgeGraph(
        entities, [r for r in relations if r.source in names or r.target in names]
    )
