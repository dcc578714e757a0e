"""Prune rules (gitmem/features/lifecycle/rules.py): each rule at its edges, idempotence, the
registry (code and gitmem.yaml), size warnings, and properties over random documents."""

from __future__ import annotations

import datetime as dt
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitmem.base.errors import InvalidInputError
from gitmem.features.lifecycle.prune import (
    VERIFY_STATUS,
    LifecycleConfigError,
    PruneAction,
    PruneRule,
    RuleContext,
    RuleResult,
    issue_status,
    parse_summary,
    session_counts,
)
from gitmem.features.lifecycle.rules import (
    DEFAULT_REGISTRY,
    DEFAULT_SIZE_LIMITS,
    RuleRegistry,
    apply_rule,
    registry_from_config,
    size_limits_from_config,
    size_warning,
)
from gitmem.features.lifecycle.sections import (
    chronological,
    count_lines,
    join_sections,
    split_sections,
)
from gitmem.format.config import PolicyMapping

TODAY = dt.date(2026, 11, 22)


def ago(days: int) -> str:
    return (TODAY - dt.timedelta(days=days)).isoformat()


def titles(text: str, level: int) -> list[str]:
    return [s.title for s in split_sections(text, level) if s.level == level]


def run(
    file_type: str,
    body: str,
    *,
    write_count: int = 0,
    archive_text: str | None = None,
    config: dict[str, object] | None = None,
) -> RuleResult:
    return apply_rule(
        file_type,
        body,
        today=TODAY,
        write_count=write_count,
        archive_text=archive_text,
        config=config,
    )


# --------------------------------------------------------------------------- markdown


def test_split_is_lossless_and_ignores_headings_in_code_fences() -> None:
    body = textwrap.dedent(
        """\
        intro line
        ## A
        text
        ```md
        ## not a heading
        ```
        ### sub of A
        ## B ##
        ~~~
        # also not
        ~~~
        # Top"""
    )
    blocks = split_sections(body, 2)
    assert "".join(b.text for b in blocks) == body
    assert [(b.level, b.title) for b in blocks] == [(0, ""), (2, "A"), (2, "B"), (1, "Top")]
    assert "### sub of A" in blocks[1].text


@given(st.text(alphabet=st.sampled_from(list("#`~ \nab-2:*")), max_size=200), st.integers(1, 6))
def test_split_is_lossless_for_any_text(body: str, level: int) -> None:
    blocks = split_sections(body, level)
    assert "".join(b.text for b in blocks) == body
    assert join_sections(blocks) == body


def test_count_lines() -> None:
    assert count_lines("") == 0
    assert count_lines("a") == 1
    assert count_lines("a\n") == 1
    assert count_lines("a\n\nb") == 3


def test_chronological_order_by_date_and_position_for_undated() -> None:
    body = (
        "## Review 2026-03-01\n\n## Review undated after march\n\n"
        "## Review 2026-01-01\n\n## Review\n**Date**: 2026-02-01\n\n"
    )
    sections = [s for s in split_sections(body, 2) if s.level]
    order = chronological(sections)
    assert [sections[i].title for i in order] == [
        "Review 2026-01-01",
        "Review",  # dated by its Date: line
        "Review 2026-03-01",
        "Review undated after march",  # as old as the dated section before it
    ]
    assert chronological(sections) == chronological(sections)


# --------------------------------------------------------------------------- review_history


def review_doc(dates: Sequence[str], preamble: str = "# Review History\n\n") -> str:
    return preamble + "".join(f"## Review {d}\n\n- finding for {d}\n\n" for d in dates)


def days_dates(n: int, start: dt.date = dt.date(2026, 1, 1)) -> list[str]:
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(n)]


def test_review_history_exactly_ten_is_untouched() -> None:
    body = review_doc(days_dates(10))
    result = run("review_history", body)
    assert result == RuleResult(body)


