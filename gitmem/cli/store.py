"""Commands on the whole store: init, ls, history, log."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

import gitmem
from gitmem.base.clock import format_timestamp
from gitmem.base.printable import printable, printable_json
from gitmem.cli.common import (
    REASONS,
    F,
    State,
    at_option,
    emit_json,
    emitted,
    filter_options,
    json_state,
    output,
    scope_option,
    short,
    stacked,
    table,
    valid_at_option,
    valid_us,
)
from gitmem.format.model import UNTITLED, Scope, validity_text
from gitmem.store.locations import is_store, user_store_path
from gitmem.store.results import HISTORY_PAGE, LOG_PAGE, History, LogEntry


@click.command()
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--bare", is_flag=True, help="No work tree: the fast path for agents and servers.")
@click.option(
    "--project", is_flag=True,
    help="Make the project's repo-scope store in <project>/.gitmem/ (PATH defaults to the "
    "top of the git repository you are in) and exclude it in .git/info/exclude.",
)
@click.option(
    "--follow-branches", is_flag=True,
    help="With --project: memory written on a code branch stays on a memory branch of that "
    "name until the code branch merges (gitmem branches).",
)
@click.option(
    "--scope", type=click.Choice([str(s) for s in Scope]),
    help="The store's scope (default: user for the user store, repo otherwise).",
)
@json_state
def init(
    state: State, path: Path | None, bare: bool, project: bool, follow_branches: bool,
    scope: str | None,
) -> None:
    """Create a store at PATH, else --store, $GITMEM_DIR or the user store (harmless twice).

    \b
    Example:
      cd my-project && gitmem init --project
    """
    if follow_branches and not project:
        raise click.UsageError("--follow-branches is for a project's store: add --project")
    if project:
        if bare:
            raise click.UsageError("--project makes a store with a work tree; drop --bare")
        from gitmem.store.discovery import git_top

        root = path or git_top(Path.cwd()) or Path.cwd()
        existed = is_store(root / ".gitmem")
        store = gitmem.init_project(root, follow_branches=follow_branches)
    else:
        target = path or Path(state.store_path or os.environ.get("GITMEM_DIR") or user_store_path())
        if scope is None:
            is_user = target.expanduser().absolute() == user_store_path().absolute()
            scope = str(Scope.USER if is_user else Scope.REPO)
        existed = is_store(target.expanduser())
        store = gitmem.init(target, bare=bare, scope=scope)
    db = store.db()
    if emitted(state, {
        "path": str(db.path.absolute()), "gitdir": str(db.gitdir), "bare": db.bare,
        "scope": str(store.default_scope), "created": not existed,
    }):
        return
    kind = "bare" if db.bare else "work-tree"
    verb = "Opened existing" if existed else "Initialized"
    click.echo(f"{verb} {store.default_scope}-scope {kind} gitmem store in {db.path.absolute()}")
    if project:
        click.echo("It is listed in the project's .git/info/exclude as /.gitmem/")


@click.command(name="ls")
@filter_options
@scope_option
@at_option
@valid_at_option
@click.option(
    "--limit", "-n", type=click.IntRange(min=1), metavar="N", help="At most N memories (a page)."
)
@click.option(
    "--offset", type=click.IntRange(min=0), default=0, metavar="K", help="Skip the first K."
)
@json_state
def ls(
    state: State, category: str | None, tags: tuple[str, ...], scope: str | None, show_all: bool,
    at: str | None, valid_at: str | None, limit: int | None, offset: int,
) -> None:
    """List memories valid now, oldest first (superseded, archived, expired ones with --all).

    \b
    Example:
      gitmem ls --valid-at 2026-03-01 --at 2026-06-01   # true then, as known then
    """
    page = slice(offset, offset + limit if limit is not None else None)
    plain = not state.json and at is None and category is None and not tags
    current = state.current_index(scope) if plain else None
    if current is not None:
        # The plain listing straight from a current index's rows, without opening git.
        current.warn_problems()  # as Store.list reports them
        rows = current.rows(
            ["id", "version", "category", "title", "supersedes", "status"],
            include_superseded=show_all, include_archived=show_all,
            valid_us=valid_us(valid_at, show_all),
        )
        return _ls_table([(*row, current.scope) for row in rows], show_all, page)
    memories = state.store().list(
        scope=scope, category=category, tags=list(tags) or None, include_superseded=show_all,
        include_archived=show_all, at=at, valid_at=valid_at,
    )
    if emitted(state, memories[page]):
        return
    rows = [
        (m.id, m.version, m.category, m.title, m.supersedes, m.status, m.store_scope or m.scope)
        for m in memories
    ]
    _ls_table(rows, show_all, page)


def _ls_table(rows: list[tuple[Any, ...]], show_all: bool, page: slice) -> None:
    """The listing's table of ``rows[page]`` (id, version, category, title, supersedes,
    status, scope); a superseded memory's status says so."""
    superseded = {row[4] for row in rows if row[4]}
    shown = [
        [ident, str(version), cat or "-", title or UNTITLED, str(where or "-")]
        + (["superseded" if ident in superseded else str(status)] if show_all else [])
        for ident, version, cat, title, _sup, status, where in rows[page]
    ]
    headers = ["ID", "VER", "CATEGORY", "TITLE", "SCOPE"] + (["STATUS"] if show_all else [])
    click.echo(table(headers, shown) if shown else "No memories.")


