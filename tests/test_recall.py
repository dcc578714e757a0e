"""Store.recall: natural-language questions, keywords, identifiers and paths find the right
memory on small hand-built stores; filters, version chains, at=, budgets; no query raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import InvalidInputError
from gitmem.store.bm25 import parse
from gitmem.store.recall import estimate_tokens, memory_text

DEPLOY = "The deploy target is staging; production deploys need a tag"
FIXTURES = "Fixtures live in tests/conftest.py"


def fill(store: Store, clock: FixedClock) -> dict[str, str]:
    """The issue's two memories among others that share some of their words."""
    ids: dict[str, str] = {}
    texts = {
        "deploy": (DEPLOY, None),
        "fixtures": (FIXTURES, None),
        "tags": ("Release tags are signed with the team key", "Signing releases"),
        "staging-db": ("The staging database is reset every night at 02:00", None),
        "user": ("Use sample_user from tests/factories.py for a logged-in user", "Test users"),
        "camel": ("The HttpRequestParser class turns raw bytes into requests", None),
        "unicode": ("Die Größe des Caches ist 512 MB; Zürich hosts the mirror", "Cache"),
        "lint": ("Run ruff and mypy --strict before every commit", "Linting"),
    }
    for key, (body, title) in texts.items():
        clock.advance(minutes=1)
        ids[key] = store.create(body + "\n", title=title).id
    return ids


def top(store: Store, query: str, n: int = 1, **kwargs: object) -> list[str]:
    return store.recall(query, limit=n, **kwargs).ids  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("how do we deploy to staging?", "deploy"),  # a question: stop words, punctuation
        ("deploying", "deploy"),  # a stem
        ("deploys", "deploy"),
        ("test fixtures", "fixtures"),  # test ~ tests, not every word required
        ("where do fixtures live", "fixtures"),
        ("conftest.py", "fixtures"),  # a path
        ("tests/conftest.py", "fixtures"),
        ("sample_user", "user"),  # a snake_case identifier
        ("sampleUser", "user"),  # the same words in camel case
        ("HttpRequestParser", "camel"),  # an identifier as written
        ("request parser", "camel"),  # its parts
        ("größe", "unicode"),  # unicode, with and without accents
        ("zurich", "unicode"),
        ("signing release tags", "tags"),
        ("when is the staging database reset?", "staging-db"),
        ("ruff mypy", "lint"),  # a keyword list
    ],
)
def test_questions_keywords_identifiers_and_paths(
    filled_store: tuple[Store, dict[str, str]], query: str, expected: str
) -> None:
    store, ids = filled_store
    assert top(store, query) == [ids[expected]]


def test_hits_say_which_lines_matched_and_why(store: Store, clock: FixedClock) -> None:
    ids = fill(store, clock)
    body = "# Deploys\n\nUnrelated first line.\nWe deploy to staging from main.\nLast line.\n"
    mid = store.create(body, title="How deploys work").id
    results = store.recall("how do we deploy to staging?")
    hit = next(h for h in results if h.id == mid)
    # The two best lines, in body order: the heading and the line with both words.
    assert [(line.number, line.text) for line in hit.lines] == [
        (1, "# Deploys"),
        (4, "We deploy to staging from main."),
    ]
    assert hit.why[0] == "matched deploy (body, title), staging (body)"
    assert set(results.ids[:2]) == {mid, ids["deploy"]}
    data = results.to_dict()
    assert data["hits"][0]["id"] == results.ids[0]
    assert {"id", "title", "score", "lines", "why"} <= set(data["hits"][0])
    scores = [h.score for h in results]
    assert scores == sorted(scores, reverse=True)


