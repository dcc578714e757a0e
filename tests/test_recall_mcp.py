"""The MCP ``recall`` tool through the SDK's real stdio client: the same ids as Store.recall."""

from __future__ import annotations

import pytest

from gitmem import FixedClock, Store

pytest.importorskip("mcp")

from mcp import Client

from tests.test_mcp import ok, serve
from tests.test_recall import fill

QUERIES = [
    "how do we deploy to staging?",
    "deploying",
    "test fixtures",
    "where do fixtures live",
    "sample_user",
    "HttpRequestParser",
    'NEAR("oops',
    "größe",
]


@pytest.mark.slow
def test_mcp_recall_returns_store_recalls_ids(store: Store, clock: FixedClock) -> None:
    fill(store, clock)
    expected = {q: store.recall(q, limit=5).ids for q in QUERIES}
    packed = store.recall("deploy staging", budget=40).to_dict()["packed"]
    got: dict[str, list[str]] = {}
    budget: list[dict[str, object]] = []

    async def body(client: Client) -> None:
        for query in QUERIES:
            result = await ok(client, "recall", {"query": query, "limit": 5})
            assert result.structured_content is not None
            got[query] = [h["id"] for h in result.structured_content["hits"]]
            assert all(h["why"] for h in result.structured_content["hits"])
        result = await ok(client, "recall", {"query": "deploy staging", "budget": 40})
        assert result.structured_content is not None
        budget.extend(result.structured_content["packed"])
        grep = await ok(client, "recall", {"query": "sample_\\w+", "mode": "regex"})
        assert grep.structured_content is not None and grep.structured_content["hits"]

    serve(store.path, body)
    assert got == expected
    assert all(expected[q] for q in QUERIES if q != 'NEAR("oops')
    assert budget == packed and budget