def history_text(history: History) -> str:
    """A history as text: one heading per memory of the chain, one line per version."""
    lines: list[str] = []
    for memory_id, group in itertools.groupby(history, key=lambda version: version.memory_id):
        versions = list(group)
        first = versions[0].memory
        supersedes = f" (supersedes {first.supersedes})" if first and first.supersedes else ""
        lines.append(printable(memory_id + supersedes))
        rows = (
            [
                "-" if v.version is None else str(v.version), format_timestamp(v.time), v.op,
                v.agent or v.author, short(v.commit),
                "-" if v.memory is None else validity_text(v.memory),
                "(deleted)" if v.memory is None else v.memory.title or UNTITLED,
            ]
            for v in versions
        )
        text = table(["VER", "TIME", "OP", "AUTHOR", "COMMIT", "VALID", "TITLE"], rows)
        lines += ["  " + line for line in text.splitlines()]
    return "\n".join(lines)


def paged(what: str, default: int, least: int) -> Callable[[F], F]:
    """``-n/--limit N`` (default ``default``) and ``--page P`` for a command that shows
    ``what`` a page at a time."""
    return stacked(
        click.option(
            "--limit", "-n", type=click.IntRange(min=least), default=default, show_default=True,
            metavar="N", help=f"At most N {what}: the newest of the page.",
        ),
        click.option(
            "--page", type=click.IntRange(min=1), default=1, show_default=True, metavar="P",
            help=f"Page 2 is the N {what} before page 1's, and so on.",
        ),
    )


@click.command()
@click.argument("memory_id", metavar="ID")
@paged("versions", HISTORY_PAGE, 1)
@json_state
def history(state: State, memory_id: str, limit: int, page: int) -> None:
    """Every version of a memory and of those it supersedes, oldest first.

    \b
    Example:
      gitmem history mem_5f0c... --json | jq '.versions[].memory.body'
    """
    store = state.store()
    memory_id = store.resolve_id(memory_id)
    result = store.history(memory_id, limit=limit, page=page)
    output(state, {"id": memory_id, **result.to_dict()}, history_text(result))
    if result.earlier and not state.json:
        more = f"more: gitmem history {memory_id} --page {page + 1}"
        click.echo(f"({result.earlier} earlier version(s); {more})")


def log_text(entries: list[LogEntry]) -> str:
    return table(
        ["COMMIT", "TIME", "AUTHOR", "SUBJECT"],
        (
            [short(e.commit), format_timestamp(e.time), e.agent or e.author, e.subject]
            for e in entries
        ),
    )


