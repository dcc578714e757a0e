"""The knowledge-graph tools over MCP stdio, beside the reference server they replace.

``mcp-graph``: both servers are driven by the official Python MCP client over stdio, in
the same run, alternating phases: ``gitmem --store S mcp`` on a bare store, and the npm
package ``@modelcontextprotocol/server-memory`` (one JSONL file), which the benchmark
installs into a cache directory with npm when node is on the machine (``GITMEM_BENCH_NPM``
names another directory holding it). Each server gets ``create_entities`` calls of one
entity each (with one observation and, from the second on, a relation to an earlier
entity every tenth call) up to the size; the rate of the last block of calls is the
figure (the cost at that size, not the average over the way there). Then
``search_nodes`` (queries that match a few entities), ``open_nodes`` (two names) and
``read_graph`` of the whole graph, timed per call.

The size is ``--graph-size`` (10k in the full preset). The reference rewrites its whole
file on every call, so its create rate falls with the size: at 10k a run takes minutes.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gitmem
from bench.fixtures import Context
from bench.harness import Row, log, ms, scenario, size_label

PACKAGE = "@modelcontextprotocol/server-memory"


def npm_dir() -> Path:
    """Where the reference server is (or gets) installed."""
    env = os.environ.get("GITMEM_BENCH_NPM")
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "gitmem-bench" / "server-memory"


def reference_entry(install: bool = True) -> Path | None:
    """The reference server's script, installed with npm if missing; None without node."""
    if shutil.which("node") is None:
        return None
    root = npm_dir()
    entry = root / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if entry.exists() or not install or shutil.which("npm") is None:
        return entry if entry.exists() else None
    root.mkdir(parents=True, exist_ok=True)
    log(f"installing {PACKAGE} into {root} with npm")
    subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(root), PACKAGE],
        check=False,
        capture_output=True,
        timeout=300,
    )
    return entry if entry.exists() else None


def _needs_mcp() -> str | None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return "the mcp extra is not installed"
    return None


def _entity(i: int) -> dict[str, Any]:
    return {
        "name": f"entity-{i:06d}",
        "entityType": ("person", "project", "place", "idea")[i % 4],
        "observations": [f"observation {i} about topic-{i % 97} and word{i % 13}"],
    }


def drive(
    params: Any, size: int, block: int, queries: int, seed: int
) -> dict[str, Any]:
    """One server's session: creates up to ``size``, then timed reads. Returns timings."""
    import anyio
    from mcp import Client

    out: dict[str, Any] = {}

    async def call(client: Any, tool: str, args: dict[str, Any]) -> Any:
        result = await client.call_tool(tool, args)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")
        return result

    async def body(client: Any) -> None:
        started = time.perf_counter()
        marks: list[tuple[int, float]] = [(0, started)]
        for i in range(size):
            await call(client, "create_entities", {"entities": [_entity(i)]})
            if i and i % 10 == 0:
                rel = {"from": f"entity-{i:06d}", "to": f"entity-{i // 2:06d}",
                       "relationType": "knows"}  # fmt: skip
                await call(client, "create_relations", {"relations": [rel]})
            if (i + 1) % block == 0 or i + 1 == size:
                marks.append((i + 1, time.perf_counter()))
                if (i + 1) % (block * 10) == 0:
                    log(f"  {i + 1} entities, {block / (marks[-1][1] - marks[-2][1]):.0f}/s")
        (n0, t0), (n1, t1) = marks[-2], marks[-1]
        out["create_last_rate"] = (n1 - n0) / (t1 - t0)
        out["create_rate"] = size / (marks[-1][1] - started)
        rng = random.Random(seed)
        timings: dict[str, list[float]] = {"search": [], "open": [], "read": []}
        for _ in range(queries):
            word = f"topic-{rng.randrange(97)} "
            t = time.perf_counter()
            await call(client, "search_nodes", {"query": word.strip() + " and"})
            timings["search"].append(time.perf_counter() - t)
            names = [f"entity-{rng.randrange(size):06d}" for _ in range(2)]
            t = time.perf_counter()
            await call(client, "open_nodes", {"names": names})
            timings["open"].append(time.perf_counter() - t)
        for _ in range(max(3, queries // 10)):
            t = time.perf_counter()
            await call(client, "read_graph", {})
            timings["read"].append(time.perf_counter() - t)
        for key, values in timings.items():
            out[key] = statistics.median(values)

    async def main() -> None:
        async with Client(params, read_timeout_seconds=600) as client:
            await body(client)

    anyio.run(main)
    return out


def gitmem_params(store: Path) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable, args=["-m", "gitmem", "--store", str(store), "mcp"]
    )


def reference_params(entry: Path, memory_file: Path) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command="node", args=[str(entry)], env={**os.environ, "MEMORY_FILE_PATH": str(memory_file)}
    )


@scenario(
    "mcp-graph",
    "knowledge-graph tools over MCP stdio, beside @modelcontextprotocol/server-memory",
    requires=_needs_mcp,
)
def mcp_graph(ctx: Context) -> list[Row]:
    size = ctx.config.graph_size
    block = max(10, min(500, size // 20))
    queries = 50 if size > 100 else 10
    root = ctx.new_dir("mcp-graph")
    store = root / "store.git"
    gitmem.init(store, bare=True)
    entry = reference_entry()
    runs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("gitmem", lambda: drive(gitmem_params(store), size, block, queries, ctx.config.seed))
    ]
    if entry is not None:
        memory = root / "memory.jsonl"
        ref_params = reference_params(entry, memory)
        runs.append(
            ("reference", lambda: drive(ref_params, size, block, queries, ctx.config.seed))
        )
    else:
        log("node or the reference package is missing: gitmem's figures only")
    results: dict[str, dict[str, Any]] = {}
    for label, run in runs:
        log(f"mcp-graph: {label}, {size} entities one per call")
        results[label] = run()
    mine, ref = results["gitmem"], results.get("reference", {})
    base = f"`{PACKAGE}` (node, JSONL file)" if ref else "reference not run (no node)"
    label = f"{size_label(size)} entities"
    note = "bare store; over MCP stdio with the official Python client; both in this run"
    return [
        Row("create_entities, one entity per call: rate over the last block", label, "calls/s",
            mine["create_last_rate"], base, ref.get("create_last_rate"), runs=1,
            note=f"{block} calls per block; {note}"),
        Row("create_entities, one entity per call: cumulative rate", label, "calls/s",
            mine["create_rate"], base, ref.get("create_rate"), runs=1, note=note),
        Row("search_nodes p50 (a query matching ~1% of entities)", label, "ms",
            ms(mine["search"]), base, ms(ref["search"]) if ref else None,
            higher_is_better=False, runs=queries),
        Row("open_nodes p50 (two names)", label, "ms", ms(mine["open"]), base,
            ms(ref["open"]) if ref else None, higher_is_better=False, runs=queries),
        Row("read_graph p50 (whole graph)", label, "ms", ms(mine["read"]), base,
            ms(ref["read"]) if ref else None, higher_is_better=False,
            runs=max(3, queries // 10)),
    ]  # fmt: skip

