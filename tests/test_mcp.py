"""``gitmem mcp`` driven by the MCP SDK's own client over stdio, as a real client would.

Each test starts ``python -m gitmem --store S mcp`` as a subprocess (the SDK
takes ~2 s to import, so each test does a whole session's worth of calls).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import gitmem
from gitmem import Store
from gitmem.features.graph import Graph
from tests.storetools import commit_count, entity
from tests.test_schema import unknown_keywords

pytest.importorskip("mcp")

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

GRAPH_TOOLS = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]
OWN_TOOLS = [
    "remember",
    "recall",
    "get_memory",
    "update_memory",
    "supersede_memory",
    "forget",
    "memory_history",
    "staleness_report",
    "prune",
]


def serve(
    store_path: Path,
    body: Callable[[Client], Awaitable[None]],
    *,
    mode: str = "auto",
    on_message: Any = None,
    store_after: bool = False,
) -> None:
    where = (
        ["mcp", "--store", str(store_path)] if store_after else ["--store", str(store_path), "mcp"]
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gitmem", *where, "--agent", "claude"]
    )

    async def main() -> None:
        async with Client(
            params, mode=mode, read_timeout_seconds=60, message_handler=on_message
        ) as client:
            await body(client)

    anyio.run(main)


async def ok(client: Client, tool: str, args: dict[str, Any]) -> types.CallToolResult:
    result = await client.call_tool(tool, args)
    assert isinstance(result, types.CallToolResult)
    assert not result.is_error, result.content
    return result


async def fails(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert isinstance(result, types.CallToolResult)
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def text_json(result: types.CallToolResult) -> Any:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


def test_tools_are_the_reference_servers_plus_gitmems_with_truthful_annotations(
    store: Store,
) -> None:
    async def body(client: Client) -> None:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert list(listed) == GRAPH_TOOLS + OWN_TOOLS
        # gitmem's schema checker validates the arguments: no keyword it would skip.
        assert [n for n, t in listed.items() if unknown_keywords(t.input_schema)] == []
        entities = listed["create_entities"].input_schema
        assert entities["required"] == ["entities"]
        item = entities["properties"]["entities"]["items"]
        assert item["required"] == ["name", "entityType", "observations"]
        assert item["properties"]["name"]["description"] == "The name of the entity"
        relation = listed["create_relations"].input_schema["properties"]["relations"]["items"]
        assert set(relation["properties"]) == {"from", "to", "relationType"}
        assert listed["add_observations"].input_schema["properties"]["observations"]["items"][
            "required"
        ] == ["entityName", "contents"]
        assert listed["delete_entities"].input_schema["required"] == ["entityNames"]
        assert listed["delete_observations"].input_schema["required"] == ["deletions"]
        assert listed["search_nodes"].input_schema["required"] == ["query"]
        assert listed["open_nodes"].input_schema["required"] == ["names"]
        assert listed["read_graph"].input_schema["properties"] == {}
        hints = {
            name: (
                t.annotations.read_only_hint,
                t.annotations.destructive_hint,
                t.annotations.idempotent_hint,
            )
            for name, t in listed.items()
            if t.annotations is not None
        }
        assert len(hints) == len(listed)
        read, add, delete = (True, False, True), (False, False, False), (False, True, True)
        assert hints == {
            "create_entities": add,
            "create_relations": add,
            "add_observations": add,
            "delete_entities": delete,
            "delete_observations": delete,
            "delete_relations": delete,
            "read_graph": read,
            "search_nodes": read,
            "open_nodes": read,
            "remember": add,
            "recall": read,
            "get_memory": read,
            "update_memory": (False, True, True),
            "supersede_memory": add,
            "forget": delete,
            "memory_history": read,
            "staleness_report": read,
            "prune": (False, True, False),
        }
        resources = (await client.list_resources()).resources
        assert [(r.name, r.uri, r.mime_type) for r in resources] == [
            ("knowledge-graph", "memory://knowledge-graph", "application/json")
        ]

    serve(store.path, body)


@pytest.mark.slow
def test_knowledge_graph_tools_match_the_reference_results(store: Store) -> None:
    before = commit_count(store)

    async def body(client: Client) -> None:
        alice = {"name": "Alice", "entityType": "person", "observations": ["works at Acme Corp"]}
        bob = {"name": "Bob", "entityType": "person", "observations": []}
        result = await ok(client, "create_entities", {"entities": [alice, bob]})
        assert result.structured_content == {"entities": [alice, bob]}
        assert text_json(result) == [alice, bob]
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        assert block.text == json.dumps([alice, bob], indent=2)
        again = await ok(client, "create_entities", {"entities": [alice]})
        assert again.structured_content == {"entities": []}

        knows = {"from": "Alice", "to": "Bob", "relationType": "knows"}
        result = await ok(client, "create_relations", {"relations": [knows]})
        assert result.structured_content == {"relations": [knows]}
        added = await ok(
            client,
            "add_observations",
            {"observations": [{"entityName": "Alice", "contents": ["likes coffee"]}]},
        )
        assert added.structured_content == {
            "results": [{"entityName": "Alice", "addedObservations": ["likes coffee"]}]
        }
        message = await fails(
            client,
            "add_observations",
            {"observations": [{"entityName": "Nobody", "contents": ["x"]}]},
        )
        assert message == "Entity with name Nobody not found"

        found = await ok(client, "search_nodes", {"query": "COFFEE"})
        assert found.structured_content == {
            "entities": [
                {
                    "name": "Alice",
                    "entityType": "person",
                    "observations": ["works at Acme Corp", "likes coffee"],
                }
            ],
            "relations": [knows],
        }
        opened = await ok(client, "open_nodes", {"names": ["Bob"]})
        assert opened.structured_content == {"entities": [bob], "relations": [knows]}

        resource = await client.read_resource("memory://knowledge-graph")
        content = resource.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert content.mime_type == "application/json"
        full = await ok(client, "read_graph", {})
        assert json.loads(content.text) == full.structured_content == text_json(full)

        deleted = await ok(
            client,
            "delete_observations",
            {"deletions": [{"entityName": "Alice", "observations": ["likes coffee"]}]},
        )
        assert deleted.structured_content == {
            "success": True,
            "message": "Observations deleted successfully",
        }
        await ok(client, "delete_relations", {"relations": [knows]})
        result = await ok(client, "delete_entities", {"entityNames": ["Bob", "Nobody"]})
        block = result.content[0]
        assert (
            isinstance(block, types.TextContent) and block.text == "Entities deleted successfully"
        )
        final = await ok(client, "read_graph", {})
        assert final.structured_content == {
            "entities": [
                {"name": "Alice", "entityType": "person", "observations": ["works at Acme Corp"]}
            ],
            "relations": [],
        }

        # Bad calls are error results, and the server keeps serving.
        assert "entities" in await fails(client, "create_entities", {"entities": "Alice"})
        assert "observations" in await fails(
            client, "create_entities", {"entities": [{"name": "x", "entityType": "t"}]}
        )
        assert "unknown tool" in await fails(client, "no_such_tool", {})
        assert (await ok(client, "read_graph", {})).structured_content == final.structured_content

    serve(store.path, body)
    # One commit per successful mutation: create, create relation, observe, and three deletes.
    assert commit_count(store) == before + 6
    assert {e.agent for e in store.log() if e.ops != ["init"]} == {"claude"}
    alice = entity(Graph(store), "Alice")
    assert alice is not None and alice.observations == ("works at Acme Corp",)


@pytest.mark.slow
def test_gitmem_memory_tools(store: Store) -> None:
    async def body(client: Client) -> None:
        made = await ok(
            client,
            "remember",
            {
                "content": "Fixtures live in conftest.py",
                "title": "Pytest fixtures",
                "tags": ["testing"],
            },
        )
        assert made.structured_content is not None
        memory = made.structured_content["memory"]
        mid = memory["id"]
        assert mid.startswith("mem_") and memory["version"] == 1 and memory["agent"] == "claude"

        found = await ok(client, "recall", {"query": "fixtures"})
        assert found.structured_content is not None
        assert [m["id"] for m in found.structured_content["hits"]] == [mid]

        got = await ok(client, "get_memory", {"id": mid})
        assert got.structured_content is not None
        assert got.structured_content["memory"]["body"] == "Fixtures live in conftest.py"

        updated = await ok(
            client,
            "update_memory",
            {"id": mid, "content": "Fixtures: tests/conftest.py", "expected_version": 1},
        )
        assert updated.structured_content is not None
        assert updated.structured_content["memory"]["version"] == 2
        conflict = await fails(
            client, "update_memory", {"id": mid, "content": "lost", "expected_version": 1}
        )
        assert "version" in conflict

        newer = await ok(client, "supersede_memory", {"id": mid, "content": "Use fixtures, always"})
        assert newer.structured_content is not None
        new_id = newer.structured_content["memory"]["id"]
        assert newer.structured_content["memory"]["supersedes"] == mid

        history = await ok(client, "memory_history", {"id": new_id})
        assert history.structured_content is not None
        versions = history.structured_content["versions"]
        assert [v["version"] for v in versions] == [1, 2, 1]  # the successor is a new memory

        report = await ok(client, "staleness_report", {})
        assert report.structured_content is not None
        assert report.structured_content["counts"] == {"fresh": 1, "aging": 0, "stale": 0}

        gone = await ok(client, "forget", {"id": new_id, "reason": "obsolete"})
        assert gone.structured_content == {"id": new_id, "deleted": True}
        again = await ok(client, "forget", {"id": new_id})
        assert again.structured_content == {"id": new_id, "deleted": False}
        assert "no memory" in await fails(client, "get_memory", {"id": new_id})
        assert "path separator" in await fails(client, "get_memory", {"id": "../../etc/passwd"})
        assert "required" in await fails(client, "remember", {})

        # prune: the layered store's rules, a dry run unless asked.
        issues = (
            "# Known issues\n\n### Crash on start\n**Status**: Resolved 2026-01-01\n\n"
            "### Slow search\n**Status**: In Progress\n"
        )
        await ok(client, "remember", {"content": issues, "id": "projects/acme/known_issues"})
        dry = await ok(client, "prune", {})
        assert dry.structured_content is not None
        assert dry.structured_content["dryRun"] is True and dry.structured_content["commit"] is None
        assert [p["id"] for p in dry.structured_content["pruned"]] == ["projects/acme/known_issues"]
        real = await ok(client, "prune", {"scope": "project", "project": "acme", "dry_run": False})
        assert real.structured_content is not None and real.structured_content["commit"]
        assert real.structured_content["pruned"] == dry.structured_content["pruned"]
        assert "needs a project" in await fails(client, "prune", {"scope": "project"})

    serve(store.path, body)
    ops = sorted(op for e in store.log() for op in e.ops)
    assert ops == ["create", "create", "delete", "init", "supersede", "update", "update"]
    # The superseding memory is gone, so the one it replaced is current again.
    assert [m.body for m in store.list() if m.id.startswith("mem_")] == [
        "Fixtures: tests/conftest.py"
    ]
    assert "Crash on start" not in store.read("projects/acme/known_issues").body


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
def test_legacy_handshake_and_resource_subscription(tmp_path: Path) -> None:
    """Clients on the initialize handshake (most desktop clients today) get the same tools,
    and a subscriber to memory://knowledge-graph hears about every change. (This one starts
    the server as `gitmem mcp --store PATH`, the other spelling.)"""
    store = gitmem.init(tmp_path / "store")
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async def body(client: Client) -> None:
        assert client.protocol_version != "2026-07-28"
        await client.subscribe_resource("memory://knowledge-graph")
        await ok(
            client,
            "create_entities",
            {"entities": [{"name": "A", "entityType": "t", "observations": []}]},
        )
        await ok(client, "read_graph", {})
        with anyio.fail_after(30):
            while not updates:
                await anyio.sleep(0.05)

    serve(store.path, body, mode="legacy", on_message=on_message, store_after=True)
    assert updates == ["memory://knowledge-graph"]
    assert entity(Graph(store), "A") is not None


@pytest.mark.slow
def test_listen_stream_on_the_current_protocol(tmp_path: Path) -> None:
    """On the 2026-07-28 protocol a client listens with subscriptions/listen instead."""
    store = gitmem.init(tmp_path / "store")
    events: list[str] = []

    async def body(client: Client) -> None:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=["memory://knowledge-graph"]) as sub:
            assert list(sub.honored.resource_subscriptions or []) == ["memory://knowledge-graph"]
            await ok(
                client,
                "create_entities",
                {"entities": [{"name": "A", "entityType": "t", "observations": []}]},
            )
            with anyio.fail_after(30):
                async for event in sub:
                    events.append(str(getattr(event, "uri", event)))
                    break

    serve(store.path, body)
    assert events == ["memory://knowledge-graph"]


def test_tool_layer_without_a_transport(store: Store) -> None:
    """The specs the server serves, called directly: extra keys are dropped as zod drops them,
    and a bug in a handler is an error result, not an exception."""
    import dataclasses

    from gitmem.entry.mcp import ToolResult, call, tools

    specs = {spec.name: spec for spec in tools(store)}
    result, failed = call(
        specs["create_entities"],
        {"entities": [{"name": "A", "entityType": "t", "observations": [], "x": 1}], "y": 2},
    )
    assert not failed and result.structured == {
        "entities": [{"name": "A", "entityType": "t", "observations": []}]
    }
    assert specs["create_entities"].input_schema["additionalProperties"] is False

    def broken(args: dict[str, Any]) -> ToolResult:
        raise RuntimeError("boom")

    buggy = dataclasses.replace(specs["read_graph"], name="buggy", handler=broken)
    result, failed = call(buggy, {})
    assert failed and result.text == "internal error in buggy: RuntimeError: boom"


@pytest.mark.slow
def test_first_use_creates_the_store_and_the_help_config_works(
    tmp_path: Path, isolated_home: Path
) -> None:
    """The client configuration `gitmem mcp --help` shows, on a machine with no store yet
    and no git identity: the server creates the store at --store PATH (saying so on
    stderr, never on stdout, which is the protocol's) and serves the graph tools."""
    import os
    import re
    import subprocess

    (isolated_home / ".gitconfig").unlink()  # a fresh machine: no git user either
    help_text = subprocess.run(
        [sys.executable, "-m", "gitmem", "mcp", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    config = json.loads(re.search(r"\{\"mcpServers\".*\}\}\}", help_text, re.S).group(0))  # type: ignore[union-attr]
    server = config["mcpServers"]["memory"]
    assert server["command"] == "gitmem"
    fresh = tmp_path / "nothing-here" / ".gitmem"
    args = [fresh.as_posix() if a == "/home/me/.gitmem" else a for a in server["args"]]
    assert fresh.as_posix() in args

    # The server's stderr: one line saying where the store was made.
    quiet = tmp_path / "quiet" / ".gitmem"
    probe = [quiet.as_posix() if a == fresh.as_posix() else a for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "gitmem", *probe],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert f"gitmem: created a new store at {quiet}" in done.stderr

    params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", *args])

    async def main_() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            await ok(
                client,
                "create_entities",
                {"entities": [{"name": "Ada", "entityType": "person", "observations": ["x"]}]},
            )
            result = await ok(client, "search_nodes", {"query": "ADA"})
            assert result.structured_content == {
                "entities": [{"name": "Ada", "entityType": "person", "observations": ["x"]}],
                "relations": [],
            }

    anyio.run(main_)
    assert entity(Graph(gitmem.open(fresh)), "Ada") is not None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_streamable_http_with_a_bearer_token(tmp_path: Path) -> None:
    """`gitmem mcp --http PORT`: bound to 127.0.0.1, the SDK's streamable HTTP client with
    the token works (two agents, one store); without it, or with another, the server says
    401 and nothing is written. The token comes from the user's state directory."""
    import os
    import socket
    import subprocess
    import time

    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from gitmem.entry import tokens

    store = gitmem.init(tmp_path / "store.git", bare=True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != tokens.TOKEN_ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitmem", "--store", str(store.path), "mcp", "--http", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the HTTP server did not start"
            time.sleep(0.2)
        token_file = tokens.token_path(store)
        assert token_file.stat().st_mode & 0o077 == 0
        assert store.db().gitdir not in token_file.parents
        token = token_file.read_text().strip()
        url = f"http://127.0.0.1:{port}/mcp"

        async def agent(name: str) -> None:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await ok(
                    client,
                    "create_entities",
                    {"entities": [{"name": name, "entityType": "agent", "observations": []}]},
                )

        async def both() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent, "first")
                tg.start_soon(agent, "second")

        anyio.run(both)
        names = {e.name for e in Graph(gitmem.open(store.path)).read_graph().entities}
        assert names == {"first", "second"}

        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream"}
        for auth in ({}, {"Authorization": "Bearer wrong-token-wrong-token"},
                     {"Authorization": token}):  # fmt: skip
            response = httpx2.post(url, json=body, headers={**headers, **auth}, timeout=30)
            assert response.status_code == 401
            assert token not in response.text
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}/mcp" in err.decode()
    assert token not in err.decode()


def test_a_token_committed_in_the_store_is_never_the_bearer_token(
    tmp_path: Path, isolated_home: Path
) -> None:
    """Issue 38: a bare store committed in a project carries its ``gitmem/`` folder, and a
    committed ``gitmem/mcp-token`` (mode 0644) became the HTTP server's bearer token, so
    whoever wrote it read and wrote the victim's memories. The token is made in the user's
    state directory (0600) instead, and a token file others can read is refused."""
    from gitmem.base.errors import StoreError
    from gitmem.entry import tokens

    store = gitmem.init(tmp_path / "project" / ".gitmem", bare=True)
    planted = store.db().gitdir / "gitmem" / "mcp-token"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text("attacker-chose-this-token-0123456789\n")
    planted.chmod(0o644)
    token, where = tokens.http_token(store)
    assert token != "attacker-chose-this-token-0123456789"
    assert where == tokens.token_path(store)
    assert isolated_home in where.parents and store.db().gitdir not in where.parents
    assert where.stat().st_mode & 0o777 == 0o600
    assert tokens.http_token(store) == (token, where)  # kept for the next start

    where.chmod(0o644)
    with pytest.raises(StoreError, match="can be read by others"):
        tokens.http_token(store)
    where.unlink()
    where.symlink_to(planted)
    with pytest.raises(StoreError, match="cannot read the token file"):
        tokens.http_token(store)


@pytest.mark.parametrize(
    ("text", "bound"),
    [("8765", ("127.0.0.1", 8765)), ("0.0.0.0:80", ("0.0.0.0", 80)),
     ("[::1]:9000", ("::1", 9000)), ("localhost:1", ("localhost", 1))],
)  # fmt: skip
def test_http_bind_addresses(text: str, bound: tuple[str, int]) -> None:
    from gitmem.entry import mcp as mcp_server

    assert mcp_server.parse_bind(text) == bound


@pytest.mark.parametrize("text", ["", "host:", "example.com:80", "1:0", "1:65536", "x"])
def test_bad_http_bind_addresses_are_one_clear_error(text: str) -> None:
    from gitmem import InvalidInputError
    from gitmem.entry import mcp as mcp_server

    with pytest.raises(InvalidInputError, match="--http"):
        mcp_server.parse_bind(text)
