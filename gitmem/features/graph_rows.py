"""The knowledge graph's files and their rows in the derived index: what an entity file
means is decided here once, for the index and for the walk the graph falls back to. The row
provider fills ``graph_entities``, ``graph_relations`` (file order, pending ones last) and
``graph_text`` (FTS5 trigrams narrowing ``search_nodes``); queries read inside one SQLite
read transaction, so every answer reflects one commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import sqlite3
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitmem.format.model import Memory
from gitmem.git.objects import Snapshot
from gitmem.store.index import Index
from gitmem.store.index_rows import IndexedMemory, RowChanges, chunks, marks
from gitmem.store.row_providers import RowProvider, provider_state, register

ENTITIES_ROOT = "entities"
PENDING_ID = f"{ENTITIES_ROOT}/pending-relations"
"""Relations whose source entity does not exist yet."""
GRAPH_VERSION = 4
"""Bump when the tables or what :func:`_apply` writes change: the index refills them."""
TRIGRAM = 3


# -- what a file means ---------------------------------------------------------------------


def parse_observations(body: str) -> list[str]:
    """Observations from an entity file's body: ``- `` or ``* `` starts an item, lines
    indented by two spaces continue it, blank lines are skipped, any other line is one."""
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


def _listed(value: Any, keys: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The ``keys`` of each front-matter list item holding them all as strings."""
    items = value if isinstance(value, list) else []
    return [
        tuple(item[k] for k in keys)
        for item in items
        if isinstance(item, Mapping) and all(isinstance(item.get(k), str) for k in keys)
    ]


def pending_field(value: Any) -> list[tuple[str, str, str]]:
    """(from, type, to) triples of the pending file's ``relations``."""
    return [(source, kind, to) for source, kind, to in _listed(value, ("from", "type", "to"))]


def is_entity_path(path: str) -> bool:
    """``entities/<type folder>/<shard>/<name>.md``; other files under ``entities/`` (the
    pending file, format 1's ``entities/<type>/<name>.md``) are no entities."""
    parts = path.split("/")
    return len(parts) == 4 and parts[0] == ENTITIES_ROOT and path.endswith(".md")


MAX_NAME_SEGMENT = 100
MAX_TYPE_SEGMENT = 80
"""``entities/`` + type + ``/`` + name stays within the 200-character id bound."""

_HASH_LENGTHS = (8, 12, 16, 40)
_WINDOWS_RESERVED = {
    "CON", "PRN", "AUX", "NUL",
    *(f"COM{i}" for i in range(1, 10)),
    *(f"LPT{i}" for i in range(1, 10)),
}  # fmt: skip


def sanitise(text: str, *, max_length: int = MAX_NAME_SEGMENT, fallback: str = "unnamed") -> str:
    """A path segment for ``text`` of letters, digits, '.', '_' and '-' (accents dropped,
    anything else a dash), at most ``max_length`` long; ``fallback`` when nothing is left."""
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


def _plain(observation: str) -> bool:
    """Whether an observation survives the plain list form (and a person's editor) intact."""
    return not observation.startswith('"') and all(
        line and line == line.strip() and not any(unicodedata.category(c) == "Cc" for c in line)
        for line in observation.split("\n")
    )


def format_observations(observations: Iterable[str]) -> str:
    """The body of an entity file: one list item per observation, continued on lines
    indented by two spaces; one the plain form would not keep exactly is a JSON string."""
    lines: list[str] = []
    for observation in observations:
        if _plain(observation):
            first, *rest = observation.split("\n")
            lines.append(f"- {first}")
            lines.extend(f"  {line}" for line in rest)
        else:
            lines.append("- " + json.dumps(observation, ensure_ascii=False))
    return "".join(f"{line}\n" for line in lines)


def _title(name: str) -> str:
    """A one-line title for ``gitmem ls`` (titles may not hold control characters)."""
    flat = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in name).strip()
    return " ".join(flat.split())[:200] or "(unnamed)"


def shard_of(name: str) -> str:
    """The shard folder of an entity's file: two hex digits of a hash of its case-folded
    file name, so a write and the index's catch-up touch small trees at any graph size."""
    base = sanitise(name, max_length=MAX_NAME_SEGMENT, fallback="unnamed")
    return hashlib.sha1(base.casefold().encode("utf-8")).hexdigest()[:2]


