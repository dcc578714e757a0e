"""The MCP tools' result text: JSON.stringify(value, null, 2), as the reference server
writes it, made by gitmem.entry.mcp._json; it must equal json.dumps(indent=2) exactly."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gitmem.entry.mcp import _json

_SCALARS = st.one_of(
    st.text(),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers(), st.booleans()), inner,
                        max_size=4),
    ),
    max_leaves=25,
)


@given(_VALUES)
def test_same_text_as_json_dumps_with_an_indent(value: Any) -> None:
    assert _json(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_a_graph_result() -> None:
    graph = {
        "entities": [
            {"type": "entity", "name": 'Ann "the" \u00e9\\', "entityType": "person",
             "observations": ["likes tea\n", "\u2028"]},
            {"type": "entity", "name": "B", "entityType": "x", "observations": []},
        ],
        "relations": [],
    }
    assert _json(graph) == json.dumps(graph, indent=2, ensure_ascii=False)
