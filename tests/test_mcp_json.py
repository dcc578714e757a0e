"""The MCP tools' result text: JSON.stringify(value, null, 2), as the reference server
writes it, made by gitmem.entry.mcp._json; it must equal json.dumps(indent=2) exactly, but
for the characters JSON leaves raw that are not printable, which it escapes too."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gitmem.base.printable import printable_json
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
    text = json.dumps(value, indent=2, ensure_ascii=False)
    assert _json(value) == printable_json(text)


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
