"""The knowledge graph: the nine operations of the reference MCP memory server, case by case,
over entity files in a real store (one commit per call, hand-editable files)."""

from __future__ import annotations

import threading
from hashlib import sha1
from typing import Any

import pytest

import gitmem
from gitmem import InvalidInputError, NotFoundError, Store
from gitmem.features.graph import Entity, Graph
from gitmem.features.graph_rows import (
    PENDING_ID,
    format_observations,
    parse_observations,
    sanitise,
    shard_of,
)
from tests.clitools import Gitmem, make_runner
from tests.storetools import commit_count, entity, plant


def at(kind: str, name: str, segment: str | None = None) -> str:
    """The id gitmem gives the entity ``name`` of type folder ``kind`` (sharded layout)."""
    return f"entities/{kind}/{shard_of(name)}/{segment or name}"


def ent(name: str, kind: str = "person", *obs: str) -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": list(obs)}


def rel(a: str, b: str, kind: str = "knows") -> dict[str, str]:
    return {"from": a, "to": b, "relationType": kind}


@pytest.fixture
def graph(any_store: Store) -> Graph:
    return Graph(any_store, agent="tester")


def names(g: Any) -> list[str]:
    return sorted(e.name for e in g.entities)


def triples(g: Any) -> set[tuple[str, str, str]]:
    return {r.key for r in g.relations}


# -- create_entities ------------------------------------------------------------------------


def test_create_entities_returns_new_ones_and_skips_existing_names(graph: Graph) -> None:
    created = graph.create_entities([ent("Alice", "person", "works at Acme Corp"), ent("Bob")])
    assert [e.to_dict() for e in created] == [
        {"name": "Alice", "entityType": "person", "observations": ["works at Acme Corp"]},
        {"name": "Bob", "entityType": "person", "observations": []},
    ]
    again = graph.create_entities([ent("Alice", "robot", "other"), ent("Carol")])
    assert [e.name for e in again] == ["Carol"]
    alice = entity(graph, "Alice")
    assert alice == Entity("Alice", "person", ("works at Acme Corp",))


def test_a_name_repeated_in_one_call_is_created_once(graph: Graph) -> None:
    created = graph.create_entities([ent("Alice", "person", "a"), ent("Alice", "person", "b")])
    assert [e.observations for e in created] == [("a",)]
    assert names(graph.read_graph()) == ["Alice"]


def test_create_entities_empty_input_makes_no_commit(graph: Graph) -> None:
    before = commit_count(graph.store)
    assert graph.create_entities([]) == []
    assert graph.create_entities([ent("A")]) != []
    assert graph.create_entities([ent("A")]) == []
    assert commit_count(graph.store) == before + 1


def test_each_call_is_one_commit_with_trailers(graph: Graph) -> None:
    before = commit_count(graph.store)
    graph.create_entities([ent("Alice"), ent("Bob"), ent("Carol")])
    assert commit_count(graph.store) == before + 1
    log = graph.store.log(limit=1)[0]
    assert log.ops == ["create"]
    assert set(log.ids) == {at("person", "Alice"), at("person", "Bob"), at("person", "Carol")}
    assert log.agent == "tester"


def test_case_is_kept_and_names_that_sanitise_alike_get_a_stable_suffix(graph: Graph) -> None:
    graph.create_entities([ent("Alice"), ent("alice"), ent("ALICE!")])
    ids = [graph.entity_id(n) or "" for n in ("Alice", "alice", "ALICE!")]
    # Names differing only in case share a shard, where they are told apart.
    assert shard_of("Alice") == shard_of("alice") == shard_of("ALICE!")
    assert ids == [
        at("person", "Alice"),
        at("person", "alice", f"alice-{sha1(b'alice').hexdigest()[:8]}"),
        at("person", "ALICE!", f"ALICE-{sha1(b'ALICE!').hexdigest()[:8]}"),
    ]
    # Case-insensitively distinct, so a checkout on macOS or Windows does not collide.
    assert len({i.casefold() for i in ids}) == 3
    # The suffix depends on the name only: the same name gets the same file in another store.
    other = Graph(gitmem.init(graph.store.path.parent / "other", clock=graph.store.clock))
    other.create_entities([ent("ALICE"), ent("alice")])
    assert other.entity_id("alice") == graph.entity_id("alice")