def _taken(snap: Snapshot, folder: str, segment: str, planned: set[str]) -> bool:
    """Whether ``folder`` has an entry called ``segment`` or ``segment.md``, ignoring case
    (committed, staged or ``planned``; a file removed in this commit still counts)."""
    return f"{folder}/{segment}".casefold() in planned or any(
        snap.committed_spellings(folder, name) or snap.staged_spellings(f"{folder}/{name}")
        for name in (segment, f"{segment}.md")
    )


def _free_name(
    snap: Snapshot, folder: str, text: str, max_length: int, fallback: str, planned: set[str]
) -> str:
    """``text`` as a segment ``folder`` does not have yet, else with a hash of it appended."""
    base = sanitise(text, max_length=max_length, fallback=fallback)
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    candidates = itertools.chain(
        [base],
        (f"{base[: max_length - n - 1].rstrip('-._')}-{digest[:n]}" for n in _HASH_LENGTHS),
        (f"{base[: max_length - 46].rstrip('-._')}-{digest}-{n}" for n in range(2, 10_000)),
    )
    return next(c for c in candidates if not _taken(snap, folder, c, planned))


@dataclass
class EntityRow:
    """One entity file as the graph reads it (or, ``dirty``, as a graph call will write it)."""

    doc: str
    name: str
    entity_type: str
    observations: list[str]
    relations: list[tuple[str, str]]
    """(relationType, to) of relations starting here, in file order."""
    created_ns: int
    version: int | None
    """None for a file a graph call creates."""
    dirty: bool = False

    @property
    def folder(self) -> str:
        return self.doc.split("/")[1]

    @property
    def order(self) -> tuple[int, str]:
        """Where it is listed: oldest first, then by document id."""
        return (self.created_ns, self.doc)


ORDER_KEY = "created_ns"
"""Front-matter key of an entity: its creation time in nanoseconds, made strictly increasing
by the writer. ``created_at`` has whole seconds, and the reference lists entities in the
order they were made, so entities made within one second need this to keep that order."""


def entity_fields(memory: Memory) -> EntityRow:
    """The entity an entity file's memory holds (name and type fall back to its place)."""
    segments = memory.id.split("/")
    name, kind = memory.extra.get("name"), memory.extra.get("entity_type")
    # Listed by its created_ns, else (a file written by hand or before the key) created_at.
    order = memory.extra.get(ORDER_KEY)
    if not (isinstance(order, int) and not isinstance(order, bool) and 0 <= order < 2**62):
        order = int(memory.created_at.timestamp()) * 1_000_000_000
    return EntityRow(
        doc=memory.id,
        name=name if isinstance(name, str) else segments[-1],
        entity_type=kind if isinstance(kind, str) else segments[1],
        observations=parse_observations(memory.body),
        relations=[(k, to) for k, to in _listed(memory.extra.get("relations"), ("type", "to"))],
        created_ns=order,
        version=memory.version,
    )


# -- the row provider -----------------------------------------------------------------------

_DDL = (
    "CREATE TABLE graph_entities (rowid INTEGER PRIMARY KEY, doc TEXT NOT NULL, "
    "folder TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, "
    "observations TEXT NOT NULL, created_ns INTEGER NOT NULL, version INTEGER NOT NULL)",
    "CREATE INDEX graph_entities_name ON graph_entities (name, created_ns, doc)",
    "CREATE INDEX graph_entities_order ON graph_entities (created_ns, doc)",
    "CREATE INDEX graph_entities_type ON graph_entities (type, folder)",
    "CREATE TABLE graph_relations (owner INTEGER NOT NULL, pending INTEGER NOT NULL, "
    "created_ns INTEGER NOT NULL, doc TEXT NOT NULL, pos INTEGER NOT NULL, "
    "source TEXT NOT NULL, target TEXT NOT NULL, type TEXT NOT NULL)",
    "CREATE INDEX graph_relations_owner ON graph_relations (owner)",
    "CREATE INDEX graph_relations_source ON graph_relations (source)",
    "CREATE INDEX graph_relations_target ON graph_relations (target)",
    "CREATE INDEX graph_relations_order ON graph_relations (pending, created_ns, doc, pos)",
    "CREATE VIRTUAL TABLE graph_text USING fts5(text, tokenize = 'trigram case_sensitive 1')",
)