def test_filters(store: Store, clock: FixedClock) -> None:
    a = store.create("deploy with the blue pipeline\n", category="ops", tags=["ci"])
    b = store.create("deploy with the green pipeline\n", category="dev", tags=["ci", "green"])
    c = store.create("deploy archived notes\n", status="archived")
    assert set(top(store, "deploy", 10)) == {a.id, b.id}
    assert top(store, "deploy", 10, category="ops") == [a.id]
    assert top(store, "deploy", 10, tags=["green"]) == [b.id]
    assert top(store, "deploy", 10, tags=["ci", "green"]) == [b.id]
    assert top(store, "deploy", 10, category="nope") == []
    assert c.id in top(store, "deploy", 10, include_archived=True)


def test_a_version_chain_collapses_to_its_newest_version(store: Store, clock: FixedClock) -> None:
    old = store.create("The deploy target is staging\n")
    clock.advance(minutes=1)
    mid = store.supersede(old.id, "Deploys now go to the preview cluster\n")
    clock.advance(minutes=1)
    new = store.supersede(mid.id, "Deploys go to the preview cluster, then production\n")
    # "staging" is only in the oldest version: its match counts for the newest one.
    results = store.recall("staging")
    assert results.ids == [new.id]
    assert any(old.id in w for w in results[0].why)
    assert results.ids == top(store, "staging", 5) and len(results) == 1
    # Every version, when asked for.
    assert top(store, "staging", 5, include_superseded=True) == [old.id]
    assert set(top(store, "deploys", 5, include_superseded=True)) == {old.id, mid.id, new.id}
    # Each chain once, even when several of its versions match.
    assert top(store, "deploy preview production", 5) == [new.id]


def test_recency_breaks_ties(store: Store, clock: FixedClock) -> None:
    first = store.create("same words here\n")
    clock.advance(days=3)
    second = store.create("same words here\n")
    assert top(store, "same words", 2) == [second.id, first.id]


def test_at_a_past_revision_and_inside_a_transaction(store: Store, clock: FixedClock) -> None:
    ids = fill(store, clock)
    past = str(store.db().tip().id)  # type: ignore[union-attr]
    store.update(ids["deploy"], "Deploys go to the preview cluster\n")
    assert top(store, "staging production tag", 1) != [ids["deploy"]]
    assert top(store, "staging production tag", 1, at=past) == [ids["deploy"]]
    unindexed = gitmem.open(store.path)
    unindexed.use_index = False
    for query in ("test fixtures", "how do we deploy to staging?", "sample_user"):
        assert top(unindexed, query, 3) == top(store, query, 3)
    with store.transaction("tx"):
        assert top(store, "test fixtures") == [ids["fixtures"]]


def test_budget_packs_whole_memories_first(store: Store, clock: FixedClock) -> None:
    long = store.create("deploy " + "word " * 400 + "\ndeploy staging line\n", title="Long")
    short = store.create("deploy staging quickly\n", title="Short")
    results = store.recall("deploy staging", budget=60)
    assert results.budget == 60 and results.tokens <= 60
    whole = [p for p in results.packed if p.whole]
    assert [p.id for p in whole] == [short.id]
    assert whole[0].text == memory_text(results.hits[results.ids.index(short.id)])
    excerpt = [p for p in results.packed if not p.whole]
    assert [p.id for p in excerpt] == [long.id] and "deploy staging line" in excerpt[0].text
    assert all(p.tokens == estimate_tokens(p.text) for p in results.packed)
    assert store.recall("deploy", budget=0).packed == []
    with pytest.raises(InvalidInputError):
        store.recall("deploy", budget=-1)
    with pytest.raises(InvalidInputError):
        store.recall("deploy", limit=0)


def test_two_scopes_are_searched_together(tmp_path: Path, clock: FixedClock) -> None:
    repo = gitmem.init(tmp_path / "repo", clock=clock)
    user = gitmem.init(tmp_path / "user", scope="user", clock=clock)
    both = gitmem.Store([repo._backends[repo.default_scope], user._backends[user.default_scope]])
    a = repo.create("deploy from the repo store\n")
    b = user.create("deploy from the user store\n")
    results = both.recall("deploy")
    assert set(results.ids) == {a.id, b.id}
    # scope= keeps one store's memories (issue 12's scope filter)
    assert both.recall("deploy", scope="repo").ids == [a.id]
    assert both.recall("deploy", scope="user").ids == [b.id]
    assert both.recall("deploy", scope=gitmem.Scope.USER).ids == [b.id]


