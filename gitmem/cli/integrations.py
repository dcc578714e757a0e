"""Agent integrations on the command line: entity, mcp, import, export, graph, serve."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gitmem import NotFoundError
from gitmem.base.errors import require_extra
from gitmem.cli.common import (
    ProgressBar,
    State,
    SuggestingGroup,
    agent_option,
    agent_state,
    emitted,
    json_state,
    output,
    pass_state,
    stacked,
)
from gitmem.features import pictures, transfer
from gitmem.features.graph import Entity, Graph, KnowledgeGraph
from gitmem.features.transfer import Fidelity


def _graph(state: State, agent: str | None = None, *, write: bool = False) -> Graph:
    return Graph(state.store(write=write), agent=agent)


def _print_graph(state: State, graph: KnowledgeGraph) -> None:
    if emitted(state, graph):
        return
    for entity in graph.entities:
        click.echo(f"{entity.name} ({entity.entity_type})")
        for observation in entity.observations:
            click.echo("  - " + observation.replace("\n", "\n    "))
    if graph.relations:
        click.echo("relations:")
        for r in graph.relations:
            click.echo(f"  {r.source} --{r.relation_type}--> {r.target}")


_relation = stacked(  # entity relate and entity unrelate
    click.argument("source", metavar="FROM"), click.argument("relation_type", metavar="RELATION"),
    click.argument("target", metavar="TO"), agent_option,
)
_texts = stacked(  # entity observe and entity forget
    click.argument("name"),
    click.argument("texts", nargs=-1, required=True, metavar="TEXT..."),
    agent_option,
)
_names = click.argument("names", nargs=-1, required=True, metavar="NAME...")


@click.group(cls=SuggestingGroup)
def entity() -> None:
    """The knowledge graph of the MCP server's tools (entities/<type>/<name>.md).

    \b
    Example:
      gitmem entity add Alice --type person --observe "works at Acme"
    """


@entity.command("add")
@click.argument("name")
@click.option("--type", "entity_type", required=True, help="The entity's type (person, ...).")
@click.option("--observe", "observations", multiple=True, metavar="TEXT", help="An observation.")
@agent_state
def entity_add(
    state: State, name: str, entity_type: str, observations: tuple[str, ...], agent: str | None,
) -> None:
    """Create the entity NAME (nothing happens if it exists)."""
    created = _graph(state, agent, write=True).create_entities(
        [Entity(name, entity_type, observations)]
    )
    output(
        state, {"entities": [e.to_dict() for e in created]},
        f"created {name}" if created else f"{name} already exists; nothing changed",
    )


@entity.command("observe")
@_texts
@json_state
def entity_observe(state: State, name: str, texts: tuple[str, ...], agent: str | None) -> None:
    """Add observations to the entity NAME (ones it already has are skipped)."""
    results = _graph(state, agent).add_observations([{"entityName": name, "contents": list(texts)}])
    added = len(results[0]["addedObservations"])
    output(state, {"results": results}, f"added {added} observation{'s' * (added != 1)} to {name}")


@entity.command("relate")
@_relation
@json_state
def entity_relate(
    state: State, source: str, relation_type: str, target: str, agent: str | None,
) -> None:
    """Relate FROM to TO (in active voice: Alice works_at Acme)."""
    created = _graph(state, agent, write=True).create_relations(
        [{"from": source, "to": target, "relationType": relation_type}]
    )
    output(
        state, {"relations": [r.to_dict() for r in created]},
        "related" if created else "that relation exists; nothing changed",
    )


@entity.command("unrelate")
@_relation
@pass_state
def entity_unrelate(
    state: State, source: str, relation_type: str, target: str, agent: str | None,
) -> None:
    """Delete the relation FROM RELATION TO."""
    _graph(state, agent).delete_relations(
        [{"from": source, "to": target, "relationType": relation_type}]
    )


@entity.command("forget")
@_texts
@pass_state
def entity_forget(state: State, name: str, texts: tuple[str, ...], agent: str | None) -> None:
    """Delete observations (exact texts) from the entity NAME."""
    _graph(state, agent).delete_observations([{"entityName": name, "observations": list(texts)}])


@entity.command("show")
@_names
@json_state
def entity_show(state: State, names: tuple[str, ...]) -> None:
    """Show entities and every relation touching them (the open_nodes tool)."""
    _print_graph(state, _graph(state).open_nodes(list(names)))


@entity.command("id")
@click.argument("name")
@pass_state
def entity_id(state: State, name: str) -> None:
    """Print the document id of the entity NAME (for gitmem history, show, restore)."""
    doc_id = _graph(state).entity_id(name)
    if doc_id is None:
        raise NotFoundError(f"no entity named {name!r}")
    click.echo(doc_id)


@entity.command("search")
@click.argument("query")
@json_state
def entity_search(state: State, query: str) -> None:
    """Entities whose name, type or an observation contains QUERY (ignoring case)."""
    _print_graph(state, _graph(state).search_nodes(query))


@entity.command("ls")
@json_state
def entity_ls(state: State) -> None:
    """The whole graph (the read_graph tool)."""
    _print_graph(state, _graph(state).read_graph())


@entity.command("rm")
@_names
@agent_option
@pass_state
def entity_rm(state: State, names: tuple[str, ...], agent: str | None) -> None:
    """Delete entities and every relation touching them (history keeps them)."""
    _graph(state, agent).delete_entities(list(names))


@click.command()
@click.option("--agent", help="Author of the commits the server makes (default: the git user).")
@click.option(
    "--http", "bind", metavar="[HOST:]PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp (HOST: 127.0.0.1 by default) "
    "instead of stdio. Clients send a bearer token: $GITMEM_MCP_TOKEN, else gitmem's own "
    "(its path is said on stderr).",
)
@pass_state
def mcp(state: State, agent: str | None, bind: str | None) -> None:
    """Serve the store over MCP on stdin/stdout (needs the mcp extra).

    \b
    Example (Claude Desktop, claude_desktop_config.json):
      {"mcpServers": {"memory": {"command": "gitmem",
                                 "args": ["--store", "/home/me/.gitmem", "mcp"]}}}
    """
    require_extra("mcp", "gitmem mcp", "mcp")
    from gitmem.entry import mcp as mcp_server
    from gitmem.entry import tokens

    store = state.store(write=True)  # made on first use, said on stderr (stdout is MCP's)
    if bind is None:
        mcp_server.run(store, agent=agent)
        return
    host, port = mcp_server.parse_bind(bind)
    token, where = tokens.http_token(store)
    source = f"${tokens.TOKEN_ENV}" if where is None else str(where)
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"gitmem: serving MCP at http://{shown}:{port}{mcp_server.HTTP_PATH} "
        f"(bearer token: {source})",
        err=True,
    )
    mcp_server.run_http(store, host=host, port=port, token=token, agent=agent)


@click.command()
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0: any port."
)
@click.option(
    "--host", default="127.0.0.1", show_default=True,
    help="The address to listen on (an IP address or localhost). Any other than this "
    "machine's own asks every request for a token: $GITMEM_WEB_TOKEN, else one gitmem keeps "
    "in your state directory (the URL printed carries it).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the view in a browser.")
@pass_state
def serve(state: State, port: int, host: str, open_browser: bool) -> None:
    """Serve a read-only web view of the store (needs the web extra; ?format=json too).

    \b
    Example:
      gitmem serve --open
    """
    require_extra("web", "gitmem serve", "jinja2", "markdown_it", "nh3")
    from gitmem.entry.web.server import Server

    store = state.store()
    server = Server(store, host, port)
    click.echo(f"gitmem: serving a read-only view of {store.path} at {server.link}", err=True)
    server.run(open_browser=open_browser)


def _report(state: State, report: Fidelity) -> None:
    output(state, report, report.summary())
    if not report.ok:
        raise click.exceptions.Exit(1)


def _import(state: State, run: Callable[..., Fidelity], source: Path, **options: Any) -> None:
    with ProgressBar("importing") as progress:
        _report(state, run(state.store(write=True), source, progress=progress, **options))


@click.group("import", cls=SuggestingGroup)
def import_() -> None:
    """Bring memory in from other tools: one commit, then a fidelity report (exit 1 if
    an entry differs in the store).

    \b
    Example:
      gitmem import mcp-jsonl memory.jsonl --skip-bad
    """


@import_.command("mcp-jsonl")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--skip-bad", is_flag=True, help="Leave out lines that cannot be read; list them.")
@agent_state
def import_mcp_jsonl(state: State, file: Path, skip_bad: bool, agent: str | None) -> None:
    """The reference MCP memory server's memory.jsonl, into the knowledge graph."""
    _import(state, transfer.import_mcp_jsonl, file, skip_bad=skip_bad, agent=agent)


