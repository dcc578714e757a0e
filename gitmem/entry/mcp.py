"""``gitmem mcp``: the store as an MCP server over stdio or HTTP, on the official ``mcp`` SDK.

Tools: the reference knowledge-graph server's nine (its names, schemas, results and
``memory://knowledge-graph`` resource) and gitmem's own (``remember``, ``recall`` ...).
A handler's error comes back as a result with ``isError`` set: a bad call never kills it.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gitmem._version import __version__
from gitmem.base import logs
from gitmem.base.errors import GitmemError, InvalidInputError, NotFoundError
from gitmem.base.printable import printable, printable_json
from gitmem.features.graph import Graph
from gitmem.format import schema
from gitmem.store.core import Store
from gitmem.store.results import HISTORY_PAGE

log = logs.get(__name__)

RESOURCE_URI = "memory://knowledge-graph"

# The tool annotations (read-only, destructive, idempotent) of each kind of tool.
READ = (True, False, True)
ADD = (False, False, False)
DELETE = (False, True, True)
_HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint")


@dataclass(frozen=True)
class ToolResult:
    text: str
    structured: dict[str, Any] | None = None


Handler = Callable[[dict[str, Any]], ToolResult]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    hints: tuple[bool, bool, bool]
    output_schema: dict[str, Any] | None = None

    @functools.cached_property
    def validator(self) -> Callable[[Any], list[schema.Problem]]:
        return schema.checker(_lenient(self.input_schema))


def _of(kind: str, description: str | None = None, **more: Any) -> dict[str, Any]:
    return {"type": kind, **more, **({"description": description} if description else {})}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object schema; a property given as a string is a string with that description."""
    return {
        "type": "object",
        "properties": {
            k: _of("string", v) if isinstance(v, str) else v for k, v in properties.items()
        },
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _list(items: dict[str, Any] | None = None, description: str | None = None) -> dict[str, Any]:
    return _of("array", description, items=items or _of("string"))


_BOOL = _of("boolean")
_ENTITY = _obj(
    {
        "name": "The name of the entity",
        "entityType": "The type of the entity",
        "observations": _list(None, "An array of observation contents associated with the entity"),
    }
)
_RELATION = _obj(
    {
        "from": "The name of the entity where the relation starts",
        "to": "The name of the entity where the relation ends",
        "relationType": "The type of the relation",
    }
)
_GRAPH_OUT = _obj({"entities": _list(_ENTITY), "relations": _list(_RELATION)})
_DONE_OUT = _obj({"success": _BOOL, "message": _of("string")})


def _json(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``, as the reference server writes its results. The
    text goes to a model: characters JSON leaves as they are but that are not printable
    (a bidirectional override, an invisible tag) are escaped too (``printable_json``)."""
    return printable_json(json.dumps(value, indent=2, ensure_ascii=False))


def _out(data: Any, key: str | None = None) -> ToolResult:
    """``data`` as the text and as the structured result (under ``key`` when given)."""
    return ToolResult(_json(data), {key: data} if key else data)


def _deleting(action: Callable[[Any], object], key: str, what: str) -> Handler:
    def handler(args: dict[str, Any]) -> ToolResult:
        action(args[key])
        message = f"{what} deleted successfully"
        return ToolResult(message, {"success": True, "message": message})

    return handler


def _per_entity(outer: str, key: str, entity: str, items: str) -> dict[str, Any]:
    """``{outer: [{entityName, key: [strings]}]}``: the reference's observation tools' input."""
    return _obj({outer: _list(_obj({"entityName": entity, key: _list(None, items)}))})


def _graph_tools(graph: Graph) -> list[ToolSpec]:
    entities, relations = _obj({"entities": _list(_ENTITY)}), _obj({"relations": _list(_RELATION)})
    added = _obj({"entityName": _of("string"), "addedObservations": _list()})
    return [
        ToolSpec(
            "create_entities",
            "Create multiple new entities in the knowledge graph",
            entities,
            lambda a: _out([e.to_dict() for e in graph.create_entities(a["entities"])], "entities"),
            ADD,
            entities,
        ),
        ToolSpec(
            "create_relations",
            "Create multiple new relations between entities in the knowledge graph. "
            "Relations should be in active voice",
            relations,
            lambda a: _out(
                [r.to_dict() for r in graph.create_relations(a["relations"])], "relations"
            ),
            ADD,
            relations,
        ),
        ToolSpec(
            "add_observations",
            "Add new observations to existing entities in the knowledge graph",
            _per_entity(
                "observations",
                "contents",
                "The name of the entity to add the observations to",
                "An array of observation contents to add",
            ),
            lambda a: _out(graph.add_observations(a["observations"]), "results"),
            ADD,
            _obj({"results": _list(added)}),
        ),
        ToolSpec(
            "delete_entities",
            "Delete multiple entities and their associated relations from the knowledge graph",
            _obj({"entityNames": _list(None, "An array of entity names to delete")}),
            _deleting(graph.delete_entities, "entityNames", "Entities"),
            DELETE,
            _DONE_OUT,
        ),
        ToolSpec(
            "delete_observations",
            "Delete specific observations from entities in the knowledge graph",
            _per_entity(
                "deletions",
                "observations",
                "The name of the entity containing the observations",
                "An array of observations to delete",
            ),
            _deleting(graph.delete_observations, "deletions", "Observations"),
            DELETE,
            _DONE_OUT,
        ),
        ToolSpec(
            "delete_relations",
            "Delete multiple relations from the knowledge graph",
            _obj({"relations": _list(_RELATION, "An array of relations to delete")}),
            _deleting(graph.delete_relations, "relations", "Relations"),
            DELETE,
            _DONE_OUT,
        ),
        ToolSpec(
            "read_graph",
            "Read the entire knowledge graph",
            _obj({}),
            lambda a: _out(graph.read_graph_dict()),
            READ,
            _GRAPH_OUT,
        ),
        ToolSpec(
            "search_nodes",
            "Search for nodes in the knowledge graph based on a query",
            _obj(
                {
                    "query": "The search query to match against entity names, types, and "
                    "observation content"
                }
            ),
            lambda a: _out(graph.search_nodes(a["query"]).to_dict()),
            READ,
            _GRAPH_OUT,
        ),
        ToolSpec(
            "open_nodes",
            "Open specific nodes in the knowledge graph by their names",
            _obj({"names": _list(None, "An array of entity names to retrieve")}),
            lambda a: _out(graph.open_nodes(a["names"]).to_dict()),
            READ,
            _GRAPH_OUT,
        ),
    ]


_POSITIVE = {"type": "integer", "minimum": 1}
_ID = "The memory's id (mem_<uuid> or a path id such as projects/acme/known_issues)"
_SCOPE = _of(
    "string",
    "The project's store or the user's (when both are open; default: both for reads, the "
    "project's for writes)",
    enum=["repo", "user"],
)
_RELATIONSHIPS = ["supersedes", "refines", "contradicts", "relates-to"]
_FIELDS = {
    "title": "A one-line title",
    "category": "Category, e.g. coding-preferences, project-conventions",
    "tags": _list(None, "Tags (one line each)"),
    "related": _list(
        _obj({"id": "The related memory's id", "relationship": _of("string", enum=_RELATIONSHIPS)}),
        "Links to other memories",
    ),
    "valid_from": "When the fact began to hold in the world (RFC 3339 date or date-time)",
    "valid_until": "When it stopped holding (RFC 3339 date or date-time)",
}
_VALID_AT = (
    "Only memories valid (true in the world) at this date or date-time; default now, or at 'at'"
)
_REASON = "Why: written in the commit message"


def _fields(args: Mapping[str, Any], agent: str | None) -> dict[str, Any]:
    fields = {k: args[k] for k in _FIELDS if k in args}
    return {**fields, "agent": agent} if agent else fields


def _memory_tools(store: Store, agent: str | None) -> list[ToolSpec]:
    specs: list[ToolSpec] = []

    def tool(
        description: str, schema: dict[str, Any], hints: tuple[bool, bool, bool]
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            specs.append(ToolSpec(handler.__name__, description, schema, handler, hints))
            return handler

        return register

    @tool(
        "Store a new memory (one commit). Returns it with its new id.",
        _obj(
            {
                "content": "The memory's text (markdown)",
                **_FIELDS,
                "id": "A path id to store it at (default: a new mem_<uuid>)",
                "scope": _SCOPE,
            },
            ["content"],
        ),
        ADD,
    )
    def remember(args: dict[str, Any]) -> ToolResult:
        memory = store.create(
            args["content"], id=args.get("id"), scope=args.get("scope"), **_fields(args, agent)
        )
        from gitmem.store.duplicates import duplicates_report, duplicates_text

        similar = duplicates_report(store.reader(memory.store_scope), memory)
        data = memory.to_dict()
        text = _json(data)
        if similar:
            how = "call update_memory (or supersede_memory) with id {id}"
            text += "\n" + "\n".join(duplicates_text(similar, how=how))
        return ToolResult(text, {"memory": data, "near_duplicates": similar})

    @tool(
        "Find the memories that answer a question: ask in plain language, or give "
        "keywords, a code identifier or a path (any word may match; word forms meet; "
        "similar meaning counts). Best first, each with its best lines and why it "
        "ranked; superseded memories count for their newest version; only memories valid "
        "now (or at valid_at); 'contradictions' names hits that contradict each other. With "
        "budget (tokens), 'packed' holds the best whole memories that fit. mode 'fts' (FTS5 "
        "syntax), 'regex' or 'substring' searches instead (the same hits).",
        _obj(
            {
                "query": "The question, keywords, identifier or path",
                "mode": _of(
                    "string",
                    "natural (default): recall; others: search",
                    enum=["natural", "fts", "regex", "substring"],
                ),
                "limit": _of("integer", minimum=1, maximum=200),
                "budget": _of("integer", "Pack the best memories into this many tokens", minimum=0),
                "category": "Only this category",
                "tags": _list(None, "Only memories with all these tags"),
                "include_superseded": _BOOL,
                "valid_at": _VALID_AT,
                "scope": _SCOPE,
            },
            ["query"],
        ),
        READ,
    )
    def recall(args: dict[str, Any]) -> ToolResult:
        mode = args.get("mode", "natural")
        kept = ("scope", "category", "tags", "include_superseded", "limit", "valid_at")
        common = {"limit": 10, **{k: args[k] for k in kept if k in args}}
        if mode != "natural":
            return _out(store.search(args["query"], mode=mode, **common).to_dict())
        return _out(store.recall(args["query"], budget=args.get("budget"), **common).to_dict())

    @tool(
        "Read one memory by id, now or at a past revision or date.",
        _obj(
            {
                "id": f"{_ID}; a unique prefix of it will do",
                "at": "A git revision or a date/time",
                "valid_at": "Fail unless the memory was valid (true) at this date or date-time",
            },
            ["id"],
        ),
        READ,
    )
    def get_memory(args: dict[str, Any]) -> ToolResult:
        return _out(store.read(**args).to_dict(), "memory")

    @tool(
        "Change a memory in place (same id, version + 1; the old text stays in history).",
        _obj(
            {
                "id": _ID,
                "content": "The new text (omit to keep it)",
                **_FIELDS,
                "expected_version": _of(
                    "integer", "Fail if someone else changed the memory first", minimum=1
                ),
                "reason": _REASON,
            },
            ["id"],
        ),
        DELETE,
    )
    def update_memory(args: dict[str, Any]) -> ToolResult:
        memory = store.update(
            args["id"],
            args.get("content"),
            expected_version=args.get("expected_version"),
            message=args.get("reason"),
            **_fields(args, agent),
        )
        return _out(memory.to_dict(), "memory")

    @tool(
        "Replace a memory with a new one that says it supersedes it (the old one stays).",
        _obj(
            {"id": _ID, "content": "The replacement text", **_FIELDS, "reason": _REASON},
            ["id", "content"],
        ),
        ADD,
    )
    def supersede_memory(args: dict[str, Any]) -> ToolResult:
        fields = _fields(args, agent)
        memory = store.supersede(args["id"], args["content"], message=args.get("reason"), **fields)
        return _out(memory.to_dict(), "memory")

    @tool(
        "Delete a memory (its history stays, and gitmem restore brings it back).",
        _obj({"id": _ID, "reason": _REASON}, ["id"]),
        DELETE,
    )
    def forget(args: dict[str, Any]) -> ToolResult:
        deleted = store.delete(args["id"], agent=agent, message=args.get("reason"))
        return _out({"id": args["id"], "deleted": deleted})

    @tool(
        "Every version of a memory along its supersedes chain: commit, time, author, "
        "operation and content; the newest 'limit' (100) of 'page', and how many are "
        "'earlier' (on the next page).",
        _obj({"id": _ID, "limit": _POSITIVE, "page": _POSITIVE}, ["id"]),
        READ,
    )
    def memory_history(args: dict[str, Any]) -> ToolResult:
        return _out(store.history(**{"limit": HISTORY_PAGE, **args}).to_dict())

    @tool(
        "Which memories are fresh, aging or stale (days since updated_at, thresholds "
        "from gitmem.yaml).",
        _obj({"include_superseded": _BOOL, "include_archived": _BOOL}, []),
        READ,
    )
    def staleness_report(args: dict[str, Any]) -> ToolResult:
        from gitmem.features.lifecycle.staleness import store_staleness

        return _out(store_staleness(store, **args).to_dict())

    @tool(
        "Run the lifecycle prune rules over the layered documents (resolved known issues "
        "removed, old review history archived, ...). A dry run unless dry_run is false; a "
        "real run is one commit, and everything removed stays restorable from history.",
        _obj(
            {
                "scope": _of("string", enum=["all", "project", "skill"]),
                "project": "With scope project (or skill): the project",
                "skill": "With scope skill: the skill",
                "dry_run": _of(
                    "boolean", "Only report what would be pruned (the default)", default=True
                ),
            },
            [],
        ),
        (False, True, False),
    )
    def prune(args: dict[str, Any]) -> ToolResult:
        from gitmem.features.layered import LayeredStore, PrunePolicy

        policy = PrunePolicy(**{"dry_run": True, **args})
        return _out(LayeredStore(store, agent=agent).prune(policy).to_dict())

    return specs


def tools(store: Store, *, agent: str | None = None) -> list[ToolSpec]:
    """Every tool the server offers."""
    return _graph_tools(Graph(store, agent=agent)) + _memory_tools(store, agent)


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
    """Run a tool on the arguments its schema knows (zod drops the others): its result, or
    its error as text, and whether it failed."""
    args = dict(arguments or {})
    try:
        # Paths mix keys and list indexes, so they are compared as text.
        errors = sorted(spec.validator(args), key=lambda e: [str(p) for p in e.path])
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "arguments"
            raise InvalidInputError(
                f"invalid arguments for {spec.name}: {where}: {errors[0].message}"
            )
        known = spec.input_schema["properties"]
        return spec.handler({k: v for k, v in args.items() if k in known}), False
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

    # Change notifications both ways the SDK speaks: resources/subscribe on the initialize
    # handshake, subscriptions/listen streams on the 2026-07-28 protocol.
    bus = InMemorySubscriptionBus()
    specs = {spec.name: spec for spec in tools(store, agent=agent)}
    subscribed: set[str] = set()
    resource = types.Resource(
        name="knowledge-graph",
        title="Knowledge Graph",
        uri=RESOURCE_URI,
        description="The full knowledge graph with all entities and relations",
        mime_type="application/json",
    )

    listed = [
        types.Tool(
            name=spec.name,
            title=(title := spec.name.replace("_", " ").title()),
            description=spec.description,
            input_schema=spec.input_schema,
            output_schema=spec.output_schema,
            annotations=types.ToolAnnotations(
                title=title,
                **dict(zip(_HINTS, spec.hints, strict=True)),
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
        if not failed and not spec.hints[0]:
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
        return types.ListResourcesResult(resources=[resource])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if str(params.uri) != RESOURCE_URI:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {params.uri}")
        text = specs["read_graph"].handler({}).text
        json_text = types.TextResourceContents(
            uri=RESOURCE_URI, mime_type=resource.mime_type, text=text
        )
        return types.ReadResourceResult(contents=[json_text])

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
        "gitmem",
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


HTTP_PATH = "/mcp"


def parse_bind(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` as (host, port); a bare port binds 127.0.0.1."""
    host, _, port = text.rpartition(":")
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


def run_http(store: Store, *, host: str, port: int, token: str, agent: str | None = None) -> None:
    """Serve ``store`` over the SDK's streamable HTTP transport at /mcp until interrupted. Only
    requests carrying ``Authorization: Bearer <token>`` (compared in constant time) reach the
    server; others get 401."""
    import uvicorn
    from starlette.responses import JSONResponse

    app = build_server(store, agent=agent).streamable_http_app(
        streamable_http_path=HTTP_PATH, host=host
    )
    expected = f"Bearer {token}".encode()
    refusal = JSONResponse(
        {"error": "unauthorized"}, 401, {"WWW-Authenticate": 'Bearer realm="gitmem"'}
    )

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        given = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
        if scope["type"] == "http" and (
            len(given) != 1 or not hmac.compare_digest(given[0], expected)
        ):
            return await refusal(scope, receive, send)
        await app(scope, receive, send)

    config = uvicorn.Config(guarded, host=host, port=port, log_level="warning")
    uvicorn.Server(config).run()
