"""``gitmem mcp``: the store as an MCP server over stdio or HTTP, on the official ``mcp`` SDK.

Tools: the reference knowledge-graph server's nine (its names, schemas and results, and
its ``memory://knowledge-graph`` resource, so a client set up for
``@modelcontextprotocol/server-memory`` works unchanged) and gitmem's own (``remember``,
``recall``, ``prune`` ...). Each is a :class:`ToolSpec` whose handler is a plain function
over the library; a handler's error comes back as a result with ``isError`` set, so the
server never dies of a bad call.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitmem._version import __version__
from gitmem.base import logs, paths
from gitmem.base.errors import GitmemError, InvalidInputError, NotFoundError, StoreError
from gitmem.base.printable import printable, printable_json
from gitmem.features.graph import Graph
from gitmem.format import schema
from gitmem.store.core import Store

__all__ = [
    "RESOURCE_URI",
    "SERVER_NAME",
    "TOKEN_ENV",
    "ToolResult",
    "ToolSpec",
    "BearerGuard",
    "build_server",
    "http_token",
    "token_path",
    "parse_bind",
    "run",
    "run_http",
    "tools",
]

log = logs.get(__name__)

SERVER_NAME = "gitmem"
RESOURCE_URI = "memory://knowledge-graph"


@dataclass(frozen=True)
class ToolResult:
    text: str
    structured: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    handler: Callable[[dict[str, Any]], ToolResult]
    read_only: bool
    destructive: bool
    idempotent: bool
    output_schema: dict[str, Any] | None = None
    validator: Any = field(default=None, compare=False, repr=False)

    def call(self, arguments: Mapping[str, Any] | None) -> ToolResult:
        args = dict(arguments or {})
        # Paths mix keys and list indexes, so they are compared as text.
        errors = sorted(self.validator(args), key=lambda e: [str(p) for p in e.path])
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.path) or "arguments"
            raise InvalidInputError(f"invalid arguments for {self.name}: {where}: {first.message}")
        return self.handler(args)


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _str(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _list(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return {
        "type": "array",
        "items": items,
        **({"description": description} if description else {}),
    }


_ENTITY = _obj(
    {
        "name": _str("The name of the entity"),
        "entityType": _str("The type of the entity"),
        "observations": _list(
            _str(), "An array of observation contents associated with the entity"
        ),
    }
)
_RELATION = _obj(
    {
        "from": _str("The name of the entity where the relation starts"),
        "to": _str("The name of the entity where the relation ends"),
        "relationType": _str("The type of the relation"),
    }
)
_GRAPH_OUT = _obj({"entities": _list(_ENTITY), "relations": _list(_RELATION)})
_DONE_OUT = _obj({"success": {"type": "boolean"}, "message": _str()})


def _json(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``, as the reference server writes its results. The
    text goes to a model: characters JSON leaves as they are but that are not printable
    (a bidirectional override, an invisible tag) are escaped too (``printable_json``)."""
    return printable_json(json.dumps(value, indent=2, ensure_ascii=False))


def _done(message: str) -> ToolResult:
    return ToolResult(message, {"success": True, "message": message})


