"""Differential test: ``gitmem mcp`` against the reference server it replaces.

Random call sequences (fixed seeds) go to both servers over stdio with the official
MCP client: ``gitmem --store S mcp`` and the npm package
``@modelcontextprotocol/server-memory`` run by node. After every call the results
(error or not, structured content) and then ``read_graph`` are compared.

Known differences the generator steers around, listed in docs/integrations.md: a
name repeated inside one ``create_entities`` call (the reference stores it twice) and
an observation repeated inside one ``add_observations`` item (likewise). Relations are
compared as multisets: gitmem lists them grouped by the file of their source entity,
the reference in the order they were made.

The reference is looked for at ``$GITMEM_REFERENCE_SERVER_MEMORY`` (its ``dist/index.js``)
or in the benchmark's npm cache (``~/.cache/gitmem-bench/server-memory``, which
``python -m bench --only mcp-graph`` fills); without node or the package the test is
skipped, saying which is missing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client, StdioServerParameters

import gitmem

_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
_ENTRY = Path(
    os.environ.get("GITMEM_REFERENCE_SERVER_MEMORY")
    or _CACHE / "gitmem-bench/server-memory/node_modules/@modelcontextprotocol/server-memory"
    "/dist/index.js"
)

NAMES = ["Alice", "alice", "Bob", "Zoë", "Карл", "a b", "Acme Corp", "x.md", "-dash"]
TYPES = ["person", "Person", "org", "ΣΑΣ"]
TEXTS = ["likes tea", "Works at ACME", "two\nlines", " padded ", "", "ünïcode", '"quoted"',
         "- dash", "tea"]  # fmt: skip
KINDS = ["knows", "works_at", "Knows"]
QUERIES = ["", "a", "AL", "tea", "acme", "person", "\u03c3", "\n", "zz", "o", "lines"]


def _reference() -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: the reference server cannot run")
    if not _ENTRY.exists():
        pytest.skip(
            f"the reference server is not installed at {_ENTRY} (npm install "
            "@modelcontextprotocol/server-memory, or set GITMEM_REFERENCE_SERVER_MEMORY)"
        )
    return _ENTRY


def _call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    def names(low: int = 1, high: int = 3) -> list[str]:
        return rng.sample(NAMES, rng.randint(low, high))

    def texts() -> list[str]:
        return rng.sample(TEXTS, rng.randint(0, 2))

    def relation() -> dict[str, str]:
        return {"from": rng.choice(NAMES), "to": rng.choice(NAMES),
                "relationType": rng.choice(KINDS)}  # fmt: skip

    kind = rng.choice(
        ["create_entities"] * 4 + ["create_relations"] * 3 + ["add_observations"] * 3
        + ["delete_entities", "delete_observations", "delete_relations", "search_nodes",
           "search_nodes", "open_nodes", "read_graph"]
    )  # fmt: skip
    if kind == "create_entities":
        return kind, {"entities": [{"name": n, "entityType": rng.choice(TYPES),
                                    "observations": texts()} for n in names()]}  # fmt: skip
    if kind == "create_relations":
        return kind, {"relations": [relation() for _ in range(rng.randint(1, 3))]}
    if kind == "add_observations":
        return kind, {"observations": [{"entityName": n, "contents": texts()}
                                       for n in names(1, 2)]}  # fmt: skip
    if kind == "delete_entities":
        return kind, {"entityNames": names(1, 2)}
    if kind == "delete_observations":
        return kind, {"deletions": [{"entityName": n, "observations": texts()}
                                    for n in names(1, 2)]}  # fmt: skip
    if kind == "delete_relations":
        return kind, {"relations": [relation() for _ in range(rng.randint(1, 2))]}
    if kind == "search_nodes":
        return kind, {"query": rng.choice(QUERIES)}
    if kind == "open_nodes":
        return kind, {"names": names(0, 3)}
    return kind, {}


def _normal(value: Any) -> Any:
    """Structured content with relations as a sorted multiset (see the module docstring)."""
    if isinstance(value, dict):
        out = dict(value)
        if isinstance(out.get("relations"), list):
            out["relations"] = sorted(out["relations"], key=lambda r: json.dumps(r, sort_keys=True))
        return out
    return value


def _outcome(result: Any) -> tuple[bool, Any]:
    if result.is_error:
        text = result.content[0].text if result.content else ""
        # Both name the entity; the reference's text carries the SDK's prefix.
        return True, "not found" in text
    return False, _normal(result.structured_content)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow),
                                  pytest.param(3, marks=pytest.mark.slow)])
def test_random_call_sequences_agree_with_the_reference(tmp_path: Path, seed: int) -> None:
    entry = _reference()
    store = gitmem.init(tmp_path / "store.git", bare=True)
    mine = StdioServerParameters(
        command=sys.executable, args=["-m", "gitmem", "--store", str(store.path), "mcp"]
    )
    theirs = StdioServerParameters(
        command="node",
        args=[str(entry)],
        env={**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
    )
    rng = random.Random(seed)
    calls = [_call(rng) for _ in range(40)]

    async def main() -> None:
        async with (
            Client(mine, read_timeout_seconds=60) as ours,
            Client(theirs, read_timeout_seconds=60) as ref,
        ):
            for step, (tool, args) in enumerate(calls):
                got = _outcome(await ours.call_tool(tool, args))
                want = _outcome(await ref.call_tool(tool, args))
                assert got == want, f"step {step}: {tool} {args}"
                graph_ours = _outcome(await ours.call_tool("read_graph", {}))
                graph_ref = _outcome(await ref.call_tool("read_graph", {}))
                assert graph_ours == graph_ref, f"read_graph after step {step}: {tool} {args}"

    anyio.run(main)