def _apply(conn: sqlite3.Connection, _repo: object, changes: RowChanges) -> None:
    for gone in changes.removed:
        if _kind(gone) is None:
            continue
        conn.execute("DELETE FROM graph_entities WHERE rowid = ?", (gone.rowid,))
        conn.execute("DELETE FROM graph_relations WHERE owner = ?", (gone.rowid,))
        conn.execute("DELETE FROM graph_text WHERE rowid = ?", (gone.rowid,))
    entities: list[tuple[Any, ...]] = []
    relations: list[tuple[Any, ...]] = []
    texts: list[tuple[int, str]] = []
    for new in changes.added:
        kind = _kind(new)
        if kind == "pending":
            triples = pending_field(new.memory.extra.get("relations"))
            relations.extend(
                (new.rowid, 1, 0, new.memory.id, pos, source, target, rtype)
                for pos, (source, rtype, target) in enumerate(triples)
            )
        elif kind == "entity":
            row = entity_fields(new.memory)
            observations = json.dumps(row.observations, ensure_ascii=False)
            entities.append(
                (new.rowid, row.doc, row.folder, row.name, row.entity_type, observations,
                 row.created_ns, row.version)
            )  # fmt: skip
            relations.extend(
                (new.rowid, 0, row.created_ns, row.doc, pos, row.name, target, rtype)
                for pos, (rtype, target) in enumerate(row.relations)
            )
            # Pieces are lowered one by one (the rule the results are checked with), then joined.
            pieces = (row.name, row.entity_type, *row.observations)
            texts.append((new.rowid, "\n".join(piece.lower() for piece in pieces)))
    conn.executemany(f"INSERT INTO graph_entities VALUES ({', '.join('?' * 8)})", entities)
    conn.executemany(f"INSERT INTO graph_relations VALUES ({', '.join('?' * 8)})", relations)
    conn.executemany("INSERT INTO graph_text (rowid, text) VALUES (?, ?)", texts)


def _kind(item: IndexedMemory) -> str | None:
    path = item.memory.path or ""
    if path == f"{PENDING_ID}.md":
        return "pending"
    if is_entity_path(path):
        return "entity"
    return None


GRAPH_PROVIDER = RowProvider(
    name="graph",
    version=GRAPH_VERSION,
    tables=("graph_text", "graph_relations", "graph_entities"),
    ddl=_DDL,
    apply=_apply,
    under=f"{ENTITIES_ROOT}/",
)
register(GRAPH_PROVIDER)


# -- queries ----------------------------------------------------------------------------------

_ENTITY_COLUMNS = "doc, name, type, observations, created_ns, version"
_ENTITY_ORDER = "ORDER BY created_ns, doc"
_RELATION_ORDER = "ORDER BY pending, created_ns, doc, pos"


def _entity(row: Sequence[Any]) -> EntityRow:
    return EntityRow(
        doc=row[0],
        name=row[1],
        entity_type=row[2],
        observations=json.loads(row[3]),
        relations=[],
        created_ns=int(row[4]),
        version=int(row[5]),
    )


