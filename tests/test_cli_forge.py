"""The layered interface, prune and validate from the command line."""

from __future__ import annotations

import pytest
from clitools import Gitmem, make_runner

from gitmem import Store
from tests.conftest import run_git


@pytest.fixture
def gm(any_store: Store) -> Gitmem:
    return Gitmem(any_store.path, make_runner())


def reviews(n: int) -> str:
    return "".join(f"## Review 2026-01-{i + 1:02d}\n\n- finding {i}\n\n" for i in range(n))


def test_create_read_update_append_delete(gm: Gitmem) -> None:
    created = gm.json("layer", "create", "shared-project", "known_issues", "-p", "acme",
                      "--content", "# Known issues\n")
    assert created["id"] == "projects/acme/known_issues"
    assert created["path"] == "projects/acme/known_issues.md"
    doc = gm.json("layer", "read", "shared-project", "known_issues", "-p", "acme")
    assert doc["content"] == "# Known issues\n" and doc["lineCount"] == 1
    assert doc["staleness"] == "fresh" and doc["advisory"] is None
    assert gm("layer", "read", "shared-project", "known_issues", "-p", "acme").stdout == (
        "# Known issues\n")
    updated = gm.json("layer", "update", "projects/acme/known_issues", "-", input="a\nb\n")
    assert updated == {"id": "projects/acme/known_issues", "updated": True, "lineCount": 2,
                       "warning": None}
    appended = gm.json("layer", "append", "projects/acme/known_issues", "c\n")
    assert appended["lineCount"] == 3 and appended["pruned"] is False
    assert gm.json("layer", "delete", "projects/acme/known_issues") == {
        "id": "projects/acme/known_issues", "deleted": True}
    assert "no layered document projects/acme/known_issues" in gm.fails(
        3, "layer", "read", "shared-project", "known_issues", "-p", "acme")


def test_create_twice_and_bad_names_are_one_line_errors(gm: Gitmem) -> None:
    gm("layer", "create", "agent", "notes", "--agent-name", "scout", "--content", "x\n")
    assert "already exists" in gm.fails(5, "layer", "create", "agent", "notes",
                                        "--agent-name", "scout", "--content", "y\n")
    assert "project" in gm.fails(4, "layer", "create", "shared-project", "notes",
                                 "-p", "../up", "--content", "y\n")
    assert "agent" in gm.fails(4, "layer", "create", "agent", "notes", "--content", "y\n")
    assert "no layered document" in gm.fails(3, "layer", "update", "projects/acme/x", "y")


def test_append_prunes_and_prune_command_dry_run(gm: Gitmem, any_store: Store) -> None:
    gm("layer", "create", "skill-specific", "review_history", "--skill", "py", "-p", "acme",
       "--content", reviews(10))
    appended = gm.json("layer", "append", "skills/py/acme/review_history",
                       "## Review 2026-02-01\n\n- new\n")
    assert appended["pruned"] is True
    assert appended["pruneDetails"][0]["action"] == "archived"
    gm("layer", "update", "skills/py/acme/review_history", reviews(12))
    before = run_git(any_store.path, "rev-parse", "main")
    dry = gm.json("prune", "--dry-run")
    assert dry["dryRun"] is True and len(dry["pruned"]) == 2
    assert run_git(any_store.path, "rev-parse", "main") == before
    real = gm.json("prune", "--scope", "skill", "--skill", "py")
    assert real["pruned"] == dry["pruned"] and real["commit"]
    text = gm("prune", "--dry-run").stdout
    assert text.startswith("would prune 0 section(s)")


def test_by_project_profile_list_staleness_search(gm: Gitmem) -> None:
    gm("layer", "create", "shared-project", "project_overview", "-p", "acme",
       "--content", "Python 3.11 service; deploy with `make deploy`.\n")
    gm("layer", "create", "command", "deploy_history", "-p", "acme", "--command", "deploy",
       "--content", "deploy ok\n")
    grouped = gm.json("layer", "by-project", "acme")
    assert [d["id"] for d in grouped["shared"]] == ["projects/acme/project_overview"]
    assert [d["id"] for d in grouped["commands"]] == ["commands/acme/deploy_history"]
    assert gm.json("layer", "by-project", "ghost") == {
        "project": "ghost", "shared": [], "skills": {}, "commands": []}
    profile = gm.json("layer", "profile", "acme")
    assert profile["fileTypes"] == ["project_overview"]
    listed = gm("layer", "list", "command", "acme").stdout
    assert "commands/acme/deploy_history" in listed
    report = gm.json("layer", "staleness")
    assert report["counts"] == {"fresh": 2, "aging": 0, "stale": 0}
    hits = gm.json("layer", "search", "deploy", "--layer", "command")
    assert [h["id"] for h in hits["hits"]] == ["commands/acme/deploy_history"]


def test_validate_one_and_all(gm: Gitmem) -> None:
    gm("layer", "create", "shared-project", "project_overview", "-p", "acme",
       "--content", "- Language: Python 3.11\n")
    one = gm.json("validate", "projects/acme/project_overview")
    assert one["checks"]["completeness"]["complete"] is False
    assert one["suggestions"]
    every = gm.json("validate", "--all")
    assert [r["id"] for r in every] == ["projects/acme/project_overview"]
    assert "incomplete" in gm("validate", "projects/acme/project_overview").stdout
    gm("validate", code=2)


def test_content_that_is_not_utf8_is_a_clear_error(gm: Gitmem) -> None:
    gm("layer", "create", "agent", "notes", "--agent-name", "scout", "--content", "x\n")
    assert "not valid UTF-8" in gm.fails(4, "layer", "update", "agents/scout/notes", "-",
                                   input=b"\xff\xfe bad")
