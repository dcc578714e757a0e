"""Quality checks (gitmem/features/lifecycle/quality.py): completeness heuristics, what a claim
is, specificity at the 30% edge, growth, accuracy suggestions, the report's JSON shape."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitmem.features.lifecycle.prune import LifecycleConfigError
from gitmem.features.lifecycle.quality import (
    COMPLETENESS_CHECKS,
    Claim,
    QualityPolicy,
    accuracy_suggestions,
    claims,
    completeness,
    growth_rate,
    references,
    specificity,
    validate_document,
)
from gitmem.features.lifecycle.sections import count_lines

OVERVIEW = textwrap.dedent(
    """\
    <!-- Last Updated: 2026-01-01 -->
    # Project Overview

    **Language**: Python 3.11
    **Framework**: FastAPI 0.110

    ## Architecture
    Routers call services; services call repositories.

    ## Conventions
    - Names are snake_case; `ruff` formats everything.

    ## Testing
    - Fixtures live in `tests/conftest.py`.
    """
)


# --------------------------------------------------------------------------- completeness


def test_complete_overview_names_each_check_with_its_line() -> None:
    data = completeness(OVERVIEW)
    assert data["complete"]
    assert [(c["name"], c["found"], c["line"]) for c in data["checks"]] == [
        ("language_version", True, 4),
        ("framework_version", True, 5),
        ("architecture_pattern", True, 7),  # the heading, because it has content
        ("conventions", True, 11),
        ("testing_approach", True, 13),
    ]
    assert data["checks"][0]["evidence"] == "**Language**: Python 3.11"
    assert (data["complete"], data["foundCount"], data["total"], data["missing"]) == (
        True,
        5,
        5,
        [],
    )
    assert set(data["checks"][0]) == {"name", "found", "line", "evidence", "detection"}


def test_empty_overview_misses_everything() -> None:
    result = completeness("# Project Overview\n\nA web app.\n")
    assert result["missing"] == list(COMPLETENESS_CHECKS)
    assert not result["complete"]
    assert all(c["line"] is None and c["evidence"] is None for c in result["checks"])


@pytest.mark.parametrize(
    ("check", "text", "found"),
    [
        ("language_version", "Written in Python 3.12.", True),
        ("language_version", "Python (3.11+)", True),
        ("language_version", "requires python>=3.11", True),
        ("language_version", "Go 1.22 services", True),
        ("language_version", "golang 1.21", True),
        ("language_version", "Node.js v20 and TypeScript 5.x", True),
        ("language_version", "C++17 core", True),
        ("language_version", "- Runtime: CPython 3.12", True),  # a field with a version
        ("language_version", "Written in Python.", False),  # no version
        ("language_version", "go to step 2", False),  # lower-case go is a verb
        ("language_version", "```\nPython 3.11\n```", False),  # code blocks are not read
        ("framework_version", "Django 5.0 with DRF", True),
        ("framework_version", "React 18, Next.js 14", True),
        ("framework_version", "**Framework**: Litestar-like 2.1", True),
        ("framework_version", "Spring Boot 3.2", True),
        ("framework_version", "Django, no version", False),
        ("architecture_pattern", "A hexagonal core with adapters.", True),
        ("architecture_pattern", "Event-driven workers.", True),
        ("architecture_pattern", "**Architecture**: three services talking over gRPC", True),
        ("architecture_pattern", "## Architecture\n\nsee the diagram\n", True),
        ("architecture_pattern", "## Architecture\n\n## Next\n\ntext\n", False),  # empty
        ("architecture_pattern", "## Architecture\n\n### Layers\n\nweb, db\n", True),
        ("conventions", "Format with black.", True),
        ("conventions", "Components are PascalCase.", True),
        ("conventions", "## Code Style\n\nFour spaces.\n", True),
        ("conventions", "Be nice.", False),
        ("testing_approach", "Run pytest -x.", True),
        ("testing_approach", "Integration tests use a real database.", True),
        ("testing_approach", "e2e via Playwright", True),
        ("testing_approach", "## Testing\n\nEverything is checked in CI.\n", True),
        ("testing_approach", "Quality matters.", False),
    ],
)
def test_completeness_heuristics(check: str, text: str, found: bool) -> None:
    result = {c["name"]: c["found"] for c in completeness(text)["checks"]}
    assert result[check] is found


# --------------------------------------------------------------------------- claims


def test_what_is_a_claim() -> None:
    body = textwrap.dedent(
        """\
        # Title

        First sentence here. Second one names `parse()`! Third?
        A wrapped line
        that continues the third paragraph sentence.
        **Status**: open

        - bullet one
          continued on the next line
        - Lead-in:
          - nested item with src/app.py:12
        1. ordered item
        - [x] done task

        > quoted sentence.

        | table | row |
        |---|---|
        | a | b |

        ```python
        # not a heading, not a claim
        x = 1
        ```
        <!-- a comment
        over lines -->
        ---
        [VERIFY PATTERNS] write 5 (2026-01-01): marker
        Call `a. B` once.
        """
    )
    found = claims(body)
    assert [(c.line, c.kind, c.text) for c in found] == [
        (3, "sentence", "First sentence here."),
        (3, "sentence", "Second one names `parse()`!"),
        (3, "sentence", "Third?"),
        (4, "sentence", "A wrapped line that continues the third paragraph sentence."),
        (6, "sentence", "**Status**: open"),
        (8, "bullet", "bullet one continued on the next line"),
        (11, "bullet", "nested item with src/app.py:12"),
        (12, "bullet", "ordered item"),
        (13, "bullet", "done task"),
        (15, "sentence", "quoted sentence."),
        (29, "sentence", "Call `a. B` once."),
    ]
    assert found[6].paths == ("src/app.py",)
    assert found[6].line_refs == (":12",)


@pytest.mark.parametrize(
    ("text", "paths", "line_refs", "identifiers"),
    [
        ("edit src/app.py", ("src/app.py",), (), ()),
        ("the docs/ folder", ("docs/",), (), ()),
        ("see ./run", ("./run",), (), ()),
        ("in a/b/c", ("a/b/c",), (), ()),
        ("setup.cfg and App.tsx", ("setup.cfg", "App.tsx"), (), ()),
        ("the Makefile target", ("Makefile",), (), ()),
        ("at app.py:120", ("app.py",), (":120",), ()),
        ("`store.py`:88", ("store.py",), (":88",), ()),
        ("on line 45", (), ("line 45",), ()),
        ("lines 10-20 of it", (), ("lines 10-20",), ()),
        ("blob#L12-L40", (), ("#L12-L40",), ()),
        ("call `load_config`", (), (), ("load_config",)),
        ("call run()", (), (), ("run()",)),
        ("os.path.join(a, b) and getUser(id)", (), (), ("os.path.join(a, b)", "getUser(id)")),
        # Not references:
        ("https://example.com/a/b.html", (), (), ()),
        ("and/or input/output", (), (), ()),
        ("Node.js and Next.js", (), (), ()),
        ("e.g. this, i.e. that", (), (), ()),
        ("at 10:30 on a 3:1 ratio", (), (), ()),
        ("some file(s)", (), (), ()),
        ("version `42`", (), (), ()),
    ],
)
def test_references(
    text: str, paths: tuple[str, ...], line_refs: tuple[str, ...], identifiers: tuple[str, ...]
) -> None:
    assert references(text) == (paths, line_refs, identifiers)


@given(st.text(alphabet=st.sampled_from(list("ab #-*`|>:.!?\n1/()_<!->")), max_size=300))
def test_claims_on_any_text(body: str) -> None:
    found = claims(body)
    assert found == claims(body)  # deterministic
    total = count_lines(body)
    for claim in found:
        assert 1 <= claim.line <= total
        assert claim.text and claim.text == claim.text.strip()
        assert not claim.text.endswith(":")
        assert claim.text.split()[0].lstrip("`*_") in body


# --------------------------------------------------------------------------- specificity


def doc(specific: int, unspecific: int) -> str:
    lines = [f"- names `func_{i}`" for i in range(specific)]
    lines += [f"- vague claim number {i}" for i in range(unspecific)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("specific_count", "unspecific_count", "specific"),
    [(7, 3, True), (6, 4, False), (0, 0, True), (1, 0, True), (0, 1, False)],
)
def test_specificity_edge_at_thirty_percent(
    specific_count: int, unspecific_count: int, specific: bool
) -> None:
    data = specificity(doc(specific_count, unspecific_count))
    assert data["claimCount"] == specific_count + unspecific_count
    assert [c["text"] for c in data["unspecificClaims"]] == [
        f"vague claim number {i}" for i in range(unspecific_count)
    ]
    assert data["unspecificCount"] == unspecific_count
    assert data["specific"] is specific
    assert set(data) == {
        "specific",
        "claimCount",
        "unspecificCount",
        "unspecificRatio",
        "threshold",
        "unspecificClaims",
    }


def test_specificity_threshold_is_configurable() -> None:
    assert specificity(doc(6, 4), max_unspecific_ratio=0.4)["specific"]
    assert not specificity(doc(7, 3), max_unspecific_ratio=0.2)["specific"]


# --------------------------------------------------------------------------- growth


@pytest.mark.parametrize(
    ("counts", "status", "change"),
    [
        ([], "unknown", None),
        ([10, 12, 14, 16], "unknown", None),
        ([10, 10, 10, 10, 10], "stagnant", 0),
        ([10, 11, 11, 11, 11], "healthy", 1),
        ([10, 10, 10, 10, 11], "healthy", 1),
        ([20, 25, 30, 12, 15], "stagnant", -5),  # shrank over the window
        ([5, 10, 10, 10, 10, 10], "stagnant", 0),  # grew, but not in the last 5 writes
        ([5, 6, 7, 8, 9, 10, 11], "healthy", 4),
    ],
)
def test_growth_rate(counts: list[int], status: str, change: int | None) -> None:
    result = growth_rate(counts)
    assert (result["status"], result["change"], result["writes"]) == (status, change, len(counts))
    assert result["lineCounts"] == (counts[-5:] if len(counts) >= 5 else counts)


def test_growth_window_is_configurable() -> None:
    assert growth_rate([1, 2, 3], window=3)["status"] == "healthy"
    assert growth_rate([1, 2, 3], window=4)["status"] == "unknown"


# --------------------------------------------------------------------------- accuracy


ACCURACY_DOC = textwrap.dedent(
    """\
    - Uses a cache.
    - `load()` reads the config.
    - Retries live in src/retry.py.
    - The parser is at src/parse.py:40 in `parse_line`.
    - Errors are wrapped.
    - See line 12 of the notes.
    """
)


def test_accuracy_suggestions_only_every_fifth_write() -> None:
    for count in (0, 1, 4, 6, 9):
        assert accuracy_suggestions(ACCURACY_DOC, count) == []
    assert accuracy_suggestions(ACCURACY_DOC, 5) == accuracy_suggestions(ACCURACY_DOC, 10)


def test_accuracy_suggestions_pick_the_most_concrete_claims() -> None:
    picked = accuracy_suggestions(ACCURACY_DOC, 5)
    assert [s["line"] for s in picked] == [4, 3, 6]  # path+line+id, path, line
    assert picked[0]["suggestion"] == (
        'line 4: "The parser is at src/parse.py:40 in `parse_line`." - is it still true '
        "of src/parse.py, :40, parse_line?"
    )
    assert picked[0]["claim"] == "The parser is at src/parse.py:40 in `parse_line`."
    assert [s["line"] for s in accuracy_suggestions(ACCURACY_DOC, 5, count=2)] == [4, 3]


def test_accuracy_suggestions_fill_up_with_unspecific_claims() -> None:
    body = "- Uses a cache.\n- Retries live in src/retry.py.\n- Errors are wrapped.\n"
    picked = accuracy_suggestions(body, 5)
    assert [s["line"] for s in picked] == [2, 1]
    assert picked[1]["suggestion"].endswith("Name the file or function it is about.")
    assert accuracy_suggestions("# only a heading\n", 5) == []


# --------------------------------------------------------------------------- policy and report


def test_quality_policy_from_config() -> None:
    assert QualityPolicy.from_config(None) == QualityPolicy()
    policy = QualityPolicy.from_config(
        {"lifecycle": {"quality": {"max_unspecific_ratio": 0.2, "growth_window": 3}}}
    )
    assert (policy.max_unspecific_ratio, policy.growth_window) == (0.2, 3)
    for bad, message in [
        ({"max_unspecific_ratio": -1}, "max_unspecific_ratio must be a number from 0 to 1"),
        ({"growth_window": 1}, "growth_window must be a whole number >= 2"),
        ({"accuracy_claims": "3"}, "accuracy_claims must be a whole number >= 1"),
        ({"ratio": 1}, "lifecycle.quality.ratio: unknown option"),
    ]:
        with pytest.raises(LifecycleConfigError, match=message):
            QualityPolicy.from_config({"lifecycle": {"quality": bad}})


def test_validate_project_overview() -> None:
    data = validate_document(
        "project_overview", "# Overview\n\nWritten in Python 3.11.\n", write_count=5
    )
    assert data["checks"]["completeness"]["missing"] == list(COMPLETENESS_CHECKS[1:])
    assert data["fileType"] == "project_overview"
    assert set(data["checks"]) == {"completeness", "specificity", "growthRate"}
    assert data["checks"]["growthRate"] is None
    assert data["suggestions"][:4] == [
        "Add the framework and its version (e.g. 'Django 5.0').",
        "Add the architecture pattern (an Architecture section).",
        "Add the conventions (naming, formatter, linter).",
        "Add the testing approach (tools, kinds of tests).",
    ]
    assert data["suggestions"][4].startswith("1 of 1 claims name no file path")
    assert data["suggestions"][5].startswith('Check line 3: "Written in Python 3.11."')
    assert [a["line"] for a in data["accuracy"]] == [3]


def test_validate_common_patterns() -> None:
    body = "- Wrap errors with `wrap_error()` from src/errors.py.\n"
    report = validate_document("common_patterns", body, line_counts=[1, 1, 1, 1, 1])
    assert report["checks"]["completeness"] is None
    assert report["checks"]["growthRate"]["status"] == "stagnant"
    assert report["checks"]["specificity"]["specific"]
    assert report["suggestions"] == [
        "common_patterns has not grown over its last 5 writes: record the patterns learned since.",
    ]
    healthy = validate_document("common_patterns", body, line_counts=[1, 1, 1, 1, 2])
    assert healthy["suggestions"] == []
    assert healthy["checks"]["growthRate"] == {
        "status": "healthy",
        "writes": 5,
        "lineCounts": [1, 1, 1, 1, 2],
        "change": 1,
    }


def test_claim_to_dict_is_camel_case() -> None:
    claim = Claim("x at a.py:3", 1, "bullet", ("a.py",), (":3",), ())
    assert claim.to_dict() == {
        "text": "x at a.py:3",
        "line": 1,
        "kind": "bullet",
        "specific": True,
        "paths": ["a.py"],
        "lineRefs": [":3"],
        "identifiers": [],
    }
