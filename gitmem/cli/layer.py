"""``gitmem layer ...``: one :class:`gitmem.features.layered.LayeredStore` method each."""

from __future__ import annotations

import click

from gitmem.base.errors import InvalidInputError, NotFoundError
from gitmem.cli.common import (
    State,
    SuggestingGroup,
    agent_option,
    allow_empty_option,
    emitted,
    json_state,
    output,
    read_text_arg,
    stacked,
    table,
)
from gitmem.features.layered import STRUCTURAL_FILE_TYPES, Document, LayeredStore
from gitmem.features.layers import LAYER_ROOTS, Layer, document_id, placement


def _layer_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A layer's name, or project or skill for short: the same names in every layer command."""
    names = {**{str(x): x for x in Layer}, "project": Layer.SHARED_PROJECT, "skill": Layer.SKILL}
    if value is not None and value not in names:
        raise click.BadParameter(
            f"{value!r} is not a layer: {', '.join(Layer)} (or project, skill for short)"
        )
    return None if value is None else str(names[value])


def _check_file_type(layered: LayeredStore, file_type: str, new_type: bool) -> None:
    """Refuse a file type a letter or two from a known one (known_isues): those with a
    prune rule, their archives, the conventional ones and any already stored."""
    import difflib

    from gitmem.features.lifecycle import rules

    if new_type:
        return
    known = {"project_overview", *STRUCTURAL_FILE_TYPES}
    for kind in rules.registry_from_config(layered.store.config().raw).file_types():
        known |= {kind, f"{kind}_archive"}
    for root in LAYER_ROOTS.values():
        for doc_id in layered.store.documents(root, recursive=True):
            known |= {where["file_type"] for where in [placement(doc_id)] if where is not None}
    close = difflib.get_close_matches(file_type, sorted(known), n=1, cutoff=0.8)
    if file_type not in known and close:
        raise InvalidInputError(
            f"file type {file_type!r} is not one this store knows; did you mean {close[0]!r}? "
            f"(known: {', '.join(sorted(known))})",
            hint="pass --new-type to start a new kind of document with this name",
        )


_place_options = stacked(  # where a document is: create and read
    click.argument("layer_name", metavar="LAYER", callback=_layer_name),
    click.argument("file_type"),
    click.option("--project", "-p", help="The project (shared-project, skill, command)."),
    click.option("--skill", help="The skill (skill-specific layer)."),
    click.option("--command", "command_name", help="The command (command layer)."),
    click.option("--agent-name", "agent_name", help="The agent (agent layer)."),
)


def _layered(state: State, agent: str | None = None, *, write: bool = False) -> LayeredStore:
    return LayeredStore(state.store(write=write), agent=agent)


def _show_documents(state: State, docs: list[Document]) -> None:
    rows = [
        [d.id, str(d.staleness), str(d.line_count),
         "-" if d.updated_at is None else d.updated_at.date().isoformat()]
        for d in docs
    ]
    output(state, docs, table(["ID", "STALENESS", "LINES", "UPDATED"], rows) if rows else "(none)")


@click.group(cls=SuggestingGroup)
def layer() -> None:
    """Layered documents: projects/, skills/, commands/, agents/ (the Forge layout).

    \b
    Example:
      gitmem layer create shared-project known_issues -p my-api --content "# Known issues"
    """


@layer.command("create")
@_place_options
@click.option("--content", help="The markdown content ('-' or none: read stdin).")
@click.option("--title", help="A title (default: file type and owner).")
@agent_option
@click.option(
    "--new-type", is_flag=True, help="Allow a file type close to a known one (not a typo)."
)
@allow_empty_option
@json_state
def create(
    state: State, layer_name: str, file_type: str, project: str | None, skill: str | None,
    command_name: str | None, agent_name: str | None, content: str | None, title: str | None,
    agent: str | None, new_type: bool, allow_empty: bool,
) -> None:
    """Create a document at its layer path; fails if it exists.

    A FILE_TYPE a letter or two from a known one is refused as a likely typo.
    """
    layered = _layered(state, agent, write=True)
    _check_file_type(layered, file_type, new_type)
    data = {
        "layer": layer_name, "fileType": file_type, "project": project, "skill": skill,
        "command": command_name, "agent": agent_name, "title": title,
        "content": read_text_arg(content, "content", store=layered.store, allow_empty=allow_empty),
    }
    result = layered.create({k: v for k, v in data.items() if v is not None})
    output(state, result, result.id)


@layer.command("read")
@_place_options
@json_state
def read(
    state: State, layer_name: str, file_type: str, project: str | None, skill: str | None,
    command_name: str | None, agent_name: str | None,
) -> None:
    """Print a document (with a [POTENTIALLY STALE] advisory when it is stale)."""
    doc = _layered(state).read(
        layer_name, project, file_type, skill=skill, command=command_name, agent=agent_name
    )
    if doc is None:
        where = document_id(
            layer_name, file_type, project=project, skill=skill, command=command_name,
            agent=agent_name,
        )
        raise NotFoundError(f"no layered document {where}", hint="gitmem layer create ...")
    if emitted(state, doc):
        return
    if doc.advisory:
        click.echo(doc.advisory, err=True)
    click.echo(doc.content, nl=not doc.content.endswith("\n"))


