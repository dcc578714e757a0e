"""Commands over the derived index and the repository: search, recall, reindex, gc."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import click

from gitmem.base.printable import printable
from gitmem.cli.common import (
    ProgressBar,
    State,
    at_option,
    emitted,
    filter_options,
    json_state,
    on_terminal,
    scope_option,
    valid_at_option,
    valid_us,
)
from gitmem.format.model import UNTITLED
from gitmem.store.search import SearchMatch, SearchResults

if TYPE_CHECKING:
    # Recall loads the embedder's libraries; a search answered by FTS5 never needs them.
    from gitmem.store.recall import RecallResults


def _highlight(match: SearchMatch) -> str:
    """The matching line with its matched spans in bold (plain text when not a terminal)."""
    line, parts, last = match.line, [], 0
    for start, end in match.spans:
        parts += [line[last:start], click.style(line[start:end], bold=True, fg="red")]
        last = end
    return "".join(parts) + line[last:]


def results_text(results: SearchResults) -> str:
    lines: list[str] = []
    if results.notice:
        lines.append(f"note: {results.notice}")
    if not results.matches:
        lines.append("No matches.")
        return "\n".join(lines)
    current: str | None = None
    for match in results:
        if match.id != current or match.line_number is None:
            current = match.id
            heading = printable(f"{match.id}  {match.title or UNTITLED}")
            if results.mode == "fts":  # a title match is a tier worth 1000, then bm25
                title = match.score >= 1000.0
                bm25 = match.score - 1000.0 if title else match.score
                heading += f"  [{'title match, ' if title else ''}bm25 {bm25:.3g}]"
            elif results.mode == "natural":  # answered by recall (gitmem recall --explain)
                heading += f"  [recall {match.score:.3f}]"
            lines.append(click.style(heading, bold=True))
        if match.line_number is None:
            continue
        first = match.line_number - len(match.context_before)
        for offset, text in enumerate(match.context_before):
            lines.append(click.style(f"  {first + offset:>4}- {text}", dim=True))
        lines.append(f"  {match.line_number:>4}: {_highlight(match)}")
        for offset, text in enumerate(match.context_after, start=1):
            lines.append(click.style(f"  {match.line_number + offset:>4}- {text}", dim=True))
    return "\n".join(lines)


@click.command()
@click.argument("query")
@click.option("--regex", "mode", flag_value="regex", help="QUERY is a regular expression (grep).")
@click.option(
    "--substring", "mode", flag_value="substring", help="QUERY is literal text, any case."
)
@click.option(
    "--fts", "mode", flag_value="fts", default=True, help="QUERY is FTS5 syntax (the default)."
)
@scope_option
@click.option("--layer", help="Only documents of this layer.")
@click.option("--project", help="Only documents of this project.")
@filter_options
@valid_at_option
@click.option("--limit", "-n", type=click.IntRange(min=1), default=20, show_default=True)
@json_state
def search(
    state: State, query: str, mode: str, scope: str | None, layer: str | None, project: str | None,
    category: str | None, tags: tuple[str, ...], show_all: bool, valid_at: str | None, limit: int,
) -> None:
    """Search the memories valid now (FTS5 syntax: words, OR, NOT, "phrases", prefix*).

    Title matches first, then bm25; a query FTS5 cannot answer is answered by gitmem recall.

    \b
    Example:
      gitmem search '"docker compose" OR podman' --category project-conventions
    """
    # One more than asked for tells whether the list was cut, so the output can say so.
    plain = mode == "fts" and not (layer or project or category or tags)
    when = valid_us(valid_at, show_all)
    results = _search_current(state, query, scope, show_all, when, limit + 1) if plain else None
    if results is None:
        results = state.store().search(
            query, mode=mode, scope=scope, layer=layer, project=project, category=category,
            tags=list(tags) or None, include_superseded=show_all, include_archived=show_all,
            limit=limit + 1, valid_at=valid_at,
        )
    cut = _cut(results, limit)
    if emitted(state, {**results.to_dict(), "limit": limit, "truncated": cut}):
        return
    click.echo(results_text(results))
    if cut:
        click.echo(f"(showing the first {limit} memories; --limit N shows more)")


def _search_current(
    state: State, query: str, scope: str | None, show_all: bool, when: int | None, limit: int,
) -> SearchResults | None:
    """An unfiltered FTS5 search answered from a current index without opening git;
    None when the full path must answer (see Store.search)."""
    current = state.current_index(scope, providers=["lexical"]) if query.strip() else None
    if current is None:
        return None  # no current index, or an empty query (the full path says why)
    from gitmem.store.search import full_text_matches

    filters = {"include_superseded": show_all, "include_archived": show_all, "valid_us": when}
    found = full_text_matches(query, [current], limit, filters)
    if isinstance(found, str):
        return None  # not FTS5 syntax: answered by recall, on the full path
    return SearchResults(query=query, mode="fts", matches=found)


def _cut(results: SearchResults, limit: int) -> bool:
    """Keep the matches of the first ``limit`` memories; True when there were more."""
    seen: list[str] = []
    for i, match in enumerate(results.matches):
        if match.id not in seen:
            seen.append(match.id)
            if len(seen) > limit:
                del results.matches[i:]
                return True
    return False


def recall_text(results: RecallResults, *, explain: bool) -> str:
    """Hits with their best lines (and, explained, why each ranked); with a budget, the
    packed memories themselves, ready to paste into an agent's context."""
    if results.budget is not None:
        parts = [
            f"<!-- {p.id} ({'whole' if p.whole else 'excerpt'}, ~{p.tokens} tokens) -->\n{p.text}"
            for p in results.packed
        ]
        return "\n\n".join(parts) if parts else "Nothing fits the budget."
    if not results.hits:
        return "No matches."
    lines: list[str] = []
    for hit in results:
        heading = printable(f"{hit.id}  {hit.title or UNTITLED}")
        if explain:
            heading += f"  [score {hit.score:.3f}]"
        lines.append(click.style(heading, bold=True))
        for line in hit.lines:
            lines.append(f"  {line.number:>4}: {line.text}")
        if explain:
            for reason in hit.why:
                lines.append(click.style(f"        {reason}", dim=True))
    for a, b, why in results.contradictions:
        kind = "linked by contradicts" if why == "contradicts" else "two sides of a fork"
        lines.append(f"note: {a} and {b} contradict each other ({kind})")
    return "\n".join(lines)


