"""Pictures of a store (``gitmem graph``): the knowledge graph's entities and relations, and
the memories with their ``supersedes`` and ``related`` arrows, as Mermaid or Graphviz DOT.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from gitmem.base.errors import InvalidInputError, NotFoundError
from gitmem.features.graph import Graph
from gitmem.features.graph_rows import ENTITIES_ROOT, PENDING_ID
from gitmem.format.model import UNTITLED
from gitmem.store.core import Store

FORMATS = ("mermaid", "dot")


@dataclass(frozen=True)
class Node:
    key: str
    label: str
    kind: str
    """entity, missing (a relation's end that is no entity), memory, superseded, fork."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    kind: str
    """relation, supersedes, fork (a supersedes arrow into a fork), related."""


@dataclass
class Picture:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def add(self, node: Node) -> None:
        self.nodes.setdefault(node.key, node)

    def around(self, start: str, depth: int) -> Picture:
        """The part within ``depth`` links of ``start`` (links followed both ways)."""
        neighbours: dict[str, set[str]] = collections.defaultdict(set)
        for edge in self.edges:
            neighbours[edge.source].add(edge.target)
            neighbours[edge.target].add(edge.source)
        seen = frontier = {start}
        for _ in range(depth):
            frontier = {other for key in frontier for other in neighbours[key]} - seen
            seen = seen | frontier
        return Picture(
            {key: node for key, node in self.nodes.items() if key in seen},
            [e for e in self.edges if e.source in seen and e.target in seen],
        )


def _entity_key(name: str) -> str:
    return f"entity:{name}"


def _shown_ids(ids: list[str]) -> dict[str, str]:
    """Each memory's id as its label shows it: the first 13 characters of a ``mem_`` id, or
    the whole id where those do not tell it from another's (a fork kept beside its memory)."""
    short = {i: i[:13] if i.startswith("mem_") else i for i in ids}
    counts = collections.Counter(short.values())
    return {i: s if counts[s] == 1 else i for i, s in short.items()}


def build(store: Store) -> Picture:
    """The whole picture of the store's default scope: knowledge graph and memories."""
    picture = Picture()
    graph = Graph(store).read_graph()
    for entity in graph.entities:
        picture.add(
            Node(_entity_key(entity.name), f"{entity.name}\n({entity.entity_type})", "entity")
        )
    for relation in graph.relations:
        for end in (relation.source, relation.target):
            picture.add(Node(_entity_key(end), end, "missing"))
        picture.edges.append(
            Edge(
                _entity_key(relation.source),
                _entity_key(relation.target),
                relation.relation_type,
                "relation",
            )
        )
    memories = [
        m
        for m in store.list(include_superseded=True, include_archived=True)
        if not m.id.startswith(f"{ENTITIES_ROOT}/") and m.id != PENDING_ID
    ]
    known = {m.id for m in memories}
    shown = _shown_ids(sorted(known))
    successors: dict[str, list[str]] = collections.defaultdict(list)
    for m in memories:
        if m.supersedes:
            successors[m.supersedes].append(m.id)
    for m in memories:
        fork = len(successors.get(m.id, ())) > 1
        kind = "fork" if fork else "superseded" if m.id in successors else "memory"
        name = m.title or UNTITLED
        name = name if len(name) <= 60 else name[:57] + "..."
        picture.add(Node(m.id, f"{name}\nv{m.version} · {shown[m.id]}", kind))
    for m in memories:
        if m.supersedes:
            if m.supersedes not in known:
                picture.add(Node(m.supersedes, f"{m.supersedes}\n(missing)", "missing"))
            fork = len(successors.get(m.supersedes, ())) > 1
            picture.edges.append(
                Edge(m.id, m.supersedes, "supersedes", "fork" if fork else "supersedes")
            )
        for rel in m.related:
            if rel.id == m.supersedes and str(rel.relationship) == "supersedes":
                continue
            if rel.id not in known:
                picture.add(Node(rel.id, f"{rel.id}\n(missing)", "missing"))
            picture.edges.append(Edge(m.id, rel.id, str(rel.relationship), "related"))
    return picture


def select(picture: Picture, start: str | None, depth: int) -> Picture:
    """``start`` (a memory id or an entity name) and what lies within ``depth`` links."""
    if depth < 0:
        raise InvalidInputError("--depth must be 0 or more")
    if start is None:
        return picture
    for key in (start, _entity_key(start)):
        if key in picture.nodes:
            return picture.around(key, depth)
    raise NotFoundError(f"no memory or entity {start!r} to draw")


def _mermaid_text(text: str) -> str:
    # Mermaid reads "#name;" entity codes inside quoted labels; quotes and angle brackets
    # would end the label or be taken as HTML.
    out = text.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;")
    out = out.replace(">", "#gt;")
    return out.replace("\r", "").replace("\n", "<br/>")


_MERMAID_CLASSES = {
    "entity": "fill:#eef6ff,stroke:#3b78c4",
    "missing": "fill:#fff,stroke:#999,stroke-dasharray:4 3,color:#777",
    "memory": "fill:#f6fff0,stroke:#4a8a2a",
    "superseded": "fill:#f2f2f2,stroke:#aaa,color:#777",
    "fork": "fill:#ffe5e5,stroke:#c00,stroke-width:2px",
}


def _mermaid(picture: Picture) -> str:
    names = {key: f"n{i}" for i, key in enumerate(sorted(picture.nodes))}
    lines = ["flowchart LR"]
    for key in sorted(picture.nodes):
        node = picture.nodes[key]
        shape = ('(["', '"])') if node.kind in {"entity", "missing"} else ('["', '"]')
        lines.append(f"  {names[key]}{shape[0]}{_mermaid_text(node.label)}{shape[1]}")
    for edge in picture.edges:
        arrow = "-.->" if edge.kind == "related" else "-->"
        label = _mermaid_text(edge.label)
        lines.append(f'  {names[edge.source]} {arrow}|"{label}"| {names[edge.target]}')
    fork_links = [i for i, edge in enumerate(picture.edges) if edge.kind == "fork"]
    for kind, style in _MERMAID_CLASSES.items():
        members = [names[k] for k in sorted(picture.nodes) if picture.nodes[k].kind == kind]
        if members:
            lines.append(f"  classDef {kind} {style}")
            lines.append(f"  class {','.join(members)} {kind}")
    if fork_links:
        lines.append(f"  linkStyle {','.join(map(str, fork_links))} stroke:#c00,stroke-width:2px")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")


_DOT_NODES = {
    "entity": 'shape=ellipse, style=filled, fillcolor="#eef6ff", color="#3b78c4"',
    "missing": 'shape=ellipse, style=dashed, color="#999999", fontcolor="#777777"',
    "memory": 'shape=box, style=filled, fillcolor="#f6fff0", color="#4a8a2a"',
    "superseded": 'shape=box, style=filled, fillcolor="#f2f2f2", color="#aaaaaa"',
    "fork": 'shape=box, style="filled,bold", fillcolor="#ffe5e5", color="#cc0000", penwidth=2',
}
_DOT_EDGES = {
    "relation": "",
    "supersedes": "",
    "fork": ', color="#cc0000", penwidth=2',
    "related": ", style=dotted",
}


def _dot(picture: Picture) -> str:
    font = 'fontname="Helvetica"'  # nodes and edge labels alike (dot's default is Times)
    lines = ["digraph gitmem {", "  rankdir=LR;", f"  node [{font}];", f"  edge [{font}];"]
    for key in sorted(picture.nodes):
        node = picture.nodes[key]
        lines.append(
            f'  "{_dot_text(key)}" [label="{_dot_text(node.label)}", {_DOT_NODES[node.kind]}];'
        )
    for edge in picture.edges:
        lines.append(
            f'  "{_dot_text(edge.source)}" -> "{_dot_text(edge.target)}" '
            f'[label="{_dot_text(edge.label)}"{_DOT_EDGES[edge.kind]}];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(store: Store, *, fmt: str = "mermaid", start: str | None = None, depth: int = 2) -> str:
    """``gitmem graph``: the store (or the part around ``start``) as Mermaid or DOT text."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    picture = select(build(store), start, depth)
    return _mermaid(picture) if fmt == "mermaid" else _dot(picture)
