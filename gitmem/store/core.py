"""The Store: the one class callers use, over its layers (:mod:`gitmem.store.writes` >
:mod:`gitmem.store.history` > :mod:`gitmem.store.reads` > :mod:`gitmem.store.transactions`),
and the entry points to search, recall, sync and packing.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from gitmem.base.errors import InvalidInputError
from gitmem.format.model import Scope
from gitmem.store.index_catchup import Progress
from gitmem.store.inputs import tag_tuple, whole_number
from gitmem.store.transactions import At
from gitmem.store.writes import Writes

if TYPE_CHECKING:
    from gitmem.git.maintenance import GcResult
    from gitmem.store.recall import RecallResults
    from gitmem.store.search import SearchResults
    from gitmem.store.sync import SyncResult


class Store(Writes):
    """A gitmem store: one git repository, or a repo-scope and a user-scope one read together
    (:func:`gitmem.open`, :func:`gitmem.init`); writes go to ``default_scope`` unless told."""

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, branch={self.db().branch!r})"

    def close(self) -> None:
        """Let go of the index's database connection and git's open files (a later call
        opens them again); ``with gitmem.open(...) as store:`` closes at the block's end."""
        for backend in self._backends.values():
            if backend.index is not None:
                backend.index.close()
            backend.db.repo.free()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def gc(
        self, *, scope: Scope | str | None = None, progress: Progress | None = None
    ) -> builtins.list[GcResult]:
        """Pack each repository with ``git gc``; sizes before and after (``gitmem gc``).
        ``progress(done, total)`` counts repositories packed."""
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
        join: bool = False,
        progress: Progress | None = None,
        git_progress: Callable[[str], None] | None = None,
    ) -> SyncResult:
        """Fetch ``remote``, merge its branch memory-aware, push (``gitmem sync``; see
        :func:`gitmem.store.sync.sync`). ``progress`` follows the index's catch-up, ``git_progress``
        gets git's own lines; ``join``: merge a hub's unrelated history (``gitmem join``).
        A project store following its code's branches syncs main and its memory branches too."""
        from gitmem.store import follow
        from gitmem.store.sync import sync

        db = self.db(scope)
        both = follow.sync_all if branch is None and follow.follows(db.repo) else sync
        result = both(
            db, remote, join=join, git_progress=git_progress,
            **({"branch": branch} if branch is not None else {}),
        )
        self.index(scope).catch_up(progress)
        return result

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
        valid_at: At = None,
    ) -> SearchResults:
        """Search the current memories, best first: ``"fts"`` (FTS5 syntax, title matches
        first, then bm25; a query that is not FTS5 syntax is answered by :meth:`recall`, ``notice``
        says so), ``"regex"`` or ``"substring"`` (a grep of the bodies, one match per line). Valid
        time as :meth:`list` judges it."""
        from gitmem.store import search as search_mod

        checked_mode = search_mod.check_mode(mode)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("the search query is empty")
        whole_number("limit", limit, 1)
        filters: dict[str, Any] = {
            "category": category,
            "tags": sorted(set(tag_tuple(tags))) if tags else [],
            "include_superseded": include_superseded,
            "include_archived": include_archived,
            "layer": layer,
            "project": project,
            "valid_us": self._valid_us(
                self._ordered(scope)[0], None, valid_at, include_superseded
            ),
        }
        results = search_mod.SearchResults(query=query, mode=checked_mode)
        if checked_mode != "fts":
            pattern = search_mod.compile_line_pattern(query, checked_mode)
            memories = itertools.chain.from_iterable(
                self._reader(b).candidates(filters) for b in self._ordered(scope)
            )
            results.matches = search_mod.grep(memories, pattern, limit)
            return results
        found = search_mod.full_text_matches(
            query, (self._reader(b) for b in self._ordered(scope)), limit, filters
        )
        if isinstance(found, str):
            # Not FTS5 syntax: a question, punctuation, words no memory holds all of.
            plain = {k: v for k, v in filters.items() if k != "valid_us"}
            recalled = self.recall(query, limit=limit, scope=scope, valid_at=valid_at, **plain)
            results.notice = f"searched {query!r} as natural language ({found})"
            results.mode = "natural"  # scores are recall's, not FTS5 tiers and bm25
            found = [search_mod.from_recall(h.memory, h.score, h.lines) for h in recalled]
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
        valid_at: At = None,
    ) -> RecallResults:
        """The memories that answer ``query`` best first, each with its best lines and why it ranked
        (docs/recall.md); never raises for a query. ``budget`` (tokens) packs the best into
        ``results.packed``; contradicting hits are named in ``results.contradictions``. Valid time
        as :meth:`list` judges it."""
        from gitmem.store.recall import recall

        whole_number("limit", limit, 1)
        if budget is not None:
            whole_number("budget", budget, 0)
        backends = self._ordered(scope)
        return recall(
            [self._reader(b, at) for b in backends],
            query,
            limit=limit,
            category=category,
            tags=sorted(set(tag_tuple(tags))) if tags else (),
            include_superseded=include_superseded,
            include_archived=include_archived,
            budget=budget,
            layer=layer,
            project=project,
            valid_us=self._valid_us(backends[0], at, valid_at, include_superseded),
        )