def test_entity_types_that_differ_only_in_case_get_their_own_folders(graph: Graph) -> None:
    graph.create_entities([ent("a", "Person"), ent("b", "person"), ent("c", "Person")])
    folders = {(graph.entity_id(n) or "").split("/")[1] for n in "abc"}
    assert len(folders) == 2
    assert graph.entity_id("a") is not None
    assert (graph.entity_id("a") or "").split("/")[1] == (graph.entity_id("c") or "").split("/")[1]


@pytest.mark.parametrize(
    ("name", "segment"),
    [
        ("Acme Corp", "Acme-Corp"),
        ("  spaced   out  ", "spaced-out"),
        ("Zürich", "Zurich"),
        ("../../etc/passwd", "etc-passwd"),
        ("a/b\\c", "a-b-c"),
        ("...", "unnamed"),
        ("東京", "unnamed"),
        ("", "unnamed"),
        ("README.md", "README-md"),
        ("CON", "CON-"),
        ("x" * 300, "x" * 100),
        ("a--b__c", "a-b__c"),
    ],
)
def test_sanitise(name: str, segment: str) -> None:
    assert sanitise(name) == segment


def test_awkward_names_round_trip_exactly(graph: Graph) -> None:
    odd = [
        "東京",
        "",
        "../../etc/passwd",
        "yes",
        "2026-11-22",
        "null",
        "line\nbreak",
        "tab\there",
        "# heading",
        "x" * 300,
        "- dash",
        '"quoted"',
    ]
    graph.create_entities([ent(n, "thing", n) for n in odd])
    got = {e.name: e for e in graph.read_graph().entities}
    assert set(got) == set(odd)
    for n in odd:
        assert got[n].observations == (n,)
        doc_id = graph.entity_id(n)
        assert doc_id is not None and doc_id.startswith("entities/thing/")
        assert graph.store.read(doc_id).extra["name"] == n


# -- observations in the body ---------------------------------------------------------------


@pytest.mark.parametrize(
    "observation",
    [
        "plain",
        "two\nlines",
        " leading",
        "trailing ",
        "",
        "a\n\nb",
        "ends with newline\n",
        "\ttab",
        "nul \x00 inside",
        '"starts with a quote',
        '"in quotes"',
        "- looks like an item",
        "  - nested",
        "unicode ✓ \u2028 line separator",
        "cr\r\nlf",
    ],
)
def test_observations_round_trip_through_the_body(observation: str) -> None:
    body = format_observations(["before", observation, "after"])
    assert parse_observations(body) == ["before", observation, "after"]


def test_hand_written_bodies_parse_leniently() -> None:
    body = "* star item\n- dash item\n  continued\n\nA sentence without a dash.\r\n- last\r\n"
    assert parse_observations(body) == [
        "star item",
        "dash item\ncontinued",
        "A sentence without a dash.",
        "last",
    ]