@click.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--limit", "-n", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--explain", is_flag=True, help="Show scores and why each memory ranked.")
@click.option(
    "--budget", type=click.IntRange(min=0), metavar="TOKENS",
    help="Print the best memories that fit this many tokens, whole ones first.",
)
@scope_option
@filter_options
@at_option
@valid_at_option
@json_state
def recall(
    state: State, query: tuple[str, ...], limit: int, explain: bool, budget: int | None,
    scope: str | None, category: str | None, tags: tuple[str, ...], show_all: bool, at: str | None,
    valid_at: str | None,
) -> None:
    """Find the memories that answer a question (plain words, any may match), best first.

    \b
    Example:
      gitmem recall how do we deploy to staging? --budget 2000
    """
    results = None
    if at is None and not tags:
        # A current index answers without loading the store.
        current = state.current_index(scope, providers=["lexical", "vectors"])
        if current is not None:
            from gitmem.store.recall import recall_current

            results = recall_current(
                current, " ".join(query), limit=limit, category=category,
                include_superseded=show_all, include_archived=show_all, budget=budget,
                valid_us=valid_us(valid_at, show_all),
            )
    if results is None:
        results = state.store().recall(
            " ".join(query), limit=limit, scope=scope, category=category, tags=list(tags) or None,
            include_superseded=show_all, include_archived=show_all, at=at, budget=budget,
            valid_at=valid_at,
        )
    if emitted(state, results):
        return
    if results.notice:
        from gitmem.store import embed
        from gitmem.store.recall import EMBEDDINGS_OFF

        # The embedder failed: its logged warning (with the reason) is the one notice.
        if not (results.notice == EMBEDDINGS_OFF and embed.warned()):
            click.echo(f"note: {results.notice}", err=True)
    click.echo(recall_text(results, explain=explain))


@click.command()
@scope_option
@json_state
def reindex(state: State, scope: str | None) -> None:
    """Throw the search index away and build it again from git.

    \b
    Example:
      gitmem reindex
    """
    store = state.store()
    stats = []
    for backend_scope in [scope] if scope else [str(s) for s in store.scopes]:
        with ProgressBar(f"indexing {backend_scope}", quiet=state.json, min_total=2000) as progress:
            stats += store.reindex(scope=backend_scope, progress=progress)
    if emitted(state, [dataclasses.asdict(s) for s in stats]):
        return
    for s in stats:
        click.echo(
            f"Indexed {s.memories} memories and {s.versions} versions "
            f"from {s.applied_commits} commits (at {(s.commit or 'no commit')[:10]})."
        )
        if s.problems:
            click.echo(f"{len(s.problems)} file(s) could not be read; see gitmem ls warnings.")


def _size(n: int) -> str:
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n >= 1024**power:
            return f"{n / 1024**power:.1f} {unit}"
    return f"{n} B"


@click.command()
@scope_option
@json_state
def gc(state: State, scope: str | None) -> None:
    """Pack the store's repository with git gc; report its size before and after.

    \b
    Example:
      gitmem gc
    """

    def packing(done: int, total: int) -> None:
        if done < total and on_terminal(state.json):
            which = f" {done + 1} of {total}" if total > 1 else ""
            click.echo(f"gitmem gc: packing repository{which} with git gc...", err=True)

    results = state.store().gc(scope=scope, progress=packing)
    if emitted(state, results):
        return
    for r in results:
        packed = r.loose_objects_before - r.loose_objects_after
        if packed <= 0 and r.bytes_after == r.bytes_before:
            click.echo(f"{r.path}: already packed, nothing to do ({_size(r.bytes_after)})")
            continue
        click.echo(
            f"{r.path}: packed {max(packed, 0)} loose objects ({r.loose_objects_after} left); "
            f"{_size(r.bytes_before)} -> {_size(r.bytes_after)} of files"
        )


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would change; commit nothing.")
@json_state
def migrate(state: State, dry_run: bool) -> None:
    """Convert a store of an older format to the current one (one commit per scope).

    \b
    Example:
      gitmem migrate --dry-run
    """
    from gitmem.features.migrate import migrate as run_migrations

    state.any_format = True
    with ProgressBar("migrating", quiet=state.json, min_total=500) as progress:
        steps = run_migrations(state.store(), dry_run=dry_run, progress=progress)
    if emitted(state, steps):
        return
    if not steps:
        click.echo("Nothing to migrate: the store is at the current format.")
    for s in steps:
        verb = "Would convert" if dry_run else "Converted"
        where = f" (commit {s.commit[:10]})" if s.commit else ""
        click.echo(
            f"{s.scope}: {verb} format {s.from_format} -> {s.to_format}: "
            f"{s.moved_count} file(s) moved, {s.rewritten} rewritten{where}"
        )
        for note in s.notes:
            click.echo(f"  {note}")