_doc_write = stacked(
    click.argument("doc_id", metavar="ID"), click.argument("content", required=False),
    agent_option, allow_empty_option, json_state,
)


def _warn(warning: str | None) -> None:
    if warning:
        click.echo(f"gitmem: warning: {warning}", err=True)


@layer.command("update")
@_doc_write
def update(
    state: State, doc_id: str, content: str | None, agent: str | None, allow_empty: bool,
) -> None:
    """Replace a document's content (CONTENT, or stdin)."""
    layered = _layered(state, agent)
    text = read_text_arg(content, "content", store=layered.store, allow_empty=allow_empty)
    result = layered.update(doc_id, text)
    if emitted(state, result):
        return
    click.echo(f"updated {result.id} ({result.line_count} lines)")
    _warn(result.warning)


@layer.command("append")
@_doc_write
def append(
    state: State, doc_id: str, content: str | None, agent: str | None, allow_empty: bool,
) -> None:
    """Append to a document (created if missing), then apply its prune rule."""
    layered = _layered(state, agent, write=True)
    text = read_text_arg(content, "content", store=layered.store, allow_empty=allow_empty)
    where = placement(doc_id)
    if where is not None and layered.get(doc_id) is None:
        _check_file_type(layered, where["file_type"], False)
        entry = {("fileType" if k == "file_type" else k): str(v) for k, v in where.items()}
        created = layered.create({**entry, "content": text})
        output(state, created, f"created {created.id} (it did not exist)")
        return
    result = layered.append(doc_id, text)
    if emitted(state, result):
        return
    click.echo(f"appended to {result.id} ({result.line_count} lines)")
    for item in result.prune_details:
        click.echo(f"  {item.action}: {item.section or item.id}: {item.reason}")
    _warn(result.warning)


@layer.command("delete")
@click.argument("doc_id", metavar="ID")
@json_state
def delete(state: State, doc_id: str) -> None:
    """Delete a document (gitmem restore ID brings it back)."""
    result = _layered(state).delete(doc_id)
    output(state, result, f"deleted {doc_id}" if result.deleted else f"no document {doc_id}")


@layer.command("by-project")
@click.argument("project")
@json_state
def by_project(state: State, project: str) -> None:
    """A project's documents: shared, per skill, commands."""
    grouped = _layered(state).get_by_project(project)
    if emitted(state, grouped):
        return
    docs = [*grouped.shared, *(d for ds in grouped.skills.values() for d in ds), *grouped.commands]
    _show_documents(state, docs)


@layer.command("profile")
@click.argument("project")
@json_state
def profile(state: State, project: str) -> None:
    """A project's overview and what else is known about it."""
    result = _layered(state).get_project_profile(project)
    if emitted(state, result):
        return
    click.echo(f"project: {result.project}")
    click.echo(f"documents: {', '.join(result.file_types) or '(none)'}")
    click.echo(f"skills: {', '.join(result.skills) or '(none)'}")
    if result.staleness is not None:
        click.echo(f"staleness: {result.staleness}")
    if result.overview is not None:
        click.echo("")
        click.echo(result.overview.content, nl=not result.overview.content.endswith("\n"))


@layer.command("list")
@click.argument("what", metavar="LAYER", callback=_layer_name)
@click.argument("name")
@click.option("--project", "-p", help="With skill: only this project.")
@json_state
def list_(state: State, what: str, name: str, project: str | None) -> None:
    """Documents of one project (shared-project, command), skill or agent: NAME."""
    layered = _layered(state)
    if what == Layer.SHARED_PROJECT:
        docs = layered.get_shared_project_memory(name)
    elif what == Layer.SKILL:
        docs = layered.get_skill_memory(name, project)
    elif what == Layer.COMMAND:
        docs = layered.get_command_memory(name)
    else:
        docs = layered.get_agent_memory(name)
    _show_documents(state, docs)


@layer.command("staleness")
@json_state
def staleness(state: State) -> None:
    """Fresh, aging and stale documents across all layers."""
    report = _layered(state).get_staleness_report()
    if emitted(state, report.to_dict()):
        return
    click.echo(f"{len(report.fresh)} fresh, {len(report.aging)} aging, {len(report.stale)} stale")
    rows = [
        [e.id, str(e.staleness), "-" if e.days_since_update is None else str(e.days_since_update)]
        for e in [*report.stale, *report.aging]
    ]
    if rows:
        click.echo(table(["ID", "STALENESS", "DAYS"], rows))


@layer.command("search")
@click.argument("pattern")
@click.option(
    "--layer", "layer_name", metavar="|".join(Layer), callback=_layer_name, help="Only this layer."
)
@click.option("--project", "-p", help="Only this project.")
@click.option("--limit", type=int, default=20, show_default=True)
@json_state
def search(
    state: State, pattern: str, layer_name: str | None, project: str | None, limit: int,
) -> None:
    """Full-text search over layered documents."""
    results = _layered(state).search(pattern, layer=layer_name, project=project, limit=limit)
    if emitted(state, results):
        return
    for match in results:
        line = f":{match.line_number}: {match.line}" if match.line_number else ""
        click.echo(f"{match.id}{line}")