def _graph_tools(graph: Graph) -> list[ToolSpec]:
    def create_entities(args: dict[str, Any]) -> ToolResult:
        result = [e.to_dict() for e in graph.create_entities(args["entities"])]
        return ToolResult(_json(result), {"entities": result})

    def create_relations(args: dict[str, Any]) -> ToolResult:
        result = [r.to_dict() for r in graph.create_relations(args["relations"])]
        return ToolResult(_json(result), {"relations": result})

    def add_observations(args: dict[str, Any]) -> ToolResult:
        result = graph.add_observations(args["observations"])
        return ToolResult(_json(result), {"results": result})

    def delete_entities(args: dict[str, Any]) -> ToolResult:
        graph.delete_entities(args["entityNames"])
        return _done("Entities deleted successfully")

    def delete_observations(args: dict[str, Any]) -> ToolResult:
        graph.delete_observations(args["deletions"])
        return _done("Observations deleted successfully")

    def delete_relations(args: dict[str, Any]) -> ToolResult:
        graph.delete_relations(args["relations"])
        return _done("Relations deleted successfully")

    def read_graph(args: dict[str, Any]) -> ToolResult:
        result = graph.read_graph_dict()
        return ToolResult(_json(result), result)

    def search_nodes(args: dict[str, Any]) -> ToolResult:
        result = graph.search_nodes(args["query"]).to_dict()
        return ToolResult(_json(result), result)

    def open_nodes(args: dict[str, Any]) -> ToolResult:
        result = graph.open_nodes(args["names"]).to_dict()
        return ToolResult(_json(result), result)

    write = {"read_only": False, "destructive": False, "idempotent": False}
    delete = {"read_only": False, "destructive": True, "idempotent": True}
    read = {"read_only": True, "destructive": False, "idempotent": True}
    return [
        ToolSpec(
            "create_entities",
            "Create Entities",
            "Create multiple new entities in the knowledge graph",
            _obj({"entities": _list(_ENTITY)}),
            create_entities,
            output_schema=_obj({"entities": _list(_ENTITY)}),
            **write,
        ),
        ToolSpec(
            "create_relations",
            "Create Relations",
            "Create multiple new relations between entities in the knowledge graph. "
            "Relations should be in active voice",
            _obj({"relations": _list(_RELATION)}),
            create_relations,
            output_schema=_obj({"relations": _list(_RELATION)}),
            **write,
        ),
        ToolSpec(
            "add_observations",
            "Add Observations",
            "Add new observations to existing entities in the knowledge graph",
            _obj(
                {
                    "observations": _list(
                        _obj(
                            {
                                "entityName": _str(
                                    "The name of the entity to add the observations to"
                                ),
                                "contents": _list(
                                    _str(), "An array of observation contents to add"
                                ),
                            }
                        )
                    )
                }
            ),
            add_observations,
            output_schema=_obj(
                {"results": _list(_obj({"entityName": _str(), "addedObservations": _list(_str())}))}
            ),
            **write,
        ),
        ToolSpec(
            "delete_entities",
            "Delete Entities",
            "Delete multiple entities and their associated relations from the knowledge graph",
            _obj({"entityNames": _list(_str(), "An array of entity names to delete")}),
            delete_entities,
            output_schema=_DONE_OUT,
            **delete,
        ),
        ToolSpec(
            "delete_observations",
            "Delete Observations",
            "Delete specific observations from entities in the knowledge graph",
            _obj(
                {
                    "deletions": _list(
                        _obj(
                            {
                                "entityName": _str(
                                    "The name of the entity containing the observations"
                                ),
                                "observations": _list(_str(), "An array of observations to delete"),
                            }
                        )
                    )
                }
            ),
            delete_observations,
            output_schema=_DONE_OUT,
            **delete,
        ),
        ToolSpec(
            "delete_relations",
            "Delete Relations",
            "Delete multiple relations from the knowledge graph",
            _obj({"relations": _list(_RELATION, "An array of relations to delete")}),
            delete_relations,
            output_schema=_DONE_OUT,
            **delete,
        ),
        ToolSpec(
            "read_graph",
            "Read Graph",
            "Read the entire knowledge graph",
            _obj({}),
            read_graph,
            output_schema=_GRAPH_OUT,
            **read,
        ),
        ToolSpec(
            "search_nodes",
            "Search Nodes",
            "Search for nodes in the knowledge graph based on a query",
            _obj(
                {
                    "query": _str(
                        "The search query to match against entity names, types, and "
                        "observation content"
                    )
                }
            ),
            search_nodes,
            output_schema=_GRAPH_OUT,
            **read,
        ),
        ToolSpec(
            "open_nodes",
            "Open Nodes",
            "Open specific nodes in the knowledge graph by their names",
            _obj({"names": _list(_str(), "An array of entity names to retrieve")}),
            open_nodes,
            output_schema=_GRAPH_OUT,
            **read,
        ),
    ]