def test_review_history_eleven_moves_the_oldest_to_a_new_archive() -> None:
    dates = days_dates(11)
    shuffled = dates[5:] + dates[:5]  # written out of order: the date decides, not position
    body = review_doc(shuffled) + "## Notes\n\nkept\n"
    result = run("review_history", body)
    assert titles(result.body, 2) == [f"Review {d}" for d in dates[5:] + dates[1:5]] + ["Notes"]
    assert result.actions == (
        PruneAction(
            "archived",
            "11 reviews, more than 10: the oldest moved to review_history_archive.md",
            "Review 2026-01-01",
        ),
    )
    assert result.archive_text is not None
    assert result.archive_text.startswith("# Review History Archive\n\n")
    assert titles(result.archive_text, 2) == ["Review 2026-01-01"]
    assert "- finding for 2026-01-01" in result.archive_text
    assert DEFAULT_REGISTRY["review_history"].archive == "review_history_archive"


def test_review_history_archive_kept_in_date_order_and_moving_is_idempotent() -> None:
    archive = (
        "# My archive\n\nhand-written header\n\n"
        "## Review 2025-12-20\n\nold\n\n## Review 2025-12-01\n\nolder\n"
    )
    body = review_doc(days_dates(13))
    result = run("review_history", body, archive_text=archive)
    assert result.archive_text is not None
    assert result.archive_text.startswith("# My archive\n\nhand-written header\n\n")
    assert titles(result.archive_text, 2) == [
        "Review 2025-12-01",
        "Review 2025-12-20",
        "Review 2026-01-01",
        "Review 2026-01-02",
        "Review 2026-01-03",
    ]
    # The body after the move, run again: nothing moves, the archive is left alone.
    again = run("review_history", result.body, archive_text=result.archive_text)
    assert again == RuleResult(result.body)
    # The same move repeated against the new archive (a retried write) adds nothing twice.
    retried = run("review_history", body, archive_text=result.archive_text)
    assert retried.archive_text == result.archive_text
    assert retried.body == result.body


def test_review_history_undated_reviews_move_in_document_order() -> None:
    body = "".join(f"## Review number {i}\n\ntext {i}\n\n" for i in range(12))
    result = run("review_history", body)
    assert [a.section for a in result.actions] == ["Review number 0", "Review number 1"]
    assert titles(result.body, 2) == [f"Review number {i}" for i in range(2, 12)]


def test_review_history_config_override() -> None:
    body = review_doc(days_dates(4))
    config = {"lifecycle": {"prune": {"review_history": {"max_reviews": 3}}}}
    result = run("review_history", body, config=config)
    assert [a.section for a in result.actions] == ["Review 2026-01-01"]
    assert run("review_history", body) == RuleResult(body)


# --------------------------------------------------------------------------- known_issues


def issue(title: str, status: str, *extra: str) -> str:
    lines = [f"### {title}", f"**Status**: {status}", *extra, "", "Details.", "", ""]
    return "\n".join(lines)


@pytest.mark.parametrize(("days", "removed"), [(29, False), (30, True), (31, True)])
def test_known_issues_resolved_edge(days: int, removed: bool) -> None:
    body = "# Known Issues\n\n" + issue("Crash on save", f"Resolved ({ago(days)})")
    result = run("known_issues", body)
    assert ("Crash on save" not in result.body) is removed
    if removed:
        assert result.actions == (
            PruneAction(
                "removed",
                f"resolved on {ago(days)}, {days} days ago (30+ days)",
                "Crash on save",
            ),
        )
        assert result.body == "# Known Issues\n\n"
    else:
        assert result == RuleResult(body)


def test_known_issues_in_progress_kept_whatever_its_age_but_flagged_once() -> None:
    body = issue("Flaky sync", f"In Progress since {ago(400)}") + issue(
        "Crash", f"✅ RESOLVED — {ago(400)}"
    )
    result = run("known_issues", body)
    assert titles(result.body, 3) == ["Flaky sync"]
    assert f"**Status**: In Progress since {ago(400)} {VERIFY_STATUS}\n" in result.body
    assert [a.action for a in result.actions] == ["flagged", "removed"]
    assert result.actions[0].section == "Flaky sync"
    again = run("known_issues", result.body)
    assert again == RuleResult(result.body)
    assert result.body.count(VERIFY_STATUS) == 1


