"""An index build's shortcuts give exactly what the plain code gave (issue 17).

A first build (a clone, ``gitmem reindex``) decodes and indexes every memory of a store;
each shortcut it takes is held here to the code it stands in for: the full-text column of
identifier parts (a look for a place to cut before the word-by-word split), the JSON
columns read back (one decoder, the empty list and map answered directly), the recent
answers of ``id_from_path`` and ``memory_path`` kept, the store's scope given to the
decoded memory directly, and a batch's tags and edges inserted in one statement each
(the tables compared with the rows stored one memory at a time, in a real build).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from storetools import TABLE_HASHES, build_with_a_broken_file
from test_codec import VALUES

from gitmem.base.errors import GitmemError
from gitmem.format import layout, memfile
from gitmem.format.model import Scope
from gitmem.store import lexical, rows
from gitmem.store.core import Store

# Text where words with parts are common: ASCII letters of both cases and digits beside
# each other, the separators unicode61 cuts at, and anything else now and then.
_IDENT_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("aBcDxyzXYZ0189_- .\n/"),
        st.characters(codec="utf-8"),
    ),
    max_size=80,
)


@given(_IDENT_TEXT)
@example("parseHTTPRequest utf8Decode CamelCase")
@example("Bench memory 60456 on worker and logging")  # digits alone: no parts
@example("ABc")  # an all-caps run before a capitalised word
@example("\u00e9aB a\u0663b")  # non-ASCII words are not split
@example("x" * 70 + "Y")  # over the identifier length: not split
@example("\ud800aB \u00e91a")  # what is not ASCII is one character apart from its neighbours
@settings(max_examples=500)
def test_identifier_parts_are_those_of_each_word(text: str) -> None:
    assert lexical.identifier_parts(text) == lexical.each_word_parts(text)


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
def test_json_columns_read_back_as_json_loads_reads_them(value: Any) -> None:
    try:
        text = rows.dumps_json(value)
    except TypeError:
        return  # not a value a row holds
    assert rows.loads_json(text) == json.loads(text, object_hook=rows.json_hook)


@pytest.mark.parametrize(
    "text",
    [
        "[]", "{}", " []", "[ ]", "\ufeff[]", "\ufeff{}", b"[]", b"{}", "", "[",
        '{"$gitmem": "date", "v": "2026-01-02"}',
    ],
)
def test_json_columns_odd_texts_read_as_json_loads_reads_them(text: Any) -> None:
    assert _json_outcome(lambda: rows.loads_json(text)) == _json_outcome(
        lambda: json.loads(text, object_hook=rows.json_hook)
    )


_PATHS = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda i: layout.format4_path(f"mem_{i}"), st.from_regex(r"[0-9a-f]{8}", fullmatch=True)
    ),
    st.builds(
        lambda i: layout.memory_path(f"mem_{i}"), st.from_regex(r"[0-9a-f]{8}", fullmatch=True)
    ),
    st.builds(lambda p: f"memories/{p}.md", st.text(max_size=20)),
    st.sampled_from(["memories/ab/c.md", "projects/acme/note.md", "notes/a/b.txt", "memories"]),
)


def _id_outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except (GitmemError, TypeError, AttributeError) as exc:
        return type(exc).__name__, str(exc)


@given(st.lists(_PATHS, max_size=8))
def test_recent_ids_of_paths_are_those_worked_out_again(paths: list[str]) -> None:
    for path in paths + paths:  # the second time from what was kept
        for past in (False, True):
            found = layout.id_from_path(path, past=past)
            assert found == layout._id_from_path.__wrapped__(path, past)
        memory_id = layout.id_from_path(path) or path
        if _id_outcome(functools.partial(layout.check_id, memory_id))[0] == "ok":
            assert layout.memory_path(memory_id) == layout._memory_path.__wrapped__(memory_id)


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


_BUILD = TABLE_HASHES + r"""
import json, sys
import gitmem
from gitmem.store import index as ix

def store_each(self, conn, decoded):
    # How a batch was stored before its tags and edges were inserted a batch at a time.
    for path, memory_id, parts in decoded:
        if memory_id is None:
            conn.execute("INSERT OR REPLACE INTO problems VALUES (?, ?)",
                         (ix.raw_path(path), ix.raw_path(str(parts))))
        else:
            ix._insert_parts(conn, parts)

ix.FILL_BATCH = 7
index = gitmem.open(sys.argv[1]).index()
def tables():
    return table_hashes(index.connect(), fts="idents:http OR idents:decode")
