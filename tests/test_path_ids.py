"""Path ids: documents addressed by where they live (projects/acme/known_issues).

The whole store works on them as on plain ids: every operation, the index and
its answers, the hooks' validation, and the refusals that keep ids inside the store.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitmem import AlreadyExistsError, InvalidIdError, NotFoundError, Store
from gitmem.format.layout import DOCUMENT_ROOTS, id_from_path, is_memory_file, memory_path
from tests.storetools import blob_at, commit_count, plant, status_porcelain, tip

DOC = "projects/acme/known_issues"


def test_path_id_lives_at_its_path_and_round_trips(any_store: Store) -> None:
    memory = any_store.create("# Known issues\n", id=DOC, title="Known issues")
    assert memory.id == DOC
    assert memory_path(DOC) == "projects/acme/known_issues.md"
    assert blob_at(any_store, "projects/acme/known_issues.md") is not None
    assert any_store.read(DOC).body == "# Known issues\n"
    assert id_from_path("projects/acme/known_issues.md") == DOC


def test_every_operation_works_on_a_path_id(any_store: Store) -> None:
    any_store.create("first\n", id=DOC, title="Known issues")
    any_store.update(DOC, "second\n")
    any_store.append(DOC, "third")
    assert any_store.read(DOC).body == "second\nthird"
    assert any_store.read(DOC).version == 3
    with pytest.raises(AlreadyExistsError):
        any_store.create("again\n", id=DOC)
    assert any_store.delete(DOC) is True
    assert any_store.get(DOC) is None
    assert any_store.delete(DOC) is False
    restored = any_store.restore(DOC)
    assert restored.body == "second\nthird"
    versions = list(any_store.history(DOC))
    assert [v.op for v in versions] == ["create", "update", "append", "delete", "restore"]


def test_list_index_and_scan_agree_on_path_ids(any_store: Store) -> None:
    plain = any_store.create("an atomic memory\n", title="Atomic")
    any_store.create("overview of acme\n", id="projects/acme/project_overview", title="Overview")
    any_store.create("ada\n", id="entities/person/ada", title="Ada")
    indexed = {m.id for m in any_store.list()}
    scanned = {m.id for m in Store(list(any_store._backends.values()), use_index=False).list()}
    assert indexed == scanned == {plain.id, "projects/acme/project_overview", "entities/person/ada"}
    hits = any_store.search("overview")
    assert [h.id for h in hits] == ["projects/acme/project_overview"]


def test_index_catches_up_on_path_id_changes(any_store: Store) -> None:
    any_store.create("v1\n", id=DOC)
    assert any_store.read(DOC).body == "v1\n"
    assert [m.id for m in any_store.list()] == [DOC]
    any_store.delete(DOC)
    assert any_store.list() == []
    assert [m.id for m in any_store.list(include_archived=True)] == []


def test_successors_and_supersede_across_id_kinds(any_store: Store) -> None:
    any_store.create("old\n", id=DOC)
    new = any_store.supersede(DOC, "new\n", id="projects/acme/known_issues_v2")
    assert new.supersedes == DOC
    assert [m.id for m in any_store.successors(DOC)] == ["projects/acme/known_issues_v2"]
    assert any_store.latest_version(DOC).id == "projects/acme/known_issues_v2"


@pytest.mark.parametrize(
    "bad",
    [
        "projects/../memories/aa/x",
        "projects/acme/../../etc/passwd",
        "projects//x",
        "projects/x/",
        "/projects/x",
        "elsewhere/x",
        "projects\\x",
        "projects/%2e%2e/x",
        "projects/acme/x.md",
        "projects/.hidden/x",
        "projects/a b/x",
        "projects/" + "/".join(["d"] * 9),
    ],
)
def test_hostile_path_ids_are_refused_and_nothing_changes(any_store: Store, bad: str) -> None:
    before = tip(any_store)
    with pytest.raises(InvalidIdError):
        any_store.create("x\n", id=bad)
    with pytest.raises(InvalidIdError):
        any_store.read(bad)
    assert tip(any_store) == before


def test_files_beside_documents_are_not_memories(any_store: Store) -> None:
    """A README.txt next to layered documents is left alone; a bad .md is a problem."""
    plant(any_store, "projects/acme/notes.txt", "not a memory\n")
    plant(any_store, "projects/acme/bad.md", "no front-matter here\n")
    plant(any_store, "projects/Acme Co/x.md", "---\nid: x\n---\n")
    problems = {p.path for p in any_store.problems()}
    assert problems == {"projects/acme/bad.md", "projects/Acme Co/x.md"}
    reference = Store(list(any_store._backends.values()), use_index=False)
    scanned = {p.path for p in reference.problems()}
    assert scanned == problems
    assert not is_memory_file("projects/acme/notes.txt")
    assert not is_memory_file("gitmem.yaml")


def test_a_file_whose_id_disagrees_with_its_path_is_a_problem(any_store: Store) -> None:
    plant(
        any_store,
        "projects/acme/known_issues.md",
        "---\nid: projects/acme/other\ncreated_at: 2026-01-01T00:00:00Z\n"
        "updated_at: 2026-01-01T00:00:00Z\nversion: 1\n---\nbody\n",
    )
    (problem,) = any_store.problems()
    assert "its path says" in problem.message
    with pytest.raises(Exception, match="its path says"):
        any_store.read(DOC)


def test_read_of_a_missing_path_id_is_not_found(any_store: Store) -> None:
    with pytest.raises(NotFoundError):
        any_store.read("skills/review/acme/review_history")
    assert any_store.get("skills/review/acme/review_history") is None


def test_work_tree_stays_clean_and_git_reads_the_document(store: Store) -> None:
    store.create("hello\n", id="agents/reviewer/notes", title="Reviewer notes")
    assert status_porcelain(store) == ""
    shown = subprocess.run(
        ["git", "-C", str(store.path), "show", "HEAD:agents/reviewer/notes.md"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "id: agents/reviewer/notes" in shown
    assert (Path(store.path) / "agents/reviewer/notes.md").read_text() == shown
    fsck = subprocess.run(
        ["git", "-C", str(store.path), "fsck", "--strict"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr


def test_one_transaction_writes_documents_in_several_roots(any_store: Store) -> None:
    before = commit_count(any_store)
    with any_store.transaction("seed documents") as tx:
        for root in DOCUMENT_ROOTS:
            tx.create(f"{root} doc\n", id=f"{root}/x/doc")
    assert commit_count(any_store) == before + 1
    assert {m.id for m in any_store.list()} == {f"{root}/x/doc" for root in DOCUMENT_ROOTS}