@click.command()
@click.option("--agent", help="Only commits by this agent (Gitmem-Agent trailer or author).")
@click.option(
    "--op", metavar="OP",
    help="Only this operation: create, update, append, supersede, delete, restore, ...",
)
@click.option("--id", "memory_id", metavar="ID", help="Only commits that touched this memory.")
@click.option("--since", metavar="DATE", help="Only commits at or after this date/time.")
@click.option("--until", metavar="DATE", help="Only commits at or before this date/time.")
@paged("commits", LOG_PAGE, 0)
@click.option(
    "--path", metavar="PATH",
    help="Only commits that changed a file under PATH (a file, a folder or a glob).",
)
@click.option("--category", help="Only commits that changed a memory of this category.")
@click.option(
    "--format", "fmt", default="table", metavar="FORMAT",
    help="table (default), oneline, json, jsonl, or a template of {commit} {short} {time} "
    "{author} {email} {agent} {session} {subject} {ops} {ids} {supersedes} {scope}.",
)
@json_state
def log(
    state: State, agent: str | None, op: str | None, memory_id: str | None, since: str | None,
    until: str | None, limit: int, page: int, path: str | None, category: str | None, fmt: str,
) -> None:
    """The audit log: commits, newest first, filtered by their Gitmem-* trailers.

    \b
    Example:
      gitmem log --agent hephaestus --since 2026-11-01
    """
    store = state.store()
    if memory_id is not None:
        memory_id = store.resolve_id(memory_id)
    entries = store.log(
        agent=agent, op=op, id=memory_id, since=since, until=until, limit=limit * page,
        path=path, category=category,
    )
    more = bool(limit) and len(entries) == limit * page
    entries = entries[limit * (page - 1) :]
    if more and not state.json and fmt == "table":
        click.echo(f"(more: the same command with --page {page + 1})", err=True)
    if state.json or fmt == "json":
        emit_json([e.to_dict() for e in entries])
    elif fmt == "jsonl":
        for entry in entries:
            click.echo(printable_json(json.dumps(entry.to_dict(), ensure_ascii=False)))
    elif fmt == "oneline":
        for entry in entries:
            click.echo(f"{short(entry.commit)} {printable(entry.subject)}")
    elif fmt != "table":
        # Imported here: gitmem.features.audit brings the review and secret-scanning modules, which
        # no other command of this module needs (they cost `gitmem ls` ~40% of its time).
        from gitmem.features.audit import format_entry

        for entry in entries:
            values = {**entry.to_dict(), "short": short(entry.commit), "email": entry.author_email}
            click.echo(format_entry(fmt, values))
    elif entries:
        click.echo(log_text(entries))


@click.command()
@json_state
def status(state: State) -> None:
    """Which store(s) are in use and why; branch, tip, index, hooks, merge driver.

    \b
    Example:
      gitmem --store ~/notes-store status --json
    """
    from gitmem.entry.status import store_status

    store = state.store()
    also = "the user store, read together with the project's"
    rows = [
        store_status(store, s, REASONS[state.reason] if s == store.default_scope else also)
        for s in store.scopes
    ]
    if emitted(state, {"default_scope": str(store.default_scope), "stores": rows}):
        return
    for n, row in enumerate(rows):
        if n:
            click.echo()
        kind = "bare" if row["bare"] else "work-tree"
        default = " (writes go here)" if row["scope"] == str(store.default_scope) else ""
        click.echo(f"{row['scope']} store{default}: {row['path']}")
        click.echo(f"  why:     {row['why']}")
        click.echo(f"  kind:    {kind}{'' if row['writable'] else ', read-only for you'}")
        tip = f"{short(row['tip'])} {row['tip_subject'] or ''}".rstrip() if row["tip"] else "none"
        click.echo(f"  branch:  {row['branch'] or '-'} at {tip}")
        click.echo(f"  index:   {row['index']}")
        author = row["author"]
        if not row["git_identity"]:
            author += " (no git identity: set git config user.name/user.email, or pass --agent)"
        click.echo(f"  author:  {author}")
        installed = [name for name, on in row["hooks"].items() if on]
        click.echo(
            "  hooks:   " + (", ".join(installed) if installed else "none (gitmem hooks install)")
        )
        click.echo(
            "  merge driver: "
            + ("registered" if row["merge_driver"] else "not registered (gitmem sync sets it)")
        )
        if row["pending_forks"]:
            click.echo(
                "  waiting: "
                + ", ".join(printable(f) for f in row["pending_forks"])
                + " (forks of a git merge or rebase on no commit yet: gitmem conflicts commits"
                " them)"
            )


@click.command()
@click.argument("key", type=click.Choice(["branches.follow"]))
@click.argument("value", required=False, type=click.BOOL)
@json_state
def config(state: State, key: str, value: bool | None) -> None:
    """Show or set a setting of this clone (its git config, never committed).
    branches.follow: a project's memory follows the code's branches.

    \b
    Example:
      gitmem config branches.follow true
    """
    from gitmem.store import follow

    repo = state.store(write=value is not None).db().repo
    if value is not None:
        follow.set_follow(repo, value)
    on = follow.follows(repo)
    output(state, {"key": key, "value": on}, "true" if on else "false")