_TAGS = _list(_str(), "Tags (one line each)")
_RELATED = _list(
    _obj(
        {
            "id": _str("The related memory's id"),
            "relationship": {
                "type": "string",
                "enum": ["supersedes", "refines", "contradicts", "relates-to"],
            },
        }
    ),
    "Links to other memories",
)
_SCOPE = {
    "type": "string",
    "enum": ["repo", "user"],
    "description": "The project's store or the user's (when both are open; default: both for "
    "reads, the project's for writes)",
}
_ID = _str("The memory's id (mem_<uuid> or a path id such as projects/acme/known_issues)")


def _memory_result(memory: Any) -> ToolResult:
    data = memory.to_dict()
    return ToolResult(_json(data), {"memory": data})


def _fields(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: args[k] for k in ("title", "category", "tags", "related") if k in args}


def _memory_tools(store: Store, agent: str | None) -> list[ToolSpec]:
    def remember(args: dict[str, Any]) -> ToolResult:
        memory = store.create(
            args["content"],
            id=args.get("id"),
            scope=args.get("scope"),
            agent=agent,
            **_fields(args),
        )
        from gitmem.store.duplicates import duplicates_report, duplicates_text

        similar = duplicates_report(store.reader(memory.store_scope), memory)
        data = memory.to_dict()
        text = _json(data)
        if similar:
            how = "call update_memory (or supersede_memory) with id {id}"
            text += "\n" + "\n".join(duplicates_text(similar, how=how))
        return ToolResult(text, {"memory": data, "near_duplicates": similar})

    def recall(args: dict[str, Any]) -> ToolResult:
        mode = args.get("mode", "natural")
        if mode in ("regex", "substring", "fts"):
            found = store.search(
                args["query"],
                mode=mode,
                scope=args.get("scope"),
                category=args.get("category"),
                tags=args.get("tags"),
                include_superseded=args.get("include_superseded", False),
                limit=args.get("limit", 10),
            )
            data = found.to_dict()
            return ToolResult(_json(data), data)
        results = store.recall(
            args["query"],
            scope=args.get("scope"),
            category=args.get("category"),
            tags=args.get("tags"),
            include_superseded=args.get("include_superseded", False),
            limit=args.get("limit", 10),
            budget=args.get("budget"),
        )
        data = results.to_dict()
        return ToolResult(_json(data), data)

    def get_memory(args: dict[str, Any]) -> ToolResult:
        return _memory_result(store.read(args["id"], at=args.get("at")))

    def update_memory(args: dict[str, Any]) -> ToolResult:
        fields = _fields(args)
        if agent:
            fields["agent"] = agent
        memory = store.update(
            args["id"],
            args.get("content"),
            expected_version=args.get("expected_version"),
            message=args.get("reason"),
            **fields,
        )
        return _memory_result(memory)

    def supersede_memory(args: dict[str, Any]) -> ToolResult:
        fields = _fields(args)
        if agent:
            fields["agent"] = agent
        memory = store.supersede(args["id"], args["content"], message=args.get("reason"), **fields)
        return _memory_result(memory)

    def forget(args: dict[str, Any]) -> ToolResult:
        deleted = store.delete(args["id"], agent=agent, message=args.get("reason"))
        data = {"id": args["id"], "deleted": deleted}
        return ToolResult(_json(data), data)

    def memory_history(args: dict[str, Any]) -> ToolResult:
        history = store.history(args["id"])
        data = {
            "versions": [v.to_dict() for v in history.versions],
            "warnings": list(history.warnings),
        }
        return ToolResult(_json(data), data)

    def staleness_report(args: dict[str, Any]) -> ToolResult:
        from gitmem.features.lifecycle import store_staleness

        report = store_staleness(
            store,
            include_superseded=args.get("include_superseded", False),
            include_archived=args.get("include_archived", False),
        )
        data = report.to_dict()
        return ToolResult(_json(data), data)

    def prune(args: dict[str, Any]) -> ToolResult:
        from gitmem.features.layered import LayeredStore, PrunePolicy

        policy = PrunePolicy(
            scope=args.get("scope", "all"),
            project=args.get("project"),
            skill=args.get("skill"),
            dry_run=args.get("dry_run", True),
        )
        data = LayeredStore(store, agent=agent).prune(policy).to_dict()
        return ToolResult(_json(data), data)

    reason = _str("Why: written in the commit message")
    return [
        ToolSpec(
            "remember",
            "Remember",
            "Store a new memory (one commit). Returns it with its new id.",
            _obj(
                {
                    "content": _str("The memory's text (markdown)"),
                    "title": _str("A one-line title"),
                    "category": _str("Category, e.g. coding-preferences, project-conventions"),
                    "tags": _TAGS,
                    "related": _RELATED,
                    "id": _str("A path id to store it at (default: a new mem_<uuid>)"),
                    "scope": _SCOPE,
                },
                ["content"],
            ),
            remember,
            read_only=False,
            destructive=False,
            idempotent=False,
        ),
        ToolSpec(
            "recall",
            "Recall",
            "Find the memories that answer a question: ask in plain language, or give "
            "keywords, a code identifier or a path (any word may match; word forms meet; "
            "similar meaning counts). Best first, each with its best lines and why it "
            "ranked; superseded memories count for their newest version. With budget "
            "(tokens), 'packed' holds the best whole memories that fit. mode 'fts' (FTS5 "
            "syntax), 'regex' or 'substring' searches instead (the same hits).",
            _obj(
                {
                    "query": _str("The question, keywords, identifier or path"),
                    "mode": {
                        "type": "string",
                        "enum": ["natural", "fts", "regex", "substring"],
                        "description": "natural (default): recall; others: search",
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200},
                    "budget": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Pack the best memories into this many tokens",
                    },
                    "category": _str("Only this category"),
                    "tags": _list(_str(), "Only memories with all these tags"),
                    "include_superseded": {"type": "boolean"},
                    "scope": _SCOPE,
                },
                ["query"],
            ),
            recall,
            read_only=True,
            destructive=False,
            idempotent=True,
        ),
        ToolSpec(
            "get_memory",
            "Get Memory",
            "Read one memory by id, now or at a past revision or date.",
            _obj(
                {
                    "id": _str(f"{_ID['description']}; a unique prefix of it will do"),
                    "at": _str("A git revision or a date/time"),
                },
                ["id"],
            ),
            get_memory,
            read_only=True,
            destructive=False,
            idempotent=True,
        ),
        ToolSpec(
            "update_memory",
            "Update Memory",
            "Change a memory in place (same id, version + 1; the old text stays in history).",
            _obj(
                {
                    "id": _ID,
                    "content": _str("The new text (omit to keep it)"),
                    "title": _str(),
                    "category": _str(),
                    "tags": _TAGS,
                    "related": _RELATED,
                    "expected_version": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Fail if someone else changed the memory first",
                    },
                    "reason": reason,
                },
                ["id"],
            ),
            update_memory,
            read_only=False,
            destructive=True,
            idempotent=True,
        ),
        ToolSpec(
            "supersede_memory",
            "Supersede Memory",
            "Replace a memory with a new one that says it supersedes it (the old one stays).",
            _obj(
                {
                    "id": _ID,
                    "content": _str("The replacement text"),
                    "title": _str(),
                    "category": _str(),
                    "tags": _TAGS,
                    "related": _RELATED,
                    "reason": reason,
                },
                ["id", "content"],
            ),
            supersede_memory,
            read_only=False,
            destructive=False,
            idempotent=False,
        ),
        ToolSpec(
            "forget",
            "Forget",
            "Delete a memory (its history stays, and gitmem restore brings it back).",
            _obj({"id": _ID, "reason": reason}, ["id"]),
            forget,
            read_only=False,
            destructive=True,
            idempotent=True,
        ),
        ToolSpec(
            "memory_history",
            "Memory History",
            "Every version of a memory along its supersedes chain: commit, time, author, "
            "operation and content.",
            _obj({"id": _ID}),
            memory_history,
            read_only=True,
            destructive=False,
            idempotent=True,
        ),
        ToolSpec(
            "staleness_report",
            "Staleness Report",
            "Which memories are fresh, aging or stale (days since updated_at, thresholds "
            "from gitmem.yaml).",
            _obj(
                {
                    "include_superseded": {"type": "boolean"},
                    "include_archived": {"type": "boolean"},
                },
                [],
            ),
            staleness_report,
            read_only=True,
            destructive=False,
            idempotent=True,
        ),
        ToolSpec(
            "prune",
            "Prune",
            "Run the lifecycle prune rules over the layered documents (resolved known issues "
            "removed, old review history archived, ...). A dry run unless dry_run is false; a "
            "real run is one commit, and everything removed stays restorable from history.",
            _obj(
                {
                    "scope": {"type": "string", "enum": ["all", "project", "skill"]},
                    "project": _str("With scope project (or skill): the project"),
                    "skill": _str("With scope skill: the skill"),
                    "dry_run": {
                        "type": "boolean",
                        "default": True,
                        "description": "Only report what would be pruned (the default)",
                    },
                },
                [],
            ),
            prune,
            read_only=False,
            destructive=True,
            idempotent=False,
        ),
    ]


