"""What every command shares: the invocation state, the store, input and output helpers.

Commands stay thin: parse, call one library method, print. Everything they
have in common (opening the store once, reading a body from stdin, ``--json``,
the field options of add/update/supersede, tables) lives here.

Nothing here imports the store or the model at module level: every command, and
the git hooks, import this module, and ``gitmem --version`` should not pay for
opening a store it never opens.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from gitmem import Memory, Store

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """Global options of one invocation (``gitmem --store PATH --json --debug ...``)."""

    store_path: str | None = None
    json: bool = False
    debug: bool = False
    allow_secrets: bool = False
    _store: Store | None = None

    def store(self) -> Store:
        """The store this invocation works on, opened once: ``--store``, else ``gitmem.open()``."""
        if self._store is None:
            import gitmem

            self._store = gitmem.open(self.store_path)
            # --allow-secrets: the explicit allow the library asks for, for this one command.
            self._store.allow_secrets = self.allow_secrets
        return self._store


pass_state = click.make_pass_decorator(State, ensure=True)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).json = True


def json_option(f: F) -> F:
    """``--json``: print JSON instead of text (also accepted before the command name)."""
    option = click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print JSON instead of text.",
    )
    return option(f)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def read_text_arg(value: str | None, what: str = "body") -> str | bytes:
    """The argument itself, or stdin for ``-`` (and for no argument when stdin is not a terminal).

    stdin is read as bytes so the library decodes it and refuses non-UTF-8
    with its own error.
    """
    if value is not None and value != "-":
        return value
    if value is None and sys.stdin.isatty():
        raise click.UsageError(f"no {what}: give it as an argument, or '-' to read it from stdin")
    data: bytes = sys.stdin.buffer.read()
    if value is None and not data:
        raise click.UsageError(f"no {what}: give it as an argument, or pipe it on stdin")
    return data


def file_text(memory: Memory) -> str:
    """The memory's file as it is stored (front-matter and body, byte for byte)."""
    from gitmem import codec

    doc = memory.document or codec.Document(memory.to_metadata(), memory.body)
    return codec.serialize(doc)


def _choices(kind: Iterable[Any]) -> str:
    return "|".join(str(member) for member in kind)


def _field_options() -> list[Callable[[Any], Any]]:
    # Built when a command that has them is defined, so importing this module does not
    # import the model (and what it imports) for commands that never take these options.
    from gitmem.model import BUILTIN_CATEGORIES, Status, Trigger

    return [
        click.option("--title", help="A one-line title."),
        click.option(
            "--category",
            help="Category (open set; built in: " + ", ".join(BUILTIN_CATEGORIES) + ").",
        ),
        click.option("--tag", "tags", multiple=True, metavar="TAG", help="A tag; repeat for more."),
        click.option("--agent", help="The agent (or person) writing; the commit's author."),
        click.option("--session", "session_id", metavar="ID", help="The agent's session id."),
        click.option("--trigger", metavar=_choices(Trigger), help="What prompted the write."),
        click.option(
            "--related",
            multiple=True,
            metavar="ID[:REL]",
            help="A related memory, REL one of supersedes|refines|contradicts|relates-to "
            "(default relates-to); repeat for more.",
        ),
        click.option(
            "--status", metavar=_choices(Status), help="active, or archived to retire it."
        ),
        click.option("--message", "-m", help="Why: written in the commit message body."),
    ]


def field_options(f: F) -> F:
    """The memory-field options shared by add, update and supersede."""
    for option in reversed(_field_options()):
        f = option(f)
    return f


def given_fields(options: Mapping[str, Any]) -> dict[str, Any]:
    """The field options the user actually gave (repeatable ones count when used at least once)."""
    out: dict[str, Any] = {}
    for key in ("title", "category", "agent", "session_id", "trigger", "status"):
        if options.get(key) is not None:
            out[key] = options[key]
    for key in ("tags", "related"):
        if options.get(key):
            out[key] = list(options[key])
    return out


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns under a header; the last column is not padded."""
    all_rows = [list(headers), *([str(cell) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(headers) - 1)]
    lines = []
    for row in all_rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def short(commit: str) -> str:
    return commit[:10]