_folder = stacked(  # import files and import forge
    click.argument("directory", type=click.Path(file_okay=False, path_type=Path)),
    click.option("--skip-bad", is_flag=True, help="Leave out files that cannot be imported."),
    json_state,
)


@import_.command("files")
@_folder
def import_files(state: State, directory: Path, skip_bad: bool) -> None:
    """Memory files copied byte for byte (folders repo/ and user/: to that scope)."""
    _import(state, transfer.import_files, directory, skip_bad=skip_bad)


@import_.command("forge")
@_folder
def import_forge(state: State, directory: Path, skip_bad: bool) -> None:
    """A Forge plugin memory folder (projects/, skills/, ...) as layered documents."""
    _import(state, transfer.import_forge, directory, skip_bad=skip_bad)


@click.group(cls=SuggestingGroup)
def export() -> None:
    """Take memory out again, so nobody is locked in (then a fidelity report).

    \b
    Example:
      gitmem export files ./backup
    """


@export.command("mcp-jsonl")
@click.argument("dest", metavar="FILE|-")
@json_state
def export_mcp_jsonl(state: State, dest: str) -> None:
    """The knowledge graph as the reference MCP memory server's memory.jsonl ('-': stdout)."""
    text, report = transfer.export_mcp_jsonl(state.store(), dest)
    if dest == "-":
        click.echo(text)
        if not report.ok:
            raise click.exceptions.Exit(1)
        return
    _report(state, report)


@export.command("files")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@json_state
def export_files(state: State, dest: Path) -> None:
    """Every memory file, byte for byte, under DEST/<scope>/ (re-importable with import files)."""
    _report(state, transfer.export_files(state.store(), dest))


@click.command()
@click.option(
    "--format", "fmt", type=click.Choice(pictures.FORMATS), default="mermaid", show_default=True,
    help="mermaid renders in pull requests and markdown viewers; dot goes to Graphviz.",
)
@click.option("--id", "start", metavar="ID", help="Only around this memory id or entity name.")
@click.option(
    "--depth", type=click.IntRange(min=0), default=2, show_default=True,
    help="With --id: how many links away to draw.",
)
@pass_state
def graph(state: State, fmt: str, start: str | None, depth: int) -> None:
    """Draw the knowledge graph and the version chains (forks in red).

    \b
    Example:
      gitmem graph --format dot | dot -Tsvg > memory.svg
    """
    click.echo(pictures.draw(state.store(), fmt=fmt, start=start, depth=depth), nl=False)


@export.command("forge")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@json_state
def export_forge(state: State, dest: Path) -> None:
    """The layered documents as a Forge plugin memory folder (<!-- Last Updated --> lines)."""
    _report(state, transfer.export_forge(state.store(), dest))