def tools(store: Store, *, agent: str | None = None, graph: Graph | None = None) -> list[ToolSpec]:
    """Every tool the server offers, each with its validator ready."""
    graph = graph or Graph(store, agent=agent)
    specs = _graph_tools(graph) + _memory_tools(store, agent)
    out: list[ToolSpec] = []
    for spec in specs:
        validator = schema.checker(_lenient(spec.input_schema))
        out.append(
            ToolSpec(
                spec.name,
                spec.title,
                spec.description,
                spec.input_schema,
                spec.handler,
                spec.read_only,
                spec.destructive,
                spec.idempotent,
                spec.output_schema,
                validator,
            )
        )
    return out


def _lenient(node: Any) -> Any:
    """The schema without ``additionalProperties: false``: the reference's zod objects drop
    unknown keys instead of failing, so a client sending one more key still works here."""
    if isinstance(node, dict):
        return {k: _lenient(v) for k, v in node.items() if k != "additionalProperties"}
    if isinstance(node, list):
        return [_lenient(v) for v in node]
    return node


NOT_FOUND_HINT = "recall finds a memory's id from what it says; a unique prefix of an id will do"


def call(spec: ToolSpec, arguments: Mapping[str, Any] | None) -> tuple[ToolResult, bool]:
    """Run a tool: its result, or its error as text, and whether it failed."""
    try:
        return spec.call(arguments), False
    except GitmemError as exc:
        hint: str | None = exc.hint
        if hint and hint.startswith("gitmem "):  # the command line's: an agent has tools
            hint = NOT_FOUND_HINT if isinstance(exc, NotFoundError) else None
        # A message may quote what it refuses, a name read from the store among them.
        text = printable(exc.message + (f" (hint: {hint})" if hint else ""))
        return ToolResult(text), True
    except Exception as exc:  # a bug must not take the server down with it
        log.exception("tool %s failed", spec.name)
        return ToolResult(f"internal error in {spec.name}: {type(exc).__name__}: {exc}"), True