class GraphReader:
    """Queries of the graph rows, all at one commit (:attr:`commit`)."""

    def __init__(self, conn: sqlite3.Connection, commit: str | None) -> None:
        self.conn = conn
        self.commit = commit

    def _where_in(self, sql: str, names: Iterable[str]) -> Iterator[Any]:
        """The rows of ``sql`` (its ``{}`` a list of names) for every name."""
        for chunk in chunks(names):
            yield from self.conn.execute(sql.format(marks(chunk)), chunk)

    # -- entities ---------------------------------------------------------------------------

    def graph_dict(self) -> dict[str, list[dict[str, Any]]]:
        """The whole graph in the reference server's JSON shape, straight from the rows
        (``read_graph`` of a large graph: no row or entity objects on the way)."""
        loads = json.loads
        entities = [
            {"name": name, "entityType": kind, "observations": loads(observations)}
            for name, kind, observations in self.conn.execute(
                f"SELECT name, type, observations FROM graph_entities {_ENTITY_ORDER}"
            )
        ]
        relations = [
            {"from": source, "to": target, "relationType": kind}
            for source, target, kind in self.conn.execute(
                f"SELECT source, target, type FROM graph_relations {_RELATION_ORDER}"
            )
        ]
        return {"entities": entities, "relations": relations}

    def named(self, names: Iterable[str]) -> list[EntityRow]:
        """The entity files with one of these names, in the graph's order."""
        sql = f"SELECT {_ENTITY_COLUMNS} FROM graph_entities WHERE name IN ({{}})"
        return sorted((_entity(r) for r in self._where_in(sql, names)), key=lambda e: e.order)

    def search(self, query: str) -> list[EntityRow]:
        """Entities whose lower-cased name, type or an observation contains ``query``
        (lower-cased by the caller), in the graph's order."""
        if len(query) >= TRIGRAM:
            phrase = '"' + query.replace('"', '""') + '"'
            rows = self.conn.execute(
                f"SELECT {_ENTITY_COLUMNS} FROM graph_entities WHERE rowid IN "
                f"(SELECT rowid FROM graph_text WHERE graph_text MATCH ?) {_ENTITY_ORDER}",
                (phrase,),
            )
        else:
            rows = self.conn.execute(
                f"SELECT {_ENTITY_COLUMNS} FROM graph_entities {_ENTITY_ORDER}"
            )
        found = (_entity(r) for r in rows)  # the reference's rule, on lower-cased texts:
        return [
            e
            for e in found
            if any(query in t.lower() for t in (e.name, e.entity_type, *e.observations))
        ]

    def docs_of_type(self, entity_type: str) -> list[str]:
        """Folders that hold an entity of exactly this type, sorted."""
        sql = "SELECT DISTINCT folder FROM graph_entities WHERE type = ? ORDER BY folder"
        return [r[0] for r in self.conn.execute(sql, (entity_type,))]

    # -- relations -------------------------------------------------------------------------

    def touching(self, names: Collection[str]) -> list[tuple[str, str, str]]:
        """Relations with at least one end among ``names``, in the graph's order."""
        found: dict[tuple[Any, ...], tuple[str, str, str]] = {}
        for column in ("source", "target"):
            sql = (
                "SELECT pending, created_ns, doc, pos, source, target, type "
                f"FROM graph_relations WHERE {column} IN ({{}})"
            )
            for r in self._where_in(sql, names):
                found[tuple(r[:4])] = (r[4], r[5], r[6])
        return [found[key] for key in sorted(found)]

    def docs_relating_to(self, names: Iterable[str]) -> list[str]:
        """Entity files holding a relation to one of ``names``."""
        sql = "SELECT doc FROM graph_relations WHERE pending = 0 AND target IN ({})"
        return list(dict.fromkeys(r[0] for r in self._where_in(sql, names)))


def memory_reader(memories: Iterable[Memory], commit: str | None) -> GraphReader:
    """A reader of the rows of ``memories`` (entity files and the pending file) built in
    memory: the graph where the index cannot answer (a batch's staged files, no index)."""
    conn = sqlite3.connect(":memory:")
    for statement in _DDL:
        conn.execute(statement)
    added = tuple(IndexedMemory(n, "", m) for n, m in enumerate(memories, 1))
    _apply(conn, None, RowChanges(full=True, added=added))
    return GraphReader(conn, commit)


@contextlib.contextmanager
def open_reader(index: Index) -> Iterator[GraphReader | None]:
    """A reader of the graph rows caught up with the branch tip, or None when they cannot
    answer (the provider failed at this commit): the caller walks the files instead. Rows
    already at the tip cost one reference read and one query."""
    try:  # the reference only, not the commit (milliseconds among many loose objects)
        tip: str | None = str(index.db.repo.lookup_reference(index.db.ref_name).target)
    except (KeyError, ValueError):
        tip = None
    for attempt in range(2):
        if attempt:
            index.catch_up()
        with index.reading() as conn:
            meta = dict(
                conn.execute(
                    "SELECT key, value FROM meta WHERE key IN ('commit', 'provider:graph')"
                ).fetchall()
            )
            commit = meta.get("commit")
            current = commit is not None and meta.get("provider:graph") == (
                provider_state(GRAPH_PROVIDER, commit)
            )
            if attempt == 0 and (not current or commit != tip):
                continue
            if not current:
                yield None
                return
            yield GraphReader(conn, commit)
            return
