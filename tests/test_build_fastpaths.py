"""An index build's shortcuts give exactly what the plain code gave (issue 17).

A first build (a clone, ``gitmem reindex``) decodes and indexes every memory of a store;
each shortcut it takes is held here to the code it stands in for: the JSON columns read
back (one decoder, the empty list and map answered directly) and the store's scope given to
the decoded memory directly.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codec import VALUES

from gitmem.base.errors import GitmemError
from gitmem.format import layout, memfile
from gitmem.format.model import Scope
from gitmem.store import index_rows
from gitmem.store.core import Store


def _json_outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except (ValueError, TypeError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=300)
@given(
    st.one_of(
        VALUES, st.lists(st.text(max_size=5)), st.dictionaries(st.text(max_size=5), VALUES)
    )
)
@pytest.mark.slow
def test_json_columns_read_back_as_json_loads_reads_them(value: Any) -> None:
    try:
        text = index_rows.dumps_json(value)
    except TypeError:
        return  # not a value a row holds
    assert index_rows.loads_json(text) == json.loads(text, object_hook=index_rows.json_hook)


@pytest.mark.parametrize(
    "text",
    [
        "[]", "{}", " []", "[ ]", "\ufeff[]", "\ufeff{}", b"[]", b"{}", "", "[",
        '{"$gitmem": "date", "v": "2026-01-02"}',
    ],
)
def test_json_columns_odd_texts_read_as_json_loads_reads_them(text: Any) -> None:
    assert _json_outcome(lambda: index_rows.loads_json(text)) == _json_outcome(
        lambda: json.loads(text, object_hook=index_rows.json_hook)
    )


def _id_outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except (GitmemError, TypeError, AttributeError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("value", [None, 7, b"memories/ab/c.md", ["memories"]])
def test_ids_of_what_is_not_text_fail_as_they_did(value: Any) -> None:
    assert layout.id_from_path(value) is None
    assert _id_outcome(lambda: layout.memory_path(value))[0] == "InvalidIdError"


def test_a_decoded_memory_carries_the_scope_given(store: Store) -> None:
    memory = store.create("a body\n", title="t", tags=["x"])
    assert memory.path is not None
    data = (store.path / memory.path).read_bytes()
    plain = memfile.decode(data, memory.path)
    scoped = memfile.decode(data, memory.path, store_scope=Scope.USER)
    assert scoped == dataclasses.replace(plain, store_scope=Scope.USER)
    assert scoped.store_scope is Scope.USER and plain.store_scope is None
    assert [getattr(scoped, f.name) for f in dataclasses.fields(scoped)] == [
        getattr(dataclasses.replace(plain, store_scope=Scope.USER), f.name)
        for f in dataclasses.fields(scoped)
    ]