@pytest.mark.parametrize(("days", "flagged"), [(89, False), (90, True), (91, True)])
def test_known_issues_verify_status_edge(days: int, flagged: bool) -> None:
    body = issue("Slow query", "Open", f"**Updated**: {ago(days)}")
    result = run("known_issues", body)
    assert (VERIFY_STATUS in result.body) is flagged
    assert len(result.actions) == int(flagged)


def test_known_issues_status_update_date_definition() -> None:
    [section] = [
        s
        for s in split_sections(
            issue("X", f"Open (checked {ago(10)})", f"- **Last Updated:** {ago(5)}"), 3
        )
        if s.level
    ]
    info = issue_status(section)
    assert info.status_updated == TODAY - dt.timedelta(days=5)
    assert not info.resolved and not info.in_progress
    # No date on the status or updated lines: the heading date counts (when written).
    body = f"### Old bug {ago(120)}\n**Status**: Open\n\n### Undated bug\n**Status**: Open\n"
    result = run("known_issues", body)
    assert [a.section for a in result.actions] == [f"Old bug {ago(120)}"]
    assert result.actions[0].reason.startswith("no status update for 120 days")


def test_known_issues_without_status_line_get_the_marker_on_the_heading() -> None:
    body = f"### Ancient\n**Reported**: {ago(200)}\n\nno status yet\n"
    result = run("known_issues", body)
    assert result.body.startswith(f"### Ancient {VERIFY_STATUS}\n")
    assert run("known_issues", result.body) == RuleResult(result.body)


def test_known_issues_resolved_without_date_or_not_resolved_are_kept() -> None:
    body = (
        issue("No date", "Resolved")
        + issue("Negated", f"Not resolved, seen {ago(40)}")
        + issue("Fixed line", "Resolved", f"**Fixed**: {ago(45)}")
    )
    result = run("known_issues", body)
    assert titles(result.body, 3) == ["No date", "Negated"]
    assert [a.action for a in result.actions] == ["removed"]


def test_known_issues_headings_and_code_kept() -> None:
    body = (
        "# Known Issues\n\n## Open\n\n"
        + issue("A", "Open")
        + "## Resolved\n\n"
        + issue("B", f"Resolved {ago(60)}", "```", "### not an issue", "```")
    )
    result = run("known_issues", body)
    assert titles(result.body, 2) == ["Open", "Resolved"]
    assert titles(result.body, 3) == ["A"]


def test_known_issues_config_override() -> None:
    body = issue("A", f"Resolved {ago(8)}") + issue("B", "Open", f"**Updated**: {ago(20)}")
    config = {
        "lifecycle": {
            "prune": {
                "known_issues": {"remove_resolved_after_days": 7, "verify_status_after_days": 14}
            }
        }
    }
    result = run("known_issues", body, config=config)
    assert [(a.action, a.section) for a in result.actions] == [
        ("removed", "A"),
        ("flagged", "B"),
    ]


# --------------------------------------------------------------------------- test_results_history


def session_doc(n: int, first: int = 1, *, title: str = "Session") -> str:
    out = []
    for i in range(first, first + n):
        day = dt.date(2026, 1, 1) + dt.timedelta(days=i)
        out.append(f"## {title} {i} ({day.isoformat()})\n\nPassed: {i}\n**Failed**: 1\n\n")
    return "".join(out)


def test_fifteen_sessions_untouched() -> None:
    body = "# Test Results\n\n" + session_doc(15)
    assert run("test_results_history", body) == RuleResult(body)


def test_sixteen_sessions_fold_the_oldest_into_a_summary_at_the_bottom() -> None:
    body = "# Test Results\n\n" + session_doc(16) + "## Notes\n\nflaky on CI\n"
    result = run("test_results_history", body)
    heads = titles(result.body, 2)
    assert heads[-1] == "Historical Summary"
    assert heads.count("Historical Summary") == 1
    assert heads[:-1] == [
        f"Session {i} ({dt.date(2026, 1, 1 + i).isoformat()})" for i in range(2, 17)
    ] + ["Notes"]
    summary = result.body.split("## Historical Summary\n", 1)[1]
    assert "- Sessions: 1\n" in summary
    assert "- Date range: 2026-01-02 to 2026-01-02\n" in summary
    assert "- Passed: 1 (stated in 1 of 1 session)\n" in summary
    assert "- Sessions summarized:\n  - Session 1 (2026-01-02)\n" in summary
    assert [a.action for a in result.actions] == ["removed"]
    assert result.actions[0].section == "Session 1 (2026-01-02)"
    assert run("test_results_history", result.body) == RuleResult(result.body)


