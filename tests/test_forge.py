"""The layered Forge MemoryStore over real git stores: paths, results, lifecycle in commits."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from gitmem import (
    AlreadyExistsError,
    FixedClock,
    InvalidIdError,
    InvalidInputError,
    NotFoundError,
    Store,
)
from gitmem.features.layered import Document, LayeredStore, PrunePolicy
from gitmem.features.layers import document_id, placement
from tests.conftest import run_git
from tests.storetools import commit_count, tip


@pytest.fixture
def layered(any_store: Store) -> LayeredStore:
    return LayeredStore(any_store, agent="forge-agent")


def entry(
    file_type: str = "known_issues", content: str = "# Issues\n", **kw: str
) -> dict[str, str]:
    return {"layer": "shared-project", "project": "acme", "fileType": file_type,
            "content": content, **kw}


def reviews(n: int, start: dt.date = dt.date(2026, 1, 1)) -> str:
    days = [start + dt.timedelta(days=i) for i in range(n)]
    return "# Review history\n\n" + "".join(f"## Review {d}\n\n- finding {d}\n\n" for d in days)


# -- paths ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layer", "names", "expected"),
    [
        ("shared-project", {"project": "acme"}, "projects/acme/known_issues"),
        ("skill-specific", {"skill": "py-review", "project": "acme"},
         "skills/py-review/acme/known_issues"),
        ("command", {"project": "acme", "command": "deploy"}, "commands/acme/known_issues"),
        ("agent", {"agent": "hephaestus"}, "agents/hephaestus/known_issues"),
    ],
)
def test_layer_paths(layer: str, names: dict[str, str], expected: str) -> None:
    assert document_id(layer, "known_issues", **names) == expected
    where = placement(expected)
    assert where is not None and where["layer"] == layer and where["file_type"] == "known_issues"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"layer": "shared-project", "fileType": "x", "content": ""}, "project"),
        ({"layer": "skill-specific", "project": "a", "fileType": "x", "content": ""}, "skill"),
        ({"layer": "agent", "fileType": "x", "content": ""}, "agent"),
        ({"layer": "nope", "project": "a", "fileType": "x", "content": ""}, "layer"),
        (entry(project="../etc"), "project"),
        (entry(file_type="a/b"), "fileType"),
        ({**entry(), "colour": "red"}, "colour"),
        ({**entry(), "content": 7}, "content"),
    ],
)
def test_bad_entries_are_refused_and_nothing_is_written(
    layered: LayeredStore, data: dict[str, object], message: str
) -> None:
    before = tip(layered.store)
    with pytest.raises(InvalidInputError, match=message):
        layered.create(data)
    assert tip(layered.store) == before


def test_traversal_in_read_arguments_is_refused(layered: LayeredStore) -> None:
    with pytest.raises(InvalidIdError):
        layered.read("shared-project", "..", "known_issues")
    with pytest.raises(InvalidIdError):
        layered.read("agent", None, "notes", agent="a/../b")


# -- create / read / update / append / delete ----------------------------------------------


def test_create_injects_timestamps_and_refuses_an_existing_document(
    layered: LayeredStore, clock: FixedClock
) -> None:
    result = layered.create(entry(content="- `src/app.py` crashes\n"))
    assert result.to_dict() == {
        "id": "projects/acme/known_issues",
        "path": "projects/acme/known_issues.md",
        "created": "2026-11-22T10:00:00Z",
    }
    memory = layered.store.read(result.id)
    assert memory.created_at == clock.now() and memory.updated_at == clock.now()
    assert memory.extra["layer"] == "shared-project" and memory.extra["project"] == "acme"
    assert memory.agent == "forge-agent"
    before = tip(layered.store)
    with pytest.raises(AlreadyExistsError):
        layered.create(entry(content="again\n"))
    assert tip(layered.store) == before


def test_agent_and_command_entries(layered: LayeredStore) -> None:
    layered.create({"layer": "agent", "agent": "scout", "fileType": "notes", "content": "n\n"})
    layered.create({"layer": "command", "fileType": "deploy_history", "content": "d\n",
                    "project": "acme", "command": "deploy"})
    assert layered.read("agent", None, "notes", agent="scout") is not None
    doc = layered.read("command", "acme", "deploy_history")
    assert doc is not None and doc.command == "deploy"


def test_read_missing_is_none_and_read_has_what_an_agent_needs(
    layered: LayeredStore, clock: FixedClock
) -> None:
    assert layered.read("shared-project", "acme", "known_issues") is None
    layered.create(entry(content="one\ntwo\nthree\n"))
    clock.advance(days=10)
    doc = layered.read("shared-project", "acme", "known_issues")
    assert isinstance(doc, Document)
    shape = doc.to_dict()
    assert shape["lineCount"] == 3 and shape["daysSinceUpdate"] == 10
    assert shape["staleness"] == "fresh" and shape["advisory"] is None
    assert shape["updatedAt"] == "2026-11-22T10:00:00Z" and shape["content"] == "one\ntwo\nthree\n"
    clock.advance(days=31)
    aging = layered.read("shared-project", "acme", "known_issues")
    assert aging is not None and aging.staleness == "aging" and aging.advisory is None
    clock.advance(days=50)
    stale = layered.read("shared-project", "acme", "known_issues")
    assert stale is not None and stale.staleness == "stale"
    assert stale.advisory is not None and stale.advisory.startswith("[POTENTIALLY STALE]")
    assert "91 days" in stale.advisory


def test_update_refreshes_timestamp_resets_staleness_and_warns_on_size(
    layered: LayeredStore, clock: FixedClock
) -> None:
    layered.create(entry(file_type="project_overview", content="short\n"))
    clock.advance(days=120)
    result = layered.update("projects/acme/project_overview", "line\n" * 201)
    assert result.to_dict() == {
        "id": "projects/acme/project_overview",
        "updated": True,
        "lineCount": 201,
        "warning": result.warning,
    }
    assert result.warning is not None and "200" in result.warning
    doc = layered.read("shared-project", "acme", "project_overview")
    assert doc is not None and doc.staleness == "fresh" and doc.days_since_update == 0
    small = layered.update("projects/acme/project_overview", "line\n" * 200)
    assert small.warning is None


def test_update_and_append_of_a_missing_document_are_errors(layered: LayeredStore) -> None:
    with pytest.raises(NotFoundError):
        layered.update("projects/acme/nothing", "x")
    with pytest.raises(NotFoundError):
        layered.append("projects/acme/nothing", "x")
    with pytest.raises(InvalidInputError):
        layered.update("mem_0a000000-0000-4000-8000-000000000001", "x")


def test_append_without_a_rule_adds_text_in_one_commit(layered: LayeredStore) -> None:
    layered.create(entry(file_type="decisions", content="# Decisions\n"))
    before = commit_count(layered.store)
    result = layered.append("projects/acme/decisions", "- use sqlite\n")
    assert result.to_dict() == {
        "id": "projects/acme/decisions",
        "appended": True,
        "lineCount": 2,
        "pruned": False,
        "pruneDetails": [],
        "warning": None,
    }
    assert commit_count(layered.store) == before + 1
    assert layered.store.read("projects/acme/decisions").body == "# Decisions\n- use sqlite\n"


def test_append_prunes_review_history_into_the_archive_in_one_commit(
    layered: LayeredStore, git: object
) -> None:
    layered.create(entry(file_type="review_history", content=reviews(10)))
    assert layered.store.get("projects/acme/review_history_archive") is None
    before = commit_count(layered.store)
    result = layered.append("projects/acme/review_history", "## Review 2026-02-01\n\n- new\n")
    assert commit_count(layered.store) == before + 1
    assert result.pruned is True
    assert [p.action for p in result.prune_details] == ["archived"]
    assert result.prune_details[0].section == "Review 2026-01-01"
    body = layered.store.read("projects/acme/review_history").body
    assert body.count("## Review") == 10 and "2026-01-01" not in body
    archive = layered.store.read("projects/acme/review_history_archive")
    assert "## Review 2026-01-01" in archive.body
    assert archive.extra["file_type"] == "review_history_archive"
    trailers = run_git(
        layered.store.path, "log", "-1", "--format=%(trailers:key=Gitmem-Prune,valueonly)"
    )
    assert "projects/acme/review_history archived [Review 2026-01-01]" in trailers


def test_delete_reports_and_leaves_the_folder_and_history(layered: LayeredStore) -> None:
    layered.create(entry())
    layered.create(entry(file_type="decisions"))
    assert layered.delete("projects/acme/known_issues").to_dict() == {
        "id": "projects/acme/known_issues", "deleted": True}
    assert layered.delete("projects/acme/known_issues").deleted is False
    assert [d.id for d in layered.get_shared_project_memory("acme")] == ["projects/acme/decisions"]
    restored = layered.store.restore("projects/acme/known_issues")
    assert restored.body == "# Issues\n"


# -- getters ---------------------------------------------------------------------------


def seed(layered: LayeredStore) -> None:
    with layered.store.transaction("seed"):
        layered.create(entry(file_type="project_overview", content="Python 3.11\n"))
        layered.create(entry(file_type="index", content="# index\n"))
        layered.create(entry(file_type="known_issues"))
        layered.create({"layer": "skill-specific", "skill": "py-review", "project": "acme",
                        "fileType": "review_history", "content": "r\n"})
        layered.create({"layer": "skill-specific", "skill": "py-review", "project": "other",
                        "fileType": "review_history", "content": "r\n"})
        layered.create({"layer": "skill-specific", "skill": "lint", "project": "acme",
                        "fileType": "common_patterns", "content": "p\n"})
        layered.create({"layer": "command", "project": "acme", "command": "deploy",
                        "fileType": "deploy_history", "content": "d\n"})
        layered.create({"layer": "agent", "agent": "scout", "fileType": "notes", "content": "s\n"})


def test_getters_group_and_exclude_index_files(layered: LayeredStore) -> None:
    seed(layered)
    shared = [d.file_type for d in layered.get_shared_project_memory("acme")]
    assert shared == ["known_issues", "project_overview"]
    grouped = layered.get_by_project("acme").to_dict()
    assert [d["fileType"] for d in grouped["shared"]] == ["known_issues", "project_overview"]
    assert {k: [d["id"] for d in v] for k, v in grouped["skills"].items()} == {
        "lint": ["skills/lint/acme/common_patterns"],
        "py-review": ["skills/py-review/acme/review_history"],
    }
    assert [d["id"] for d in grouped["commands"]] == ["commands/acme/deploy_history"]
    assert [d.id for d in layered.get_skill_memory("py-review")] == [
        "skills/py-review/acme/review_history", "skills/py-review/other/review_history"]
    assert [d.id for d in layered.get_skill_memory("py-review", "other")] == [
        "skills/py-review/other/review_history"]
    assert [d.id for d in layered.get_command_memory("acme", "deploy")] == [
        "commands/acme/deploy_history"]
    assert layered.get_command_memory("acme", "build") == []
    assert [d.id for d in layered.get_agent_memory("scout")] == ["agents/scout/notes"]
    profile = layered.get_project_profile("acme").to_dict()
    assert profile["overview"]["content"] == "Python 3.11\n"
    assert profile["skills"] == ["lint", "py-review"]
    json.dumps(grouped), json.dumps(profile)


def test_unknown_projects_give_empty_results_not_errors(layered: LayeredStore) -> None:
    seed(layered)
    assert layered.get_shared_project_memory("ghost") == []
    assert layered.get_skill_memory("ghost") == []
    assert layered.get_command_memory("ghost") == []
    assert layered.get_agent_memory("ghost") == []
    empty = layered.get_by_project("ghost").to_dict()
    assert empty == {"project": "ghost", "shared": [], "skills": {}, "commands": []}
    assert layered.get_project_profile("ghost").overview is None


def test_staleness_report_across_layers(layered: LayeredStore, clock: FixedClock) -> None:
    seed(layered)
    clock.advance(days=40)
    layered.update("projects/acme/known_issues", "fresh now\n")
    clock.advance(days=60)
    report = layered.get_staleness_report().to_dict()
    assert [e["id"] for e in report["aging"]] == ["projects/acme/known_issues"]
    assert report["aging"][0]["days_since_update"] == 60
    stale = {e["id"] for e in report["stale"]}
    assert "projects/acme/index" not in stale and "projects/acme/project_overview" in stale
    assert len(stale) == 6 and report["fresh"] == []


def test_search_filters_by_layer_and_project(layered: LayeredStore) -> None:
    seed(layered)
    layered.update("projects/acme/known_issues", "the deploy script times out\n")
    layered.update("commands/acme/deploy_history", "deploy took 3 minutes\n")
    everywhere = {m.id for m in layered.search("deploy")}
    assert everywhere == {"projects/acme/known_issues", "commands/acme/deploy_history"}
    shared = {m.id for m in layered.search("deploy", layer="shared-project")}
    assert shared == {"projects/acme/known_issues"}
    assert [m.id for m in layered.search("deploy", project="other")] == []
    found = layered.search("deploy", layer="command", project="acme")
    assert [m.id for m in found] == ["commands/acme/deploy_history"]


# -- prune -----------------------------------------------------------------------------


def test_prune_dry_run_equals_real_run_and_writes_nothing(
    layered: LayeredStore, clock: FixedClock
) -> None:
    seed(layered)
    layered.update("projects/acme/known_issues", (
        "# Known issues\n\n### Crash on start\n**Status**: Resolved 2026-10-01\n\n"
        "### Slow search\n**Status**: In Progress\n"))
    layered.update("skills/py-review/acme/review_history", reviews(12))
    before = tip(layered.store)
    dry = layered.prune(PrunePolicy(scope="project", project="acme", dry_run=True))
    assert tip(layered.store) == before and dry.dry_run is True and dry.commit is None
    real = layered.prune(PrunePolicy(scope="project", project="acme"))
    assert real.pruned == dry.pruned and real.warnings == dry.warnings
    assert real.commit is not None and commit_count(layered.store) > 0
    assert {(p.id, p.action) for p in real.pruned} == {
        ("projects/acme/known_issues", "removed"),
        ("skills/py-review/acme/review_history", "archived"),
    }
    assert "Crash on start" not in layered.store.read("projects/acme/known_issues").body
    message = run_git(layered.store.path, "log", "-1", "--format=%B")
    assert message.count("Gitmem-Prune:") == len(real.pruned)
    again = layered.prune(PrunePolicy(scope="project", project="acme"))
    assert again.pruned == () and again.commit is None
    # Nothing is lost: the removed issue is in the commit before, restorable by id.
    restored = layered.store.restore("projects/acme/known_issues", at=before)
    assert "Crash on start" in restored.body


def test_prune_scope_skill_only_touches_that_skill(layered: LayeredStore) -> None:
    seed(layered)
    layered.update("skills/py-review/other/review_history", reviews(11))
    layered.update("projects/acme/known_issues", reviews(11))
    report = layered.prune(PrunePolicy(scope="skill", skill="py-review"))
    assert {p.id for p in report.pruned} == {"skills/py-review/other/review_history"}
    assert layered.store.get("skills/py-review/other/review_history_archive") is not None


def test_prune_policy_is_checked() -> None:
    with pytest.raises(InvalidInputError, match="needs a project"):
        PrunePolicy(scope="project")
    with pytest.raises(InvalidInputError, match="scope"):
        PrunePolicy(scope="everything")


def test_size_warnings_come_from_prune_too(layered: LayeredStore) -> None:
    layered.create(entry(file_type="notes", content="x\n" * 501))
    report = layered.prune()
    assert report.pruned == ()
    assert len(report.warnings) == 1 and "501 lines" in report.warnings[0]


def test_documents_are_plain_files_git_can_read(store: Store, tmp_path: Path) -> None:
    layered = LayeredStore(store)
    layered.create(entry(content="plain markdown\n"))
    text = (Path(store.path) / "projects/acme/known_issues.md").read_text()
    assert text.startswith("---\nid: projects/acme/known_issues\n")
    assert text.endswith("---\n\nplain markdown\n")
    assert run_git(store.path, "status", "--porcelain") == ""


# -- validate -----------------------------------------------------------------------------


def test_validate_project_overview_names_what_is_missing(layered: LayeredStore) -> None:
    layered.create(entry(file_type="project_overview", content=(
        "# Overview\n\n- Language: Python 3.11\n- Framework: Flask 3.0\n"
        "- The app starts in `src/app.py`.\n")))
    result = layered.validate("projects/acme/project_overview")
    assert result["id"] == "projects/acme/project_overview"
    completeness = result["checks"]["completeness"]
    assert completeness is not None and completeness["complete"] is False
    assert result["checks"]["growthRate"] is None
    assert any("testing" in s.lower() for s in result["suggestions"])


def test_validate_common_patterns_growth_comes_from_git_history(layered: LayeredStore) -> None:
    layered.create({"layer": "skill-specific", "skill": "lint", "project": "acme",
                    "fileType": "common_patterns", "content": "- `a.py`: pattern\n"})
    doc = "skills/lint/acme/common_patterns"
    for _ in range(5):
        layered.update(doc, "- `a.py`: pattern\n")  # no growth; a no-op makes no commit
        layered.update(doc, "- `a.py`: pattern \n")
    result = layered.validate(doc)
    assert result["writeCount"] == 10  # create + 9 real updates (the first is a no-op)
    assert result["checks"]["growthRate"]["status"] == "stagnant"
    layered.update(doc, "".join(f"- `f{i}.py`: pattern {i}\n" for i in range(8)))
    grown = layered.validate(doc)
    assert grown["checks"]["growthRate"]["status"] == "healthy"


def test_validate_of_an_unknown_document_is_not_found(layered: LayeredStore) -> None:
    with pytest.raises(NotFoundError):
        layered.validate("projects/acme/ghost")