def test_words_that_are_fts5_syntax_are_words(store: Store, clock: FixedClock) -> None:
    a = store.create("NEAR the border, OR NOT: a note about AND gates\n")
    for query in ('NEAR(border', 'OR NOT', '"AND gates', "title:border", "border*", "^border"):
        assert top(store, query) == [a.id], query


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    query=st.one_of(
        st.text(),
        st.text(alphabet=st.sampled_from(list('"*():^-+{}[]NEAROTD \x00\\\'/._\u00e9\ud7ff'))),
        st.lists(st.sampled_from(["AND", "OR", "NOT", "NEAR", '"', "*", "(", ")", "title:", "x"]))
        .map(" ".join),
    )
)
@pytest.mark.slow
def test_no_query_ever_raises(filled_store: tuple[Store, dict[str, str]], query: str) -> None:
    store, _ = filled_store
    results = store.recall(query)
    assert len(results) <= 10
    store.recall(query, include_superseded=True, budget=10)
    assert parse(query).fts.count('"') % 2 == 0


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict[str, str]]:
    clock = FixedClock()
    store = gitmem.init(tmp_path_factory.mktemp("r") / "store", clock=clock)
    return store, fill(store, clock)


def test_a_surrogate_or_nul_in_the_query(filled_store: tuple[Store, dict[str, str]]) -> None:
    store, ids = filled_store
    assert store.recall("deploy\x00staging\ud800?").ids[0] == ids["deploy"]
    assert store.recall("").notice and store.recall("?!").ids == []


ISSUE_QUERIES = [
    "how do we deploy to staging?",
    "deploying",
    "test fixtures",
    "where do fixtures live",
]


@pytest.mark.parametrize("query", ISSUE_QUERIES)
def test_search_answers_the_issues_queries(store: Store, query: str) -> None:
    """The issue's store and queries: `gitmem search` said "No matches." to each."""
    deploy = store.create(DEPLOY + "\n").id
    fixtures = store.create(FIXTURES + "\n").id
    expected = fixtures if "fixtures" in query else deploy
    results = store.search(query)
    assert results.ids[0] == expected
    # FTS5 syntax still means what it says: an explicit operator is not second-guessed.
    assert store.search("deploying NOT staging").ids == []
    assert store.search('"production deploys"').ids == [deploy]


@pytest.mark.parametrize("section", ["embedder: off\n", "embedder:\n  provider: bogus\n"])
def test_without_an_embedder_recall_is_lexical_with_a_notice(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, section: str
) -> None:
    from gitmem.store import embed

    config = tmp_path / "config.yaml"
    config.write_text(section)
    monkeypatch.setenv("GITMEM_CONFIG", str(config))
    embed.clear_cache()
    try:
        deploy = store.create(DEPLOY + "\n").id
        store.create(FIXTURES + "\n")
        results = store.recall("how do we deploy to staging?")
        assert results.ids == [deploy] and not results.semantic
        assert results.notice == "embeddings are off or unavailable: ranked by words only"
        assert results[0].semantic is None
    finally:
        embed.clear_cache()


def test_with_the_default_embedder_recall_is_hybrid(store: Store) -> None:
    deploy = store.create(DEPLOY + "\n").id
    results = store.recall("how do we deploy to staging?")
    assert results.semantic and results.notice is None
    assert results.ids == [deploy] and results[0].semantic is not None
    assert any(w.startswith("similar in meaning (cosine") for w in results[0].why)


