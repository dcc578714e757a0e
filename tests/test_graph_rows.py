"""The knowledge graph served by the index equals the graph read from every entity file.

Random histories (hypothesis) of graph calls, hand edits made with the git binary
(a renamed entity, an observation typed in, a file removed), merges of a clone's
commits and deletions; after every step each read (read_graph, search_nodes for
several queries, open_nodes, entity_id) through the index is compared with the same
read on a store handle whose index is off, which walks the files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gitmem
from gitmem import Store
from gitmem.features.graph import Graph
from tests.storetools import entity, plant, run_git

NAMES = ["Alice", "alice", "Bob", "Zoë", "Карл", "a b", "ΣΑΣ", "Acme Corp"]
TYPES = ["person", "Person", "org"]
TEXTS = ["likes tea", "Works at ACME", "two\nlines", "ΣΑΣ σας", "x", "", " padded "]
QUERIES = ["", "a", "al", "ali", "ACME", "person", "tea", "σας", "o\nl", "zz", "s t", "Ë"]

name = st.sampled_from(NAMES)
text = st.sampled_from(TEXTS)
OPS = st.one_of(
    st.tuples(st.just("create"), st.lists(name, max_size=3), st.sampled_from(TYPES),
              st.lists(text, max_size=2)),
    st.tuples(st.just("relate"), name, name, st.sampled_from(["knows", "works_at"])),
    st.tuples(st.just("observe"), name, st.lists(text, min_size=1, max_size=2)),
    st.tuples(st.just("unobserve"), name, text),
    st.tuples(st.just("delete"), st.lists(name, min_size=1, max_size=2)),
    st.tuples(st.just("unrelate"), name, name, st.sampled_from(["knows", "works_at"])),
    st.tuples(st.just("hand_rename"), name, name),
    st.tuples(st.just("hand_observe"), name, st.sampled_from(["typed by hand", "ACME again"])),
    st.tuples(st.just("hand_delete"), name),
    st.tuples(st.just("merge"), name, name),
)  # fmt: skip


def _file(store: Store, graph: Graph, who: str) -> Path | None:
    doc = graph.entity_id(who)
    return None if doc is None else store.path / f"{doc}.md"


def _apply(store: Store, graph: Graph, op: tuple[Any, ...], clone: Path) -> None:
    kind = op[0]
    if kind == "create":
        graph.create_entities(
            [{"name": n, "entityType": op[2], "observations": op[3]} for n in op[1]]
        )
    elif kind == "relate":
        graph.create_relations([{"from": op[1], "to": op[2], "relationType": op[3]}])
    elif kind == "observe":
        if entity(graph, op[1]) is not None:
            graph.add_observations([{"entityName": op[1], "contents": op[2]}])
    elif kind == "unobserve":
        graph.delete_observations([{"entityName": op[1], "observations": [op[2]]}])
    elif kind == "delete":
        graph.delete_entities(op[1])
    elif kind == "unrelate":
        graph.delete_relations([{"from": op[1], "to": op[2], "relationType": op[3]}])
    elif kind in {"hand_rename", "hand_observe", "hand_delete"}:
        path = _file(store, graph, op[1])
        if path is None:
            return
        rel = str(path.relative_to(store.path))
        if kind == "hand_delete":
            run_git(store.path, "rm", "-q", "--", rel)
            run_git(store.path, "commit", "-q", "-m", "hand delete")
            return
        before = path.read_text(encoding="utf-8")
        if kind == "hand_rename":
            content = re.sub(r"(?m)^name: .*$", f"name: {_yaml(op[2])}", before, count=1)
        else:
            content = before + f"{op[2]}\n"
        if content != before:  # renaming to the same name changes nothing to commit
            plant(store, rel, content)
    elif kind == "merge":
        # A clone adds an observation by hand while the store creates an entity; the
        # store's work tree then merges the clone's commit (a merge commit, two parents).
        run_git(clone, "pull", "-q", "--no-rebase", "origin", "main")
        path = _file(store, graph, op[1])
        if path is not None:
            rel = str(path.relative_to(store.path))
            theirs = clone / rel
            theirs.write_text(theirs.read_text(encoding="utf-8") + "merged in\n", "utf-8")
            run_git(clone, "commit", "-q", "-am", "clone edit")
        graph.create_entities([{"name": f"{op[2]} merged", "entityType": "org",
                                "observations": []}])  # fmt: skip
        run_git(store.path, "pull", "-q", "--no-rebase", "--no-edit", str(clone), "main")


def _yaml(value: str) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _same(served: Graph, walked: Graph) -> None:
    assert served.read_graph() == walked.read_graph()
    assert served.read_graph_dict() == walked.read_graph().to_dict()  # MCP read_graph's rows
    for query in QUERIES:
        assert served.search_nodes(query) == walked.search_nodes(query), query
    assert served.open_nodes(NAMES) == walked.open_nodes(NAMES)
    for who in NAMES:
        assert served.open_nodes([who]) == walked.open_nodes([who])
        assert served.entity_id(who) == walked.entity_id(who)
        assert entity(served, who) == entity(walked, who)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.slow
@given(ops=st.lists(OPS, min_size=1, max_size=10))
def test_index_served_graph_equals_a_walk_of_every_file(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]
) -> None:
    root = tmp_path_factory.mktemp("graph")
    store = gitmem.init(root / "store")
    graph = Graph(store, agent="tester")
    plain = gitmem.open(store.path)
    plain.use_index = False
    walked = Graph(plain)
    # Something to clone (the first op may be a merge).
    graph.create_entities([{"name": "Seed", "entityType": "person", "observations": ["s"]}])
    clone = root / "clone"
    run_git(root, "clone", "-q", str(store.path), str(clone))
    for op in ops:
        _apply(store, graph, op, clone)
        _same(graph, walked)


def test_batch_calls_see_each_other_and_the_index_after(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([{"name": "Old", "entityType": "person", "observations": ["o"]}])
    with graph.batch("import"):
        graph.create_entities([{"name": "A", "entityType": "person", "observations": ["a"]}])
        graph.create_relations([{"from": "A", "to": "Old", "relationType": "knows"},
                                {"from": "B", "to": "A", "relationType": "knows"}])  # fmt: skip
        graph.create_entities([{"name": "B", "entityType": "Person", "observations": []}])
        graph.add_observations([{"entityName": "A", "contents": ["more"]}])
        graph.delete_entities(["Old"])
    plain = gitmem.open(store.path)
    plain.use_index = False
    assert graph.read_graph() == Graph(plain).read_graph()
    result = graph.read_graph().to_dict()
    # The store's clock is fixed here, so the order is the files' (by id), not asserted.
    result["entities"].sort(key=lambda e: e["name"])
    assert result == {
        "entities": [
            {"name": "A", "entityType": "person", "observations": ["a", "more"]},
            {"name": "B", "entityType": "Person", "observations": []},
        ],
        "relations": [{"from": "B", "to": "A", "relationType": "knows"}],
    }


def test_a_stale_or_missing_index_gives_the_same_answers(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([{"name": "Alice", "entityType": "person", "observations": ["tea"]}])
    graph.create_relations([{"from": "Alice", "to": "Bob", "relationType": "knows"}])
    before = graph.search_nodes("TEA")
    index_file = store.db().state_dir / "index.sqlite"
    store.index().close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_file}{suffix}").unlink(missing_ok=True)
    again = Graph(gitmem.open(store.path))
    assert again.search_nodes("TEA") == before
    assert [r.key for r in before.relations] == [("Alice", "Bob", "knows")]