def test_summary_totals_and_a_later_run_folds_the_summary_in() -> None:
    body = session_doc(18, title="Test Session")
    first = run("test_results_history", body)
    # sessions 1..3: passed 1+2+3 = 6, failed 3
    assert "- Passed: 6 (stated in 3 of 3 sessions)\n" in first.body
    assert "- Failed: 3 (stated in 3 of 3 sessions)\n" in first.body
    grown = (
        first.body.replace(
            "## Historical Summary", session_doc(2, first=19) + "## Historical Summary"
        )
        + "## Session 21 (2026-01-22)\n\nno counts written\n"
    )
    second = run("test_results_history", grown)
    assert titles(second.body, 2).count("Historical Summary") == 1
    summary = parse_summary(split_sections(second.body, 2)[-1])
    assert summary.sessions == 6
    assert summary.first == dt.date(2026, 1, 2)
    assert summary.last == dt.date(2026, 1, 7)
    assert (summary.passed, summary.passed_stated) == (1 + 2 + 3 + 4 + 5 + 6, 6)
    assert (summary.failed, summary.failed_stated) == (6, 6)
    assert summary.headings == tuple(
        f"Test Session {i} ({dt.date(2026, 1, 1 + i).isoformat()})" for i in range(1, 7)
    )
    assert len(titles(second.body, 2)) == 16


def test_summary_without_stated_counts_or_dates() -> None:
    body = "".join(f"## Session {i}\n\nall good\n\n" for i in range(17))
    result = run("test_results_history", body)
    assert "- Date range: not stated\n" in result.body
    assert "- Passed: not stated\n" in result.body
    summary = parse_summary(split_sections(result.body, 2)[-1])
    assert (summary.sessions, summary.passed_stated, summary.first) == (2, 0, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Passed: 12", {"passed": 12}),
        ("**Passed**: 12\n**Failed**: 3", {"passed": 12, "failed": 3}),
        ("**Failed:** 3", {"failed": 3}),
        ("Tests passed: 7", {"passed": 7}),
        ("failed = 0", {"failed": 0}),
        ("=== 12 passed, 1 failed in 0.2s ===", {"passed": 12, "failed": 1}),
        ("40 tests passed and 1 test failed", {"passed": 40, "failed": 1}),
        ("Passed: 5\n5 passed again\n9 failed", {"passed": 5, "failed": 9}),  # first of each
        ("v1.2 passed review", {}),
        ("nothing stated", {}),
    ],
)
def test_accepted_test_count_forms(text: str, expected: dict[str, int]) -> None:
    assert session_counts(text) == expected


def test_max_sessions_override() -> None:
    config = {"lifecycle": {"prune": {"test_results_history": {"max_sessions": 2}}}}
    result = run("test_results_history", session_doc(3), config=config)
    assert len(result.actions) == 1


# --------------------------------------------------------------------------- common_patterns


@pytest.mark.parametrize(("count", "flagged"), [(0, False), (4, False), (5, True), (6, False)])
def test_common_patterns_every_fifth_write(count: int, flagged: bool) -> None:
    body = "<!-- Last Updated: 2026-01-01 -->\n# Common Patterns\n\n- Use `Store.read`\n"
    result = run("common_patterns", body, write_count=count)
    assert (result.body != body) is flagged
    if flagged:
        assert result.body == (
            "<!-- Last Updated: 2026-01-01 -->\n# Common Patterns\n\n"
            "[VERIFY PATTERNS] write 5 (2026-11-22): check that each pattern below still "
            "matches the code, then delete this line.\n\n- Use `Store.read`\n"
        )
        assert result.actions[0].action == "flagged"
        assert result.actions[0].section is None


