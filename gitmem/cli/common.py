"""What every command shares: the invocation state, shared options, input and output.
Nothing here imports the store or the model at module level (git hooks import it)."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gitmem.base.printable import printable, printable_json

if TYPE_CHECKING:
    from gitmem import Store
    from gitmem.store.index_queries import CurrentIndex

F = TypeVar("F", bound=Callable[..., Any])

REASONS = {
    "--store": "named by --store",
    "$GITMEM_DIR": "named by $GITMEM_DIR",
    "project": "the project's store, found by walking up from the current directory",
    "user": "the user store: no --store, $GITMEM_DIR or project .gitmem/ here; $GITMEM_HOME "
    "moves it",
}
"""Why a store is the one used (the first of :func:`store_location`'s answer)."""


@dataclass
class State:
    """Global options of one invocation (``gitmem --store PATH --json --debug ...``)."""

    store_path: str | None = None
    json: bool = False
    debug: bool = False
    allow_secrets: bool = False
    branch: str | None = None
    _store: Store | None = None
    reason: str = ""
    """Why this store: a key of REASONS."""
    any_format: bool = False
    """Open a store of an older format too (``gitmem migrate``, doctor, status)."""

    def store(self, *, write: bool = False) -> Store:
        """The store this invocation works on, opened once. Where there is none, a command
        that writes makes it (saying so on stderr); one that reads says there is none."""
        if self._store is None:
            import gitmem
            from gitmem.store.discovery import open_store
            from gitmem.store.reads import index_writable

            self.reason, target = store_location(self.store_path)
            if self.reason != "project" and not _is_store_or_taken(target):
                if not write:
                    from gitmem.base.errors import StoreError

                    raise StoreError(
                        f"no store at {target}",
                        hint=f"create it with: gitmem init {target}; a command that writes "
                        "(gitmem add ...) makes it too",
                    )
                gitmem.init(target, scope="user" if self.reason == "user" else "repo")
                why = REASONS[self.reason]
                click.echo(f"gitmem: created a new store at {target.resolve()} ({why})", err=True)
            self._store = open_store(
                self.store_path, branch=self.branch, any_format=self.any_format
            )
            # --allow-secrets: the explicit allow the library asks for, for this one command.
            self._store.allow_secrets = self.allow_secrets
            if not all(index_writable(self._store.db(s)) for s in self._store.scopes):
                # A read-only store: every reading command scans git rather than fail on
                # an index it cannot build or catch up (writes fail with their own error).
                self._store.use_index = False
        return self._store

    def current_index(
        self, scope: str | None = None, *, providers: Sequence[str] = ()
    ) -> CurrentIndex | None:
        """The store's index when it is current, so a read command answers without opening
        git; None means :meth:`store` (always for a project's store, which needs git)."""
        if self._store is not None or self.branch is not None:
            return None
        from gitmem.store.index_queries import open_current
        from gitmem.store.locations import is_store

        reason, path = store_location(self.store_path)
        if reason == "project" or (reason == "user" and not is_store(path)):
            return None
        found = open_current(path, providers=providers)
        if found is None or scope not in (None, str(found.scope)):
            return None
        self.reason = reason
        return found


def _is_store_or_taken(path: Path) -> bool:
    """Whether ``path`` is a store, or something first use must not make one in (a file, a
    directory with files in it: opening it says what it is)."""
    from gitmem.store.locations import is_store

    if is_store(path):
        return True
    if not os.path.lexists(path):
        return False
    try:
        return not path.is_dir() or any(path.iterdir())
    except OSError:
        return True


def store_location(store_path: str | None) -> tuple[str, Path]:
    """Which rule of store discovery picks the store ("--store", "$GITMEM_DIR", "project",
    "user"), in the order ``gitmem.open()`` uses, and the store's path."""
    from gitmem.store.locations import find_project_store, user_store_path

    if store_path is not None:
        return "--store", Path(store_path).expanduser()
    if os.environ.get("GITMEM_DIR"):
        return "$GITMEM_DIR", Path(os.environ["GITMEM_DIR"]).expanduser()
    project = find_project_store(Path.cwd())
    return ("project", project) if project is not None else ("user", user_store_path())


class SuggestingGroup(click.Group):
    """A click group whose unknown-command error names the closest commands."""

    def resolve_command(
        self, ctx: click.Context, args: list[str],
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if (
            name
            and not name.startswith("-")
            and not ctx.resilient_parsing
            and self.get_command(ctx, name) is None
        ):
            import difflib  # only for a mistyped command

            known = self.list_commands(ctx)
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
            close += [c for c in known if c.startswith(name) and c not in close][:3]
            suggestion = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise click.UsageError(f"No such command {name!r}.{suggestion}", ctx)
        return super().resolve_command(ctx, args)


pass_state = click.make_pass_decorator(State, ensure=True)


def sets(attribute: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """An option's callback that sets ``attribute`` of the invocation's :class:`State` when
    the option is given: the global options work before and after the command name."""

    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None and value is not False:
            setattr(ctx.ensure_object(State), attribute, value)

    return callback


json_option = click.option(
    "--json", is_flag=True, expose_value=False, callback=sets("json"),
    help="Print JSON instead of text.",
)


def json_state(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``, and the invocation's :class:`State` as the first argument."""
    return json_option(pass_state(f))


def emit_json(data: Any) -> None:
    """``data`` as JSON: plain data, where a result stands for its ``to_dict()``."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=lambda o: o.to_dict())
    click.echo(printable_json(text))


def emitted(state: State, data: Any) -> bool:
    """Under ``--json``: print ``data`` as JSON and say so (the command is done)."""
    if state.json:
        emit_json(data)
    return state.json


def output(state: State, data: Any, text: str) -> None:
    """``data`` as JSON under ``--json``, else ``text``."""
    if not emitted(state, data):
        click.echo(text)


scope_option = click.option(
    "--scope", metavar="repo|user", help="Only this store, when both are open."
)
agent_option = click.option("--agent", help="Who writes (agent or person): the commit's author.")
message_option = click.option("--message", "-m", help="Why: written in the commit message body.")
valid_at_option = click.option(
    "--valid-at", metavar="DATE",
    help="Only memories valid (true in the world) then; default: now, or the time of --at.",
)
AT_HELP = "A revision (commit, branch, tag, HEAD~3) or a date/time (2026-11-01, RFC 3339)."
at_option = click.option("--at", metavar="REV|DATE", help=f"The store as it was then. {AT_HELP}")


def valid_us(valid_at: str | None, show_all: bool) -> int | None:
    """The valid time a listing answered without the store keeps (``Store.list``'s rule,
    now by the system clock): ``--valid-at``, else now unless ``--all``."""
    import datetime as dt

    from gitmem.store.index_rows import valid_micros
    from gitmem.store.inputs import valid_time

    when = valid_time(valid_at, "--valid-at")
    return None if when is None and show_all else valid_micros(when or dt.datetime.now(dt.UTC))


def read_text_arg(
    value: str | None, what: str = "body", *, store: Store, allow_empty: bool = False
) -> str:
    """The argument, or stdin for ``-`` (and for none when stdin is not a terminal), as
    :func:`gitmem.store.inputs.body_text` checks it; stdin is read up to the body limit."""
    from gitmem.base.errors import TooLargeError
    from gitmem.store.inputs import body_text

    if value is not None and value != "-":
        data: str | bytes = value
    elif value is None and sys.stdin.isatty():
        raise click.UsageError(f"no {what}: give it as an argument, or '-' to read it from stdin")
    else:
        limit = body_limit(store)
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise TooLargeError(
                f"the {what} on stdin is over the store's limit of {limit} bytes",
                hint="split it, or raise limits.max_body_bytes for this store in your own "
                "gitmem configuration (gitmem.yaml only lowers it)",
            )
        if value is None and not data and not allow_empty:
            raise click.UsageError(f"no {what}: give it as an argument, or pipe it on stdin")
    return body_text(data, what=what, allow_empty=allow_empty)


def body_limit(store: Store) -> int:
    """The largest body any of the store's scopes takes (``limits.max_body_bytes``)."""
    return max(store.config(scope).max_body_bytes for scope in store.scopes)


allow_empty_option = click.option(
    "--allow-empty", is_flag=True, help="Accept an empty body (refused otherwise)."
)


def stacked(*decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """The decorators as if written one above the other, the first on top."""
    return lambda f: functools.reduce(lambda g, decorate: decorate(g), reversed(decorators), f)


filter_options = stacked(  # ls, search and recall
    click.option("--category", help="Only this category."),
    click.option(
        "--tag", "tags", multiple=True, metavar="TAG", help="Only with this tag (repeat: all)."
    ),
    click.option(
        "--all", "show_all", is_flag=True, help="Include superseded, archived and expired memories."
    ),
)


agent_state = stacked(agent_option, json_state)  # --agent and --json of a write
authored = stacked(agent_option, message_option, json_state)
"""``--agent``, ``-m/--message`` and ``--json`` of a command that writes one commit."""


def field_options(f: F) -> F:
    """The memory-field options shared by add, update and supersede, with --allow-empty and
    --json (the model is imported when a command that has them is defined)."""
    from gitmem.format.model import BUILTIN_CATEGORIES, Trigger

    categories = ", ".join(BUILTIN_CATEGORIES)
    return stacked(
        click.option("--title", help="A one-line title."),
        click.option("--category", help=f"Category (open set; built in: {categories})."),
        click.option("--tag", "tags", multiple=True, metavar="TAG", help="A tag; repeat for more."),
        agent_option,
        click.option("--session", "session_id", metavar="ID", help="The agent's session id."),
        click.option("--trigger", metavar="|".join(Trigger), help="What prompted the write."),
        click.option(
            "--related", multiple=True, metavar="ID[:REL]",
            help="A related memory, REL one of supersedes|refines|contradicts|relates-to "
            "(default relates-to); repeat for more.",
        ),
        click.option("--status", metavar="active|archived", help="active, or archived: retired."),
        click.option("--valid-from", metavar="DATE", help="When the fact began to hold."),
        click.option("--valid-until", metavar="DATE", help="When it stopped holding."),
        message_option,
        allow_empty_option,
        json_state,
    )(f)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns under a header, control characters in cells shown escaped
    (titles come from teammates; one line per row)."""
    all_rows = [list(headers), *([printable(str(cell)) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(headers) - 1)]
    lines = []
    for row in all_rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def short(commit: str) -> str:
    return commit[:10]


@dataclass
class ProgressBar:
    """A ``progress(done, total)`` callback drawing a bar on stderr, on a terminal only,
    without ``--json``, and once ``total`` reaches ``min_total``."""

    label: str
    quiet: bool = False
    min_total: int = 0
    bar: Any = None
    done: int = 0

    def __call__(self, count: int, total: int) -> None:
        if total < self.min_total or not on_terminal(self.quiet):
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(count - self.done)
        self.done = count

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def on_terminal(quiet: bool = False) -> bool:
    """Whether to show how a long step is going: stderr is a terminal, and no ``--json``."""
    return not quiet and sys.stderr.isatty()


def to_stderr(line: str) -> None:
    """A ``lines(text)`` callback: git's progress lines to stderr as they come."""
    sys.stderr.write(line)
    sys.stderr.flush()
