"""The pages of ``gitmem serve``: what each shows, read through the public ``Store`` API.

Each page is a :class:`Page`: a template with its context, and the same content in the
command line's JSON shapes (``ls``, ``recall``/``search``, ``show`` with ``history``,
``log``, ``review`` ``--json``). Nothing here writes to the store.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmem.base.errors import GitmemError, InvalidInputError, NotFoundError
from gitmem.features import pictures
from gitmem.features import review as reviewing
from gitmem.features.review import memory_paths
from gitmem.format.layout import id_from_path
from gitmem.format.model import Memory, Status
from gitmem.store.core import Store
from gitmem.store.inputs import valid_time
from gitmem.store.results import HISTORY_PAGE
from gitmem.store.search import uses_fts_syntax

PAGE = 50
"""Rows per page of the memories and audit pages (and hits per search)."""
REREAD = 2_000
"""Changed memory files beyond which the listing is read whole rather than file by file."""

Params = Mapping[str, str]


@dataclass
class Page:
    template: str
    data: Callable[[], Any]
    """The JSON answer, in the command line's shapes (built only when asked for)."""
    context: dict[str, Any] = field(default_factory=dict)


def _number(params: Params, key: str, default: int, low: int = 1) -> int:
    text = params.get(key, str(default))
    if not text.isdigit() or not low <= int(text) <= 10**6:
        raise InvalidInputError(f"{key} {text!r} is not a number from {low} to 1000000")
    return int(text)


def _given(params: Params, *keys: str) -> dict[str, Any]:
    """The parameters named, an empty one as None (a form sends every field)."""
    return {key: params.get(key) or None for key in keys}


def _pager(params: Params, number: int, more: bool) -> dict[str, Any]:
    """Links to the pages before and after this one, keeping the other parameters."""
    rest = {k: v for k, v in params.items() if k not in {"page", "format"}}
    return {
        "number": number,
        "prev": {**rest, "page": str(number - 1)} if number > 1 else None,
        "next": {**rest, "page": str(number + 1)} if more else None,
    }