def test_entity_file_is_readable_and_hand_edits_are_honoured(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([ent("Alice", "person", "works at Acme", "two\nlines")])
    graph.create_relations([rel("Alice", "Bob")])
    path = f"{at('person', 'Alice')}.md"
    text = (store.path / path).read_text()
    assert "name: Alice\n" in text and "entity_type: person\n" in text
    assert "relations:\n- type: knows\n  to: Bob\n" in text
    assert text.endswith("---\n\n- works at Acme\n- two\n  lines\n")
    # A person renames the entity and adds an observation by hand, with git.
    edited = text.replace("name: Alice", "name: Alicia").replace(
        "- two\n  lines\n", "- two\n  lines\nlikes tea\n"
    )
    plant(store, path, edited)
    assert entity(graph, "Alice") is None
    alicia = entity(graph, "Alicia")
    assert alicia is not None and alicia.observations == (
        "works at Acme",
        "two\nlines",
        "likes tea",
    )
    assert triples(graph.open_nodes(["Alicia"])) == {("Alicia", "Bob", "knows")}
    graph.add_observations([{"entityName": "Alicia", "contents": ["x"]}])
    assert graph.entity_id("Alicia") == at("person", "Alice")


def test_unreadable_entity_files_are_skipped(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([ent("Alice")])
    broken = f"{at('person', 'broken')}.md"
    plant(store, broken.replace("broken.md", "Broken.md"), "---\nname: [unclosed\n---\n")
    assert names(graph.read_graph()) == ["Alice"]
    # A new entity never lands on the unreadable file's place.
    before = commit_count(store)
    graph.create_entities([ent("broken")])
    assert commit_count(store) == before + 1
    assert graph.entity_id("broken") == at(
        "person", "broken", f"broken-{sha1(b'broken').hexdigest()[:8]}"
    )


# -- create_relations -----------------------------------------------------------------------


def test_create_relations_skips_existing_triples_and_allows_unknown_endpoints(
    graph: Graph,
) -> None:
    graph.create_entities([ent("Alice"), ent("Bob")])
    first = graph.create_relations([rel("Alice", "Bob"), rel("Alice", "Bob", "works_with")])
    assert [r.to_dict() for r in first] == [
        {"from": "Alice", "to": "Bob", "relationType": "knows"},
        {"from": "Alice", "to": "Bob", "relationType": "works_with"},
    ]
    again = graph.create_relations([rel("Alice", "Bob"), rel("Alice", "Nobody", "knows")])
    assert [r.key for r in again] == [("Alice", "Nobody", "knows")]
    assert triples(graph.read_graph()) == {
        ("Alice", "Bob", "knows"),
        ("Alice", "Bob", "works_with"),
        ("Alice", "Nobody", "knows"),
    }
    assert graph.create_relations([]) == []


def test_relation_from_an_entity_not_yet_created_moves_into_its_file(graph: Graph) -> None:
    graph.create_relations([rel("Ghost", "Alice", "haunts"), rel("Ghost", "Bob", "haunts")])
    assert graph.store.exists(PENDING_ID)
    assert graph.create_relations([rel("Ghost", "Alice", "haunts")]) == []
    graph.create_entities([ent("Ghost", "spirit")])
    assert not graph.store.exists(PENDING_ID)
    ghost = graph.store.read(graph.entity_id("Ghost") or "")
    assert ghost.extra["relations"] == [
        {"type": "haunts", "to": "Alice"},
        {"type": "haunts", "to": "Bob"},
    ]
    assert triples(graph.read_graph()) == {("Ghost", "Alice", "haunts"), ("Ghost", "Bob", "haunts")}


def test_self_relations(graph: Graph) -> None:
    graph.create_entities([ent("Alice")])
    assert len(graph.create_relations([rel("Alice", "Alice", "self")])) == 1
    assert triples(graph.open_nodes(["Alice"])) == {("Alice", "Alice", "self")}
    graph.delete_entities(["Alice"])
    assert graph.read_graph().relations == []


# -- add_observations -----------------------------------------------------------------------


def test_add_observations_returns_what_was_added_and_skips_duplicates(graph: Graph) -> None:
    graph.create_entities([ent("Alice", "person", "works at Acme Corp")])
    first = graph.add_observations([{"entityName": "Alice", "contents": ["likes coffee"]}])
    assert first == [{"entityName": "Alice", "addedObservations": ["likes coffee"]}]
    second = graph.add_observations(
        [{"entityName": "Alice", "contents": ["likes coffee", "has a dog", "has a dog"]}]
    )
    assert second == [{"entityName": "Alice", "addedObservations": ["has a dog"]}]
    alice = entity(graph, "Alice")
    assert alice is not None
    assert alice.observations == ("works at Acme Corp", "likes coffee", "has a dog")


def test_add_observations_to_unknown_entity_names_it_and_writes_nothing(graph: Graph) -> None:
    graph.create_entities([ent("Alice")])
    before = commit_count(graph.store)
    with pytest.raises(NotFoundError, match="Entity with name NonExistent not found"):
        graph.add_observations(
            [
                {"entityName": "Alice", "contents": ["would be added"]},
                {"entityName": "NonExistent", "contents": ["x"]},
            ]
        )
    assert commit_count(graph.store) == before
    alice = entity(graph, "Alice")
    assert alice is not None and alice.observations == ()


def test_adding_nothing_new_makes_no_commit(graph: Graph) -> None:
    graph.create_entities([ent("Alice", "person", "a")])
    before = commit_count(graph.store)
    assert graph.add_observations([{"entityName": "Alice", "contents": ["a"]}]) == [
        {"entityName": "Alice", "addedObservations": []}
    ]
    assert commit_count(graph.store) == before


# -- deletes ----------------------------------------------------------------------------------


def test_delete_entities_cascades_to_relations_and_ignores_unknown_names(graph: Graph) -> None:
    graph.create_entities([ent("Alice"), ent("Bob"), ent("Charlie")])
    graph.create_relations([rel("Alice", "Bob"), rel("Bob", "Charlie"), rel("Alice", "Charlie")])
    graph.create_relations([rel("Ghost", "Bob"), rel("Ghost", "Alice")])
    before = commit_count(graph.store)
    graph.delete_entities(["Bob", "NonExistent"])
    assert commit_count(graph.store) == before + 1
    g = graph.read_graph()
    assert names(g) == ["Alice", "Charlie"]
    assert triples(g) == {("Alice", "Charlie", "knows"), ("Ghost", "Alice", "knows")}
    assert not graph.store.exists("entities/person/Bob")
    graph.delete_entities([])
    graph.delete_entities(["NonExistent"])
    assert commit_count(graph.store) == before + 1


def test_delete_entities_removes_relations_naming_an_entity_that_never_existed(
    graph: Graph,
) -> None:
    graph.create_entities([ent("Alice")])
    graph.create_relations([rel("Alice", "Ghost")])
    graph.delete_entities(["Ghost"])
    assert graph.read_graph().relations == []


def test_delete_observations(graph: Graph) -> None:
    graph.create_entities([ent("Alice", "person", "works at Acme Corp", "likes coffee")])
    graph.delete_observations(
        [
            {"entityName": "Alice", "observations": ["likes coffee", "never said"]},
            {"entityName": "NonExistent", "observations": ["x"]},
        ]
    )
    alice = entity(graph, "Alice")
    assert alice is not None and alice.observations == ("works at Acme Corp",)
    graph.delete_observations([])


def test_delete_relations_exact_triples(graph: Graph) -> None:
    graph.create_entities([ent("Alice"), ent("Bob")])
    graph.create_relations([rel("Alice", "Bob"), rel("Alice", "Bob", "works_with")])
    graph.create_relations([rel("Ghost", "Bob")])
    graph.delete_relations(
        [rel("Alice", "Bob"), rel("Bob", "Alice", "works_with"), rel("Ghost", "Bob")]
    )
    assert triples(graph.read_graph()) == {("Alice", "Bob", "works_with")}
    assert not graph.store.exists(PENDING_ID)


# -- reads --------------------------------------------------------------------------------------


@pytest.fixture
def acme(graph: Graph) -> Graph:
    graph.create_entities(
        [
            ent("Alice", "person", "works at Acme Corp", "likes programming"),
            ent("Bob", "person", "works at TechCo"),
            ent("Acme Corp", "company", "tech company"),
        ]
    )
    graph.create_relations(
        [rel("Alice", "Acme Corp", "works_at"), rel("Bob", "Acme Corp", "competitor")]
    )
    return graph


def test_read_graph_of_an_empty_store(graph: Graph) -> None:
    assert graph.read_graph().to_dict() == {"entities": [], "relations": []}


def test_search_by_name_type_and_observation_ignoring_case(acme: Graph) -> None:
    assert names(acme.search_nodes("ALICE")) == ["Alice"]
    assert names(acme.search_nodes("company")) == ["Acme Corp"]
    assert names(acme.search_nodes("programming")) == ["Alice"]
    assert acme.search_nodes("nothing like it").to_dict() == {"entities": [], "relations": []}


def test_search_includes_every_relation_touching_a_match(acme: Graph) -> None:
    result = acme.search_nodes("Acme")
    assert names(result) == ["Acme Corp", "Alice"]
    assert triples(result) == {
        ("Alice", "Acme Corp", "works_at"),
        ("Bob", "Acme Corp", "competitor"),
    }
    assert triples(acme.search_nodes("Alice")) == {("Alice", "Acme Corp", "works_at")}


def test_open_nodes(acme: Graph) -> None:
    result = acme.open_nodes(["Alice", "Nobody"])
    assert names(result) == ["Alice"]
    assert triples(result) == {("Alice", "Acme Corp", "works_at")}
    assert triples(acme.open_nodes(["Acme Corp"])) == {
        ("Alice", "Acme Corp", "works_at"),
        ("Bob", "Acme Corp", "competitor"),
    }
    assert acme.open_nodes([]).to_dict() == {"entities": [], "relations": []}
    assert names(acme.open_nodes(["alice"])) == []


# -- bad input, batches, history, races ------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "arg", "message"),
    [
        (
            "create_entities",
            [{"name": "A", "entityType": "t"}],
            r"entities\[0\]: 'observations' is a required property",
        ),
        (
            "create_entities",
            [{"name": 1, "entityType": "t", "observations": []}],
            r"entities\[0\]\.name: 1 is not of type 'string'",
        ),
        ("create_entities", "Alice", "entities: 'Alice' is not of type 'array'"),
        ("create_relations", [{"from": "a", "to": "b"}], "'relationType' is a required property"),
        (
            "add_observations",
            [{"entityName": "a", "contents": "x"}],
            r"observations\[0\]\.contents: 'x' is not of type 'array'",
        ),
        ("delete_entities", [None], r"entityNames\[0\]: None is not of type 'string'"),
        ("delete_observations", [{"entityName": "a"}], "'observations' is a required property"),
    ],
)
def test_bad_input_is_one_clear_error_and_writes_nothing(
    graph: Graph, call: str, arg: Any, message: str
) -> None:
    before = commit_count(graph.store)
    with pytest.raises(InvalidInputError, match=message):
        getattr(graph, call)(arg)
    assert commit_count(graph.store) == before


def test_batch_is_one_commit_and_all_or_nothing(graph: Graph) -> None:
    before = commit_count(graph.store)
    with graph.batch("import") as g:
        g.create_entities([ent("Alice")])
        g.create_relations([rel("Alice", "Bob")])
        g.add_observations([{"entityName": "Alice", "contents": ["x"]}])
        g.create_entities([ent("Bob")])
    assert commit_count(graph.store) == before + 1
    assert triples(graph.read_graph()) == {("Alice", "Bob", "knows")}
    with pytest.raises(NotFoundError), graph.batch("fails") as g:
        g.create_entities([ent("Carol")])
        g.add_observations([{"entityName": "Nobody", "contents": ["x"]}])
    assert commit_count(graph.store) == before + 1
    assert entity(graph, "Carol") is None


def test_history_of_an_entity_shows_what_was_known_when(graph: Graph) -> None:
    graph.create_entities([ent("Alice", "person", "first")])
    graph.add_observations([{"entityName": "Alice", "contents": ["second"]}])
    graph.delete_observations([{"entityName": "Alice", "observations": ["first"]}])
    history = graph.store.history(graph.entity_id("Alice") or "")
    bodies = [v.memory.body if v.memory else None for v in history]
    assert bodies == ["- first\n", "- first\n- second\n", "- second\n"]


def test_concurrent_writers_lose_nothing(any_store: Store) -> None:
    Graph(any_store).create_entities([ent("Alice")])
    path = any_store.path
    errors: list[BaseException] = []

    def worker(tag: str) -> None:
        try:
            g = Graph(gitmem.open(path))
            for i in range(8):
                g.add_observations([{"entityName": "Alice", "contents": [f"{tag}{i}"]}])
                g.create_relations([rel("Alice", f"{tag}{i}")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    alice = entity(Graph(any_store), "Alice")
    assert alice is not None
    assert sorted(alice.observations) == sorted(f"{t}{i}" for t in "ab" for i in range(8))
    assert len(Graph(any_store).read_graph().relations) == 16


# -- the command line ----------------------------------------------------------------------------


def test_entity_commands(store: Store) -> None:
    gm = Gitmem(store.path, make_runner())
    assert gm(
        "entity", "add", "Alice", "--type", "person", "--observe", "works at Acme"
    ).stdout == ("created Alice\n")
    assert "already exists" in gm("entity", "add", "Alice", "--type", "robot").stdout
    assert gm.json("entity", "observe", "Alice", "likes coffee", "works at Acme") == {
        "results": [{"entityName": "Alice", "addedObservations": ["likes coffee"]}]
    }
    gm("entity", "relate", "Alice", "works_at", "Acme Corp", "--agent", "cli-agent")
    assert gm("entity", "show", "Alice").stdout == (
        "Alice (person)\n  - works at Acme\n  - likes coffee\n"
        "relations:\n  Alice --works_at--> Acme Corp\n"
    )
    assert gm.json("entity", "search", "ACME")["relations"] == [
        {"from": "Alice", "to": "Acme Corp", "relationType": "works_at"}
    ]
    gm("entity", "forget", "Alice", "likes coffee")
    gm("entity", "unrelate", "Alice", "works_at", "Acme Corp")
    assert gm.json("entity", "ls") == {
        "entities": [{"name": "Alice", "entityType": "person", "observations": ["works at Acme"]}],
        "relations": [],
    }
    assert "Entity with name Bob not found" in gm.fails(3, "entity", "observe", "Bob", "x")
    assert gm("entity", "id", "Alice").stdout == f"{at('person', 'Alice')}\n"
    assert "no entity named 'Nobody'" in gm.fails(3, "entity", "id", "Nobody")
    gm("entity", "rm", "Alice")
    assert gm.json("entity", "ls") == {"entities": [], "relations": []}
    history = gm.json("history", at("person", "Alice"))
    assert [v["op"] for v in history["versions"]][-1] == "delete"


@pytest.mark.slow
def test_two_processes_writing_one_entity_lose_nothing(any_store: Store) -> None:
    """Separate processes (two MCP servers, a CLI and a server) race through the branch's
    compare-and-swap and, in a work-tree store, its write lock."""
    import subprocess
    import sys

    Graph(any_store).create_entities([ent("Alice")])
    script = (
        "import sys, gitmem\n"
        "from gitmem.features.graph import Graph\n"
        "g = Graph(gitmem.open(sys.argv[1]))\n"
        "for i in range(10):\n"
        "    g.add_observations([{'entityName': 'Alice', 'contents': [sys.argv[2] + str(i)]}])\n"
        "    g.create_relations([{'from': 'Alice', 'to': sys.argv[2] + str(i),"
        " 'relationType': 'r'}])\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(any_store.path), tag])
        for tag in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    alice = entity(Graph(any_store), "Alice")
    assert alice is not None
    assert sorted(alice.observations) == sorted(f"{t}{i}" for t in "ab" for i in range(10))
    assert len(Graph(any_store).read_graph().relations) == 20