index.rebuild()
batched = tables()
ix.Index._store_decoded = store_each
index.rebuild()
print(json.dumps({"batched": batched, "each": tables()}))
"""


def test_a_build_stores_the_rows_one_memory_at_a_time_would(store: Store, tmp_path: Path) -> None:
    made = []
    for n in range(40):
        made.append(
            store.create(
                f"memory {n}: parseHTTPRequest and utf8Decode" if n % 3 else f"memory {n}",
                tags=[f"t{n % 4}", "ci"] if n % 2 else [],
                related=[{"id": made[-1].id, "relationship": "relates-to"}] if made else [],
            )
        )
    store.supersede(made[5].id, "its successor")
    # The same id where format 4 put it too: not a memory path, a problem row.
    twin = made[7]
    assert twin.path is not None
    data = (store.path / twin.path).read_text().replace("tags: [", "tags: [other, ")
    old = store.path / str(layout.format4_path(twin.id))
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text(data)
    result = build_with_a_broken_file(store, tmp_path, _BUILD)
    assert result["batched"] == result["each"]
    assert result["each"]["memories"].endswith(" 41")
    assert result["each"]["problems"].endswith(" 2")
    assert not result["each"]["tags"].endswith(" 0")
    assert not result["each"]["edges"].endswith(" 0")
    assert result["each"]["fts"]  # identifier parts indexed


_BOUNDED = TABLE_HASHES + r"""
import json, pathlib, subprocess, sys
import pygit2
import gitmem
from gitmem.store import index as ix

events = []
original_versions = ix.Index._apply_versions
def versions(self, *args, **kwargs):
    events.append(("versions", pygit2.settings.cached_memory[1]))
    return original_versions(self, *args, **kwargs)
ix.Index._apply_versions = versions
original_fill = ix.Index._fill_empty
def fill(self, *args, **kwargs):
    events.append(("fill", pygit2.settings.cached_memory[1]))
    return original_fill(self, *args, **kwargs)
ix.Index._fill_empty = fill

ix.FILL_BATCH = 7
index = gitmem.open(sys.argv[1]).index()
def tables():
    return table_hashes(index.connect(), also=("commits",), fts="deploys")
cache_before = pygit2.settings.cached_memory[1]
index.rebuild()
alone = tables()
alone_events = list(events)
events.clear()
# Caches and pack windows far smaller than what the build reads (the pack is larger than
# the windows' limit).
subprocess.run(["git", "-C", sys.argv[1], "repack", "-a", "-d", "-q"], check=True)
ix.BUILD_GIT_CACHE = 1
ix.FILL_GIT_CACHE = 1
pygit2.settings.mwindow_size = 8192
pygit2.settings.mwindow_mapped_limit = 16384
index.rebuild()
packs = pathlib.Path(sys.argv[1], ".git", "objects", "pack")
print(json.dumps({"alone": alone, "bounded": tables(),
                  "events": events, "alone_events": alone_events,
                  "cache_before": cache_before, "cache_after": pygit2.settings.cached_memory[1],
                  "pack": max(p.stat().st_size for p in packs.glob("*.pack"))}))
"""


def test_a_first_build_bounds_libgit2s_caches(store: Store, tmp_path: Path) -> None:
    for n in range(60):
        store.create(f"memory {n} about deploys " + "words " * 40, tags=["ci"] if n % 2 else [])
    first = store.create("the first version")
    store.supersede(first.id, "its successor")
    result = build_with_a_broken_file(store, tmp_path, _BOUNDED)
    assert result["bounded"] == result["alone"]
    assert result["alone"]["memories"].endswith(" 62")
    assert result["pack"] > 16384  # more than the windows may map at once
    # libgit2's cache bounded while the version rows and the fill are written, and as it
    # was afterwards
    assert result["alone_events"] == [["versions", 64 << 20], ["fill", 8 << 20]]
    assert result["events"] == [["versions", 1], ["fill", 1]]
    assert result["cache_after"] == result["cache_before"]


def test_loading_the_index_starts_no_process() -> None:
    """The C heap's ``malloc_trim`` is looked up when a first build needs it, among the
    symbols already loaded: ``ctypes.util.find_library`` runs ``ldconfig -p``, and at
    import time it did so for every command that loads the index."""
    import platform
    import subprocess
    import sys

    script = (
        "import subprocess\n"
        "def refuse(*args, **kwargs):\n"
        "    raise AssertionError(f'a process started: {args[1:2]}')\n"
        "subprocess.Popen.__init__ = refuse\n"
        "import gitmem.store.index as index\n"
        "trim = index._libc_malloc_trim()\n"
        "print('ok', trim is not None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert done.stdout.strip() == "ok True"  # found on glibc, without a process