class View:
    """The pages of one store. Not thread-safe: one thread asks for every page."""

    ROUTES = (
        (re.compile(r"/"), "memories"),
        (re.compile(r"/memory/(?P<memory_id>.+)"), "memory"),
        (re.compile(r"/diff/(?P<commit>[0-9a-f]{4,64})/(?P<memory_id>.+)"), "diff"),
        (re.compile(r"/audit"), "audit"),
        (re.compile(r"/review"), "review"),
        (re.compile(r"/graph"), "graph"),
    )

    def __init__(self, store: Store) -> None:
        self.store = store
        self._tips: dict[str, tuple[pygit2.Commit | None, dict[str, Memory]]] = {}
        self._listing: dict[str, Any] = {}

    def page(self, path: str, params: Params) -> Page:
        for pattern, name in self.ROUTES:
            if found := pattern.fullmatch(path):
                page: Page = getattr(self, name)(params, **found.groupdict())
                page.context.setdefault("params", params)
                return page
        raise NotFoundError(f"there is no page {path}")

    def refresh(self) -> None:
        """Bring the listing up to the branch tips: at a new tip, only the memory files that
        differ from the last one (a tree diff) are read again, so a write costs the view what
        it changed, not a read of the whole store."""
        changed = False
        for scope in self.store.scopes:
            db = self.store.db(scope)
            tip = db.tip()
            old_tip, memories = self._tips.get(str(scope), (None, {}))
            if (old_tip and old_tip.id) == (tip and tip.id):
                continue
            changed = True
            paths = memory_paths(db.repo, old_tip, tip) if old_tip and tip else None
            if paths is None or len(paths) > REREAD:
                paths = []
                every = self.store.list(scope=scope, include_superseded=True, include_archived=True)
                memories = {m.id: m for m in every}
            for memory_id in filter(None, map(id_from_path, paths)):
                try:
                    memories[memory_id] = self.store.read(memory_id, scope=scope)
                except GitmemError:  # deleted, or no longer readable (a problem, listed)
                    memories.pop(memory_id, None)
            self._tips[str(scope)] = (tip, memories)
        if not changed and self._listing:
            return
        every = sorted(
            (m for _, memories in self._tips.values() for m in memories.values()),
            key=lambda m: (m.created_at, m.id),
        )
        replaced = {(str(m.store_scope), m.supersedes) for m in every if m.supersedes}
        every = [  # marked as ``ls --all`` marks them
            dataclasses.replace(m, status=Status.SUPERSEDED)
            if (str(m.store_scope), m.id) in replaced
            else m
            for m in every
        ]
        # Valid time is judged per request; a replaced memory whose validity ended has its window.
        current = [
            m
            for m in every
            if not m.archived
            and ((str(m.store_scope), m.id) not in replaced or m.valid_until is not None)
        ]
        self._listing = {
            "all": every,
            "current": current,
            "category": sorted({m.category for m in every if m.category}),
            "tag": sorted({t for m in every for t in m.tags}),
            "agent": sorted({m.agent for m in every if m.agent}),
            "scope": [str(s) for s in self.store.scopes],
            "problems": self.store.problems(),
        }

    def memories(self, params: Params) -> Page:
        self.refresh()
        facets = self._listing
        every = params.get("all") == "1"
        when = valid_time(params.get("valid_at") or None, "valid_at")
        memories = facets["all" if every else "current"]
        if when is not None or not every:
            held = when or self.store.clock.now()
            memories = [m for m in memories if m.valid_at(held)]
        if params.get("q", "").strip():
            return self._search(params, facets)
        wanted = {k: params[k] for k in ("category", "tag", "agent", "scope") if params.get(k)}
        kept = [m for m in memories if _matches(m, wanted)]
        number = _number(params, "page", 1)
        shown = kept[(number - 1) * PAGE : number * PAGE]
        return Page(
            "memories.html",
            lambda: [dataclasses.replace(m, document=None).to_dict() for m in shown],
            {
                "memories": shown,
                "facets": facets,
                "total": len(kept),
                "pager": _pager(params, number, len(kept) > number * PAGE),
            },
        )

    def _search(self, params: Params, facets: dict[str, Any]) -> Page:
        """Recall for a question; FTS5 when the query is written in its syntax."""
        query = params["q"]
        filters: dict[str, Any] = _given(params, "scope", "category", "valid_at")
        filters["tags"] = [params["tag"]] if params.get("tag") else None
        hits: list[dict[str, Any]] = []
        if uses_fts_syntax(query):
            found = self.store.search(query, limit=PAGE, **filters)
            notice, data = found.notice, found.to_dict
            for match in found:
                lines = [(match.line_number, match.line)] if match.line_number else []
                why = [f"FTS5 ({found.mode}): score {match.score:.3f}"]
                hits.append({"id": match.id, "title": match.title, "lines": lines, "why": why})
        else:
            recalled = self.store.recall(query, limit=PAGE, **filters)
            notice, data = recalled.notice, recalled.to_dict
            for hit in recalled:
                lines = [(line.number, line.text) for line in hit.lines]
                why = [f"score {hit.score:.3f}", *hit.why]
                hits.append({"id": hit.id, "title": hit.title, "lines": lines, "why": why})
        return Page("search.html", data, {"hits": hits, "notice": notice, "facets": facets})

    def memory(self, params: Params, memory_id: str) -> Page:
        at = params.get("at") or None
        history = self.store.history(memory_id, limit=HISTORY_PAGE)
        memory = self.store.get(memory_id, at=at)
        if memory is None and at is not None:
            raise NotFoundError(f"{memory_id} was not in the store at {at}")
        deleted = memory is None
        if memory is None:  # deleted: shown as it last was
            memory = next(v.memory for v in reversed(history.versions) if v.memory is not None)
        memory = dataclasses.replace(memory, document=None)
        older = {v.memory_id: v.memory and v.memory.title for v in history}
        older.pop(memory_id, None)
        newer = [(m.id, m.title) for m in self.store.successors(memory_id)]
        return Page(
            "memory.html",
            lambda: {
                "memory": memory.to_dict(),
                "history": {"id": memory_id, **history.to_dict()},
            },
            {
                "memory": memory,
                "deleted": deleted,
                "at": at,
                "history": list(reversed(history.versions)),
                "warnings": history.warnings,
                "older": list(older.items()),
                "newer": newer,
            },
        )

    def diff(self, params: Params, commit: str, memory_id: str) -> Page:
        """One version of a memory against the version before it along its chain."""
        versions = self.store.history(memory_id).versions
        found = [i for i, v in enumerate(versions) if v.commit.startswith(commit)]
        if not found:
            raise NotFoundError(f"commit {commit} made no version of {memory_id}")
        i = found[-1]
        version, before = versions[i], versions[i - 1].memory if i else None
        after = version.memory
        fields = reviewing.field_changes(before, after) if before and after else []
        shown = after or before
        lines, _ = reviewing.body_diff(
            (shown and shown.path) or memory_id,
            before.body if before else "",
            after.body if after else "",
            True,
        )
        return Page(
            "diff.html",
            lambda: {
                "version": version.to_dict(),
                "fields": [f.to_dict() for f in fields],
                "diff": lines,
            },
            {"version": version, "fields": fields, "diff": lines, "memory_id": memory_id},
        )

    def audit(self, params: Params) -> Page:
        number = _number(params, "page", 1)
        session = params.get("session") or None
        entries = self.store.log(
            **_given(params, "agent", "op", "since", "until"),
            limit=None if session else number * PAGE + 1,
        )
        if session:  # the log filters by trailers the store indexes; sessions by hand
            entries = [e for e in entries if e.session == session]
        shown = entries[(number - 1) * PAGE : number * PAGE]
        return Page(
            "audit.html",
            lambda: [e.to_dict() for e in shown],
            {"entries": shown, "pager": _pager(params, number, len(entries) > number * PAGE)},
        )

    def review(self, params: Params) -> Page:
        spec = params.get("range", "").strip()
        result = reviewing.review(self.store, spec) if spec else None
        branches = sorted(self.store.db().repo.branches.local)
        return Page(
            "review.html",
            lambda: result.to_dict() if result else {"branches": branches},
            {"review": result, "branches": branches},
        )

    def graph(self, params: Params) -> Page:
        depth = _number(params, "depth", 2, low=0)
        picture = pictures.select(pictures.build(self.store), params.get("id") or None, depth)
        return Page(
            "graph.html",
            lambda: {
                "nodes": [dataclasses.asdict(n) for n in picture.nodes.values()],
                "edges": [dataclasses.asdict(e) for e in picture.edges],
            },
            {"picture": picture},
        )


def _matches(memory: Memory, wanted: Mapping[str, str]) -> bool:
    values: dict[str, Iterable[str | None]] = {
        "category": [memory.category],
        "tag": memory.tags,
        "agent": [memory.agent],
        "scope": [str(memory.store_scope or memory.scope)],
    }
    return all(value in values[key] for key, value in wanted.items())
