"""One JSON shape per kind of thing (docs/cli.md, "JSON shapes"): a hit is a hit in search,
recall, layer search and MCP; ``--json`` errors are JSON; a missing extra has its own exit
code and says how to install it; an untitled memory reads the same in every listing."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from clitools import Gitmem, make_runner

from gitmem import Store
from gitmem.base.errors import EXIT_CODES, install_command
from gitmem.features.layered import LayeredStore

ROOT = Path(__file__).resolve().parent.parent
HIT = json.loads((ROOT / "schemas" / "hit.schema.json").read_text())


@pytest.fixture
def gm(store: Store) -> Gitmem:
    store.create(
        "intro\nsetup\nFixtures live in tests/conftest.py\nmore\nend\n",
        title="Prefer pytest fixtures",
    )
    store.create("Fixtures are session scoped here\n")  # untitled
    return Gitmem(store.path, make_runner())


def _hits(data: dict[str, Any]) -> list[dict[str, Any]]:
    for hit in data["hits"]:
        jsonschema.validate(hit, HIT)
    return list(data["hits"])


def test_search_and_recall_give_one_hit_shape(gm: Gitmem, store: Store) -> None:
    searched = _hits(gm.json("search", "fixtures"))
    recalled = _hits(gm.json("recall", "where do fixtures live"))
    regex = _hits(gm.json("search", "--regex", "F[a-z]+"))
    assert {h["id"] for h in searched} == {h["id"] for h in recalled} == {h["id"] for h in regex}
    titled = next(m.id for m in store.list() if m.title)
    [one] = [h for h in searched if h["id"] == titled]
    [two] = [h for h in recalled if h["id"] == titled]
    assert one["lines"] == two["lines"] == [
        {"number": 3, "text": "Fixtures live in tests/conftest.py", "before": ["intro", "setup"],
         "after": ["more", "end"]}
    ]  # fmt: skip
    assert set(one) < set(two)  # recall adds why it ranked, nothing renamed


def test_layer_search_gives_hits(gm: Gitmem, store: Store) -> None:
    LayeredStore(store).create(
        {"layer": "shared-project", "project": "p", "fileType": "notes",
         "content": "# Notes\nfixtures here\n"}
    )  # fmt: skip
    assert _hits(gm.json("layer", "search", "fixtures"))


def test_mcp_recall_gives_the_same_hits(gm: Gitmem, store: Store) -> None:
    pytest.importorskip("mcp")
    from gitmem.entry.mcp import call, tools

    [recall] = [t for t in tools(store) if t.name == "recall"]
    for args in ({"query": "where do fixtures live"}, {"query": "fixtures", "mode": "fts"}):
        result, failed = call(recall, args)
        structured = result.structured
        assert not failed
        assert structured is not None and _hits(structured)
        assert "matches" not in structured


@pytest.mark.parametrize(
    "argv, code",
    [
        (["show", "mem_nothing"], 3),
        (["ls", "--bogus"], 2),
        (["add", "x", "--status", "gone"], 4),
        (["--store", "/nonexistent/store", "ls"], 7),
    ],
)
def test_json_errors_are_json_on_stderr_with_the_same_code(
    gm: Gitmem, argv: list[str], code: int
) -> None:
    for spelled in ([*argv, "--json"], ["--json", *argv]):
        result = gm(*spelled, code=code)
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        error = json.loads(line)["error"]
        assert error["code"] == code == EXIT_CODES[error["kind"]]
        assert error["message"] and "gitmem: error" not in line
    assert gm(*argv, code=code).stderr.startswith("gitmem: error: ")  # text without --json


def test_a_missing_extra_exits_9_saying_how_to_install_it(
    gm: Gitmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    assert EXIT_CODES["missing-dependency"] == 9
    line = gm.fails(9, "mcp")
    assert "mcp extra" in line and install_command("mcp") in line
    # From where this gitmem came: its own interpreter, and this checkout (an editable
    # install) rather than a package index that may not have it.
    assert sys.executable in install_command("mcp")
    assert f"{ROOT}[mcp]" in install_command("mcp")
    error = json.loads(gm("mcp", "--json", code=9).stderr)["error"]
    assert error["kind"] == "missing-dependency"


def test_mcp_errors_hint_at_tools_not_commands(gm: Gitmem, store: Store) -> None:
    pytest.importorskip("mcp")
    from gitmem.entry.mcp import call, tools

    [get] = [t for t in tools(store) if t.name == "get_memory"]
    result, failed = call(get, {"id": "mem_zzz"})
    assert failed and result.text.startswith("no memory mem_zzz (hint: recall finds")
    assert "gitmem " not in result.text  # an agent has the tools, not the command line


def test_an_untitled_memory_reads_the_same_in_every_listing(gm: Gitmem, store: Store) -> None:
    untitled = next(m.id for m in store.list() if m.title is None)
    lines = {
        "ls": gm("ls").stdout,
        "recall": gm("recall", "session scoped").stdout,
        "search": gm("search", "session").stdout,
    }
    for command, out in lines.items():
        [line] = [line for line in out.splitlines() if untitled in line]
        assert "(untitled)" in line, command
    assert "(untitled)" in gm("history", untitled).stdout