def test_common_patterns_marker_once_per_flag() -> None:
    body = "- pattern one\n"
    five = run("common_patterns", body, write_count=5)
    assert five.body.startswith("[VERIFY PATTERNS] write 5 ")
    assert five.body.endswith("\n\n- pattern one\n")
    assert run("common_patterns", five.body, write_count=5) == RuleResult(five.body)
    ten = run("common_patterns", five.body, write_count=10)
    assert ten.body.count("[VERIFY PATTERNS]") == 1
    assert ten.body.startswith("[VERIFY PATTERNS] write 10 ")
    assert run("common_patterns", "", write_count=5).body.count("\n") == 1
    config = {"lifecycle": {"prune": {"common_patterns": {"verify_every_writes": 3}}}}
    assert run("common_patterns", body, write_count=3, config=config).actions


# --------------------------------------------------------------------------- registry and config


def shout_rule(ctx: RuleContext) -> RuleResult:
    """Upper-cases the body (a custom rule for the tests)."""
    suffix = str(ctx.options.get("suffix", ""))
    return RuleResult(ctx.body.upper() + suffix, None, (PruneAction("flagged", "shouted", None),))


def test_custom_rule_in_a_registry() -> None:
    registry = RuleRegistry()
    registry.register("decisions", PruneRule(shout_rule, {"suffix": "!"}))
    result = apply_rule("decisions", "a\n", today=TODAY, registry=registry)
    assert result.body == "A\n!"
    # Which way a text option loosens is unknown: only the user's own settings set one.
    config = {"lifecycle": {"prune": {"decisions": {"suffix": "?"}}}}
    assert apply_rule("decisions", "a", today=TODAY, registry=registry, config=config).body == "A!"
    local = PolicyMapping({}, config, "LOCAL")
    assert apply_rule("decisions", "a", today=TODAY, registry=registry, config=local).body == "A?"
    assert apply_rule("review_history", "x", today=TODAY, registry=registry) == RuleResult("x")
    assert registry.file_types() == ["decisions"]


def test_custom_rule_with_an_archive_sees_only_its_own_archive() -> None:
    seen: list[tuple[str | None, str | None, dt.date, int]] = []

    def keeper(ctx: RuleContext) -> RuleResult:
        seen.append((ctx.archive_name, ctx.archive_text, ctx.today, ctx.write_count))
        return RuleResult("", (ctx.archive_text or "") + ctx.body, ())

    registry = RuleRegistry()
    registry.register("log", PruneRule(keeper, archive="log_archive"))
    registry.register("plain", shout_rule)
    now = dt.datetime(2026, 11, 22, 23, 59, tzinfo=dt.UTC)
    result = apply_rule(
        "log", "new\n", today=now, write_count=7, archive_text="old\n", registry=registry
    )
    assert result.archive_text == "old\nnew\n"
    assert seen == [("log_archive", "old\n", TODAY, 7)]
    # A rule without an archive is never handed one.
    registry.register("peek", lambda ctx: RuleResult(str(ctx.archive_text)))
    assert apply_rule("peek", "x", today=TODAY, archive_text="a", registry=registry).body == (
        "None"
    )
    with pytest.raises(InvalidInputError, match="is not a plain name"):
        registry.register("x", PruneRule(keeper, archive="../escape"))


