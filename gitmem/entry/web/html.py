"""How the web view draws: Jinja2 templates, memory bodies as sanitised markdown (raw HTML
off, cleaned by nh3, no images), the graph as SVG laid out here. Templates escape every value
and show control characters as escapes; no page has a script."""

from __future__ import annotations

import collections
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

from gitmem.base.clock import format_timestamp
from gitmem.base.printable import printable
from gitmem.features.pictures import Picture

HERE = Path(__file__).parent
STYLE = HERE / "static" / "style.css"

_TAGS = {"a", "p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol",
         "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"}
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_MARKDOWN.disable("image")


def markdown(text: str) -> Markup:
    """A memory body as HTML that runs nothing and fetches nothing."""
    lines = (printable(line.removesuffix("\r").replace("\t", "    ")) for line in text.split("\n"))
    html = _MARKDOWN.render("\n".join(lines))
    return Markup(
        nh3.clean(
            html,
            tags=_TAGS,
            attributes={"a": {"href", "title"}},
            url_schemes={"http", "https", "mailto"},
            link_rel="noopener noreferrer nofollow",
        )
    )


def _shown(value: Any) -> Any:
    """Every value a template prints: control characters as escapes; Markup is ours."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    return value


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        finalize=_shown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown
    env.filters["path"] = lambda text: quote(str(text), safe="/")
    env.filters["layout"] = layout
    return env


MAX_NODES = 300
"""Nodes drawn at most; a larger graph is drawn in part (pick a node to see around it)."""
WIDTH, HEIGHT, GAP_X, GAP_Y, PAD = 220, 44, 90, 22, 16
LABEL_CHARS = 32


@dataclass(frozen=True)
class Box:
    key: str
    kind: str
    lines: list[str]
    x: int
    y: int
    href: str


@dataclass(frozen=True)
class Arrow:
    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    kind: str


@dataclass(frozen=True)
class Drawing:
    boxes: list[Box]
    arrows: list[Arrow]
    width: int
    height: int
    left_out: int


def layout(picture: Picture) -> Drawing:
    """Columns by the longest path along the arrows (cycles stop at a bound); in each column a
    node sits level with the nodes pointing to it where it can: a plain layered drawing,
    enough for version chains and small graphs."""
    keys = sorted(picture.nodes)[:MAX_NODES]
    kept = set(keys)
    edges = [e for e in picture.edges if e.source in kept and e.target in kept]
    rank = dict.fromkeys(keys, 0)
    bound = min(len(keys), 24)
    for _ in range(bound):
        moved = False
        for edge in edges:
            if edge.source != edge.target and rank[edge.target] <= rank[edge.source] < bound:
                rank[edge.target] = rank[edge.source] + 1
                moved = True
        if not moved:
            break
    columns: dict[int, list[str]] = collections.defaultdict(list)
    for key in keys:
        columns[rank[key]].append(key)
    row: dict[str, int] = {}
    into = collections.defaultdict(list)
    for edge in edges:
        into[edge.target].append(edge.source)
    for column in sorted(columns):

        def place(key: str) -> float:
            before = [row[k] for k in into[key] if k in row]
            return sum(before) / len(before) if before else float("inf")

        free = 0
        for key in sorted(columns[column], key=place):
            wanted = place(key)
            row[key] = free = max(free, round(wanted) if wanted != float("inf") else free)
            free += 1
    boxes: dict[str, Box] = {}
    for key in keys:
        node = picture.nodes[key]
        lines = [line if len(line) <= LABEL_CHARS else line[: LABEL_CHARS - 1] + "…"
                 for line in node.label.split("\n")[:2]]  # fmt: skip
        name = key.removeprefix("entity:")
        href = f"/graph?id={quote(name)}" if key.startswith("entity:") else f"/memory/{quote(key)}"
        x, y = PAD + rank[key] * (WIDTH + GAP_X), PAD + row[key] * (HEIGHT + GAP_Y)
        boxes[key] = Box(key, node.kind, lines, x, y, href)
    arrows = []
    for edge in edges:
        a, b = boxes[edge.source], boxes[edge.target]
        x1, x2 = (a.x + WIDTH, b.x) if b.x > a.x else (a.x + WIDTH / 2, b.x + WIDTH / 2)
        y1, y2 = a.y + HEIGHT / 2, b.y + HEIGHT / 2
        if b.x <= a.x:
            y1, y2 = (a.y + HEIGHT, b.y) if b.y > a.y else (a.y, b.y + HEIGHT)
        arrows.append(Arrow(x1, y1, x2, y2, edge.label, edge.kind))
    width = PAD * 2 + (max(rank.values(), default=0) + 1) * (WIDTH + GAP_X)
    height = PAD * 2 + (max(row.values(), default=0) + 1) * (HEIGHT + GAP_Y)
    return Drawing(list(boxes.values()), arrows, width, height, len(picture.nodes) - len(keys))
