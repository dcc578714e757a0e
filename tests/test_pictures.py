"""gitmem graph: relations and version chains as Mermaid and DOT, forks visible."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_git

import gitmem
from gitmem import FixedClock, InvalidInputError, NotFoundError, Store
from gitmem.features import conflicts as forks
from gitmem.features.graph import Graph
from gitmem.features.pictures import build, draw, select
from tests.clitools import Gitmem, make_runner


@pytest.fixture
def drawn(store: Store) -> dict[str, str]:
    g = Graph(store)
    g.create_entities(
        [
            {"name": "Alice", "entityType": "person", "observations": ["x"]},
            {"name": 'Acme "Corp" <&>', "entityType": "company", "observations": []},
            {"name": "Bob", "entityType": "person", "observations": []},
        ]
    )
    g.create_relations(
        [
            {"from": "Alice", "to": 'Acme "Corp" <&>', "relationType": "works_at"},
            {"from": "Alice", "to": "Ghost", "relationType": "fears"},
            {"from": "Bob", "to": "Alice", "relationType": "knows"},
        ]
    )
    root = store.create("use setUp", title="Testing #1")
    left = store.supersede(root.id, "use fixtures")
    right = store.supersede(root.id, "use factories")
    newest = store.supersede(left.id, "use fixtures, scoped")
    other = store.create("see the chain", title="note", related=[(newest.id, "refines")])
    return {"root": root.id, "left": left.id, "right": right.id, "newest": newest.id,
            "other": other.id}  # fmt: skip


def mermaid_names(text: str) -> dict[str, str]:
    """Node name -> label of a Mermaid flowchart."""
    return {
        m.group(1): m.group(2)
        for m in re.finditer(r'^  (n\d+)\(?\["(.*)"\]\)?$', text, flags=re.MULTILINE)
    }


def test_mermaid_draws_entities_relations_chains_and_forks(
    store: Store, drawn: dict[str, str]
) -> None:
    text = draw(store)
    assert text.startswith("flowchart LR\n")
    labels = mermaid_names(text)
    by_label = {v.split("<br/>")[0]: k for k, v in labels.items()}
    assert labels[by_label["Alice"]] == "Alice<br/>(person)"
    # Quotes, angle brackets and '#' are entity codes, so no label can break the chart.
    assert "Acme #quot;Corp#quot; #lt;&#gt;" in by_label
    assert by_label["Ghost"] in re.search(r"class ([\w,]+) missing", text).group(1).split(",")  # type: ignore[union-attr]
    alice, acme = by_label["Alice"], by_label["Acme #quot;Corp#quot; #lt;&#gt;"]
    assert f'  {alice} -->|"works_at"| {acme}' in text
    # The fork: the root is superseded twice, drawn in red, and so are both arrows into it.
    fork_nodes = re.search(r"class ([\w,]+) fork", text)
    assert fork_nodes is not None
    root_name = [k for k, v in labels.items() if drawn["root"][:13] in v]
    assert fork_nodes.group(1).split(",") == root_name
    edges = [line for line in text.splitlines() if "-->" in line or "-.->" in line]
    red = re.search(r"linkStyle ([\d,]+) stroke:#c00", text)
    assert red is not None
    red_edges = [edges[int(i)] for i in red.group(1).split(",")]
    assert len(red_edges) == 2 and all(e.endswith(f" {root_name[0]}") for e in red_edges)
    assert all('"supersedes"' in e for e in red_edges)
    assert any('-.->|"refines"|' in e for e in edges)
    assert "Testing #35;1" in text
    superseded = re.search(r"class ([\w,]+) superseded", text)
    assert superseded is not None and len(superseded.group(1).split(",")) == 1


def test_dot_output_is_escaped_and_marks_forks(store: Store, drawn: dict[str, str]) -> None:
    text = draw(store, fmt="dot")
    assert text.startswith("digraph gitmem {\n") and text.endswith("}\n")
    assert '"entity:Acme \\"Corp\\" <&>" [label="Acme \\"Corp\\" <&>\\n(company)"' in text
    assert f'"{drawn["left"]}" -> "{drawn["root"]}" [label="supersedes", color="#cc0000"' in text
    assert f'"{drawn["newest"]}" -> "{drawn["left"]}" [label="supersedes"];' in text
    assert f'"{drawn["other"]}" -> "{drawn["newest"]}" [label="refines", style=dotted];' in text
    # Every line is a statement DOT accepts: balanced quotes, ending in ';' or a brace.
    for line in text.splitlines()[1:-1]:
        assert line.endswith(";") and line.replace('\\"', "").count('"') % 2 == 0


def test_around_one_node_to_a_depth(store: Store, drawn: dict[str, str]) -> None:
    picture = build(store)
    near = select(picture, "Alice", 1)
    assert set(near.nodes) == {
        "entity:Alice",
        'entity:Acme "Corp" <&>',
        "entity:Ghost",
        "entity:Bob",
    }
    assert set(select(picture, "Alice", 0).nodes) == {"entity:Alice"}
    chain = select(picture, drawn["newest"], 1)
    assert set(chain.nodes) == {drawn["newest"], drawn["left"], drawn["other"]}
    assert set(select(picture, drawn["newest"], 2).nodes) == {
        drawn["newest"],
        drawn["left"],
        drawn["other"],
        drawn["root"],
    }
    assert len(select(picture, None, 0).nodes) == len(picture.nodes)
    with pytest.raises(NotFoundError, match="no memory or entity 'nobody'"):
        select(picture, "nobody", 1)
    with pytest.raises(InvalidInputError):
        draw(store, fmt="svg")


def test_empty_store_draws_an_empty_chart(store: Store) -> None:
    assert draw(store) == "flowchart LR\n"
    assert draw(store, fmt="dot").count("->") == 0


def test_graph_command(store: Store, drawn: dict[str, str]) -> None:
    gm = Gitmem(store.path, make_runner())
    out = gm("graph").stdout
    assert out == draw(store)
    dot = gm("graph", "--format", "dot", "--id", "Bob", "--depth", "1").stdout
    assert '"entity:Bob" -> "entity:Alice" [label="knows"];' in dot
    assert "Ghost" not in dot
    assert "no memory or entity" in gm.fails(3, "graph", "--id", "nobody")
    gm("graph", "--format", "svg", code=2)


def test_a_fork_kept_beside_its_memory_gets_a_label_of_its_own(
    tmp_path: Path, clock: FixedClock
) -> None:
    """``resolve --keep both`` leaves ``mem_X`` and ``mem_X.fork-...``, same title and
    version: the labels tell them apart."""
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    shared = origin.create("original\n", title="Shared")
    a, b = (_clone(tmp_path, name, clock) for name in ("a", "b"))
    b.update(shared.id, "b's version\n")
    clock.advance(seconds=1)
    a.update(shared.id, "a's version\n")
    b.sync()
    [fork] = a.sync().forks
    forks.resolve(a, shared.id, "both")
    labels = {node.key: node.label for node in build(a).nodes.values()}
    assert set(labels) == {shared.id, fork.id}
    assert labels[shared.id] != labels[fork.id]
    assert shared.id in labels[shared.id] and fork.id in labels[fork.id]


def _clone(tmp_path: Path, name: str, clock: FixedClock) -> Store:
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), name)
    return gitmem.open(tmp_path / name, clock=clock)


def test_an_untitled_memory_shows_its_id_once(store: Store) -> None:
    memory = store.create("no title here\n")
    [node] = build(store).nodes.values()
    assert node.label.count(memory.id[:13]) == 1
    assert node.label.splitlines()[0] == "(untitled)"


def test_dot_edge_labels_use_the_nodes_font(store: Store, drawn: dict[str, str]) -> None:
    text = draw(store, fmt="dot")
    node_font = re.search(r'^  node \[.*fontname="([^"]+)"', text, re.MULTILINE)
    edge_font = re.search(r'^  edge \[.*fontname="([^"]+)"', text, re.MULTILINE)
    assert node_font is not None and edge_font is not None
    assert edge_font.group(1) == node_font.group(1)
