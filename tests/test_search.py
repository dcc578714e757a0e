"""Search modes, filters, ranking, malformed queries; the search, reindex and gc commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import FixedClock, InvalidInputError, Store
from gitmem.cli import cli
from gitmem.git.maintenance import repository_size


@pytest.fixture
def corpus(any_store: Store, clock: FixedClock) -> dict[str, str]:
    s = any_store
    ids = {}
    ids["fixtures"] = s.create(
        "Fixtures live in tests/conftest.py\nuse sample_user\nline three\nline four\n"
        "mock_db is session-scoped\nlast line\n",
        title="Prefer pytest fixtures",
        category="coding-preferences",
        tags=["testing", "python"],
    ).id
    clock.advance(minutes=1)
    ids["deploy"] = s.create(
        "We deploy with docker compose\nnever on fridays\n",
        title="Deploy",
        category="project-conventions",
        tags=["ops"],
    ).id
    clock.advance(minutes=1)
    ids["pytest"] = s.create(
        "pytest is the runner; fixtures are nice\nCafé culture: naïve résumé\n",
        title="pytest",
        category="coding-preferences",
        tags=["testing"],
    ).id
    clock.advance(minutes=1)
    ids["runner"] = s.create(
        "The test runner is configured in pyproject.toml [tool.pytest.ini_options]\n",
        title="Test runner configuration",
        category="project-conventions",
    ).id
    return ids


def test_fts_ranks_exact_title_then_partial_title_then_body(
    any_store: Store, corpus: dict[str, str]
) -> None:
    results = any_store.search("pytest")
    assert results.notice is None
    ids = results.ids
    # exact title "pytest" first, then the title containing it, then a body-only match
    assert ids[0] == corpus["pytest"]
    assert ids[1] == corpus["fixtures"]
    assert ids[2:] == [corpus["runner"]]
    assert results[0].score > results[1].score > results[2].score


def test_fts_syntax_and_or_not_phrase_prefix(any_store: Store, corpus: dict[str, str]) -> None:
    assert any_store.search("docker AND fridays").ids == [corpus["deploy"]]
    assert set(any_store.search("docker OR mock_db").ids) == {corpus["deploy"], corpus["fixtures"]}
    assert corpus["fixtures"] not in any_store.search("pytest NOT conftest").ids
    assert any_store.search('"docker compose"').ids == [corpus["deploy"]]
    assert any_store.search('"compose docker"').ids == []
    assert set(any_store.search("fixt*").ids) == {corpus["fixtures"], corpus["pytest"]}


def test_fts_match_carries_line_and_two_lines_of_context(
    any_store: Store, corpus: dict[str, str]
) -> None:
    (match,) = any_store.search("mock_db").matches
    assert match.id == corpus["fixtures"]
    assert match.path is not None and match.path.endswith(corpus["fixtures"] + ".md")
    assert match.title == "Prefer pytest fixtures"
    assert match.line_number == 5
    assert match.line == "mock_db is session-scoped"
    assert match.context_before == ("line three", "line four")
    assert match.context_after == ("last line",)
    assert [line.to_dict() for line in match.lines] == [
        {"number": 5, "text": "mock_db is session-scoped", "before": ["line three", "line four"],
         "after": ["last line"]}
    ]  # fmt: skip


@pytest.mark.parametrize(
    "query", ["AND AND (", 'fixtures"', "NEAR(", "*", "tests/conftest.py", ")"]
)
def test_a_query_fts5_refuses_is_natural_language_and_says_so(
    any_store: Store, corpus: dict[str, str], query: str
) -> None:
    results = any_store.search(query)
    assert results.notice is not None
    assert "natural language" in results.notice and "could not parse" in results.notice
    assert results.mode == "natural"
    if query == 'fixtures"':
        assert results.ids[0] == corpus["fixtures"]
    if query == "tests/conftest.py":
        assert results.ids[0] == corpus["fixtures"]
        assert results[0].line_number == 1


def test_unicode_and_diacritics(any_store: Store, corpus: dict[str, str]) -> None:
    assert any_store.search("café").ids == [corpus["pytest"]]
    assert any_store.search("cafe").ids == [corpus["pytest"]]  # remove_diacritics
    assert any_store.search("résumé", mode="substring")[0].line_number == 2


def test_regex_mode_is_a_grep_with_context(any_store: Store, corpus: dict[str, str]) -> None:
    results = any_store.search(r"mock_\w+|conftest\.py", mode="regex")
    assert [(m.id, m.line_number) for m in results] == [
        (corpus["fixtures"], 1),
        (corpus["fixtures"], 5),
    ]
    assert results[1].context_before == ("line three", "line four")
    assert results[0].spans == ((23, 34),)


def test_regex_metacharacters_are_literal_in_substring_mode(
    any_store: Store, corpus: dict[str, str]
) -> None:
    hits = any_store.search("[tool.pytest.ini_options]", mode="substring")
    assert [m.id for m in hits] == [corpus["runner"]]
    assert any_store.search("FRIDAYS", mode="substring").ids == [corpus["deploy"]]
    assert any_store.search("FRIDAYS", mode="regex").ids == []


def test_bad_regex_and_bad_arguments_are_clear_errors(
    any_store: Store, corpus: dict[str, str]
) -> None:
    with pytest.raises(InvalidInputError, match="does not compile"):
        any_store.search("(", mode="regex")
    with pytest.raises(InvalidInputError, match="mode"):
        any_store.search("x", mode="fuzzy")
    with pytest.raises(InvalidInputError, match="empty"):
        any_store.search("   ")
    with pytest.raises(InvalidInputError, match="limit"):
        any_store.search("x", limit=0)


@pytest.mark.parametrize("mode", ["fts", "regex", "substring"])
def test_filters_apply_in_every_mode(any_store: Store, corpus: dict[str, str], mode: str) -> None:
    query = "pytest" if mode != "regex" else "pytest|runner"
    found = any_store.search(query, mode=mode, category="project-conventions").ids
    assert set(found) == {corpus["runner"]}
    found = any_store.search(query, mode=mode, tags=["testing", "python"]).ids
    assert set(found) == {corpus["fixtures"]}
    assert any_store.search(query, mode=mode, tags=["nope"]).ids == []


def test_superseded_and_archived_are_excluded_unless_asked(
    any_store: Store, corpus: dict[str, str]
) -> None:
    newer = any_store.supersede(corpus["deploy"], "We deploy with podman\n")
    any_store.update(corpus["runner"], status="archived")
    # No current memory says "docker": recall answers, with the chain's newest version.
    assert any_store.search("docker").ids == [newer.id]
    assert any_store.search("docker", include_superseded=True).ids == [corpus["deploy"]]
    assert any_store.search("podman").ids == [newer.id]
    assert any_store.search("runner", mode="substring").ids == [corpus["pytest"]]
    archived = any_store.search("runner", mode="substring", include_archived=True).ids
    assert set(archived) == {corpus["pytest"], corpus["runner"]}


def test_limit(any_store: Store, corpus: dict[str, str]) -> None:
    assert len(any_store.search("line", mode="substring", limit=2)) == 2
    assert len(any_store.search("pytest", limit=1)) == 1


def test_results_without_the_index_match_the_index(
    any_store: Store, corpus: dict[str, str]
) -> None:
    for query, mode in [("mock_", "substring"), (r"line \w+", "regex"), ("docker", "fts")]:
        with_index = any_store.search(query, mode=mode)
        any_store.use_index = False
        try:
            without = any_store.search(query, mode=mode)
        finally:
            any_store.use_index = True
        assert sorted((m.id, m.line_number) for m in with_index) == sorted(
            (m.id, m.line_number) for m in without
        )


def test_search_sees_writes_made_by_other_handles(any_store: Store, corpus: dict[str, str]) -> None:
    import gitmem

    other = gitmem.open(any_store.path)
    assert any_store.search("zeppelin").ids == []
    new = other.create("A zeppelin note\n", title="Airships")
    assert any_store.search("zeppelin").ids == [new.id]
    other.delete(new.id)
    assert any_store.search("zeppelin").ids == []


# -- the commands -----------------------------------------------------------------------


def _run(store: Store, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store.path), *args])
    return result.exit_code, result.stdout, result.stderr


def test_search_command_text_and_json(any_store: Store, corpus: dict[str, str]) -> None:
    store = any_store
    code, out, _ = _run(store, "search", "mock_db")
    assert code == 0
    assert corpus["fixtures"] in out and "Prefer pytest fixtures" in out
    assert "   5: mock_db is session-scoped" in out
    assert "   4- line four" in out
    code, out, _ = _run(store, "search", "--json", "docker", "--category", "project-conventions")
    data = json.loads(out)
    assert data["mode"] == "fts" and [m["id"] for m in data["hits"]] == [corpus["deploy"]]
    code, out, _ = _run(store, "search", r"mock_\w+", "--regex", "--json")
    assert json.loads(out)["hits"][0]["lines"][0]["number"] == 5
    code, out, _ = _run(store, "search", "tests/conftest.py")
    assert code == 0 and out.startswith("note: searched 'tests/conftest.py' as natural language")


def test_search_command_errors_are_one_line(any_store: Store, corpus: dict[str, str]) -> None:
    store = any_store
    code, out, err = _run(store, "search", "(", "--regex")
    assert code == 4
    assert err.count("\n") == 1 and "does not compile" in err
    code, out, err = _run(store, "search", "nothing-matches-this")
    assert code == 0 and "No matches." in out


def test_reindex_command_rebuilds(any_store: Store, corpus: dict[str, str]) -> None:
    store = any_store
    index_file = store.db().state_dir / "index.sqlite"
    store.search("pytest")
    assert index_file.exists()
    code, out, _ = _run(store, "reindex", "--json")
    assert code == 0
    (stats,) = json.loads(out)
    assert stats["memories"] == 4
    assert stats["commit"] == str(store.db().tip().id)  # type: ignore[union-attr]
    code, out, _ = _run(store, "reindex")
    assert "Indexed 4 memories" in out


def test_gc_packs_loose_objects_and_keeps_every_memory(
    bare_store: Store, git: object, tmp_path: Path
) -> None:
    ids = [bare_store.create(f"memory {i}\n", title=f"m{i}").id for i in range(20)]
    gitdir = bare_store.db().gitdir
    _, loose = repository_size(gitdir)
    assert loose > 20
    code, out, _ = _run(bare_store, "gc", "--json")
    assert code == 0
    (result,) = json.loads(out)
    assert result["loose_objects_before"] == loose
    assert result["loose_objects_after"] == 0
    assert all(bare_store.read(i).body.startswith("memory") for i in ids)