def build_server(store: Store, *, agent: str | None = None) -> Any:
    """The MCP server (an ``mcp.server.lowlevel.Server``) for ``store``."""
    import mcp_types as types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated

    graph = Graph(store, agent=agent)
    # Change notifications both ways the SDK speaks: resources/subscribe on the initialize
    # handshake, subscriptions/listen streams on the 2026-07-28 protocol.
    bus = InMemorySubscriptionBus()
    specs = {spec.name: spec for spec in tools(store, agent=agent, graph=graph)}
    subscribed: set[str] = set()

    listed = [
        types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=spec.input_schema,
            output_schema=spec.output_schema,
            annotations=types.ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=spec.destructive,
                idempotent_hint=spec.idempotent,
                open_world_hint=False,
            ),
        )
        for spec in specs.values()
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = specs.get(params.name)
        if spec is None:
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {params.name!r}")], is_error=True
            )
        result, failed = call(spec, params.arguments)
        if not failed and not spec.read_only:
            if RESOURCE_URI in subscribed:
                await ctx.session.send_resource_updated(RESOURCE_URI)
            await bus.publish(ResourceUpdated(uri=RESOURCE_URI))
        return types.CallToolResult(
            content=[types.TextContent(text=result.text)],
            structured_content=result.structured,
            is_error=failed,
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name="knowledge-graph",
                    title="Knowledge Graph",
                    uri=RESOURCE_URI,
                    description="The full knowledge graph with all entities and relations",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if str(params.uri) != RESOURCE_URI:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {params.uri}")
        text = _json(graph.read_graph_dict())
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=RESOURCE_URI, mime_type="application/json", text=text
                )
            ]
        )

    async def subscribe(
        ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "gitmem: a git-versioned memory store. The knowledge-graph tools are those of the "
            "reference memory server; remember/recall/... work on memories. Every change is a "
            "git commit, so nothing is lost."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(bus),
    )