def test_near_duplicates_are_reported_with_their_similarity(
    store: Store, clock: FixedClock
) -> None:
    first = store.create(FIXTURES + "\n")
    store.create(DEPLOY + "\n")
    api = store.create("Fixtures for the API tests are in tests/api/fixtures.py\n")
    twin = store.create("Test fixtures live in conftest.py under tests\n")
    from gitmem.store.duplicates import duplicates_report

    found = duplicates_report(store.reader(), twin)
    assert [(d["id"], d["similarity"]) for d in found] == [(first.id, 1.0)]
    assert duplicates_report(store.reader(), store.create("The cat sat on the mat\n")) == []
    assert duplicates_report(store.reader(), store.create("fixtures\n")) == []
    assert api.id not in [d["id"] for d in duplicates_report(store.reader(), first)]
    # A new version does not count its predecessor as a duplicate.
    newer = store.supersede(first.id, FIXTURES + " (and tests/api/conftest.py)\n")
    assert first.id not in [d["id"] for d in duplicates_report(store.reader(), newer)]


def test_add_and_remember_report_near_duplicates(store: Store) -> None:
    from click.testing import CliRunner

    from gitmem.cli import cli
    from gitmem.entry.mcp import call, tools

    first = store.create(FIXTURES + "\n")
    runner = CliRunner()
    where = ["--store", str(store.path)]
    out = runner.invoke(cli, [*where, "add", "Fixtures are in tests/conftest.py"])
    assert out.exit_code == 0, out.output
    new_id = out.stdout.strip()
    assert new_id.startswith("mem_") and "\n" not in new_id  # stdout: the id alone
    assert f"note: similar to {first.id}" in out.stderr
    assert f"gitmem update {first.id}" in out.stderr
    out = runner.invoke(cli, [*where, "--json", "add", "The cat sat"])
    assert out.exit_code == 0 and '"near_duplicates": []' in out.stdout
    specs = {spec.name: spec for spec in tools(store)}
    result, failed = call(specs["remember"], {"content": "Test fixtures live in tests/conftest.py"})
    assert not failed and result.structured is not None
    assert [d["id"] for d in result.structured["near_duplicates"]][:1] in ([first.id], [new_id])
    assert "update_memory" in result.text


def test_recall_command(store: Store, clock: FixedClock) -> None:
    import json

    from click.testing import CliRunner

    from gitmem.cli import cli

    ids = fill(store, clock)
    runner = CliRunner()
    where = ["--store", str(store.path)]
    out = runner.invoke(cli, [*where, "recall", "how", "do", "we", "deploy", "to", "staging?"])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[0].startswith(ids["deploy"])
    assert f"     1: {DEPLOY}" in out.stdout
    out = runner.invoke(cli, [*where, "recall", "sample_user", "--explain", "-n", "1"])
    assert "matched sample (body), user (body" in out.stdout and "[score " in out.stdout
    out = runner.invoke(cli, [*where, "recall", "test fixtures", "--json", "--limit", "2"])
    data = json.loads(out.stdout)
    assert [h["id"] for h in data["hits"]] == store.recall("test fixtures", limit=2).ids
    out = runner.invoke(cli, [*where, "recall", "fixtures conftest", "--budget", "30"])
    assert out.stdout.startswith(f"<!-- {ids['fixtures']} (whole, ~") and FIXTURES in out.stdout
    out = runner.invoke(cli, [*where, "recall", "?!"])
    assert out.exit_code == 0 and "No matches." in out.stdout
    assert "no words to look for" in out.stderr
    out = runner.invoke(cli, [*where, "recall", "x", "--budget", "-1"])
    assert out.exit_code == 2


