"""Commands on one memory: add, show, edit, update, append, supersede, rm, restore."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

import click

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import GitmemError, NotFoundError, TooLargeError
from gitmem.cli.common import (
    AT_HELP,
    ProgressBar,
    State,
    agent_state,
    allow_empty_option,
    at_option,
    authored,
    body_limit,
    emitted,
    field_options,
    json_state,
    message_option,
    output,
    read_text_arg,
    valid_at_option,
)
from gitmem.format.model import EDITABLE_FIELDS

if TYPE_CHECKING:
    # `gitmem show` answered from a current index never loads the store (nor libgit2).
    from gitmem import Memory, Store

def _fields(store: Store, options: dict[str, Any]) -> dict[str, Any]:
    """The field options but --message that the user gave, ``--related ID[:REL]`` ids
    resolved by unique prefix (an id that matches nothing is kept as given: a link may name a
    memory not written yet)."""
    fields = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in options.items()
        if key != "message" and value is not None and value != ()
    }
    if "related" in fields:
        resolved = []
        for value in fields["related"]:
            ident, sep, rel = str(value).partition(":")
            with contextlib.suppress(NotFoundError):
                ident = store.resolve_id(ident)
            resolved.append(f"{ident}{sep}{rel}")
        fields["related"] = resolved
    return fields


@click.command()
@click.argument("body", required=False, metavar="[BODY|-]")
@field_options
@click.option("--scope", metavar="repo|user", help="Which store to write to, when both are open.")
@click.option("--id", "memory_id", metavar="ID", help="Use this id instead of a new mem_<uuid>.")
@click.option(
    "--jsonl", "jsonl", metavar="FILE|-",
    help="Add one memory per line of FILE ('-': stdin), each a JSON object with 'body' and "
    "field keys; all in one commit, or none if a line is bad.",
)
def add(
    state: State, /, body: str | None, scope: str | None, memory_id: str | None, jsonl: str | None,
    allow_empty: bool, **options: Any,
) -> None:
    """Store a new memory (BODY, or stdin for '-' or none) and print its id.

    \b
    Example:
      gitmem add "Fixtures live in tests/conftest.py" --title "Prefer pytest fixtures" --tag testing
    """
    if jsonl is not None:
        if body is not None or memory_id is not None:
            raise click.UsageError("--jsonl takes bodies and ids from its lines; drop BODY/--id")
        _add_jsonl(state, jsonl, scope, allow_empty, options)
        return
    store = state.store(write=True)
    memory = store.create(
        read_text_arg(body, store=store, allow_empty=allow_empty), scope=scope, id=memory_id,
        message=options.get("message"), allow_empty=allow_empty, **_fields(store, options),
    )
    from gitmem.store.duplicates import duplicates_report, duplicates_text

    similar = duplicates_report(store.reader(memory.store_scope), memory)
    if emitted(state, {**memory.to_dict(), "near_duplicates": similar}):
        return
    click.echo(memory.id)
    for line in duplicates_text(similar):
        click.echo(f"note: {line}", err=True)


_JSONL_KEYS = EDITABLE_FIELDS | {"body", "id", "extra"}


def _add_jsonl(
    state: State, source: str, scope: str | None, allow_empty: bool, options: dict[str, Any]
) -> None:
    """``add --jsonl``: every line one memory, all in one transaction (one commit)."""
    import json

    from gitmem.base.errors import InvalidInputError
    from gitmem.format.yamlbounds import MAX_FRONT_MATTER_BYTES

    store = state.store(write=True)
    defaults = _fields(store, options)
    # A line is at most a memory: its body JSON-escaped (6 bytes a byte at worst) and fields.
    limit = 6 * body_limit(store) + MAX_FRONT_MATTER_BYTES
    try:
        stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    except OSError as exc:
        raise NotFoundError(f"cannot read {source}: {exc.strerror}") from None
    entries: list[tuple[int, dict[str, Any]]] = []
    with stream:
        # A line is read up to the limit and one byte more: input of any size is refused in
        # the memory of one line.
        for number, raw in enumerate(iter(lambda: stream.readline(limit + 1), b""), 1):
            if len(raw) > limit:
                raise TooLargeError(
                    f"line {number} of {'stdin' if source == '-' else source} is over {limit} "
                    "bytes, more than a memory can hold",
                    hint="split the memory, or raise limits.max_body_bytes for this store in "
                    "your own gitmem configuration (gitmem.yaml only lowers it)",
                )
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise InvalidInputError(
                    f"line {number}: not a JSON object of UTF-8 text ({exc})"
                ) from None
            if not isinstance(entry, dict) or not isinstance(entry.get("body"), str):
                raise InvalidInputError(f"line {number}: want a JSON object with a text 'body'")
            unknown = sorted(set(entry) - _JSONL_KEYS)
            if unknown:
                raise InvalidInputError(
                    f"line {number}: unknown key(s) {', '.join(unknown)} "
                    f"(known: {', '.join(sorted(_JSONL_KEYS))})"
                )
            entries.append((number, entry))
    if not entries:
        raise click.UsageError("--jsonl: no memories in the input")
    created: list[Memory] = []
    progress = ProgressBar("adding", quiet=state.json, min_total=500)
    message = options.get("message") or f"add: {len(entries)} memories"
    with progress, store.transaction(message=message, scope=scope):
        for number, entry in entries:
            progress(len(created) + 1, len(entries))
            fields = {**defaults, **{k: v for k, v in entry.items() if k != "body"}}
            try:
                created.append(
                    store.create(entry["body"], scope=scope, allow_empty=allow_empty, **fields)
                )
            except GitmemError as exc:
                exc.message = f"line {number}: {exc.message}"
                exc.args = (exc.message,)
                raise
    output(state, created, "\n".join(memory.id for memory in created))


@click.command()
@click.argument("memory_id", metavar="ID")
@at_option
@valid_at_option
@json_state
def show(state: State, memory_id: str, at: str | None, valid_at: str | None) -> None:
    """Print a memory: its front-matter (version and updated_at from history) and body.

    \b
    Example:
      gitmem show mem_5f0c... --at 2026-11-01
    """
    current = state.current_index() if at is None and valid_at is None else None
    chosen = current.resolve_id(memory_id) if current is not None else None
    memory = current.memory(chosen) if current is not None and chosen is not None else None
    if memory is None:
        store = state.store()
        memory = store.read(store.resolve_id(memory_id), at=at, valid_at=valid_at)
    # As read, not as the file spells it: the same output from the index and from git.
    memory = dataclasses.replace(memory, document=None)
    if emitted(state, memory):
        return
    from gitmem.format.memfile import rendered_text

    data = rendered_text(memory).encode()
    click.echo(data, nl=False)  # bytes: exactly as rendered
    if not data.endswith(b"\n") and sys.stdout.isatty():
        click.echo()  # a terminal's prompt goes on its own line; a pipe gets the exact bytes


@click.command()
@click.argument("memory_id", metavar="ID")
@message_option
@click.option(
    "--discard", is_flag=True, help="Drop a kept unfinished edit and start from the stored file."
)
@json_state
def edit(state: State, memory_id: str, message: str | None, discard: bool) -> None:
    """Edit a memory's file in $VISUAL or $EDITOR, as one update.

    A broken edit, or one that raced another writer, is refused and kept: the
    next `gitmem edit ID` opens it again.

    \b
    Example:
      EDITOR="code --wait" gitmem edit mem_5f0c... -m "fix the typo"
    """
    from gitmem.store.edits import edit as edit_memory

    store = state.store()
    memory_id = store.resolve_id(memory_id)
    result = edit_memory(
        store,
        memory_id,
        lambda text: click.edit(text, extension=".md", require_save=False),
        message=message,
        discard=discard,
        notice=lambda line: click.echo(f"gitmem: {line}", err=True),
    )
    updated = result.memory
    if result.changed:
        output(state, updated, f"Updated {memory_id} to version {updated.version}")
    else:
        output(state, updated, f"No changes to {memory_id} (version {updated.version})")


@click.command()
@click.argument("memory_id", metavar="ID")
@click.argument("body", required=False, metavar="[BODY|-]")
@click.option(
    "--expected-version", type=int, metavar="N",
    help="Refuse (conflict, exit 6) unless the stored version is N.",
)
@field_options
def update(
    state: State, /, memory_id: str, body: str | None, expected_version: int | None,
    allow_empty: bool, **options: Any,
) -> None:
    """Change a memory in place (same id, version + 1).

    BODY replaces the body ('-': stdin); without it only the given fields
    change. --tag and --related replace the whole list.

    \b
    Example:
      gitmem update mem_5f0c... --tag testing --tag pytest --expected-version 2
    """
    store = state.store()
    memory_id = store.resolve_id(memory_id)
    memory = store.update(
        memory_id,
        read_text_arg(body, store=store, allow_empty=allow_empty) if body is not None else None,
        expected_version=expected_version, message=options.get("message"),
        allow_empty=allow_empty,
        **_fields(store, options),
    )
    output(state, memory, f"{memory_id} is at version {memory.version}")


@click.command()
@click.argument("memory_id", metavar="ID")
@click.argument("text", metavar="TEXT|-")
@click.option("--expected-version", type=int, metavar="N", help="Refuse unless at version N.")
@allow_empty_option
@authored
def append(
    state: State, memory_id: str, text: str, expected_version: int | None, agent: str | None,
    message: str | None, allow_empty: bool,
) -> None:
    """Add TEXT ('-': stdin) on a new line at the end of a memory's body.

    \b
    Example:
      gitmem append mem_5f0c "- a bullet point"
    """
    store = state.store()
    memory_id = store.resolve_id(memory_id)
    memory = store.append(
        memory_id,
        read_text_arg(text, "text", store=store, allow_empty=allow_empty),
        expected_version=expected_version, agent=agent, message=message, allow_empty=allow_empty,
    )
    output(state, memory, f"{memory_id} is at version {memory.version}")


@click.command()
@click.argument("memory_id", metavar="ID")
@click.argument("body", required=False, metavar="[BODY|-]")
@field_options
@click.option(
    "--id", "new_id", metavar="ID", help="Id of the new memory (default: a new mem_<uuid>)."
)
def supersede(
    state: State, /, memory_id: str, body: str | None, new_id: str | None, allow_empty: bool,
    **options: Any,
) -> None:
    """Replace a memory with a new one that says `supersedes: ID`; print its id.

    Title, category, tags and related carry forward unless given; --valid-from
    also ends the old memory's validity then, in the same commit.

    \b
    Example:
      gitmem supersede mem_0a9d... "Bob leads payments" --valid-from 2026-06-01
    """
    store = state.store()
    memory = store.supersede(
        store.resolve_id(memory_id),
        read_text_arg(body, store=store, allow_empty=allow_empty), id=new_id,
        message=options.get("message"), allow_empty=allow_empty, **_fields(store, options),
    )
    output(state, memory, memory.id)


@click.command()
@click.argument("memory_id", metavar="ID")
@click.option("--valid-until", metavar="DATE", help="When it stopped holding (default: now).")
@click.option("--reason", required=True, help="Why it no longer holds: a commit trailer.")
@agent_state
def invalidate(
    state: State, memory_id: str, valid_until: str | None, reason: str, agent: str | None
) -> None:
    """End a memory's validity in one commit (--valid-at an earlier date still reads it).

    \b
    Example:
      gitmem invalidate mem_5f0c... --reason "Ana moved to the platform team"
    """
    store = state.store()
    memory_id = store.resolve_id(memory_id)
    memory = store.invalidate(memory_id, reason=reason, valid_until=valid_until, agent=agent)
    assert memory.valid_until is not None
    output(state, memory, f"{memory_id} is valid until {format_timestamp(memory.valid_until)}")


@click.command()
@click.argument("memory_id", metavar="ID")
@authored
def rm(state: State, memory_id: str, agent: str | None, message: str | None) -> None:
    """Delete a memory (history keeps it; gitmem restore brings it back).

    \b
    Example:
      gitmem rm mem_5f0c... -m "duplicate of mem_77e1..."
    """
    store = state.store()
    memory_id = store.resolve_id(memory_id)
    store.delete(memory_id, agent=agent, message=message, missing_ok=False)
    output(
        state, {"id": memory_id, "deleted": True},
        f"Deleted {memory_id} (gitmem restore {memory_id} brings it back)",
    )


@click.command()
@click.argument("memory_id", metavar="ID")
@click.option(
    "--at", metavar="REV|DATE",
    help="Roll back to the content at this revision or time. " + AT_HELP,
)
@authored
def restore(
    state: State, memory_id: str, at: str | None, agent: str | None, message: str | None,
) -> None:
    """Bring back a deleted memory, or (--at) roll one back as a new version.

    \b
    Example:
      gitmem restore mem_5f0c... --at 2026-11-01
    """
    store = state.store()
    memory_id = store.resolve_id(memory_id)
    memory = store.restore(memory_id, at=at, agent=agent, message=message)
    output(state, memory, f"Restored {memory_id} as version {memory.version}")
