"""The MCP tools' result text: JSON.stringify(value, null, 2), as the reference server
writes it, but for the characters JSON leaves raw that are not printable, which are escaped."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gitmem.base.printable import printable_json
from gitmem.entry.mcp import _json


@given(st.text())
def test_the_escapes_keep_the_value_and_leave_nothing_unprintable(value: str) -> None:
    text = printable_json(json.dumps({"k": [value]}, indent=2, ensure_ascii=False))
    assert json.loads(text) == {"k": [value]}
    assert all(line.isprintable() for line in text.split("\n"))


def test_a_graph_result() -> None:
    graph = {
        "entities": [
            {"type": "entity", "name": 'Ann "the" \u00e9\\', "entityType": "person",
             "observations": ["likes tea\n", "\u2028"]},
            {"type": "entity", "name": "B", "entityType": "x", "observations": []},
        ],
        "relations": [],
    }
    text = json.dumps(graph, indent=2, ensure_ascii=False)
    assert _json(graph) == text.replace("\u2028", "\\u2028")  # escaped: not printable
    assert json.loads(_json(graph)) == graph