@pytest.fixture
def rule_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "projrules_for_test.py").write_text(
        textwrap.dedent(
            """\
            from gitmem.features.lifecycle.prune import PruneAction, PruneRule, RuleResult

            def drop_todo(ctx):
                kept = [l for l in ctx.body.splitlines(True) if "TODO" not in l]
                actions = [PruneAction("removed", "todo line", None)] if len(kept) < len(
                    ctx.body.splitlines(True)) else []
                return RuleResult("".join(kept), None, actions)

            def bad(ctx):
                return "not a result"

            WITH_DEFAULTS = PruneRule(drop_todo, {"level": 1})
            NOT_CALLABLE = 3
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "projrules_for_test"


@pytest.fixture
def local_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[object], None]:
    """Write ``rules:`` into the user's own configuration file (never the store's)."""
    path = tmp_path / "user-config.yaml"
    monkeypatch.setenv("GITMEM_CONFIG", str(path))

    def write(rules: object) -> None:
        path.write_text(yaml.safe_dump({"rules": rules}))

    return write


def test_rules_named_in_config(rule_module: str, local_rules: Callable[[object], None]) -> None:
    local_rules(
        {"decisions": f"{rule_module}:drop_todo", "known_issues": f"{rule_module}:WITH_DEFAULTS"}
    )
    config = {
        "lifecycle": {
            "rules": {"common_patterns": None},  # a store switching a rule off: ignored
            "prune": {"known_issues": {"level": 0}},  # lowering a limit: taken
        }
    }
    result = run("decisions", "keep\nTODO drop\n", config=config)
    assert result.body == "keep\n"
    assert result.actions == (PruneAction("removed", "todo line", None),)
    registry = registry_from_config(config)
    assert registry.options_for("known_issues", config) == {"level": 0}
    assert registry.get("common_patterns") is not None
    assert run("common_patterns", "x\n", write_count=5, config=config) != RuleResult("x\n")
    # The user's own configuration may switch it off, or give a type another rule.
    local_rules({"common_patterns": None, "known_issues": "review_history"})
    assert registry_from_config(config).get("common_patterns") is None
    assert registry_from_config(config).get("known_issues") is DEFAULT_REGISTRY["review_history"]
    assert "common_patterns" in DEFAULT_REGISTRY  # the default registry is untouched


@pytest.mark.parametrize(
    ("rules", "prune", "message"),
    [
        ({"d": "no_colon"}, {}, "must be written 'package.module:function'"),
        ({"d": "no_such_module_xyz:f"}, {}, "No module named 'no_such_module_xyz'"),
        ({"d": "{mod}:missing"}, {}, "has no attribute 'missing'"),
        ({"d": "{mod}:NOT_CALLABLE"}, {}, "is not callable"),
        ({"d": 3}, {}, "must be 'package.module:function' or null"),
        ({"bad/type": "{mod}:drop_todo"}, {}, "is not a plain name"),
        ({}, {"review_history": {"max_review": 3}}, "unknown option (known: max_reviews)"),
        ({}, {"review_history": {"max_reviews": "3"}}, "must be a int"),
        ({}, {"review_history": {"max_reviews": 0}}, "must be a whole number >= 1"),
        ({}, {"review_history": {"max_reviews": True}}, "must be a int"),
        ({}, {"review_history": 5}, "lifecycle.prune.review_history must be a mapping"),
        ({}, [], "lifecycle.prune must be a mapping"),
    ],
)
def test_bad_config_is_a_clear_error(
    rule_module: str,
    local_rules: Callable[[object], None],
    rules: dict[str, object],
    prune: object,
    message: str,
) -> None:
    fixed = {k: v.format(mod=rule_module) if isinstance(v, str) else v for k, v in rules.items()}
    local_rules(fixed)
    config = {"lifecycle": {"prune": prune}}
    with pytest.raises(InvalidInputError) as info:
        run("review_history", review_doc(days_dates(11)), config=config)
    assert message in str(info.value)


def test_a_rule_returning_something_else_is_refused(
    rule_module: str, local_rules: Callable[[object], None]
) -> None:
    local_rules({"d": f"{rule_module}:bad"})
    with pytest.raises(LifecycleConfigError, match="returned str, not a RuleResult"):
        run("d", "x")
    registry = RuleRegistry()
    registry.register(
        "d",
        lambda ctx: RuleResult(ctx.body, "archive!", ()),  # declares no archive
    )
    with pytest.raises(LifecycleConfigError, match="wrote an archive but declares none"):
        apply_rule("d", "x", today=TODAY, registry=registry)
    with pytest.raises(InvalidInputError, match="prune action 'kept'"):
        PruneAction("kept", "x", None)  # type: ignore[arg-type]


def test_results_to_dict() -> None:
    result = run("review_history", review_doc(days_dates(11)))
    data = result.to_dict()
    assert data["archiveText"] == result.archive_text
    assert data["actions"] == [
        {
            "action": "archived",
            "reason": "11 reviews, more than 10: the oldest moved to review_history_archive.md",
            "section": "Review 2026-01-01",
        }
    ]


# --------------------------------------------------------------------------- size limits


@pytest.mark.parametrize(
    ("file_type", "lines", "warns"),
    [
        ("decisions", 500, False),
        ("decisions", 501, True),
        ("project_overview", 200, False),
        ("project_overview", 201, True),
        ("review_history", 300, False),
        ("review_history", 301, True),
    ],
)
def test_size_warnings_edges(file_type: str, lines: int, warns: bool) -> None:
    warning = size_warning(file_type, lines, DEFAULT_SIZE_LIMITS)
    assert bool(warning) is warns
    if warns:
        assert str(warning).startswith(f"{file_type} has {lines} lines, more than ")


def test_size_limits_from_config() -> None:
    limits = size_limits_from_config(
        {"lifecycle": {"size_limits": {"default": 100, "project_overview": 50}}}
    )
    assert limits == {"default": 100, "project_overview": 50, "review_history": 300}
    assert size_warning("x", 101, limits) == (
        "x has 101 lines, more than the limit for any file of 100; consider pruning or splitting it"
    )
    assert size_warning("project_overview", 51, limits)
    assert not size_warning("review_history", 300, limits)
    with pytest.raises(LifecycleConfigError, match=r"size_limits\.default must be"):
        size_limits_from_config({"lifecycle": {"size_limits": {"default": 0}}})


# --------------------------------------------------------------------------- properties

_DATES = st.one_of(
    st.none(), st.dates(min_value=dt.date(2024, 1, 1), max_value=dt.date(2027, 1, 1))
)


@st.composite
def review_bodies(draw: st.DrawFn) -> str:
    kinds = draw(st.lists(st.sampled_from(["review", "other", "code"]), max_size=16))
    out = [draw(st.sampled_from(["", "# Reviews\n\n", "intro\n"]))]
    for i, kind in enumerate(kinds):
        date = draw(_DATES)
        stamp = "" if date is None else f" {date.isoformat()}"
        if kind == "review":
            out.append(f"## Review {i}{stamp}\n\nbody {i}\n\n")
        elif kind == "other":
            out.append(f"## Other {i}\n\ntext\n")
        else:
            out.append(f"## Review with code {i}{stamp}\n```\n## Review fake {i}\n```\n")
    return "".join(out)


@st.composite
def issue_bodies(draw: st.DrawFn) -> str:
    out = ["# Known Issues\n\n"]
    for i in range(draw(st.integers(0, 8))):
        status = draw(st.sampled_from(["Resolved", "In Progress", "Open", "Not resolved", None]))
        days = draw(st.integers(0, 200))
        when = draw(st.booleans())
        lines = [f"### Issue {i}"]
        if status is not None:
            lines.append(f"**Status**: {status}" + (f" ({ago(days)})" if when else ""))
        if draw(st.booleans()):
            lines.append(f"**Updated**: {ago(draw(st.integers(0, 200)))}")
        out.append("\n".join(lines) + "\n\n")
    return "".join(out)


@st.composite
def session_bodies(draw: st.DrawFn) -> str:
    out = [draw(st.sampled_from(["", "# Test Results\n\n"]))]
    for i in range(draw(st.integers(0, 22))):
        date = draw(_DATES)
        stamp = "" if date is None else f" {date.isoformat()}"
        title = draw(st.sampled_from(["Session", "Test Session", "Notes"]))
        counts = draw(st.sampled_from(["", "Passed: 3\n", "4 passed, 1 failed\n"]))
        out.append(f"## {title} {i}{stamp}\n\n{counts}\n")
    return "".join(out)


def _accounted(
    file_type: str, level: int, body: str, result: RuleResult, archive: str | None
) -> None:
    before = titles(body, level)
    after = [t.replace(VERIFY_STATUS, "").strip() for t in titles(result.body, level)]
    archived = titles(result.archive_text or archive or "", level)
    reported = [a.section for a in result.actions if a.action in ("removed", "archived")]
    for title in before:
        assert title in after or title in archived or title in reported, (file_type, title)
    # Counting, too: nothing disappears twice under one name.
    for title in set(before):
        assert before.count(title) <= (
            after.count(title) + archived.count(title) + reported.count(title)
        )


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.sampled_from(["review_history", "known_issues", "test_results_history", "common_patterns"]),
    st.data(),
    st.integers(0, 12),
)
@pytest.mark.slow
def test_rules_never_lose_a_section_and_are_idempotent(
    file_type: str, data: st.DataObject, write_count: int
) -> None:
    strategy = {
        "review_history": review_bodies(),
        "known_issues": issue_bodies(),
        "test_results_history": session_bodies(),
        "common_patterns": review_bodies(),
    }[file_type]
    body = data.draw(strategy)
    archive = (
        data.draw(st.one_of(st.none(), review_bodies())) if file_type == "review_history" else None
    )
    level = 3 if file_type == "known_issues" else 2
    config = {"lifecycle": {"prune": {"review_history": {"max_reviews": 3}}}}
    result = run(file_type, body, write_count=write_count, archive_text=archive, config=config)
    _accounted(file_type, level, body, result, archive)
    # Idempotence: the rule over its own output (and its own archive) changes nothing.
    archive_now = result.archive_text if result.archive_text is not None else archive
    again = run(
        file_type, result.body, write_count=write_count, archive_text=archive_now, config=config
    )
    assert again == RuleResult(result.body)
    if result.archive_text is not None:
        # The archive is in date order, oldest first: sorting it again keeps every place.
        sections = [s for s in split_sections(result.archive_text, 2) if s.level]
        assert chronological(sections) == list(range(len(sections)))


def test_committed_config_never_imports_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A store's gitmem.yaml naming 'module:function' is ignored with a warning that names
    the local way to opt in; the module is never imported (it would write a marker)."""
    marker = tmp_path / "imported"
    (tmp_path / "evilmod_rules.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef rule(ctx):\n    return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {"lifecycle": {"rules": {"decisions": "evilmod_rules:rule"}}}
    with caplog.at_level("WARNING", logger="gitmem"):
        registry = registry_from_config(config)
    assert registry.get("decisions") is None
    assert not marker.exists()
    assert "never imports code a store names" in caplog.text
    assert "rules: {decisions: \"evilmod_rules:rule\"}" in caplog.text


def test_committed_config_chooses_among_known_rules() -> None:
    """It may give a file type without a rule one of the rules there are; removing or
    replacing a rule is ignored (the user's own ``rules`` may)."""
    config = {
        "lifecycle": {
            "rules": {
                "decisions": "known_issues",
                "review_history": None,
                "known_issues": "common_patterns",
            }
        }
    }
    registry = registry_from_config(config)
    assert registry.get("decisions") is registry.get("known_issues") is not None
    assert registry.get("review_history") is DEFAULT_REGISTRY.get("review_history")
    assert registry.get("known_issues") is DEFAULT_REGISTRY.get("known_issues")
    with pytest.raises(LifecycleConfigError, match="no rule named 'nope'"):
        registry_from_config({"lifecycle": {"rules": {"decisions": "nope"}}})
    with pytest.raises(LifecycleConfigError, match="must be the name of a rule or null"):
        registry_from_config({"lifecycle": {"rules": {"decisions": 3}}})


def test_installed_rules_come_from_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed package's ``gitmem.rules`` entry point prunes its file type."""
    package = tmp_path / "plugin_rules_pkg.py"
    package.write_text(
        "from gitmem.features.lifecycle.rules import RuleResult\n"
        "def shout(ctx):\n    return RuleResult(ctx.body.upper(), None, ())\n"
    )
    dist = tmp_path / "plugin_rules_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-rules-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[gitmem.rules]\ndecisions = plugin_rules_pkg:shout\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert run("decisions", "quiet\n").body == "QUIET\n"