def test_words_in_most_memories_are_left_out_of_a_large_stores_query(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.store import bm25

    monkeypatch.setattr(bm25, "COMMON_FROM", 5)
    with store.transaction("many"):
        for i in range(9):
            store.create(f"plenty of notes number {i}\n")
        rare = store.create("plenty of notes about the walrus\n").id
    parsed = bm25.parse("plenty walrus")
    expression = store.index().read(lambda conn: bm25._plan(conn, parsed)[0])
    assert expression == '"walrus"'
    assert store.recall("plenty walrus").ids[0] == rare
    # A word no memory holds does not push the common one out.
    nothing = bm25.parse("plenty zebra")
    assert store.index().read(lambda conn: bm25._plan(conn, nothing)[0]) == nothing.fts
    assert len(store.recall("plenty zebra", limit=20)) == 10


def test_past_the_rank_cap_recall_ranks_the_rarest_words_or_the_newest_matches(
    store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a store of more than BOUNDED_FROM memories (lowered here), the words whose matches
    add up to at most RANK_CAP are ranked, wherever their memories are; when every word
    matches more, only the newest RANK_CAP matches are."""
    from gitmem.store import bm25, index_queries
    from gitmem.store import recall as recall_mod

    monkeypatch.setattr(bm25, "RANK_CAP", 6)
    monkeypatch.setattr(index_queries, "BOUNDED_FROM", 6)
    with store.transaction("many"):
        walrus = store.create("plenty of notes about the walrus and an otter\n").id
        otter = store.create("an otter swims\n").id
        for i in range(12):
            clock.advance(minutes=1)
            store.create(f"plenty of notes number {i}\n")
    index = store.index()
    parsed = bm25.parse("plenty otter walrus")
    plan = index.read(lambda conn: bm25._plan(conn, parsed))
    assert plan == ('"otter" OR "walrus"', None)
    assert store.recall("plenty otter walrus", limit=2).ids == [walrus, otter]
    # Every word matches more than 6 memories: the 6 newest matches, nothing older.
    plenty = bm25.parse("plenty")
    assert index.read(lambda conn: bm25._plan(conn, plenty))[1] is not None
    found = recall_mod.recall([store.reader()], "plenty notes", limit=20, semantic=False)
    newest = index.read(lambda conn: [
        r[0] for r in conn.execute(
            "SELECT id FROM memories WHERE body LIKE '%notes%' ORDER BY rowid DESC LIMIT 6"
        )
    ])
    assert len(found) == 6 and set(found.ids) == set(newest)  # the 6 last indexed matches
    monkeypatch.setattr(index_queries, "BOUNDED_FROM", 100)  # a small store: every match ranks
    assert len(recall_mod.recall([store.reader()], "plenty notes", limit=20, semantic=False)) == 13


def test_past_the_search_cap_a_search_finds_matches_and_titles_from_any_age(
    store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.store import index_queries

    monkeypatch.setattr(index_queries, "SEARCH_CAP", 5)
    monkeypatch.setattr(index_queries, "BOUNDED_FROM", 5)
    with store.transaction("many"):
        named = store.create("how we migrate the schema\n", title="migration").id
        for i in range(12):
            clock.advance(minutes=1)
            store.create(f"a migration note number {i}\n")
        store.create("nothing to see\n")
    found = store.search("migration", limit=50)
    assert found.ids[0] == named  # the exact title ranks first, however old
    newest = store.index().read(lambda conn: [
        r[0] for r in conn.execute(
            "SELECT id FROM memories WHERE body LIKE '%migration%' OR title = 'migration' "
            "ORDER BY rowid DESC LIMIT 5"
        )
    ])
    assert set(found.ids) == {named, *newest}  # the 5 last indexed matches and the title
    assert all("migrat" in store.read(i).body + (store.read(i).title or "") for i in found.ids)
    assert len(store.search("migration", limit=3)) == 3
    assert store.search("nothing", limit=5).ids  # a rare word: every match ranks
    monkeypatch.setattr(index_queries, "BOUNDED_FROM", 10_000)
    assert len(store.search("migration", limit=50)) == 13


def test_identifier_parts_split_camel_case_and_digits_only() -> None:
    from gitmem.store import lexical

    text = "parseHTTPRequest utf8Decode CamelCase ABc Plain 60456 \u00e9aB " + "x" * 70 + "Y"
    assert lexical.identifier_parts(text) == [
        "parse", "http", "request", "utf", "8", "decode", "camel", "case", "a", "bc",
    ]