def run(store: Store, *, agent: str | None = None) -> None:
    """Serve ``store`` over stdin/stdout until the client hangs up."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(store, agent=agent)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


TOKEN_ENV = "GITMEM_MCP_TOKEN"
TOKEN_DIR = "mcp-tokens"
"""In the user's state directory (:func:`token_path`): one bearer token per store."""

MIN_TOKEN = 16
HTTP_PATH = "/mcp"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def parse_bind(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` as (host, port); a bare port binds 127.0.0.1."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInputError(f"--http {text!r}: the port must be a number from 1 to 65535")
    host = host or "127.0.0.1"
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise InvalidInputError(
                f"--http {text!r}: the host must be an IP address or localhost"
            ) from None
    return host, int(port)


def token_path(store: Store, folder: str = TOKEN_DIR) -> Path:
    """Where the bearer token for ``store`` is kept: the user's state directory
    (``$XDG_STATE_HOME``, else ``~/.local/state``), ``gitmem/mcp-tokens/<hash of the store's
    git directory>``. Never in the store: a bare store committed in a project carries its
    ``gitmem/`` folder, so a token found there is one whoever committed it knows."""
    key = hashlib.sha256(os.fsencode(store.db().gitdir.resolve())).hexdigest()[:32]
    return paths.user_dir("state") / folder / key


def http_token(
    store: Store, *, env: str = TOKEN_ENV, folder: str = TOKEN_DIR
) -> tuple[str, Path | None]:
    """The bearer token clients must send: ``$env`` (``$GITMEM_MCP_TOKEN``), else the one at
    :func:`token_path` (made on first use, mode 0600). A token file that is not the user's
    own regular file, or that others may read, is refused. Returns the token and the file it
    is in (None when it came from the environment). ``gitmem serve`` keeps its own."""
    given = os.environ.get(env)
    if given is not None:
        if len(given) < MIN_TOKEN:
            raise InvalidInputError(f"${env} must be at least {MIN_TOKEN} characters")
        return given, None
    path = token_path(store, folder)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise StoreError(f"cannot read the token file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise StoreError(f"{path} is not a file of yours: it is not used as a token")
        if info.st_mode & 0o077:
            raise StoreError(
                f"{path} can be read by others (mode {stat.S_IMODE(info.st_mode):04o}): it is "
                "not used as a token",
                hint=f"delete it (a new token is made) or chmod 600 {path}",
            )
        token = fh.read(1024).decode("ascii", "replace").strip()
    if len(token) < MIN_TOKEN:
        raise StoreError(f"{path} holds no usable token; delete it and a new one is made")
    return token, path


class BearerGuard:
    """An ASGI wrapper that lets through only HTTP requests carrying ``Authorization: Bearer
    <token>`` (compared in constant time); others get 401 and never reach the server."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
            if len(given) != 1 or not hmac.compare_digest(given[0], self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="gitmem"'),
                        ],
                    }
                )
                await send(
                    {"type": "http.response.body", "body": b'{"error": "unauthorized"}'}
                )
                return
        await self.app(scope, receive, send)


def http_app(store: Store, token: str, *, host: str, agent: str | None = None) -> Any:
    """The ASGI app of the streamable HTTP transport at /mcp, behind the bearer check."""
    server = build_server(store, agent=agent)
    return BearerGuard(server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host), token)


def run_http(
    store: Store, *, host: str, port: int, token: str, agent: str | None = None
) -> None:
    """Serve ``store`` over the SDK's streamable HTTP transport until interrupted."""
    import uvicorn

    app = http_app(store, token, host=host, agent=agent)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
